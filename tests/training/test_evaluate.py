"""The evaluation process (training/evaluate.py) on a tiny random model and a small fake bench:
same checkpoint + same seed -> same numbers; the bench's protocol, not a workspace, sets the
limits; the checkpoint's weights are the ones evaluated; the wall refuses walled paths."""
from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.training.fake_eval_bench import make_checkpoint  # noqa: E402
from training import evaluate as ev  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH = "tests.training.fake_eval_bench:BENCH"


def _run(ckpt: Path | None, out: Path, *, seed: int = 0, model: str | None = None,
         episodes: int | None = 3) -> dict:
    spec = ev.EvalSpec(bench=BENCH, seed=seed, episodes=episodes, batch_size=3, device="cpu")
    folder = ev.evaluate(spec, out, checkpoint=ckpt, model=model,
                         run="run-001" if ckpt else None, step=2 if ckpt else None,
                         show_progress=False)
    episodes_ = [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]
    return {"summary": json.loads((folder / "summary.json").read_text()),
            "episodes": episodes_, "dir": folder}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, tiny_model_dir):
    return make_checkpoint(tmp_path_factory.mktemp("exp"), tiny_model_dir)


@pytest.fixture(scope="module")
def first(ckpt, tmp_path_factory):
    """The checkpoint evaluated once with seed 0 (shared by the tests that only read it)."""
    return _run(ckpt, tmp_path_factory.mktemp("first"))


def test_same_checkpoint_same_seed_same_numbers(ckpt, first, tmp_path):
    a = first
    b = _run(ckpt, tmp_path / "b")
    assert a["summary"]["per_gym"] == b["summary"]["per_gym"]
    assert [e["turns"] for e in a["episodes"]] == [e["turns"] for e in b["episodes"]]
    other = _run(ckpt, tmp_path / "c", seed=1)        # the seed matters: sampled decoding
    assert [e["turns"] for e in other["episodes"]] != [e["turns"] for e in a["episodes"]]
    assert b["summary"]["per_gym"]["travel"]["score"] > 0
    assert a["dir"].name == "run-001-step-000002-tests.training.fake_eval_bench_BENCH-test-seed0-first3"


def test_protocol_sets_limits_over_pristine_workspace(first):
    r = first
    s = r["summary"]
    assert s["knobs"]["env"]["travel"]["max_steps"] == 3      # pristine workspace says 16
    assert s["per_gym"]["travel"]["n"] == 3 and s["episodes"] == 3
    assert all(e["turn_count"] <= 3 for e in r["episodes"])
    replies = [t["user"] for e in r["episodes"] for t in e["turns"] if "thing(s)" in str(t["user"])]
    assert replies and all("I can tell you 1 thing(s)" in x for x in replies)
    assert s["split"] == "test" and s["source"] == "checkpoint" and s["run_index"] == 1


def test_checkpoint_weights_are_evaluated_and_untrained_model_works(first, tiny_model_dir,
                                                                    tmp_path):
    trained = first
    base = _run(None, tmp_path / "b", model=str(tiny_model_dir))
    assert base["summary"]["source"] == "model" and base["dir"].name.startswith("model-")
    assert [e["turns"] for e in base["episodes"]] != [e["turns"] for e in trained["episodes"]]


def test_checkpoint_without_weights_is_refused(tmp_path, tiny_model_dir):
    ckpt = tmp_path / "run-001" / "checkpoints" / "step-000001"
    ckpt.mkdir(parents=True)
    (tmp_path / "run-001" / "config.json").write_text(
        json.dumps({"model": {"path": str(tiny_model_dir)}}))
    with pytest.raises(ev.EvalError, match="no policy weights"):
        ev.load_policy(ckpt, None, "cpu")


WALL_PROBE = r"""
import os, subprocess, sys
from pathlib import Path
from training.evaluate import install_wall
wall, allowed = Path(sys.argv[1]), Path(sys.argv[2])
refused = []
install_wall([wall], [allowed], refused)
print(open(allowed / "ok.txt").read())
for attempt in (lambda: open(wall / "knobs.json").read(), lambda: os.listdir(wall),
                lambda: list(wall.iterdir()), lambda: subprocess.run(["cat", str(wall / "knobs.json")]),
                lambda: open(str(wall / ".." / wall.name / "knobs.json"))):
    try:
        attempt()
        print("READ")
    except PermissionError:
        print("refused")
print(len(refused))
"""


def test_wall_refuses_opening_listing_and_processes(tmp_path):
    wall = tmp_path / "workspace"
    wall.mkdir()
    (wall / "knobs.json").write_text("{}")
    allowed = wall / "allowed"                      # an exception inside a wall (the checkpoint)
    allowed.mkdir()
    (allowed / "ok.txt").write_text("fine")
    out = subprocess.run([sys.executable, "-c", WALL_PROBE, str(wall), str(allowed)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fine"] + ["refused"] * 5 + ["5"]


def test_quicker_settings_are_recorded_as_deviations_from_the_protocol(ckpt, tmp_path):
    spec = ev.EvalSpec(bench=BENCH, episodes=2, batch_size=2, device="cpu", max_turns=2,
                       max_new_tokens=4)
    folder = ev.evaluate(spec, tmp_path, checkpoint=ckpt, run="run-001", step=2, show_progress=False)
    summary = json.loads((folder / "summary.json").read_text())
    episodes = [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]
    assert folder.name.endswith("-seed0-first2-turns2-tokens4")     # never overwrites the protocol's
    assert summary["protocol"]["max_steps"] == 3 and summary["protocol"]["response_length"] == 6
    assert {d["setting"]: (d["protocol"], d["used"]) for d in summary["deviations"]} == {
        "episodes": ("all 6 tasks of the split", "the first 2 of each gym (2 tasks)"),
        "max_turns": (3, 2), "max_new_tokens": (6, 4)}
    assert summary["knobs"]["env"]["travel"]["max_steps"] == 2
    assert all(e["turn_count"] <= 2 for e in episodes)


def test_protocol_evaluation_has_no_deviations(first):
    assert first["summary"]["deviations"] == [{"setting": "episodes", "protocol": "all 6 tasks of the split",
                                               "used": "the first 3 of each gym (3 tasks)"}]


def test_progress_is_plain_lines_with_episodes_tokens_per_s_and_time_left(ckpt, tmp_path, capsys):
    spec = ev.EvalSpec(bench=BENCH, episodes=3, batch_size=1, device="cpu")
    ev.evaluate(spec, tmp_path, checkpoint=ckpt, run="run-001", step=2, show_progress=True)
    lines = capsys.readouterr().err.splitlines()
    assert lines[0] == ("eval fake/test: 3 episodes x up to 3 turns x up to 6 new tokens a turn "
                        "(at most 1,024 tokens an episode): up to 54 generated tokens.")
    progress = [ln for ln in lines if " episodes, " in ln]
    assert [ln.split(",")[0] for ln in progress] == [f"eval fake/test: {n}/3 episodes" for n in (1, 2, 3)]
    assert "tokens/s" in progress[0] and "left" in progress[0] and progress[-1].endswith("done")


def test_work_estimate_warns_on_the_cpu_with_a_quicker_setting():
    usergym = ev.Work(episodes=210, max_turns=16, new_tokens=1024, episode_budget=8192, gyms=7)
    assert usergym.tokens == 210 * 8192
    lines = ev.work_lines(usergym, "eval usergym/test", on_cpu=True)
    assert lines[0].endswith("up to 1,720,320 generated tokens.")
    assert lines[1].startswith("On the CPU that can take up to 31.9 h")
    assert "`--episodes 1 --max-turns 4 --max-new-tokens 64` (up to 2 min)" in lines[1]
    assert lines[1].count(". ") == 0 and "deviation from the protocol" in lines[1]
    assert len(ev.work_lines(usergym, "eval usergym/test", on_cpu=False)) == 1
    quick = ev.Work(episodes=7, max_turns=4, new_tokens=64, episode_budget=8192, gyms=7)
    assert len(ev.work_lines(quick, "eval usergym/test", on_cpu=True)) == 1


def test_progress_time_left_before_and_after_the_first_episode():
    import io

    now = [0.0]
    out = io.StringIO()
    p = ev.ProgressLines(total=10, max_tokens=1000, label="eval x/test", every_s=60, out=out,
                         clock=lambda: now[0])
    now[0] = 30.0
    p.update(0, 100)                       # within every_s: nothing
    now[0] = 100.0
    p.update(0, 200)                       # 2 tokens/s, 800 budget left: at most 400 s
    now[0] = 120.0
    p.update(2, 240, force=True)           # 2 episodes in 120 s: 8 more take 480 s
    assert out.getvalue().splitlines() == [
        "eval x/test: 0/10 episodes, 200 tokens at 2.0 tokens/s, 2 min elapsed, at most 7 min left",
        "eval x/test: 2/10 episodes, 240 tokens at 2.0 tokens/s, 2 min elapsed, about 8 min left"]


def test_worked_examples_are_recorded_and_zero_is_the_papers_protocol(ckpt, tmp_path):
    """The shipped evaluation shows one worked example before each task, which the paper's
    protocol does not: the summary records the count and lists it as a deviation; with
    demonstrations=0 no example is shown, nothing deviates and the results go to their own
    folder."""
    runs = {}
    for count in (None, 0):
        spec = ev.EvalSpec(bench="tests.training.fake_eval_bench:AS_USERGYM", episodes=1,
                           batch_size=1, device="cpu", demonstrations=count)
        folder = ev.evaluate(spec, tmp_path, checkpoint=ckpt, run="run-001", step=2,
                             show_progress=False)
        runs[count] = (json.loads((folder / "summary.json").read_text()),
                       [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()],
                       folder.name)
    shipped, paper = runs[None], runs[0]
    assert shipped[0]["demonstrations"] == {"travel": 1}
    assert {"setting": "demonstrations", "protocol": 0, "used": 1} in shipped[0]["deviations"]
    assert [e["demonstrations"] for e in shipped[1]] == [1]
    assert paper[0]["demonstrations"] == {"travel": 0}
    assert all(d["setting"] != "demonstrations" for d in paper[0]["deviations"])
    assert [e["demonstrations"] for e in paper[1]] == [0]
    assert paper[2].endswith("-first1-demos0") and not shipped[2].endswith("-demos0")


def test_summary_reports_the_environment_reward_beside_the_normalised_score():
    """UserGym's number in the paper is the gym's own reward summed over an episode (Intention
    reaches 1.2-2.0 in table 1); the summary reports it beside the score in [0, 1]."""
    def episode(rewards, score):
        return {"gym": "intention", "score": score, "success": score == 1.0, "truncated": False,
                "turn_count": len(rewards), "turns": [{"env_reward": r} for r in rewards]}
    per_gym = ev.summarize([episode([1.0, 0.7, 0.4], 1.0), episode([0.4, 0.0], 0.2)])["intention"]
    assert per_gym["env_reward"] == pytest.approx((2.1 + 0.4) / 2)
    assert per_gym["score"] == pytest.approx(0.6)


FULL_HOST = r"""
import sys
import training.kvengine as K
K._free_host_bytes = lambda: 64 * 1024        # as if the machine had 64 KiB free
from training import evaluate
sys.exit(evaluate.main(sys.argv[1:]))
"""


def test_a_batch_the_host_cannot_hold_ends_the_evaluation_in_one_sentence(ckpt, tmp_path):
    """The KV cache's refusal reaches the person as one line naming what to change, instead of
    the process being killed for memory with nothing said (a CPU evaluation of 105 episodes at
    once on a 24 GiB machine); nothing is written as if it had finished."""
    out = subprocess.run([sys.executable, "-c", FULL_HOST, "--bench", BENCH, "--episodes", "3",
                          "--batch-size", "3", "--device", "cpu", "--out-root", str(tmp_path),
                          "--checkpoint", str(ckpt), "--run", "run-001", "--step", "2",
                          "--no-progress"], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert out.returncode == 2, out.stderr[-2000:]
    last = out.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"evaluate: the KV cache for \d+ sequences of \d+ tokens needs [\d.]+ GiB "
                        r"and this machine has [\d.]+ GiB free: generate fewer sequences at "
                        r"once \(a smaller batch size\)\.", last), last
    assert "Traceback" not in out.stderr
    assert not list(tmp_path.rglob("summary.json"))


def test_some_gyms_alone_are_a_deviation_kept_apart(ckpt, tmp_path):
    """`eval --gyms travel` on a bench of travel and turtle: only travel's tasks run, the summary
    records the gyms left out as a deviation, and the folder never overwrites the whole bench's
    results; a gym the bench lacks is refused in one sentence before any model loads."""
    two = "tests.training.fake_eval_bench:TWO_GYMS"
    spec = ev.EvalSpec(bench=two, episodes=2, batch_size=2, device="cpu", gyms=("travel",))
    folder = ev.evaluate(spec, tmp_path, checkpoint=ckpt, run="run-001", step=2, show_progress=False)
    summary = json.loads((folder / "summary.json").read_text())
    assert list(summary["per_gym"]) == ["travel"] and folder.name.endswith("-first2-gyms-travel")
    gyms = next(d for d in summary["deviations"] if d["setting"] == "gyms")
    assert gyms["protocol"] == ["travel", "turtle"] and gyms["used"] == ["travel"]
    assert gyms["left_out"] == {"turtle": {"tasks": None, "why": "not asked for (--gyms)"}}
    with pytest.raises(ev.EvalError, match=r"^no gym tau in bench .*: its gyms are travel, turtle\.$"):
        ev.evaluate(ev.EvalSpec(bench=two, device="cpu", gyms=("tau",)), tmp_path / "x",
                    checkpoint=ckpt, run="run-001", step=2, show_progress=False)
    assert not (tmp_path / "x").exists()
