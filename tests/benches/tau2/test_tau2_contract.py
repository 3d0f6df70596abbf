"""The contract every tau2 domain's environment passes (STYLE.md point 6): Gymnasium's reset/step
types, rewards in [0, 1], truncation (never termination) at env.<domain>.max_steps, the info keys of
training/benches/base.py on every step, and no step after the end."""
from __future__ import annotations

import copy
import random
from pathlib import Path

import pytest

from training.benches.tau2 import BENCH
from training.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[3]
STEP_KEYS = {"gym", "task_id", "turn", "user_arm", "asked_question", "answered", "revealed_facts",
             "leaked_facts", "rule_id", "tool_calls"}
IDLE = ["Hello, how are you today", "Let me think about that.", "<think>hm</think>Okay"]
RANDOM = ["Could you give me your email?", "What is the reason?", '{"name": "nope"}',
          '<tool_call>{"name": "get_user_details", "arguments": {"user_id": "x"}}</tool_call>',
          "<tool_call>{broken</tool_call>", "Please restart your phone.", "Shall I proceed?",
          "Anything else?", "<think>plan", "###STOP###", "Please turn on airplane mode."]


def make(domain: str, index: int = 0, seed: int = 0, **env_knobs):
    snap = Snapshot.from_dir(ROOT / "workspace")
    if env_knobs:
        knobs = copy.deepcopy(snap.knobs)
        knobs["env"][domain].update(env_knobs)
        snap = Snapshot(commit="", root=snap.root, knobs=knobs, rules=snap.rules, personas=snap.personas)
    return BENCH.make_env(BENCH.load_tasks("train", [domain])[index], snap, seed=seed)


@pytest.mark.parametrize("domain", BENCH.gyms)
def test_reset_and_step_types(domain):
    env = make(domain)
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and obs and info["gym"] == domain and STEP_KEYS <= set(info)
    obs, reward, terminated, truncated, info = env.step(IDLE[0])
    assert isinstance(obs, str) and isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert STEP_KEYS <= set(info) and info["turn"] == 1


@pytest.mark.parametrize("domain", BENCH.gyms)
def test_truncation_at_max_steps(domain):
    env = make(domain, max_steps=4)
    env.reset()
    results = [env.step(IDLE[i % len(IDLE)]) for i in range(4)]
    assert [r[3] for r in results] == [False, False, False, True]
    assert not any(r[2] for r in results)
    assert results[-1][4]["score"] == 0.0 and results[-1][4]["success"] is False
    with pytest.raises(RuntimeError, match="reset"):
        env.step(IDLE[0])


@pytest.mark.parametrize("domain", BENCH.gyms)
def test_random_play_keeps_rewards_in_range(domain):
    rng = random.Random(domain)
    for index in range(3):
        env = make(domain, index=index, seed=index)
        env.reset()
        done = False
        while not done:
            _, reward, terminated, truncated, info = env.step(rng.choice(RANDOM))
            assert 0.0 <= reward <= 1.0 and STEP_KEYS <= set(info)
            assert not (terminated and truncated)
            done = terminated or truncated
        assert {"success", "score", "end_reason"} <= set(info)
