"""ColBench episode: the Gymnasium text contract, the min_questions deadlock of the paper (a turn
that both asks and answers), and every knob with a real effect (env.colbench.*, user.colbench.*)."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from training.benches.base import UserReply
from training.benches.colbench import BENCH, DEFAULT_RULES
from training.benches.colbench.spec import FACT_KINDS
from training.snapshot import Snapshot
from training.users.llm import system_prompt
from training.users.symbolic import UnknownFactKind

ROOT = Path(__file__).resolve().parents[3]
BASE_KNOBS = json.loads((ROOT / "workspace" / "knobs.json").read_text())
TRAIN = BENCH.load_tasks("train")
SHIP = next(t for t in TRAIN if t.data["func"] == "shipping_cost")
SHIP_CODE = SHIP.data["ground_truth"]


def snapshot(env: dict | None = None, user: dict | None = None) -> Snapshot:
    knobs = copy.deepcopy(BASE_KNOBS)
    knobs["env"]["colbench"].update(env or {})
    knobs["user"]["colbench"].update(user or {})
    return Snapshot(commit="", root=ROOT / "workspace", knobs=knobs,
                    rules={"colbench": json.loads(DEFAULT_RULES.read_text())})


def make(task=SHIP, *, env=None, user=None, llm=None, seed=0):
    e = BENCH.make_env(task, snapshot(env, user), seed=seed, llm=llm)
    e.reset(seed=seed)
    return e


def answer(code: str = SHIP_CODE, question: str = "") -> str:
    return f"{question} I WANT TO ANSWER:\n```python\n{code}```"


# ---------------------------------------------------------------- the contract

@pytest.mark.parametrize("task", TRAIN[:20:4], ids=lambda t: t.id)
def test_contract_reset_step_truncation_and_reward_range(task):
    env = make(task, env={"max_steps": 4})
    obs, info = env.reset(seed=3)
    assert isinstance(obs, str) and obs == task.prompt
    assert info["gym"] == "colbench" and info["task_id"] == task.id and info["turn"] == 0
    for turn in range(1, 5):
        obs, reward, terminated, truncated, info = env.step("What should the function return?")
        assert isinstance(obs, str) and obs and reward == 0.0 and not terminated
        assert truncated == (turn == 4) and info["turn"] == turn and info["asked_question"]
        for key in ("user_arm", "revealed_facts", "leaked_facts", "rule_id", "tool_calls", "answered"):
            assert key in info
    assert info["success"] is False and info["score"] == 0.0
    with pytest.raises(RuntimeError):
        env.step("more?")
    env.reset()                                          # a reset starts a fresh episode
    obs, reward, terminated, truncated, info = env.step(answer(task.data["ground_truth"], "Ok?"))
    assert terminated and not truncated and reward == 1.0 and info["success"] and info["score"] == 1.0


def test_rewards_stay_in_range_for_partial_and_broken_answers():
    rewards = []
    for code in (SHIP_CODE.replace("round(cost * multipliers[zone], 2)", "cost"), "def x(:", ""):
        env = make(env={"min_questions": 0})
        _, reward, terminated, _, info = env.step(answer(code))
        assert terminated and 0.0 <= reward <= 1.0 and info["score"] == reward
        rewards.append(reward)
    assert 0.0 < rewards[0] < 1.0 and rewards[1:] == [0.0, 0.0]


def test_two_phase_step_equals_step():
    actions = ["What unit is the weight in?", "hello", "How are zones priced?", answer(question="Thanks?")]
    a, b = make(seed=5), make(seed=5)
    for act in actions:
        one = a.step(act)
        state = b.prepare(act)
        two = b.complete(b.user.respond(state) if state is not None else None)
        for out in (one, two):
            out[4].get("tests", {}).pop("wall_s", None)      # timing differs run to run
        assert one == two


# ---------------------------------------------------------------- min_questions: no deadlock

def test_a_turn_that_asks_and_answers_counts_as_a_question():
    env = make(env={"min_questions": 1})
    _, reward, terminated, _, info = env.step(answer(question="Is the weight in grams?"))
    assert terminated and reward == 1.0 and info["asked_question"] and info["questions"] == 1
    assert info["answered"] and not info["answer_refused"]


def test_the_papers_always_ask_and_answer_policy_never_deadlocks():
    # the paper's counter skipped such turns: 41% of episodes deadlocked (appendix A.2, table 7)
    for task in TRAIN[:5]:
        env = make(task, env={"min_questions": 1})
        out = env.step(answer(task.data["ground_truth"], "Anything else I should know?"))
        assert out[2] and not out[3] and out[4]["turn"] == 1


def test_an_answer_without_questions_is_refused_until_enough_were_asked():
    env = make(env={"min_questions": 2})
    obs, reward, terminated, _, info = env.step(answer())
    assert not terminated and reward == 0.0 and info["answer_refused"] and "2 more question" in obs
    obs, _, terminated, _, info = env.step(answer(question="What unit is the weight in?"))
    assert not terminated and info["answer_refused"] and info["questions"] == 1
    assert info["revealed_facts"] and "1 more question" in obs    # the question was still answered
    _, reward, terminated, _, info = env.step(answer(question="Zone multipliers?"))
    assert terminated and reward == 1.0 and info["questions"] == 2
    env = make(env={"min_questions": 0})
    assert env.step(answer())[2]


# ---------------------------------------------------------------- env knobs

def test_max_steps_bounds_the_episode():
    for max_steps in (2, 6):
        env = make(env={"max_steps": max_steps})
        turns = 0
        while not env.done:
            turns += 1
            env.step("Can you tell me more?")
        assert turns == max_steps


def test_human_response_char_limit_cuts_replies():
    long = make(env={"human_response_char_limit": 400}).step("How is the cost computed?")[0]
    short = make(env={"human_response_char_limit": 25}).step("How is the cost computed?")[0]
    assert len(long) > 25 and short == long[:25]


# ---------------------------------------------------------------- the LLM arm

class FakeLLM:
    arm = "llm"

    def __init__(self, text: str):
        self.text, self.states = text, []

    def respond(self, state):
        self.states.append(state)
        return UserReply(text=self.text, arm="llm")


def test_llm_arm_sees_the_reference_and_answers_in_two_sentences():
    llm = FakeLLM("The weight is in kilograms. Zones multiply the cost. Here is the code: def x. Bye.")
    env = make(llm=llm, user={"strategy_mix": 0.0, "withhold_kinds": ["edge_case"]})
    obs, _, _, _, info = env.step("What is the weight unit?")
    assert info["user_arm"] == "llm" and obs == "The weight is in kilograms. Zones multiply the cost."
    prompt = system_prompt(llm.states[0])          # what training.users.llm gives its model
    assert SHIP_CODE.strip() in prompt and "at most two sentences" in prompt
    edge = next(f.text for f in SHIP.facts if f.kind == "edge_case")
    unit = next(f.text for f in SHIP.facts if f.kind == "argument")
    shared, hidden = prompt.split("Do not reveal")
    assert unit in shared and edge not in shared and edge in hidden
    assert make(llm=llm, user={"strategy_mix": 1.0}).user_arm == "symbolic"


# ---------------------------------------------------------------- user knobs (symbolic arm)

def ask(env, text):
    return env.step(text)[4]


def test_facts_per_reply():
    q = "What does it return, and what about an unknown zone or invalid weight?"
    one = ask(make(user={"facts_per_reply": 1}), q)["revealed_facts"]
    three = ask(make(user={"facts_per_reply": 3}), q)["revealed_facts"]
    assert len(one) == 1 and len(three) >= 2 and one[0] in three


def test_match_threshold():
    q = "Which unit?"           # touches one keyword of the weight fact: similarity 0.5
    low = ask(make(user={"match_threshold": 0.5}), q)
    high = ask(make(user={"match_threshold": 0.9}), q)
    assert low["revealed_facts"] and not high["revealed_facts"] and high["rule_id"] == "unknown"


def test_volunteer_interval():
    env = make(user={"volunteer_interval": 2})
    assert ask(env, "hello")["rule_id"] == "fallback"
    info = ask(env, "ok then")
    assert info["rule_id"] == "volunteer" and len(info["revealed_facts"]) == 1
    assert info["leaked_facts"] == info["revealed_facts"]          # unasked: counted as a leak
    never = make(user={"volunteer_interval": 0})
    assert all(ask(never, "ok then")["rule_id"] == "fallback" for _ in range(4))


def test_max_reveals_bounds_repeated_disclosure():
    env = make(user={"max_reveals": 2})
    got = [ask(env, "What unit is the weight in?") for _ in range(3)]
    assert [len(i["revealed_facts"]) for i in got] == [1, 1, 0]     # the repeat consumed budget
    assert got[2]["rule_id"] == "budget-spent"


@pytest.mark.parametrize("kind", FACT_KINDS)
def test_every_kind_in_the_data_can_be_withheld(kind):
    task = next(t for t in TRAIN if kind in t.fact_kinds())
    questions = [" ".join(f.keywords) + "?" for f in task.facts if f.kind == kind]
    shown, hidden = make(task), make(task, user={"withhold_kinds": [kind]})
    kinds = {f.id: f.kind for f in task.facts}
    revealed_shown = [fid for q in questions for fid in ask(shown, q)["revealed_facts"]]
    revealed_hidden = [fid for q in questions for fid in ask(hidden, q)["revealed_facts"]]
    assert any(kinds[f] == kind for f in revealed_shown)
    assert not any(kinds[f] == kind for f in revealed_hidden)


def test_a_kind_no_task_has_is_refused():
    with pytest.raises(UnknownFactKind, match="'mood'.*kinds in the data: argument, edge_case"):
        make(user={"withhold_kinds": ["mood"]})
    assert BENCH.fact_kinds == set(FACT_KINDS) == set(BENCH.check_withhold(snapshot(user={"withhold_kinds": list(FACT_KINDS)}).knobs))


def test_a_failed_user_backend_ends_the_episode_marked_failed():
    class Broken:
        def respond(self, state):
            return UserReply(text="", arm="llm", failed=True, error="HTTP 500")
    env = make(llm=Broken(), user={"strategy_mix": 0.0})
    obs, reward, terminated, truncated, info = env.step("What unit is the weight in?")
    assert terminated and not truncated and reward == 0.0 and "HTTP 500" in obs
    assert info["user_failed"] and not info["success"]


def test_thinking_is_ignored_and_the_marker_is_case_insensitive():
    env = make(env={"min_questions": 1})
    act = "<think>I WANT TO ANSWER: nope</think>Is zone 1 the cheapest?\ni want to answer:\n" + SHIP_CODE
    _, reward, terminated, _, info = env.step(act)
    assert terminated and reward == 1.0 and info["asked_question"]
