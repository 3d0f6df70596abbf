"""The LLM user's prompt (hidden facts hidden unless asked, persona, swapped roles), the local
transformers backend batched with the tiny model, and the router over named backends."""
from __future__ import annotations

import pytest

from training.benches.base import Fact, Task, UserReply, UserState
from training.users.llm import DISCLOSURE_RULE, LLMRouter, LocalLLMUser, build_llm_users, user_messages, LLMUserConfigError

TASK = Task("i1", "intention", "train", "Plan a trip.", (Fact("d0", "detail", "Budget: 500 dollars.", ("budget",), 3),),
            {"category": "Travel", "task": "Plan a trip."})


def state(msg="What is your budget?", temperature=0.0, llm="default", extra=None, persona=""):
    return UserState(gym="intention", task=TASK, turn=2, agent_message=msg,
                     history=[{"role": "agent", "content": "Hi"}, {"role": "user", "content": "Hello."},
                              {"role": "agent", "content": msg}],
                     revealed={}, knobs={"temperature": temperature, "llm": llm}, persona=persona,
                     extra={"act": "action", "user_role": "You want a trip planned.", **(extra or {})})


def test_prompt_holds_facts_under_the_disclosure_rule_and_swaps_roles():
    msgs = user_messages(state(persona="You are terse and impatient."))
    system = msgs[0]["content"]
    assert system.startswith("You are terse and impatient.")
    assert DISCLOSURE_RULE in system and "- Budget: 500 dollars." in system and "Plan a trip." in system
    assert [m["role"] for m in msgs[1:]] == ["user", "assistant", "user"]
    assert msgs[-1]["content"] == "What is your budget?"


def test_withheld_kinds_are_not_in_the_prompt_so_the_llm_user_cannot_tell_them():
    task = Task("i2", "intention", "train", "Plan a trip.",
                (Fact("d0", "detail", "Budget: 500 dollars.", ("budget",), 3),
                 Fact("p0", "preference", "I prefer trains.", ("train",), 1)), {})
    st = state()
    kept = UserState(**{**st.__dict__, "task": task, "knobs": {**st.knobs, "withhold_kinds": ["detail"]}})
    system = user_messages(kept)[0]["content"]
    assert "I prefer trains." in system and "500 dollars" not in system
    everything = UserState(**{**kept.__dict__,
                              "knobs": {**st.knobs, "withhold_kinds": ["detail", "preference"]}})
    system = user_messages(everything)[0]["content"]
    assert DISCLOSURE_RULE not in system and "trains" not in system and "Plan a trip." in system


def test_an_environment_system_prompt_is_used_as_is():
    msgs = user_messages(state(extra={"system_prompt": "You are a customer."}))
    assert msgs[0]["content"] == "You are a customer."


@pytest.fixture(scope="module")
def local_user(tiny_model_dir):
    return LocalLLMUser.from_dir(tiny_model_dir, max_new_tokens=8)


def test_local_backend_answers_a_batch(local_user):
    states = [state("What is your budget?"), state("Where to?"), state("When?", temperature=0.7)]
    replies = local_user.respond_batch(states)
    assert len(replies) == 3 and all(r.arm == "llm" and not r.failed for r in replies)
    assert all(isinstance(r.text, str) for r in replies)


def test_local_backend_greedy_is_deterministic(local_user):
    a = local_user.respond(state(temperature=0.0))
    b = local_user.respond(state(temperature=0.0))
    assert a == b


def test_local_backend_error_is_a_failed_reply(local_user, monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("out of memory")
    monkeypatch.setattr(local_user, "_generate", boom)
    reply = local_user.respond(state())
    assert reply.failed and "out of memory" in reply.error


class Echo:
    arm = "llm"

    def __init__(self, name):
        self.name = name

    def respond(self, s):
        return UserReply(text=self.name, arm="llm")


def test_router_sends_each_state_to_the_backend_its_knob_names():
    router = LLMRouter({"default": Echo("a"), "big": Echo("b")})
    replies = router.respond_batch([state(llm="big"), state(llm="default"), state(llm="nope")])
    assert [r.text for r in replies[:2]] == ["b", "a"]
    assert replies[2].failed and "'nope'" in replies[2].error


def test_bad_llm_config_is_one_clear_error():
    with pytest.raises(LLMUserConfigError, match="kind"):
        build_llm_users({"x": {"kind": "magic"}})
    with pytest.raises(LLMUserConfigError, match="no model"):
        build_llm_users({"x": {"kind": "local", "model": "/nonexistent"}})


def test_local_user_keeps_each_conversation_cached_and_answers_as_generate(tiny_model_dir,
                                                                           monkeypatch):
    """The local LLM user decodes through the policy's KV engine: greedy replies equal
    transformers' generate (EAU_ROLLOUT_BACKEND=plain), and at a conversation's next turn only the
    new exchange is run, not the system prompt and history again."""
    def conversation(turn):
        history = []
        for t in range(turn):
            history += [{"role": "agent", "content": f"Question {t}?"},
                        {"role": "user", "content": f"Answer {t}."}]
        history.append({"role": "agent", "content": f"Question {turn}?"})
        return UserState(gym="intention", task=TASK, turn=turn, agent_message=history[-1]["content"],
                         history=history, revealed={}, knobs={"temperature": 0.0},
                         persona="", extra={"user_role": "You want a trip planned."})

    user = LocalLLMUser.from_dir(tiny_model_dir, max_new_tokens=6)
    plain = LocalLLMUser.from_dir(tiny_model_dir, max_new_tokens=6)
    widths = []
    first = user.respond_batch([conversation(0)])
    forward = user.engine().decoder.forward

    def spy(*args, **kw):
        widths.append(kw["input_ids"].shape[1])
        return forward(*args, **kw)

    monkeypatch.setattr(user.engine().decoder, "forward", spy)
    later = user.respond_batch([conversation(2)])
    prompt = len(user.tokenizer.encode(user.tokenizer.apply_chat_template(
        user_messages(conversation(2)), tokenize=False, add_generation_prompt=True),
        add_special_tokens=False))
    assert max(widths) < prompt / 2                 # the system prompt and history stayed cached
    monkeypatch.setenv("EAU_ROLLOUT_BACKEND", "plain")
    assert [r.text for r in first + later] == \
        [r.text for r in plain.respond_batch([conversation(0)]) + plain.respond_batch(
            [conversation(2)])]


def test_a_repetition_penalty_is_the_same_on_the_kv_engine_and_in_transformers(tiny_model_dir,
                                                                                monkeypatch):
    """user.<gym>.repetition_penalty, the built-in agent's remedy for an LLM user caught in a
    loop: the KV engine's greedy reply equals transformers' generate with its own
    RepetitionPenaltyLogitsProcessor, and differs from the reply without one."""
    def asked(penalty):
        st = state(temperature=0.0)
        return UserState(**{**st.__dict__, "knobs": {**st.knobs, "repetition_penalty": penalty}})

    kv = LocalLLMUser.from_dir(tiny_model_dir, max_new_tokens=24)
    plain = LocalLLMUser.from_dir(tiny_model_dir, max_new_tokens=24)
    mine = [r.text for r in kv.respond_batch([asked(1.0), asked(2.0)])]
    monkeypatch.setenv("EAU_ROLLOUT_BACKEND", "plain")
    theirs = [plain.respond(asked(1.0)).text, plain.respond(asked(2.0)).text]
    assert mine == theirs and mine[0] != mine[1]
