"""The gate on demonstrations/<bench>.json and env.<gym>.demonstrations, in real temporary git
repositories: an example the gym's own parser refuses is reverted with a reason naming it; the
knob moves at most 1 per write, fewer is the harder direction, and it may not ask for more
examples than the file holds."""
from __future__ import annotations

import json

from gate_testkit import commit, knob_commit, make_experiment, write_metrics, ws_of
from orchestrator import gate
from orchestrator.workspace import LIVE_REF


def test_gate_refuses_an_example_that_does_not_parse_and_accepts_a_good_one(tmp_path):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    path = ws.path / "demonstrations" / "usergym.json"
    data = json.loads(path.read_text())
    live = ws.rev(LIVE_REF)
    broken = json.loads(json.dumps(data))
    broken["intention"][0]["messages"][1]["content"] = "Could you tell me your budget?"
    path.write_text(json.dumps(broken, indent=2))
    commit(ws, "a worked example without its tool prefix")
    v = gate.judge_pending(exp)[0]
    assert v.verdict == "rejected", v
    assert any("intention[0]" in r and "does not start with [action]" in r for r in v.reasons), v.reasons
    assert ws.rev(LIVE_REF) == live
    assert json.loads(path.read_text()) == data          # reverted on main and in the checkout

    data["intention"].append({"id": "intention-move", "messages": [
        {"role": "user", "content": "The category of the task: Moving\nThe initial vague task "
                                    "description: Help me move house."},
        {"role": "assistant", "content": "[action] When do you want to move?"}]})
    path.write_text(json.dumps(data, indent=2))
    sha = commit(ws, "a fourth intention example")
    v = gate.judge_pending(exp)[0]
    assert (v.commit, v.verdict) == (sha, "accepted"), v.reasons
    assert ws.rev(LIVE_REF) == sha


def test_gate_checks_the_knob_against_the_examples_and_its_limits(tmp_path):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    for dotted, value, words in (
            ("env.intention.demonstrations", 3, ["x-max-delta 1"]),             # 1 -> 3 at once
            ("env.intention.demonstrations", 0, ["harder", "0.80"])):           # fewer = harder
        knob_commit(ws, dotted, value)
        v = gate.judge_pending(exp)[0]
        assert v.verdict == "rejected" and all(w in " ".join(v.reasons) for w in words), v.reasons
    sha = knob_commit(ws, "env.intention.demonstrations", 2)               # easier: always allowed
    assert gate.judge_pending(exp)[0].verdict == "accepted"
    write_metrics(exp, [{"step": s, "success/intention": 0.9} for s in range(1, 11)])
    knob_commit(ws, "env.intention.demonstrations", 1)                     # harder, once succeeding
    assert gate.judge_pending(exp)[0].verdict == "accepted"
    assert ws.rev(LIVE_REF) != sha


def test_gate_refuses_more_demonstrations_than_examples(tmp_path):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    path = ws.path / "demonstrations" / "usergym.json"
    data = json.loads(path.read_text())
    data["persuade"] = data["persuade"][:1]
    path.write_text(json.dumps(data, indent=2))
    commit(ws, "one persuade example only")
    assert gate.judge_pending(exp)[0].verdict == "accepted"
    knob_commit(ws, "env.persuade.demonstrations", 2)
    v = gate.judge_pending(exp)[0]
    assert v.verdict == "rejected"
    assert any("env.persuade.demonstrations = 2" in r and "has 1 example" in r for r in v.reasons), v.reasons


