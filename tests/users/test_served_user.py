"""An LLM user in training behind a real OpenAI-compatible server: `transformers serve` (the
`serving` extra of transformers) started on loopback with the tests' tiny model, named in the
run's rollout.user_llms and chosen by the workspace's user.<gym>.llm. The trainer's episodes are
answered by it (user/symbolic_frac 0), and a server that is gone ends episodes as errors with the
reason, never the step."""
from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="transformers serve needs the serving extra (fastapi, uvicorn)")

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "training"))
from toy_env import write_run  # noqa: E402


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def served(tiny_model_dir):
    """(base URL, model name) of `transformers serve` on a free loopback port."""
    cli = Path(sys.executable).parent / "transformers"
    if not cli.exists():
        pytest.skip("the transformers CLI is not installed beside this Python")
    port = _free_port()
    log = open(Path(tiny_model_dir).parent / f"serve-{port}.log", "w")
    proc = subprocess.Popen([str(cli), "serve", "--host", "127.0.0.1", "--port", str(port),
                             "--device", "cpu", str(tiny_model_dir)], stdout=log, stderr=log,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"}, start_new_session=True)
    url = f"http://127.0.0.1:{port}/v1"
    import httpx

    deadline = time.monotonic() + 180          # readiness only: ~13 s here, more on a busy machine
    while True:
        try:
            if httpx.get(f"{url}/models", timeout=2).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            os.killpg(proc.pid, signal.SIGKILL)
            pytest.fail(f"transformers serve did not come up: {Path(log.name).read_text()[-2000:]}")
        time.sleep(0.5)
    yield url, str(tiny_model_dir)
    os.killpg(proc.pid, signal.SIGTERM)
    proc.wait(timeout=30)
    log.close()


def _workspace(tmp_path, llm: str, mix: float) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(ROOT / "workspace", ws)
    knobs = json.loads((ws / "knobs.json").read_text())
    knobs["user"]["colbench"].update(llm=llm, strategy_mix=mix)
    (ws / "knobs.json").write_text(json.dumps(knobs, indent=2))
    return ws


def _one_step(tmp_path, tiny_model_dir, url, model):
    from training import metrics
    from training.trainer import Trainer

    run = tmp_path / "run"
    write_run(run, workspace_dir=_workspace(tmp_path, "served", 0.0), model_dir=tiny_model_dir,
              bench="colbench", overrides={       # ColBench's user answers any message
                  "data.train_batch_size": 2, "rollout.n": 1, "actor.ppo_mini_batch_size": 1,
                  "rollout.max_turns": 2, "rollout.response_length": 64, "trainer.total_steps": 1,
                  "rollout.user_response_length": 8,
                  "rollout.user_llms": {"served": {"kind": "http", "base_url": url, "model": model,
                                                   "timeout_s": 60, "retries": 0}}})
    assert Trainer(run).run() == 0
    row = list(metrics.read_lines(run / "metrics.jsonl"))[-1]
    episodes = list(metrics.read_lines(run / "trajectories" / "step-000001.jsonl"))
    return row, episodes


@pytest.mark.slow          # a server start (~13 s) and one tiny PPO step
def test_training_episodes_are_answered_by_the_served_user(served, tmp_path, tiny_model_dir):
    url, model = served
    row, episodes = _one_step(tmp_path, tiny_model_dir, url, model)
    assert row["user/symbolic_frac"] == 0.0 and {e["user_arm"] for e in episodes} == {"llm"}
    assert row["episode/env_errors"] == 0
    # every turn that asked went to the server: its log holds one completion per such turn
    asked = [t for e in episodes for t in e["turns"] if not t["answered"]]
    log = next(Path(tiny_model_dir).parent.glob(f"serve-{url.split(':')[2].split('/')[0]}.log")).read_text()
    assert asked and log.count("POST /v1/chat/completions") >= len(asked)


def test_a_server_that_is_gone_ends_episodes_as_errors_not_the_step(tmp_path, tiny_model_dir):
    row, episodes = _one_step(tmp_path, tiny_model_dir, f"http://127.0.0.1:{_free_port()}/v1", "m")
    assert row["episode/env_errors"] == len(episodes) == 2
    assert all("connection error" in e["error"] for e in episodes)


def test_a_config_naming_a_key_or_no_url_is_one_sentence():
    from training.config import ConfigError, resolve

    with pytest.raises(ConfigError, match="never store a key in the config"):
        resolve("usergym", "cpu", {"rollout.user_llms": {"x": {"kind": "http", "base_url": "u",
                                                                "model": "m", "api_key": "sk"}}})
    with pytest.raises(ConfigError, match="needs base_url and model"):
        resolve("usergym", "cpu", {"rollout.user_llms": {"x": {"kind": "http", "model": "m"}}})


@pytest.mark.slow
def test_evaluation_with_one_endpoint_user_for_every_gym(served, tmp_path, tiny_model_dir):
    """`orchestrator eval --user-url --user-model`: the paper's protocol (one fixed LLM user),
    every episode answered by the endpoint's user, recorded, and kept apart from the offline
    evaluation's results and table rows."""
    from orchestrator.report_data import _deviating
    from training import evaluate as ev

    url, model = served
    spec = ev.EvalSpec(bench="colbench", episodes=2, batch_size=2, device="cpu", max_turns=1,
                       max_new_tokens=8, user_url=url, user_model=model)
    folder = ev.evaluate(spec, tmp_path, model=str(tiny_model_dir), show_progress=False)
    summary = json.loads((folder / "summary.json").read_text())
    episodes = [json.loads(x) for x in (folder / "episodes.jsonl").read_text().splitlines()]
    assert summary["user_protocol"] == f"endpoint {model}" and url in summary["user_llm"]
    assert {e["user_arm"] for e in episodes} == {"llm"} and not any(e.get("error") for e in episodes)
    offline = ev.eval_id(ev.EvalSpec(bench="colbench", episodes=2, max_turns=1, max_new_tokens=8),
                         None, None, str(tiny_model_dir))
    assert folder.name != offline and f"[user: endpoint {model}]" in _deviating(summary)
