"""The tau2 text environment: action parsing, the episode state machine, limits and scoring."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from training.benches.base import UserReply
from training.benches.tau2 import BENCH
from training.benches.tau2.env import ActionParseError, Tau2Env, parse_action
from training.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[3]
INFO_KEYS = {"gym", "task_id", "turn", "user_arm", "asked_question", "answered", "revealed_facts",
             "leaked_facts", "rule_id", "tool_calls"}


class ScriptedUser:
    """Replies from a list, then 'Okay.'; records what it was asked."""

    def __init__(self, replies=()):
        self.replies = list(replies)
        self.seen = []

    def respond(self, state):
        self.seen.append(state)
        text = self.replies.pop(0) if self.replies else "Okay."
        return UserReply(text=text, arm="llm")


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return Snapshot.from_dir(ROOT / "workspace")


def knobs(snapshot, **env):
    k = copy.deepcopy(snapshot.knobs)
    for domain in ("retail", "airline", "telecom"):
        k["env"][domain].update(env)
    return k


def task_of(domain: str, kind: str):
    return next(t for t in BENCH.load_tasks("train", [domain]) if f"_{kind}_" in t.id)


def as_call(action: dict) -> str:
    return "<tool_call>" + json.dumps({"name": action["name"], "arguments": action["arguments"]}) + "</tool_call>"


@pytest.mark.parametrize("text,name,args,message", [
    ('<tool_call>{"name": "get_user_details", "arguments": {"user_id": "a"}}</tool_call>', "get_user_details", {"user_id": "a"}, ""),
    ('Let me check. <tool_call>{"name": "x", "arguments": "{\\"k\\": 1}"}</tool_call>', "x", {"k": 1}, "Let me check."),
    ('{"name": "list_all_product_types", "arguments": {}}', "list_all_product_types", {}, ""),
    ('```json\n{"name": "calculate", "arguments": {"expression": "1+1"}}\n```', "calculate", {"expression": "1+1"}, ""),
])
def test_parse_tool_calls(text, name, args, message):
    calls, rest = parse_action(text)
    assert [(c.name, c.arguments) for c in calls] == [(name, args)] and rest == message


def test_parse_plain_text_and_malformed_calls():
    assert parse_action("Could you give me your email?") == ([], "Could you give me your email?")
    assert parse_action('I will use {"a": 1} later') == ([], 'I will use {"a": 1} later')
    with pytest.raises(ActionParseError, match="not valid JSON"):
        parse_action("<tool_call>{name: x}</tool_call>")
    with pytest.raises(ActionParseError, match='"name"'):
        parse_action('<tool_call>{"arguments": {}}</tool_call>')


def test_gold_episode_succeeds_and_fills_info(snapshot):
    task = task_of("retail", "cancel")
    user = ScriptedUser(["I want to cancel an order."])
    env = Tau2Env(task, knobs(snapshot), user, seed=0, arm="llm")
    obs, info = env.reset()
    assert obs == "I want to cancel an order." and INFO_KEYS <= set(info)   # the user speaks first
    assert info["leaked_facts"] == []
    assert user.seen[0].agent_message.startswith("Hi!") and "###STOP###" in user.seen[0].extra["system_prompt"]
    for action in task.data["actions"]:
        obs, reward, terminated, truncated, info = env.step(as_call(action))
        assert obs.startswith(f"TOOL RESULT ({action['name']}):") and "Error" not in obs
        assert not terminated and not truncated and reward == 0.0
        assert info["tool_calls"][0]["name"] == action["name"]
    assert info["answered"] is True                           # the write went through
    obs, reward, terminated, truncated, info = env.step("Your order is cancelled. Anything else?")
    assert info["asked_question"] and not terminated
    obs, reward, terminated, truncated, info = env.step("###STOP###")
    assert terminated and not truncated and reward == 1.0
    assert info["success"] is True and info["score"] == 1.0 and info["reward_breakdown"]["DB"] == 1.0
    with pytest.raises(RuntimeError):
        env.step("more")


def test_wrong_episode_scores_zero(snapshot):
    task = task_of("retail", "cancel")
    env = Tau2Env(task, knobs(snapshot), ScriptedUser(), seed=0)
    env.reset()
    for action in task.data["actions"][:-1]:                  # never cancels
        env.step(as_call(action))
    *_, reward, terminated, _, info = env.step("###STOP###")
    assert terminated and reward == 0.0 and info["success"] is False


def test_user_stop_token_ends_and_scores(snapshot):
    task = task_of("airline", "status")
    env = Tau2Env(task, knobs(snapshot), ScriptedUser(["", "Thanks! ###STOP###"]), seed=0)
    env.reset()
    env.step(as_call(task.data["actions"][0]))
    status = task.data["communicate_info"][0]
    obs, reward, terminated, truncated, info = env.step(f"The flight is {status}.")
    assert terminated and reward == 1.0 and info["reward_breakdown"]["COMMUNICATE"] == 1.0


def test_out_of_turns_is_truncated_and_scores_zero(snapshot):
    task = task_of("retail", "cancel")
    env = Tau2Env(task, knobs(snapshot, max_steps=3), ScriptedUser(), seed=0)
    env.reset()
    for i, action in enumerate(task.data["actions"][:3]):
        obs, reward, terminated, truncated, info = env.step(as_call(action))
    assert truncated and not terminated and reward == 0.0 and info["end_reason"] == "max_steps"


def test_too_many_tool_errors_end_the_episode(snapshot):
    task = task_of("retail", "cancel")
    env = Tau2Env(task, knobs(snapshot), ScriptedUser(), seed=0)
    env.reset()
    for i in range(10):
        obs, reward, terminated, truncated, info = env.step('<tool_call>{"name": "nope"}</tool_call>')
        assert "Error: unknown tool" in obs
    assert terminated and reward == 0.0 and info["end_reason"] == "too_many_errors"


def test_prepare_complete_is_step(snapshot):
    task = task_of("retail", "info")
    a = Tau2Env(task, knobs(snapshot), ScriptedUser(["I have three."]), seed=0)
    b = Tau2Env(task, knobs(snapshot), ScriptedUser(["I have three."]), seed=0)
    a.reset(), b.reset()
    state = a.prepare("How many orders do you think you have?")
    assert state.agent_message == "How many orders do you think you have?" and state.gym == "retail"
    first = a.complete(a.user.respond(state))
    assert first == b.step("How many orders do you think you have?")
    assert a.prepare(as_call(task.data["actions"][0])) is None    # a tool call needs no user


def test_telecom_symbolic_user_acts_on_the_phone(snapshot):
    task = task_of("telecom", "airplane")
    env = BENCH.make_env(task, snapshot, seed=0)                  # no LLM: the symbolic arm
    obs, info = env.reset()
    assert info["user_arm"] == "symbolic" and obs.startswith("Hi! ")
    assert not env.world.check_assertion(task.data["env_assertions"][0])
    obs, *_ , info = env.step("Please turn off airplane mode on your phone.")
    assert "[I ran toggle_airplane_mode: Airplane Mode is now OFF." in obs
    assert info["tool_calls"][0]["requestor"] == "user"
    *_, reward, terminated, _, info = env.step("###STOP###")
    assert terminated and reward == 1.0


def test_symbolic_user_discloses_identity_when_asked(snapshot):
    task = task_of("retail", "return")
    env = BENCH.make_env(task, snapshot, seed=0)
    opening, _ = env.reset()
    assert opening == task.prompt
    known = next(f for f in task.facts if f.kind in ("identity", "email"))
    question = "Could you tell me your email address?" if known.kind == "email" else \
        "Could you tell me your name and zip code?"
    obs, *_, info = env.step(question)
    assert known.text in obs and info["revealed_facts"] == [known.id]
    assert info["rule_id"] == "answer-matched" and info["leaked_facts"] == []


def test_whole_retail_episode_against_the_symbolic_user(snapshot):
    """A scripted agent that follows the policy solves a shipped task with the symbolic arm."""
    task = task_of("retail", "cancel")
    env = BENCH.make_env(task, snapshot, seed=3)
    opening, info = env.reset()
    assert "cancel your order" not in opening and "cancel my order" in opening
    obs, *_ = env.step("I can help. Could you give me your email, or your name and zip code?")
    assert obs and obs != "Sorry, I don't know that."
    obs, *_ = env.step("What is the reason for the cancellation?")
    assert "longer need" in obs or "by mistake" in obs               # the rest of the request
    for action in task.data["actions"][:-1]:
        env.step(as_call(action))
    obs, *_ = env.step("I will cancel the order now. Shall I proceed?")
    assert obs == "Yes, please go ahead."
    env.step(as_call(task.data["actions"][-1]))
    obs, reward, terminated, truncated, info = env.step("Your order is cancelled. Anything else?")
    assert "###STOP###" in obs and terminated and reward == 1.0 and info["rule_id"] == "done"


def test_the_user_sees_messages_not_tool_calls_or_thoughts(snapshot):
    task = task_of("retail", "cancel")
    user = ScriptedUser()
    env = Tau2Env(task, knobs(snapshot), user, seed=0)
    env.reset()
    env.step(as_call(task.data["actions"][0]))
    env.step("<think>the user is Ann</think>Thanks, I found your account.")
    state = user.seen[-1]
    assert state.agent_message == "Thanks, I found your account."
    assert [m["content"] for m in state.history if m["role"] == "agent"] == [
        "Hi! How can I help you today?", "Thanks, I found your account."]


def test_leaks_are_known_details_given_unasked(snapshot):
    task = task_of("retail", "cancel")
    identity = next(f for f in task.facts if f.kind in ("identity", "email"))
    env = Tau2Env(task, knobs(snapshot), ScriptedUser(["Hi.", identity.text, identity.text]), seed=0, arm="llm")
    env.reset()
    *_, info = env.step("Hello! I am happy to help today.")          # not asked: a leak
    assert info["user_replied"] and info["revealed_facts"] == [identity.id]
    assert info["leaked_facts"] == [identity.id]
    question = "What is your email address?" if identity.kind == "email" else "What is your name and zip code?"
    *_, info = env.step(question)                                    # asked: no leak
    assert info["revealed_facts"] == [identity.id] and info["leaked_facts"] == []
