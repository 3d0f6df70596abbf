"""The per-episode mixture (seeded, follows strategy_mix for every gym, logged per episode) and the
leak detector."""
from __future__ import annotations

from training.benches.base import Fact, UserReply
from training.benches.usergym import BENCH
from training.users import leak
from training.users.mixture import arm_metrics, pick_arm

import copy
import dataclasses
from pathlib import Path

from training.snapshot import Snapshot

_BASE = Snapshot.from_dir(Path(__file__).resolve().parents[2] / "workspace")


def snapshot(user):
    knobs = copy.deepcopy(_BASE.knobs)
    for gym, values in user.items():
        knobs["user"][gym].update(values)
    return dataclasses.replace(_BASE, knobs=knobs)


def first_task(gym):
    return BENCH.load_tasks("train", [gym])[0]


def test_pick_arm_is_seeded_and_follows_the_mix():
    assert pick_arm(0.5, 7, "t") == pick_arm(0.5, 7, "t")
    assert all(pick_arm(1.0, s, "t") == "symbolic" for s in range(50))
    assert all(pick_arm(0.0, s, "t") == "llm" for s in range(50))
    frac = sum(pick_arm(0.3, s, "t") == "symbolic" for s in range(2000)) / 2000
    assert 0.25 < frac < 0.35


class FakeLLM:
    arm = "llm"

    def respond(self, state):
        return UserReply(text="Sure. " + state.task.facts[0].text, arm="llm")


def test_every_gym_mixes_arms_and_logs_the_arm():
    """Unlike the paper's recorded selector (table 8 note b), every gym honours strategy_mix."""
    for gym in BENCH.gyms:
        task = first_task(gym)
        arms = set()
        for seed in range(20):
            env = BENCH.make_env(task, snapshot(user={gym: {"strategy_mix": 0.5}}), seed=seed, llm=FakeLLM())
            env.reset()
            arms.add(env.user_arm)
        assert arms == {"symbolic", "llm"}, gym
        only_llm = BENCH.make_env(task, snapshot(user={gym: {"strategy_mix": 0.0}}), seed=0, llm=FakeLLM())
        assert only_llm.user_arm == "llm"


def test_llm_arm_disclosures_are_detected_and_logged():
    task = first_task("intention")
    env = BENCH.make_env(task, snapshot(user={"intention": {"strategy_mix": 0.0}}), seed=0, llm=FakeLLM())
    env.reset()
    _, _, _, _, info = env.step("[action] Hello, how are you?")
    assert info["user_arm"] == "llm" and info["revealed_facts"] == [task.facts[0].id]
    assert info["leaked_facts"] == [task.facts[0].id]          # the agent did not ask for it


FACTS = [Fact("budget", "preference", "My budget is 250 dollars per night.", ("budget",)),
         Fact("pool", "preference", "The hotel must have an indoor pool.", ("pool",))]


def test_detect_revealed_needs_the_fact_content_not_just_its_topic():
    assert leak.detect_revealed("My budget is 250 dollars a night.", FACTS) == ["budget"]
    assert leak.detect_revealed("I'd rather not talk about my budget.", FACTS) == []
    assert leak.detect_revealed("An indoor pool is a must.", FACTS) == ["pool"]


def test_words_the_agent_has_read_are_no_evidence_of_a_disclosure():
    """Turtle's "The package is a parachute.": the puzzle names the package, the secret is the
    keyword. A reply echoing the puzzle tells nothing; one that says the secret tells it."""
    parachute = [Fact("p", "truth", "The package is a parachute.", ("parachute",))]
    puzzle = "A man lies dead in a field next to an unopened package."
    echo = "The unopened package is in the field. The unopened package is in the field."
    assert leak.detect_revealed(echo, parachute) == ["p"]              # read without the puzzle
    assert leak.detect_revealed(echo, parachute, known=puzzle) == []
    assert leak.detect_revealed("It was a parachute that failed.", parachute, known=puzzle) == ["p"]
    # the content words the prompt lacks still decide where there are some
    assert leak.detect_revealed("My budget is 250 dollars a night.", FACTS,
                                known="Find me a hotel within my budget.") == ["budget"]
    assert leak.detect_revealed("The hotel is nice.", FACTS, known="Find me a hotel.") == []


class EchoLLM:
    """An LLM user that says the puzzle again, as the 135M user often did."""
    arm = "llm"

    def respond(self, state):
        return UserReply(text=state.task.prompt, arm="llm")


def test_an_llm_reply_echoing_the_puzzle_discloses_nothing():
    """The environments pass what the agent read first (the task's prompt) as known words: read
    without them, the third training puzzle said again would disclose all three hidden facts."""
    task = next(t for t in BENCH.load_tasks("train", ["turtle"]) if t.id == "turtle-train-0002")
    assert len(leak.detect_revealed(task.prompt, task.facts)) == 3
    env = BENCH.make_env(task, snapshot(user={"turtle": {"strategy_mix": 0.0}}), seed=0,
                         llm=EchoLLM())
    env.reset()
    _, _, _, _, info = env.step("[action] Tell me more?")
    assert info["user_arm"] == "llm" and info["user_replied"] and info["revealed_facts"] == []


def test_leaked_are_the_disclosures_not_asked_for_and_rate_counts_replies():
    assert leak.leaked("What is your budget?", ["budget", "pool"], FACTS, 0.5) == ["pool"]
    infos = [{"user_arm": "symbolic", "leaked_facts": ["pool"]}, {"user_arm": "llm", "leaked_facts": []},
             {"user_arm": None, "leaked_facts": []}, {"user_arm": "llm", "leaked_facts": []}]
    assert leak.leak_rate(infos) == 1 / 3
    assert leak.leak_rate([]) == 0.0


def test_arm_metrics_split_by_arm():
    eps = [{"user_arm": "symbolic", "reward": 1.0, "success": True},
           {"user_arm": "llm", "reward": 0.0, "success": False},
           {"user_arm": "symbolic", "reward": 0.5, "success": False}]
    m = arm_metrics(eps)
    assert m["user/symbolic_frac"] == 2 / 3 and m["reward/arm_symbolic"] == 0.75 and m["success/arm_llm"] == 0.0
