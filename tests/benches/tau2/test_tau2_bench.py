"""The tau2 BENCH object: tasks (ours and tau2-bench's), prompts, users and the arm mixture."""
from __future__ import annotations

import copy
from pathlib import Path

import pytest

from training.benches import get_bench
from training.benches.tau2 import BENCH
from training.benches.tau2.domain import Tau2DataError
from training.benches.tau2.loader import first_person, scenario_facts
from training.benches.tau2.users import ChatUser, user_system_prompt
from training.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def snapshot() -> Snapshot:
    return Snapshot.from_dir(ROOT / "workspace")


def test_registered_under_its_aliases():
    assert get_bench("tau2-bench") is BENCH and BENCH.gyms == ("retail", "airline", "telecom")


@pytest.mark.parametrize("domain", ["retail", "airline", "telecom"])
def test_shipped_splits(domain):
    train, test = BENCH.load_tasks("train", [domain]), BENCH.load_tasks("test", [domain])
    assert len(train) >= 40 and len(test) >= 20
    assert {t.split for t in train} == {"train"} and {t.split for t in test} == {"test"}
    assert not {t.id for t in train} & {t.id for t in test}
    assert all(t.gym == domain and t.data["actions"] and t.facts for t in train + test)


def test_unknown_domain_and_missing_data_dir(tmp_path):
    with pytest.raises(Tau2DataError, match="unknown tau2 domain 'bank'"):
        BENCH.load_tasks("train", ["bank"])
    with pytest.raises(Tau2DataError, match="no tau2 retail tasks under"):
        BENCH.load_tasks("train", ["retail"], data_dir=tmp_path)
    (tmp_path / "retail").mkdir()
    (tmp_path / "retail" / "tasks.json").write_text("{not json")
    (tmp_path / "retail" / "policy.md").write_text("p")
    with pytest.raises(Tau2DataError, match="cannot read .*tasks.json"):
        BENCH.load_tasks("train", ["retail"], data_dir=tmp_path)


def test_real_retail_splits_and_task_fields(benchdata):
    root = benchdata / "tau2"
    train = BENCH.load_tasks("train", ["retail"], data_dir=root)
    test = BENCH.load_tasks("test", ["retail"], data_dir=root)
    assert (len(train), len(test)) == (74, 40)
    task = next(t for t in train + test if t.id == "retail/0")
    assert task.data["reward_basis"] == ["DB", "COMMUNICATE"]          # tau2's default
    assert task.data["actions"][0]["name"] == "find_user_id_by_name_zip"
    assert "Yusuf Rossi" in task.facts[-1].text and task.facts[-1].kind == "identity"
    assert task.prompt.startswith("Hi! I received my order #W2378156")
    assert "#" in task.data["policy"]                                   # the real policy.md


def test_system_prompt_has_policy_tools_and_format():
    task = BENCH.load_tasks("test", ["airline"])[0]
    prompt = BENCH.system_prompt(task)
    assert "Airline agent policy" in prompt and "<tool_call>" in prompt and "###STOP###" in prompt
    tools = [line for line in prompt.splitlines() if line.startswith("- ") and "[" in line]
    assert len(tools) == 14
    assert ("- get_reservation_details(reservation_id: str (e.g. '8JX2WO')) [read]: Return a "
            "reservation") in prompt
    assert 'cabin: "business"|"economy"|"basic_economy"' in prompt
    assert "flights: list[{flight_number, date}]" in prompt


def test_user_prompt_holds_the_scenario_stop_tokens_and_phone_tools():
    retail = BENCH.load_tasks("test", ["retail"])[0]
    text = user_system_prompt(retail)
    s = retail.data["scenario"]
    assert s["reason_for_call"] in text and s["known_info"] in text
    assert all(tok in text for tok in ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###"))
    assert "toggle_airplane_mode" not in text
    assert "toggle_airplane_mode" in user_system_prompt(BENCH.load_tasks("test", ["telecom"])[0])


def test_arm_mixture_and_chat_user(snapshot):
    task = BENCH.load_tasks("train", ["retail"])[0]
    seen = []

    def chat(messages, temperature):
        seen.append((messages, temperature))
        return "Hello, I need help with an order."

    knobs = copy.deepcopy(snapshot.knobs)
    knobs["user"]["retail"]["strategy_mix"] = 0.0                    # always the LLM arm
    snap = Snapshot(commit="", root=snapshot.root, knobs=knobs, rules=snapshot.rules,
                    personas=snapshot.personas)
    env = BENCH.make_env(task, snap, seed=1, llm=ChatUser(chat))
    obs, info = env.reset()
    assert info["user_arm"] == "llm" and obs == "Hello, I need help with an order."
    messages, temperature = seen[0]
    assert messages[0]["role"] == "system" and "###STOP###" in messages[0]["content"]
    assert messages[1] == {"role": "user", "content": "Hi! How can I help you today?"}
    assert temperature == knobs["user"]["retail"]["temperature"]
    knobs["user"]["retail"]["strategy_mix"] = 1.0                    # always the symbolic arm
    env = BENCH.make_env(task, snap, seed=1, llm=ChatUser(chat))
    assert env.reset()[1]["user_arm"] == "symbolic"


def test_chat_user_backend_failure_fails_the_episode(snapshot):
    def broken(messages, temperature):
        raise ConnectionError("endpoint down")

    knobs = copy.deepcopy(snapshot.knobs)
    knobs["user"]["retail"]["strategy_mix"] = 0.0
    snap = Snapshot(commit="", root=snapshot.root, knobs=knobs, rules=snapshot.rules)
    env = BENCH.make_env(BENCH.load_tasks("train", ["retail"])[0], snap, seed=0, llm=ChatUser(broken))
    env.reset()
    *_, reward, terminated, _, info = env.step("Can I have your email?")
    assert terminated and reward == 0.0
    assert info["end_reason"] == "user_failed" and "endpoint down" in info["user_error"]


def test_scenario_facts_and_first_person():
    facts = scenario_facts("t", {"reason_for_call": "You want to return a lamp. It is broken.",
                                 "known_info": "You are Ann Lee in zip code 12345. Your email is a@b.com."})
    assert [(f.kind, f.text) for f in facts] == [
        ("request", "I want to return a lamp."), ("request", "It is broken."),
        ("identity", "I am Ann Lee in zip code 12345."), ("email", "My email is a@b.com.")]
    assert facts[0].importance == 3
    assert first_person("You said your order and you want it") == "I said my order and I want it"


def test_make_env_refuses_missing_rules_and_unknown_withheld_kinds(snapshot):
    task = BENCH.load_tasks("train", ["retail"])[0]
    bare = Snapshot(commit="", root=snapshot.root, knobs=snapshot.knobs)
    with pytest.raises(ValueError, match="no users/tau2/rules.json"):
        BENCH.make_env(task, bare, seed=0)
    knobs = copy.deepcopy(snapshot.knobs)
    knobs["user"]["retail"]["withhold_kinds"] = ["shape"]
    bad = Snapshot(commit="", root=snapshot.root, knobs=knobs, rules=snapshot.rules)
    with pytest.raises(ValueError, match="'shape'"):
        BENCH.make_env(task, bad, seed=0)
    knobs["user"]["retail"]["withhold_kinds"] = ["identity"]
    env = BENCH.make_env(task, Snapshot(commit="", root=snapshot.root, knobs=knobs, rules=snapshot.rules), seed=0)
    env.reset()
    obs, *_ = env.step("Could you tell me your name and zip code, or your email?")
    assert not any(f.text in obs for f in task.facts if f.kind == "identity")
    assert BENCH.fact_kinds >= {t for x in BENCH.load_tasks("train") for t in x.fact_kinds()}
