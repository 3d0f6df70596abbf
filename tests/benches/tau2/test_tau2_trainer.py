"""The PPO trainer runs on tau2 (what `orchestrator start --bench tau2` starts): a tiny model, two
steps, every domain's episodes scored and logged."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

PROJECT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(PROJECT / "tests" / "training"))


@pytest.mark.slow
def test_two_ppo_steps_on_tau2(tmp_path, tiny_model_dir):
    from toy_env import write_run

    from training import metrics
    from training.trainer import Trainer

    run = tmp_path / "run"
    # turns that hold every domain's shortest solving turn (retail 44 tokens; training/budget.py)
    write_run(run, workspace_dir=PROJECT / "workspace", model_dir=tiny_model_dir, bench="tau2",
              overrides={"rollout.response_length": 48})
    assert Trainer(run).run() == 0
    rows = list(metrics.read_lines(run / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2]
    assert any(k in rows[-1] for k in ("reward/retail", "reward/airline", "reward/telecom"))
    episodes = list(metrics.read_lines(run / "trajectories" / "step-000002.jsonl"))
    assert episodes and all(ep["gym"] in ("retail", "airline", "telecom") for ep in episodes)
    assert all(ep["user_arm"] == "symbolic" and "score" in ep for ep in episodes)
