"""What is new in an agent turn: facts disclosed for the first time, and whether the turn repeats.

A leaf module (no torch), read by the rollout, which marks every turn record with `new_facts` and
`repeated`, and by orchestrator.diagnostics, which judges trajectories written before the marks.
"""
from __future__ import annotations

from typing import Any


def same_action(text: str) -> str:
    """An agent turn as repeats are judged: whitespace runs collapsed, case folded."""
    return " ".join((text or "").split()).lower()


def novelty(earlier: list[dict[str, Any]], turn: dict[str, Any]) -> tuple[list[str], bool]:
    """(facts this turn disclosed for the first time in its episode, whether the agent's text
    repeats one of its earlier turns). Reward modules read these so that asking again does not pay
    again: the symbolic users re-disclose a fact asked twice, and a 135M policy trained on credit
    per disclosure learned to repeat its question (H200 comparison, ColBench: 36% -> 44% of turns
    repeated an earlier turn of their episode over 10 steps, training reward 0.00 -> 0.29, held-out
    success 0; benchmarks/RESULTS-learning.md)."""
    seen = {f for t in earlier for f in t.get("revealed_facts", ())}
    new = list(dict.fromkeys(f for f in turn.get("revealed_facts", ()) if f not in seen))
    me = same_action(turn.get("agent", ""))
    return new, bool(me) and any(same_action(t.get("agent", "")) == me for t in earlier)


def repeated_marks(turns: list[dict[str, Any]]) -> list[bool]:
    """Per agent turn of an episode: does it repeat an earlier turn? The rollout's own mark
    (`repeated`) where a turn has it; trajectories written before the mark existed are judged
    from the text the same way (`same_action`)."""
    seen, out = set(), []
    for t in turns:
        me = same_action(t.get("agent", ""))
        out.append(bool(t["repeated"]) if "repeated" in t else bool(me) and me in seen)
        seen.add(me)
    return out
