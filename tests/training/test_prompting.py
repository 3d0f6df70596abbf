"""Table 1's prompting baselines (training/prompting.py): ReAct's thought/action format and
Reflexion's verbal self-reflection carried across attempts, under the walled evaluation."""
from __future__ import annotations

import json

import pytest

from training import prompting


class Recorder:
    """A stand-in environment that records what reaches it."""

    turn_cap = None

    def __init__(self):
        self.actions = []

    def prepare(self, action):
        self.actions.append(action)
        return None


def test_react_asks_for_a_thought_then_an_action_and_carries_out_the_action_alone():
    system = prompting.system_prompt("react", "Act with [action].")
    assert system.startswith("Act with [action].\n") and "`Thought:`" in system and "`Action:`" in system
    env = Recorder()
    react = prompting.wrap("react", env)
    react.prepare("Thought: the user has not said where.\nAction: [action] Where to?")
    react.prepare("[answer] H3")                       # no Action: line, judged as written
    react.turn_cap = 4
    assert env.actions == ["[action] Where to?", "[answer] H3"] and env.turn_cap == 4
    assert prompting.wrap("plain", env) is env and prompting.system_prompt("plain", "x") == "x"


def test_reflexion_carries_each_failed_attempts_reflection_into_the_next():
    """Tasks stop at their first success; a failed task's next attempt gets the reflections
    written on its failures (the last MEMORY of them); the result is each task's last attempt."""
    seen = []

    def attempt(indices, memory, k):
        seen.append((list(indices), {i: list(m) for i, m in memory.items()}, k))
        # task 0 succeeds at once, task 1 on its third try, task 2 never
        return [{"index": i, "success": (i == 0) or (i == 1 and k == 2), "score": 0.0}
                for i in indices]

    def write(failed, k):
        return [f"attempt {k + 1} of task {r['index']} failed" for r in failed]

    final = prompting.run_reflexion(attempt, write, tasks=3, attempts=3)
    assert [k for _, _, k in seen] == [0, 1, 2]
    assert seen[1] == ([1, 2], {1: ["attempt 1 of task 1 failed"], 2: ["attempt 1 of task 2 failed"]}, 1)
    assert seen[2][1][2] == ["attempt 1 of task 2 failed", "attempt 2 of task 2 failed"]
    assert [(r["attempts"], r["success"]) for r in final] == [(1, True), (3, True), (3, False)]
    assert final[2]["reflections"] == seen[2][1][2]
    text = prompting.system_prompt("reflexion", "Base.", final[2]["reflections"])
    assert text.startswith("Base.\n" + prompting.REFLEXION_HEADER) and "- attempt 2 of task 2" in text


def test_react_and_reflexion_run_under_the_same_protocol(tmp_path, tiny_model_dir):
    """The tiny model evaluated as ReAct and as Reflexion on the fake bench: the same protocol
    (3 turns), each method recorded and in its own folder; a task Reflexion tried again saw its
    reflection in its system prompt."""
    from training import evaluate as ev

    out = {}
    for method in ("react", "reflexion"):              # its tasks are never solved: retried
        spec = ev.EvalSpec(bench="tests.training.fake_eval_bench:NEVER_SOLVED", episodes=2,
                           batch_size=2, device="cpu", prompting=method, attempts=2)
        folder = ev.evaluate(spec, tmp_path, model=str(tiny_model_dir), show_progress=False)
        out[method] = (json.loads((folder / "summary.json").read_text()), folder.name,
                       [json.loads(x) for x in (folder / "episodes.jsonl").read_text().splitlines()])
    react, reflexion = out["react"], out["reflexion"]
    assert react[0]["prompting"] == "react" and react[1].endswith("-first2-react")
    assert all(prompting.REACT_INSTRUCTIONS in e["system"] for e in react[2])
    assert reflexion[0]["prompting"] == "reflexion" and reflexion[0]["attempts"] == 2
    assert reflexion[1].endswith("-first2-reflexion2")
    assert all(e["turn_count"] <= 3 for e in react[2] + reflexion[2])
    retried = reflexion[2]
    assert [e["attempts"] for e in retried] == [2, 2]
    for e in retried:
        assert e["reflections"] and prompting.REFLEXION_HEADER in e["system"]
        assert all(r in e["system"] for r in e["reflections"])
