"""Replays a candidate rules.json on the agent turns of recent transcripts (DESIGN.md, "Gate
checks": rules "are replayed on recent transcripts"), so a rule set that breaks the symbolic user
on real states is refused before the trainer loads it.

The replay runs in a child process (`python -m orchestrator.rule_replay`, JSON on stdin and
stdout): it needs the bench's tasks (for their hidden facts) and the rule engine, which live in
`training/`, and the orchestrator process stays free of them. The rules' regexes run on RE2
(training/users/rule_regex.py), in time linear in each message, so nothing here can hang on a
regex. Each episode is replayed turn by turn with the new rules: the agent's recorded
messages, the new user's replies and disclosures.
"""
from __future__ import annotations

import json
import subprocess
import sys
import traceback

TIMEOUT_S = 30.0


def replay(bench: str, rules: dict, user_knobs: dict, episodes: list[dict]) -> dict:
    """In the parent: run the child; returns {"errors": [...], "turns": n, "fired": {rule: n},
    "disclosed": {gym: n}, "known": {gym: n}}: per gym, the distinct facts disclosed in each
    episode, and the facts known after each turn (disclosed so far), each summed over the gym's
    episodes; `known` also counts how soon they came, which orchestrator.replay compares under
    two sets of user knobs."""
    payload = json.dumps({"bench": bench, "rules": rules, "user_knobs": user_knobs, "episodes": episodes})
    try:
        proc = subprocess.run([sys.executable, "-m", "orchestrator.rule_replay"], input=payload,
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return {"errors": [f"replaying the rules took over {TIMEOUT_S:g} s"], "turns": 0, "fired": {}}
    if proc.returncode != 0 or not proc.stdout.strip():
        tail = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        return {"errors": [], "turns": 0, "fired": {}, "skipped": f"replay unavailable ({tail})"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _act(text: str) -> tuple[str, str]:
    """("action"|"answer"|"search"|"message", the message without its tag)."""
    stripped = text.strip()
    for tag in ("action", "answer", "search"):
        if stripped.lower().startswith(f"[{tag}]"):
            return tag, stripped[len(tag) + 2:].strip()
    return "message", stripped


def _replay_episode(user, task, knobs: dict, episode: dict, fired: dict) -> tuple[list[str], int, int]:
    from training.benches.base import UserState

    errors, history, revealed, questions, known = [], [], {}, 0, 0
    for i, turn in enumerate(episode.get("turns") or [], 1):
        act, message = _act(str(turn.get("agent", "")))
        questions += int(bool(turn.get("asked_question")))
        state = UserState(gym=task.gym, task=task, turn=i, agent_message=message, history=list(history),
                          revealed=dict(revealed), questions_asked=questions, knobs=knobs,
                          extra={"act": act})
        try:
            reply = user.respond(state)
        except Exception as exc:       # noqa: BLE001 - any failure of the engine is the finding
            errors.append(f"turn {i} of task {task.id}: {type(exc).__name__}: {exc}")
            break
        fired[reply.rule_id or "(none)"] = fired.get(reply.rule_id or "(none)", 0) + 1
        for fid in reply.revealed_facts:
            revealed[fid] = revealed.get(fid, 0) + 1
        known += len(revealed)
        history += [{"role": "agent", "content": message}, {"role": "user", "content": reply.text}]
    return errors, len(revealed), known


def _child() -> int:
    from training.benches import get_bench
    from training.users.symbolic import SymbolicUser, compile_rules

    job = json.loads(sys.stdin.read())
    tasks = {t.id: t for t in get_bench(job["bench"]).load_tasks("train")}
    kinds = set().union(*(t.fact_kinds() for t in tasks.values())) if tasks else set()
    user = SymbolicUser(compile_rules(job["rules"], kinds))
    errors, fired, turns, disclosed, known = [], {}, 0, {}, {}
    for ep in job["episodes"]:
        task = tasks.get(ep.get("task_id"))
        if task is None:
            continue
        knobs = job["user_knobs"].get(task.gym, {})
        errs, n, k = _replay_episode(user, task, knobs, ep, fired)
        errors += errs
        disclosed[task.gym] = disclosed.get(task.gym, 0) + n
        known[task.gym] = known.get(task.gym, 0) + k
        turns += len(ep.get("turns") or [])
    print(json.dumps({"errors": errors[:5], "turns": turns, "fired": fired, "disclosed": disclosed,
                      "known": known}))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(_child())
    except Exception:                  # noqa: BLE001 - reported to the parent as "unavailable"
        traceback.print_exc()
        sys.exit(1)
