"""One contract every UserGym gym passes (STYLE.md point 6): Gymnasium's reset/step signature and
types, rewards in [0, 1], truncation (never termination) at env.<gym>.max_steps, the info keys of
training/benches/base.py, prepare/complete equal to step, and no step after the end."""
from __future__ import annotations

import random

import pytest

from training.benches.usergym import BENCH
from usergym_helpers import first_task, make, snapshot

STEP_KEYS = {"gym", "task_id", "turn", "user_arm", "asked_question", "answered", "revealed_facts",
             "leaked_facts", "rule_id", "tool_calls"}
# a few actions per gym that never end an episode (so truncation can be reached)
IDLE = {"travel": ["[action] Hello there.", "[search] hotel", "[action] What else?"],
        "function": ["[action] 1 2 3 4", "[action] What operations?", "[search] test"],
        "persuade": ["[action] Why?", "[answer] I have nothing to say."],
        "tau": ["[action] How can I help?", "[search] tools", "[search] help"],
        "turtle": ["[action] Is it raining?", "[answer] I do not know."],
        "intention": ["[action] Hello?", "[action] Nice weather."],
        "telepathy": ["[action] Is it purple?", "[answer] a zeppelin"]}
RANDOM_ACTIONS = ["[action] What is your budget and which date?", "[search] flight", "[answer] H1",
                  "[answer] 3", "[action] 1 2 3 4", "no tool prefix", "<think>hm</think>[action] Why?",
                  '[answer] {"name": "get_user_details", "arguments": {"user_id": "x"}}']


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_reset_and_step_follow_gymnasium(gym):
    env = make(first_task(gym))
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and obs and isinstance(info, dict) and info["gym"] == gym
    obs, reward, terminated, truncated, info = env.step(IDLE[gym][0])
    assert isinstance(obs, str) and isinstance(reward, float)
    assert isinstance(terminated, bool) and isinstance(truncated, bool)
    assert STEP_KEYS <= set(info) and info["turn"] == 1


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_truncation_at_max_steps(gym):
    env = make(first_task(gym), env={gym: {"max_steps": 4}})
    results = [env.step(IDLE[gym][i % len(IDLE[gym])]) for i in range(4)]
    assert [r[3] for r in results] == [False, False, False, True]
    assert not any(r[2] for r in results)
    assert {"success", "score"} <= set(results[-1][4])
    with pytest.raises(RuntimeError, match="reset"):
        env.step(IDLE[gym][0])


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_random_play_keeps_rewards_in_range(gym):
    rng = random.Random(gym)
    for index in range(3):
        env = make(first_task(gym, index=index), seed=index)
        total, done = 0.0, False
        while not done:
            _, reward, terminated, truncated, info = env.step(rng.choice(RANDOM_ACTIONS))
            assert 0.0 <= reward <= 1.0
            total += reward
            done = terminated or truncated
        assert 0.0 <= info["score"] <= 1.0 and isinstance(info["success"], bool)


@pytest.mark.parametrize("gym", BENCH.gyms)
def test_prepare_complete_equals_step(gym):
    task = first_task(gym)
    a, b = make(task, seed=5), make(task, seed=5)
    for action in IDLE[gym] + RANDOM_ACTIONS[:3]:
        if a.done:
            break
        state = b.prepare(action)
        reply = b.user.respond(state) if state is not None else None
        assert a.step(action) == b.complete(reply)


def test_calls_rejected_for_their_arguments_are_marked_with_the_step_they_were_on():
    """A call with the right tag that the gym rejects for its arguments is not a refused format
    (invalid_action stays False); its record names the step it was on, for the diagnosis."""
    fn = make(first_task("function"))
    info = fn.step("[action] 7 9")[4]
    assert (info["rejected"], info["invalid_action"]) == ("probe", False)
    assert fn.step("[action] 1 2 3 4")[4].get("rejected") is None
    assert make(first_task("tau")).step('[answer] {"name": "get_user_details_1", "arguments": {}}')[4][
        "rejected"] == "identify"
    assert make(first_task("tau")).step('[answer] {"name": "get_user_details", "arguments": {}}')[4][
        "rejected"] == "lookup"
    assert make(first_task("travel")).step("[search] xyzzy")[4]["rejected"] == "search"
    assert make(first_task("travel")).step("[answer] Z99")[4]["rejected"] == "answer"
