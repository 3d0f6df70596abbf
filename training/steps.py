"""The steps a gym's success needs, as they show in a turn record, and which of them a turn took
for the first time in its episode.

A leaf module (no torch), read by `training.rewards` (it marks every turn record with
`first_steps` before the reward modules see it, so a module can pay a step once per episode, at
the turn that first took it), by the trainer's `took/<gym>/<step>` metrics (the share of a gym's
episodes that took each needed step), by the gate's replay and by the meta-agent's diagnostics
(which judge trajectories written before the mark the same way).

The steps a gym's success needs (NEEDED), and why (each gym's module docstring):
  travel    search    `[search]`: option ids come only from search results, and an `[answer]`
                      must name one (benches/usergym/travel.py)
  function  probe     `[action]` with four integers: the only way to see the hidden function
            search    `[search] test`: shows the test case the `[answer]` must compute
  tau       identify  a `find_user_id_by_name_zip` call that found the user
            lookup    a `get_user_details` or `get_order_details` call that answered (the gym's
                      own help: "First authenticate the user by name and zip code, then look up
                      their orders", benches/usergym/tau.py)
  colbench  submit    a turn holding `I WANT TO ANSWER:` (or accepted as an answer): nothing
                      else is ever scored
  retail, airline, telecom
            read      a successful read tool call of the agent's, before its first write
                      (tau2's domain policies: verify the record before acting on it)
Other steps a turn may take: `ask` (a question to the user), `disclosed` (the user disclosed a
hidden fact in reply), `answer` (the turn committed to an answer: `answered`), `write` (tau2: a
successful call that changes the database; TauGym: a write tool's call, which ends the episode).
The "answer" an episode's needed steps must come before is its first `write` in tau and tau2 and
its first `answer` elsewhere.
"""
from __future__ import annotations

import json
import re
from typing import Any

from training.benches.colbench.env import MARKER
from training.benches.usergym.common import parse_action

# tau2 tools whose names start so only read the database: the domains mark 33 tools "read", all
# named so, and the shipped reward module read_before_write.py classifies them the same way
READ_PREFIXES = ("get_", "find_", "list_", "search_", "check_", "calculate")
TAU2 = ("retail", "airline", "telecom")
NEEDED: dict[str, tuple[str, ...]] = {
    "travel": ("search",), "function": ("probe", "search"), "tau": ("identify", "lookup"),
    "colbench": ("submit",), "retail": ("read",), "airline": ("read",), "telecom": ("read",)}
# each step in words a finding or a commit message can quote: "never used WHAT", "first NOUN"
WHAT: dict[str, str] = {
    "search": "[search]", "probe": "a probe ([action] and four integers)",
    "identify": "find_user_id_by_name_zip", "lookup": "get_user_details or get_order_details",
    "submit": "I WANT TO ANSWER:", "read": "a read tool call", "disclosed": "a disclosed fact",
    "ask": "a question", "answer": "an answer", "write": "a write tool call"}
NOUN: dict[str, str] = {
    "search": "[search]", "probe": "probe", "identify": "find_user_id_by_name_zip call",
    "lookup": "lookup", "submit": "I WANT TO ANSWER:", "read": "read tool call",
    "disclosed": "disclosed fact", "ask": "question", "answer": "answer", "write": "write call"}
_FOUR_INTS = re.compile(r"^\s*-?\d+(?:[\s,]+-?\d+){3}\s*$")
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)


def _ok(call: dict[str, Any]) -> bool:
    """A tool call that answered: no error flag and no "Error: ..." result (TauGym's reads report
    a user or order not found that way)."""
    return not call.get("error") and not str(call.get("result") or "").startswith("Error")


def _fact_key(fact: Any) -> str:
    """A disclosed fact as trajectories hold it: an id, or (older records) a dict with one."""
    return str(fact.get("id", fact.get("text", ""))) if isinstance(fact, dict) else str(fact)


def _is_read(name: Any) -> bool:
    return isinstance(name, str) and name.startswith(READ_PREFIXES)


def _named_calls(gym: str, text: str) -> list[str]:
    """Tool names an agent's text calls: TauGym's `[answer] {"name": ...}`, tau2's
    `<tool_call>{"name": ...}</tool_call>` or a bare JSON call (what a demonstration shows)."""
    if gym == "tau":
        act, content = parse_action(text)
        bodies = [content] if act == "answer" else []
    else:
        bodies = _TAGGED.findall(text) or [text.strip()]
    names = []
    for body in bodies:
        try:
            obj = json.loads(body)
        except ValueError:
            continue
        if isinstance(obj, dict) and isinstance(obj.get("name"), str):
            names.append(obj["name"])
    return names


def text_steps(gym: str, text: str, called: list[str] | None = None) -> list[str]:
    """The needed steps an agent text takes by its words alone; `called` names the tool calls
    that answered (a trajectory's record), else the text's own calls count (a demonstration)."""
    out = []
    if gym == "colbench":
        return ["submit"] if MARKER.search(text) else []
    names = _named_calls(gym, text) if called is None else called
    if gym in TAU2:
        return ["read"] if any(_is_read(n) for n in names) else []
    act, content = parse_action(text)
    if act == "search":
        out.append("search")
    if gym == "function" and act == "action" and _FOUR_INTS.match(content):
        out.append("probe")
    if gym == "tau":
        if "find_user_id_by_name_zip" in names:
            out.append("identify")
        if {"get_user_details", "get_order_details"} & set(names):
            out.append("lookup")
    return out


def turn_steps(gym: str, turn: dict[str, Any]) -> list[str]:
    """The steps one agent turn of a trajectory took (names above)."""
    calls = [c for c in turn.get("tool_calls") or [] if isinstance(c, dict)
             and c.get("requestor", "assistant") == "assistant"]
    out = ["ask"] if turn.get("asked_question") else []
    out += text_steps(gym, str(turn.get("agent") or ""), [c.get("name") for c in calls if _ok(c)])
    if gym == "colbench" and turn.get("answered") and "submit" not in out:
        out.append("submit")        # an accepted answer was submitted, whatever its text shows
    leaked = {_fact_key(f) for f in turn.get("leaked_facts") or []}
    if any(_fact_key(f) not in leaked for f in turn.get("revealed_facts") or []):
        out.append("disclosed")
    if gym in TAU2:
        if turn.get("answered") and any(_ok(c) and not _is_read(c.get("name")) for c in calls):
            out.append("write")
    elif gym == "tau":
        if any(isinstance(c.get("name"), str) and not _is_read(c["name"]) for c in calls):
            out.append("write")
    if turn.get("answered"):
        out.append("answer")
    return out


def first_steps(gym: str, turns: list[dict[str, Any]]) -> list[list[str]]:
    """Per turn, the steps it took that no earlier turn of its episode took."""
    seen: set[str] = set()
    out = []
    for turn in turns:
        new = [s for s in turn_steps(gym, turn) if s not in seen]
        seen.update(new)
        out.append(new)
    return out


def taken(gym: str, turns: list[dict[str, Any]]) -> set[str]:
    """The steps an episode took at any turn: the trainer's `took/<gym>/<step>` counts an episode
    whose set holds the step, as the missing-step finding's "used it at any turn" does."""
    return {s for new in first_steps(gym, turns) for s in new}


def mark_first_steps(episode: dict[str, Any]) -> None:
    """Write `first_steps` on every turn of an episode record, in place."""
    turns = [t for t in episode.get("turns") or [] if isinstance(t, dict)]
    for turn, new in zip(turns, first_steps(str(episode.get("gym") or ""), turns)):
        turn["first_steps"] = new


def answer_step(gym: str) -> str:
    """The step that ends what a needed step must come before: tau and tau2 write, others answer."""
    return "write" if gym == "tau" or gym in TAU2 else "answer"


def took_before_answer(gym: str, turns: list[dict[str, Any]], step: str) -> bool:
    """Whether an episode took `step` before its first answer (or at it: colbench's `submit` is
    the answer itself), or, never answering, at all."""
    end = answer_step(gym)
    for turn in turns:
        taken = turn_steps(gym, turn)
        if step in taken:
            return True
        if end in taken:
            return False
    return False
