"""`orchestrator replay-session EXP SESSION`: what the built-in agent of this checkout would do at
one past session of an experiment, on what that session read.

The experiment is copied into a new folder as it stood when the session began: its workspace at
the commit before the session's first commit (or, for a session that committed nothing, the last
commit before it ended), its ledger cut before the session, the run's metrics and trajectories cut
at the session's step, and the gate's hooks pointing at the copy. The built-in agent then runs one
session there, through the gate, and its record is printed. The source experiment is only read.

Why: a fix to the agent is best judged on the session that showed the fault. The H200 run of
2026-12-06 switched no_repeat on and off for four sessions; replayed so, the fixed agent committed
tau's identification example at the same sessions instead (benchmarks/RESULTS-learning.md).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from orchestrator import diagnostics, ledger
from orchestrator.errors import UserError
from orchestrator.fork import NOT_COPIED_PATTERNS
from orchestrator.workspace import Workspace

# what a fork leaves behind, and what is copied cut at the session's step instead
_NOT_COPIED = shutil.ignore_patterns(*NOT_COPIED_PATTERNS, "trajectories", "metrics.jsonl")


def _session(lines: list[dict[str, Any]], exp_dir: Path, session: str) -> tuple[int, dict[str, Any]]:
    for i, line in enumerate(lines):
        if line.get("type") == "session" and line.get("session_id") == session:
            return i, line
    known = [x.get("session_id") for x in lines if x.get("type") == "session"]
    raise UserError(f"{exp_dir.name} has no session {session} in its ledger "
                    f"(its sessions: {', '.join(known) or 'none'}).")


def _run_at(meta: dict[str, Any], entry: dict[str, Any], run: str | None) -> str:
    runs = meta.get("runs") or []
    names = [r["name"] for r in runs]
    if run is not None:
        if run not in names:
            raise UserError(f"{meta.get('name')} has no {run} (runs: {', '.join(names) or 'none'}).")
        return run
    began = [r["name"] for r in runs if (r.get("created") or 0) <= (entry.get("ts") or entry.get("time") or 0)]
    if not (began or names):
        raise UserError(f"{meta.get('name')} has no runs: there is nothing a session read.")
    return (began or names)[-1]


def replay_session(exp_dir: Path, session: str, out: Path, run: str | None = None, window: int = 10,
                   skill: str = "eau", agent_session: str = "s999") -> tuple[Path, Any]:
    """Copy `exp_dir` as it stood at `session` into `out` and run one built-in session there
    with the experiment's window W (`start --window`, 10 by default); returns (the copy, the
    session's result)."""
    from orchestrator import gate
    from orchestrator.agents import base
    from orchestrator.experiment import skill_path

    skill_path(skill)             # an unknown skill is refused before anything is copied
    exp_dir, out = Path(exp_dir).resolve(), Path(out).resolve()
    meta_path = exp_dir / "experiment.json"
    if not meta_path.exists() or not (exp_dir / "workspace" / ".git").exists():
        raise UserError(f"{exp_dir} is not an experiment (no experiment.json or workspace).")
    if out.exists():
        raise UserError(f"{out} exists: name another folder with --out.")
    meta = json.loads(meta_path.read_text())
    lines = ledger.read_lines(exp_dir)
    cut, entry = _session(lines, exp_dir, session)
    step = entry.get("step")
    if not isinstance(step, int):
        raise UserError(f"session {session} of {exp_dir.name} records no step: it cannot be replayed.")
    run = _run_at(meta, entry, run)
    src_ws = Workspace(exp_dir / "workspace")
    commits = entry.get("commits") or []
    try:
        at = (src_ws.run("rev-parse", f"{commits[0]}^").strip() if commits else
              src_ws.run("rev-list", "-1", f"--before={int(entry.get('ts') or entry.get('time'))}",
                         "HEAD").strip())
    except Exception as exc:     # a commit git no longer has, or no timestamp
        raise UserError(f"cannot find the workspace commit session {session} began from: {exc}") from exc
    out.mkdir(parents=True)
    try:
        ws = Workspace.clone(src_ws, out / "workspace", at)
        gate.prepare_workspace(out, ws)
        shutil.copytree(exp_dir / run, out / run, ignore=_NOT_COPIED)
        (out / run / "metrics.jsonl").write_text("".join(
            json.dumps(row) + "\n" for row in diagnostics.read_metrics(exp_dir / run) if row["step"] <= step))
        (out / run / "trajectories").mkdir()
        for f in sorted((exp_dir / run / "trajectories").glob("step-*.jsonl")):
            if int(f.stem.split("-")[1]) <= step:
                shutil.copy2(f, out / run / "trajectories" / f.name)
        # the snapshots the trainer had made by then (the diagnosis reads the newest's modules)
        for snap in sorted((exp_dir / run / "snapshots").glob("*")) if (exp_dir / run / "snapshots").is_dir() else []:
            try:
                ws.run("merge-base", "--is-ancestor", snap.name, at)
            except Exception:
                continue
            shutil.copytree(snap, out / run / "snapshots" / snap.name)
        before = [x for x in lines[:cut] if x.get("commit") not in commits]
        ledger.ledger_path(out).write_text("".join(json.dumps(x, default=str) + "\n" for x in before))
        (out / "experiment.json").write_text(json.dumps(
            {**meta, "name": out.name, "workspace": str(ws.path), "state": "finished", "pid": None,
             "replayed_from": {"experiment": str(exp_dir), "session": session, "commit": at,
                               "run": run, "step": step}}, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)
        raise
    ctx = base.SessionContext(agent="builtin", session_id=agent_session, exp_dir=out,
                              workspace=ws.path, run_dir=out / run, bench=meta.get("bench", "usergym"),
                              skill_path=skill_path(skill), window=window,
                              experience_dir=out / "experience", step=step)
    (out / "experience").mkdir(exist_ok=True)
    return out, base.run_session(ctx)
