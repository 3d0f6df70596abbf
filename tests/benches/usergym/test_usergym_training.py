"""A short PPO run (tiny model) on the symbolic/LLM mixture of all seven UserGym gyms writes per-gym
metrics and arm-tagged trajectories."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import metrics
from training.benches.usergym import BENCH
from training.config import resolve
from training.trainer import Trainer
from training.users.llm import LocalLLMUser

PROJECT = Path(__file__).resolve().parents[3]


@pytest.mark.slow
def test_one_ppo_step_on_all_gyms_with_the_mixture(tmp_path, tiny_model_dir):
    run = tmp_path / "run"
    run.mkdir()
    cfg = resolve("usergym", "cpu", {
        "model.path": str(tiny_model_dir), "workspace.dir": str(PROJECT / "workspace"),
        "data.train_batch_size": 21, "rollout.n": 1, "rollout.max_turns": 2, "rollout.response_length": 48,
        "actor.ppo_mini_batch_size": 21, "trainer.total_steps": 1, "trainer.save_freq": 0,
        "trainer.threads": 1, "trainer.heartbeat_s": 0.5, "gyms": list(BENCH.gyms)})
    (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    trainer = Trainer(run)
    assert trainer.gyms == BENCH.gyms          # named in the config: the held-out two included
    trainer.llm = LocalLLMUser(trainer.models.policy, trainer.models.tokenizer, max_new_tokens=6)
    assert trainer.run() == 0
    row = list(metrics.read_lines(run / "metrics.jsonl"))[-1]
    episodes = list(metrics.read_lines(run / "trajectories" / "step-000001.jsonl"))
    gyms = {ep["gym"] for ep in episodes}
    assert len(gyms) >= 5
    for gym in gyms:
        assert f"reward/{gym}" in row and f"success/{gym}" in row
    assert {ep["user_arm"] for ep in episodes} == {"symbolic", "llm"}      # strategy_mix 0.5
    assert 0.0 < row["user/symbolic_frac"] < 1.0
    assert any(k.startswith(f"reward/{g}/") for g in gyms for k in row)     # split by arm


def test_usergym_trains_on_five_gyms_and_holds_two_out_by_default():
    """The paper's split: Intention and Telepathy are held out of training (evaluated only)."""
    from training.trainer import train_gyms

    assert train_gyms(BENCH) == ("travel", "function", "persuade", "tau", "turtle")
    assert set(BENCH.held_out_gyms) == set(BENCH.gyms) - set(train_gyms(BENCH)) == {"intention", "telepathy"}
    assert "intention" in BENCH.eval_protocol["gyms"] and "telepathy" in BENCH.eval_protocol["gyms"]
