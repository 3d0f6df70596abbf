"""Knob writes that would change nothing are refused by the gate (orchestrator/gate_knobs.py): a
mixture or LLM-user temperature when the run has no LLM user, and a knob no code reads."""
from __future__ import annotations

import json

import pytest

from gate_testkit import commit, knob_commit, knobs, make_experiment, set_knob, write, ws_of
from orchestrator import gate
from orchestrator.workspace import LIVE_REF


def run_config(exp, rollout: dict) -> None:
    run = exp / "run-001"
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps({"rollout": {"max_turns": 16, **rollout}}))


def judge(exp):
    (verdict,) = gate.judge_pending(exp)
    return verdict


@pytest.mark.parametrize("knob,value", [("strategy_mix", 0.3), ("temperature", 0.9)])
def test_llm_user_knobs_are_refused_when_the_run_has_no_llm_user(tmp_path, knob, value):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    run_config(exp, {"user_llm": "none", "user_llms": {}})
    live = ws.rev(LIVE_REF)
    knob_commit(ws, f"user.travel.{knob}", value)
    v = judge(exp)
    assert not v.accepted and ws.rev(LIVE_REF) == live
    (reason,) = v.reasons
    assert reason.startswith(f"knobs.json: user.travel.{knob} ") and "changes nothing" in reason
    assert "run-001 has no LLM user" in reason
    assert "rollout.user_llm=reference" in reason and "--user-mode llm|hybrid" in reason
    assert reason.count(". ") == 0 and reason.endswith(".")          # one sentence


@pytest.mark.parametrize("rollout", [{"user_llm": "reference", "user_llms": {}},
                                     {"user_llm": "none", "user_llms": {"big": {"kind": "http",
                                      "base_url": "http://h/v1", "model": "m"}}}])
def test_the_mixture_is_accepted_when_the_run_has_an_llm_user(tmp_path, rollout):
    exp = make_experiment(tmp_path)
    run_config(exp, rollout)
    sha = knob_commit(ws_of(exp), "user.travel.strategy_mix", 0.3)
    v = judge(exp)
    assert v.accepted and v.commit == sha, v.reasons


def test_the_schema_says_the_mixture_needs_an_llm_user():
    """knobs.json keeps the mixture (a run may have an LLM user), and its schema, which the
    agent's knobs.py shows, says it acts only with one."""
    from orchestrator.paths import project_root

    schema = json.loads((project_root() / "workspace/schema/knobs.schema.json").read_text())
    for gym, node in schema["properties"]["user"]["properties"].items():
        text = node["properties"]["strategy_mix"]["description"]
        assert "Acts only in a run with an LLM user" in text and "--user-mode" in text, gym


def test_the_mixture_is_accepted_before_any_run(tmp_path):
    """Before the first run its config is unknown: the person may set up the mixture."""
    exp = make_experiment(tmp_path)
    knob_commit(ws_of(exp), "user.travel.strategy_mix", 0.3)
    assert judge(exp).accepted


def test_a_new_knob_no_code_reads_is_refused(tmp_path):
    """An agent that adds a knob to the schema and to knobs.json gets a value no code reads:
    refused in one sentence, while a new reward module's switch (read by training/rewards.py)
    is accepted."""
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    schema = json.loads((ws.path / "schema/knobs.schema.json").read_text())
    travel = schema["properties"]["env"]["properties"]["travel"]
    travel["properties"]["shuffle_options"] = {"type": "boolean", "description": "shuffle",
                                               "x-gyms": ["travel"]}
    write(ws, {"schema/knobs.schema.json": json.dumps(schema, indent=2)})
    set_knob(ws, "env.travel.shuffle_options", True)
    commit(ws, "shuffle the travel options")
    v = judge(exp)
    assert not v.accepted
    (reason,) = v.reasons
    assert reason.startswith("knobs.json: env.travel.shuffle_options is a new knob that no part "
                             "of the trainer reads") and "would change nothing" in reason
    assert reason.count(". ") == 0 and reason.endswith(".")
    # a new reward module's entry is read by the trainer's reward code
    k = knobs(ws)
    k["reward"]["modules"]["asks_twice"] = {"enabled": True, "weight": 0.5}
    write(ws, {"knobs.json": json.dumps(k, indent=2),
               "rewards/asks_twice.py": "APPLIES_TO = ['travel']\n\n"
                                        "def turn_reward(turn):\n    return 0.0\n"})
    commit(ws, "a module of its own")
    assert judge(exp).accepted
