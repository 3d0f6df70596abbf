"""A data folder of the bench's original files, for training and for evaluation: the tasks come
from it, what it lacks is named in one sentence, and its results never overwrite the shipped
tasks' (`data.data_dir`, `orchestrator start/eval/compare --data-dir`)."""
from __future__ import annotations

import json

import pytest

from training.benches import TaskDataError, get_bench, load_bench_tasks
from training.config import ConfigError, resolve


def test_shipped_tasks_without_a_folder():
    bench = get_bench("usergym")
    assert load_bench_tasks(bench, "test", ["travel"], "") == bench.load_tasks("test", ["travel"])


def test_a_missing_folder_is_one_sentence(tmp_path):
    with pytest.raises(TaskDataError, match=r"^data folder .*nope does not exist: give the folder"):
        load_bench_tasks(get_bench("usergym"), "test", ["travel"], str(tmp_path / "nope"))
    # an empty folder: tau2's loader names what it looked for; UserGym's, the gyms it lacks
    with pytest.raises(TaskDataError, match="no tau2 retail tasks under"):
        load_bench_tasks(get_bench("tau2"), "test", ["retail"], str(tmp_path))
    with pytest.raises(TaskDataError, match=r"holds no UserRL data: pass UserRL's folder"):
        load_bench_tasks(get_bench("usergym"), "test", ["travel", "tau"], str(tmp_path))


def test_the_run_check_refuses_a_folder_without_the_runs_gyms(tmp_path, tiny_model_dir):
    from training.budget import check_start

    cfg = resolve("usergym", "cpu", {"data.data_dir": str(tmp_path), "model.path": str(tiny_model_dir)})
    assert cfg.data.data_dir == str(tmp_path)
    with pytest.raises(ConfigError, match="holds no UserRL data"):
        check_start(cfg, tmp_path)


def test_userrl_files_refuse_what_they_cannot_run(benchdata):
    """The real UserRL files: no travel or persuade training split, and tau tasks without
    tau-bench's database: a run is told which, in one sentence; the runnable gyms load."""
    bench = get_bench("usergym")
    with pytest.raises(TaskDataError, match="holds no train tasks for travel, persuade, turtle"):
        load_bench_tasks(bench, "train", bench.train_gyms, str(benchdata))
    with pytest.raises(TaskDataError, match=r"tau tasks \(500\) cannot run: tau-bench's user instruction"):
        load_bench_tasks(bench, "train", ["function", "tau"], str(benchdata))
    tasks = load_bench_tasks(bench, "train", ["function", "intention"], str(benchdata))
    assert {t.gym for t in tasks} == {"function", "intention"} and len(tasks) == 840
    assert all(t.id.startswith("userrl-") for t in tasks)


def test_evaluation_on_the_userrl_files_records_them(benchdata, tmp_path, tiny_model_dir):
    from training import evaluate as ev

    spec = ev.EvalSpec(bench="usergym", episodes=1, batch_size=7, device="cpu", max_turns=1,
                       max_new_tokens=4, user_llm="none", data_dir=str(benchdata))
    folder = ev.evaluate(spec, tmp_path, model=str(tiny_model_dir), show_progress=False)
    summary = json.loads((folder / "summary.json").read_text())
    episodes = [json.loads(x) for x in (folder / "episodes.jsonl").read_text().splitlines()]
    assert summary["data"] == str(benchdata.resolve()) and "-data" in folder.name
    # travel and tau cannot run from these files: left out, and said so as a deviation
    assert {e["task_id"].split("-")[0] for e in episodes} == {"userrl"} and len(episodes) == 5
    left = next(d for d in summary["deviations"] if d["setting"] == "gyms")["left_out"]
    assert set(left) == {"travel", "tau"} and "option database" in left["travel"]["why"]
    shipped = ev.eval_id(ev.EvalSpec(bench="usergym", episodes=1, max_turns=1, max_new_tokens=4),
                         None, None, str(tiny_model_dir))
    assert folder.name != shipped                 # the shipped tasks' results stay where they are
