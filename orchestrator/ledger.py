"""The intervention ledger: `runs/NAME/ledger.jsonl`, one JSON object per line.

Every line has "type" and "ts" (UNIX seconds). Types (`append_line` refuses any other):
  verdict  {commit, parent, author, author_kind: "agent"|"orchestrator"|"person", agent, session, files,
            knob_changes: [{path, old, new}], verdict: "accepted"|"rejected", reasons, reverted_by}
  applied  {commit, run, step}            copied from a trainer's events.jsonl
  effect   {commit, metric, before, after, delta, noise, label: "helped"|"harmed"|"inconclusive"|"unmeasured", reason}
  session  {...}                          a meta-agent session (orchestrator.agents)
  control  {...}                          a restart/resume request and what became of it

Writers append whole lines with one `write` on an O_APPEND descriptor, then flush and fsync, so
two writers never interleave inside a line and a crash loses at most the last line. Readers skip
a corrupt line (a torn write, a hand edit) with a warning instead of failing.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

from orchestrator.workspace import GATE_IDENTITY, ORCHESTRATOR_IDENTITY

LEDGER = "ledger.jsonl"
TYPES = ("verdict", "applied", "effect", "session", "control")


def ledger_path(exp_dir: Path | str) -> Path:
    return Path(exp_dir) / LEDGER


def append_line(exp_dir: Path | str, record: dict[str, Any]) -> dict[str, Any]:
    """Append one record (adds "ts" when missing); returns the record written."""
    if record.get("type") not in TYPES:
        raise ValueError(f"ledger record type {record.get('type')!r} is not one of {', '.join(TYPES)}.")
    record = {"type": record["type"], "ts": record.get("ts", time.time()),
              **{k: v for k, v in record.items() if k not in ("type", "ts")}}
    data = (json.dumps(record, sort_keys=False, default=str) + "\n").encode()
    path = ledger_path(exp_dir)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        # a single write on O_APPEND: concurrent appenders never interleave within a line
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    return record


def iter_lines(exp_dir: Path | str) -> Iterator[dict[str, Any]]:
    path = ledger_path(exp_dir)
    if not path.exists():
        return
    with path.open("rb") as f:
        for n, raw in enumerate(f, 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or "type" not in rec:
                    raise ValueError("not an object with a type")
            except ValueError as exc:
                warnings.warn(f"{path}: line {n} skipped (not a ledger record: {exc})", stacklevel=2)
                continue
            yield rec


def read_lines(exp_dir: Path | str, type: str | None = None) -> list[dict[str, Any]]:
    """All records, oldest first; with `type`, only those of that type."""
    return [r for r in iter_lines(exp_dir) if type is None or r.get("type") == type]


def sync_applied(exp_dir: Path | str) -> int:
    """Copy `applied` events of every run's events.jsonl into the ledger (once each); returns how
    many were added. The trainer writes {"event": "applied", "commit", "step"} (DESIGN.md)."""
    exp_dir = Path(exp_dir)
    seen = {(r.get("commit"), r.get("run"), r.get("step")) for r in read_lines(exp_dir, "applied")}
    added = 0
    for events in sorted(exp_dir.glob("run-*/events.jsonl")):
        run = events.parent.name
        for raw in events.read_text(errors="replace").splitlines():
            try:
                ev = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(ev, dict) or (ev.get("event") or ev.get("type")) != "applied":
                continue
            key = (ev.get("commit"), run, ev.get("step"))
            if key not in seen:
                append_line(exp_dir, {"type": "applied", "commit": ev.get("commit"), "run": run,
                                      "step": ev.get("step")})
                seen.add(key)
                added += 1
    return added


def effect_text(rec: dict[str, Any]) -> str:
    """One effect line as `log` and `status` show it: "reward/mean +0.1 (helped)", or
    "reward/mean unmeasured (why)" where the run ended before the window filled and `delta` is
    null (effects.update_effects with final=True writes such lines)."""
    delta = rec.get("delta")
    if rec.get("label") == "unmeasured" or not isinstance(delta, (int, float)):
        return f"{rec.get('metric')} {rec.get('label') or 'unmeasured'} ({rec.get('reason') or 'too few steps'})"
    return f"{rec.get('metric')} {delta:+.3g} ({rec.get('label')})"


def session_reason(rec: dict[str, Any], limit: int) -> str:
    """A session line's reason in at most about `limit` characters, as whole sentences
    (orchestrator.sentences.fit), pointing to the session's record for the rest."""
    from orchestrator.sentences import fit

    reason = str(rec.get("reason") or "")
    where = f"agents/{rec.get('session_id', '?')}/{'transcript.md' if rec.get('transcript') else 'result.json'}"
    return fit(reason, limit, more=f"(the rest: {where})") if reason else ""


def author_text(rec: dict[str, Any], short: bool = False) -> str:
    """Who made a judged commit, as `log` shows it: "builtin (agent)", "Pat (person)", or the
    gate's or orchestrator's own name for its commits (the seed, a revert, a switch-off); `short`
    (`status`): the agent, "person" or "orchestrator". A seed judged before author_kind knew
    "orchestrator" was recorded as a person's: its email tells."""
    name, _, email = str(rec.get("author") or "?").partition(" <")
    kind = "orchestrator" if email.rstrip(">") in (GATE_IDENTITY[1], ORCHESTRATOR_IDENTITY[1]) \
        else rec.get("author_kind", "?")
    if rec.get("agent"):
        return rec["agent"] if short else f"{rec['agent']} (agent)"
    if short:
        return kind
    return name if kind == "orchestrator" else f"{name} ({kind})"


def applied_text(rec: dict[str, Any], applied: list[str], runs: list[dict[str, Any]]) -> str:
    """Where a judged commit was trained on: each "run-001 step 4" it was hot-reloaded at, each
    "run-001 start" a run started from it, else "pending" (accepted, not yet applied) or "-"."""
    where = list(applied) + [f"{r['name']} start" for r in runs
                             if r.get("start_commit") == rec.get("commit")]
    return ", ".join(where) or ("pending" if rec.get("verdict") == "accepted" else "-")
