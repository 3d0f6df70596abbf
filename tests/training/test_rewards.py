"""Reward modules run in sandboxed workers: weights, scales, clipping, and failures on live turns."""
from __future__ import annotations

from pathlib import Path

import pytest

from training import rewards

ASK = """APPLIES_TO = ["toy"]
def turn_reward(turn):
    if turn["agent"] == "boom":
        raise RuntimeError("bad turn")
    if turn["agent"] == "nan":
        return float("nan")
    return 1.0 if turn["asked_question"] else 0.0
"""
FINAL = """APPLIES_TO = ["toy", "other"]
def episode_reward(episode):
    return 10.0 * len(episode["turns"])
"""


def knobs(modules, scale=1.0, gym_scale=1.0, lo=-1.0, hi=2.0):
    return {"reward": {"default_scale": scale, "per_gym_scale": {"toy": gym_scale},
                       "turn_reward_clip": {"min": lo, "max": hi}, "modules": modules}}


def episode(*agents, gym="toy"):
    return {"gym": gym, "turns": [{"turn": i, "agent": a, "asked_question": a.endswith("?"),
                                   "env_reward": 0.0} for i, a in enumerate(agents)]}


def write(tmp: Path, **sources) -> dict[str, Path]:
    out = {}
    for name, text in sources.items():
        (tmp / f"{name}.py").write_text(text)
        out[name] = tmp / f"{name}.py"
    return out


def test_weighted_scaled_clipped_and_errors_counted(tmp_path):
    files = write(tmp_path, ask=ASK, final=FINAL)
    k = knobs({"ask": {"enabled": True, "weight": 0.5}, "final": {"enabled": True, "weight": 0.01}},
              scale=2.0, gym_scale=1.5)
    mods = rewards.load_modules(files, k)
    try:
        stats = rewards.ScoreStats()
        ep = episode("what?", "boom", "nan", "ok?")
        ep["turns"][0]["env_reward"] = 0.2
        got = rewards.score_episode(ep, mods, k, stats)
        # turn 0: 3 * (0.2 + 0.5) = 2.1 -> clipped to 2.0; turns 1, 2 fail -> 0 (2 errors);
        # turn 3: 3 * (0.5 * 1 + 0.01 * 40) = 2.7 -> 2.0
        assert got == pytest.approx([2.0, 0.0, 0.0, 2.0])
        assert stats.errors == 2
        assert ep["turns"][0]["reward"] == pytest.approx(2.0)
        other = episode("x", gym="other")           # "ask" does not apply to gym "other"
        # default_scale 2 x per_gym_scale 1 (absent) x weight 0.01 x 10 per turn
        assert rewards.score_episode(other, mods, k, stats) == pytest.approx([0.2])
    finally:
        rewards.close_all(mods)


def test_disabled_module_is_not_loaded_and_import_failure_refused(tmp_path):
    files = write(tmp_path, ask=ASK, broken="APPLIES_TO = ['toy']\nraise SystemExit('no')\n")
    mods = rewards.load_modules(files, knobs({"broken": {"enabled": False}}))
    assert mods == []
    with pytest.raises(rewards.RewardModuleError, match="broken"):
        rewards.load_modules(files, knobs({"broken": {"enabled": True, "weight": 1}}))
    with pytest.raises(rewards.RewardModuleError, match="does not exist"):
        rewards.load_modules(files, knobs({"ghost": {"enabled": True}}))


# Behaves for its first three calls, then fails every call: the gate's replay, a few calls in a
# fresh process, never sees it fail; a trainer's worker, imported once for the whole run, does.
LATE = """APPLIES_TO = ["toy"]
calls = 0
def turn_reward(turn):
    global calls
    calls += 1
    if calls > 3:
        raise ZeroDivisionError("division by zero")
    return 1.0
"""


def test_a_module_failing_after_its_first_calls_is_counted_per_module_with_its_reason(tmp_path):
    files = write(tmp_path, late=LATE, ask=ASK)
    k = knobs({"late": {"enabled": True}, "ask": {"enabled": True}})
    mods = rewards.load_modules(files, k)
    try:
        first, second = rewards.ScoreStats(), rewards.ScoreStats()
        ep1 = episode("what?", "ok?")
        rewards.score_episode(ep1, mods, k, first)
        ep2 = episode("what?", "ok?", "and?")
        rewards.score_episode(ep2, mods, k, second)
    finally:
        rewards.close_all(mods)
    assert first.metrics(1)["reward/module_errors/late"] == 0
    assert "module_errors" not in ep1["turns"][0]
    row = {"step": 2, **second.metrics(1)}
    assert (row["reward/module_errors/late"], row["reward/module_calls/late"]) == (2, 3)
    assert (row["reward/module_errors/ask"], row["reward/module_calls/ask"]) == (0, 3)
    assert (row["reward/module_errors"], row["reward/module_calls"]) == (2, 6)
    assert [t.get("module_errors") for t in ep2["turns"]] == [
        None, {"late": "ZeroDivisionError: division by zero"},
        {"late": "ZeroDivisionError: division by zero"}]
    assert [t["module_rewards"]["late"] for t in ep2["turns"]] == [1.0, 0.0, 0.0]
    assert rewards.errors_text(row) == "  reward modules failed 2 of 6 calls (late 2 of 3)"
    assert rewards.errors_text(first.metrics(1)) == ""
    merged = rewards.ScoreStats.merged([first, second])          # two processes' stats
    assert (merged.module_errors, merged.module_calls) == ({"late": 2}, {"late": 5, "ask": 5})
