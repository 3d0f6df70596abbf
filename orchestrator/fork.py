"""`orchestrator fork`: continue one experiment's history into a new experiment, an arm of the
paper's Figure 7 (section 5.4: "Given the same experience from the first four runs, enabling
intra-run intervention in run 5 yields a larger improvement than inter-run adaptation alone").

    orchestrator fork demo --control intra-run          # runs/demo-intra-run
    orchestrator fork demo --control inter-run          # runs/demo-inter-run
    orchestrator start demo-intra-run --agent builtin   # each arm trains its next run
    orchestrator start demo-inter-run --agent builtin

An arm is a new experiment holding the source's history up to a run (its last by default):
1. the workspace, cloned with every ref (the gate's live and judged refs and verdict notes, the
   run tags), main and live at the commit the next run would have started from (the source's
   live commit after its last run, or the next run's start commit);
2. the runs up to that one, copied without their checkpoints (their metrics, events and
   trajectories are the history the meta-agent and the report read), and the ledger's lines;
3. its own copy of the experience pool, so what one arm learns never reaches the other
   (experiment.json `experience_dir`; sessions read and write it, evaluation is walled off it);
4. one new run from the same checkpoint in every arm (the run's newest, or --checkpoint), with the
   source run's config: a whole checkpoint (a stopped run's) is resumed exactly, its steps
   continuing, for --steps more (default: as many as the source run had); a run that ended
   keeps only its policy (orchestrator/prune.py), so the arm's run starts from that policy
   (`python -m training.export_policy`, model.path) with a fresh critic, optimiser and step count,
   for --steps (default the source run's length). experiment.json `forked_from.start` says which;
5. experiment.json `control`: what `orchestrator start` uses unless --control is given, and a cap
   of runs that ends the experiment with that run (--max-runs allows more: an inter-run arm's
   review after the run then starts the next one).
Neither arm has a session before its run, so both start from identical states; the intra-run arm
has sessions during the run, the inter-run arm none. The source experiment is not changed.
"""
from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from orchestrator import ledger
from orchestrator.errors import UserError
from orchestrator.workspace import LIVE_REF, Workspace

CONTROLS = ("intra-run", "inter-run", "both")
_STEP = re.compile(r"^step-(\d+)$")
# what a fork does not copy of a run: its weights (only the forked checkpoint travels) and the
# files of a live trainer
NOT_COPIED_PATTERNS = ("checkpoints", "snapshots", "heartbeat", "trainer.pid", "hold.json", "*.tmp")
_NOT_COPIED = shutil.ignore_patterns(*NOT_COPIED_PATTERNS)


def newest_checkpoint(run_dir: Path) -> str | None:
    found = [d.name for d in (run_dir / "checkpoints").glob("step-*")
             if d.is_dir() and _STEP.match(d.name)]
    return max(found, key=lambda n: int(_STEP.match(n).group(1))) if found else None


def fork_experiment(source: str, control: str, runs_dir: Path | str, *, name: str | None = None,
                    run: str | None = None, checkpoint: str | None = None,
                    steps: int | None = None, max_runs: int | None = None) -> Path:
    """Create the arm (module docstring); returns its folder."""
    from orchestrator import gate
    from orchestrator.experiment import Experiment

    if control not in CONTROLS:
        raise UserError(f"unknown control {control!r}: choose {', '.join(CONTROLS)}.")
    runs_dir = Path(runs_dir).resolve()
    if not (runs_dir / source / "experiment.json").exists():
        raise UserError(f"no experiment {source!r} in {runs_dir}: name the experiment to fork.")
    src = Experiment(runs_dir / source)
    if gate.experiment_running(src.dir):
        raise UserError(f"experiment {source} is running: stop it first (`orchestrator stop "
                        f"{source}`), a fork continues a history that has ended.")
    names = [r["name"] for r in src.runs]
    if not names:
        raise UserError(f"experiment {source} has no runs yet: there is no history to fork.")
    run = run or names[-1]
    if run not in names:
        raise UserError(f"experiment {source} has no {run} (runs: {', '.join(names)}).")
    k = names.index(run)
    checkpoint = checkpoint or newest_checkpoint(src.dir / run)
    if not checkpoint or not (src.dir / run / "checkpoints" / checkpoint).is_dir():
        raise UserError(f"{source}/{run} has no checkpoint {checkpoint or ''}".rstrip() +
                        ": fork from a run that saved one (trainer.save_freq, or `orchestrator stop`).")
    name = name or f"{source}-{control}"
    dest = runs_dir / name
    if dest.exists():
        raise UserError(f"{dest} exists: pick another --name for the fork.")
    # the commit the next run would have started from
    at = src.runs[k + 1]["start_commit"] if k + 1 < len(src.runs) else src.ws.rev(LIVE_REF)
    dest.mkdir(parents=True)
    try:
        ws = Workspace.clone(src.ws, dest / "workspace", at)
        for later in names[k + 1:]:
            ws.delete_ref(f"refs/tags/{later}-start")
        gate.prepare_workspace(dest, ws)
        for r in names[:k + 1]:
            shutil.copytree(src.dir / r, dest / r, ignore=_NOT_COPIED)
        pool = dest / "experience"
        shutil.copytree(src.pool, pool) if src.pool.is_dir() else pool.mkdir()
        new_run = _forked_run(src, run, checkpoint, dest, ws, steps, len(names[:k + 1]) + 1)
        start = "resumed" if new_run["from_checkpoint"] else "policy"
        _copy_ledger(src.dir, dest, set(names[k + 1:]))
        fork = {"experiment": source, "run": run, "checkpoint": checkpoint, "commit": at,
                "control": control, "start": start, "time": time.time()}
        ledger.append_line(dest, {"type": "control", "action": "fork", "key": f"fork-{name}",
                                  "status": "honoured", "run": run, "new_run": new_run["name"],
                                  "from_checkpoint": checkpoint, "control": control,
                                  "why": f"forked from {source} {run} {checkpoint}"})
        runs = [dict(r) for r in src.runs[:k + 1]] + [new_run]
        meta = {**src.meta, "name": name, "workspace": str(ws.path), "runs": runs,
                "cap": max_runs if max_runs is not None else len(runs), "state": "initialized",
                "pid": None, "created": time.time(), "forked_from": fork, "control": control,
                "experience_dir": str(pool)}
        (dest / "experiment.json").write_text(json.dumps(meta, indent=2) + "\n")
    except BaseException:
        shutil.rmtree(dest, ignore_errors=True)
        raise
    return dest


def _whole(folder: Path) -> bool:
    """Whether a checkpoint still holds what a resume reads (orchestrator/prune.py slims ended
    runs' checkpoints to their policy)."""
    from orchestrator.prune import RESUME_FILES, STATE

    try:
        state = json.loads((folder / STATE).read_text())
    except (OSError, ValueError):
        return False
    return not state.get("policy_only") and all((folder / f).exists() for f in RESUME_FILES)


def _export_policy(checkpoint: Path, out: Path) -> None:
    """The checkpoint's policy as a model folder, in a subprocess (the orchestrator never
    imports torch)."""
    from orchestrator.paths import project_root

    proc = subprocess.run([sys.executable, "-m", "training.export_policy", str(checkpoint), str(out)],
                          cwd=project_root(), capture_output=True, text=True)
    if proc.returncode != 0:
        lines = (proc.stderr or proc.stdout).strip().splitlines()
        raise UserError(f"the policy of {checkpoint} could not be exported "
                        f"({lines[-1] if lines else f'exit {proc.returncode}'}).")


def _forked_run(src, run: str, checkpoint: str, dest: Path, ws: Workspace, steps: int | None,
                number: int) -> dict[str, Any]:
    """run-NNN of the arm, with the source run's config (its workspace the arm's): a whole
    checkpoint resumed for `steps` more steps, or a new run from the checkpoint's policy
    (module docstring)."""
    config = json.loads((src.dir / run / "config.json").read_text())
    source = src.dir / run / "checkpoints" / checkpoint
    config["workspace"]["repo"] = str(ws.path)
    length = steps if steps is not None else int(config["trainer"]["total_steps"])
    if length < 1:
        raise UserError(f"--steps {length}: the forked run needs at least one step.")
    name = f"run-{number:03d}"
    folder = dest / name
    folder.mkdir()
    whole = _whole(source)
    if whole:           # hard links, as Experiment.new_run copies a checkpoint: no disk
        config["trainer"]["total_steps"] = int(_STEP.match(checkpoint).group(1)) + length
        shutil.copytree(source, folder / "checkpoints" / checkpoint, copy_function=os.link)
    else:
        model = dest / "models" / f"{run}-{checkpoint}"
        _export_policy(source, model)
        config["model"] = {**config["model"], "path": str(model), "lora_rank": 0}
        config["trainer"]["total_steps"] = length
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    live = ws.rev(LIVE_REF)
    ws.tag(f"{name}-start", live)
    return {"name": name, "reason": "fork", "state": "created", "start_commit": live,
            "from_run": run, "from_checkpoint": checkpoint if whole else None,
            "from_policy": None if whole else f"{run}/{checkpoint}", "created": time.time()}


def _copy_ledger(src_dir: Path, dest: Path, dropped_runs: set[str]) -> None:
    """The source's ledger lines, less those of runs after the forked one."""
    lines = [line for line in ledger.read_lines(src_dir)
             if not (isinstance(line.get("run"), str) and line["run"] in dropped_runs)]
    ledger.ledger_path(dest).write_text("".join(json.dumps(line, default=str) + "\n"
                                                for line in lines))
