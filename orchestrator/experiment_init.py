"""Creating an experiment: `runs/NAME/` with its git workspace, hooks, live ref and experiment.json.

The workspace is seeded from the project's `workspace/` (or the live tree of another experiment,
`--from`), or is an existing git repository (`--workspace PATH`, recorded in `workspace.link`).
The first commit is checked like any other (so a corrupt knobs.json stops here, in one sentence),
judged accepted and made live (DESIGN.md, "The experiment workspace").
"""
from __future__ import annotations

import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

from orchestrator import gate, ledger
from orchestrator.errors import UserError
from orchestrator.gate_context import GateContext
from orchestrator.paths import project_root
from orchestrator.workspace import JUDGED_REF, LIVE_REF, Workspace, author_kind

RUN_CAP = 5                     # inter-run iterations per experiment (paper section 5)
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


def canonical_bench_name(bench: str) -> str:
    from training.benches import UnknownBench, canonical_bench   # plain module, no torch
    try:
        return canonical_bench(bench)
    except UnknownBench as exc:
        raise UserError(str(exc)) from None


def load_experiment(exp_dir: Path) -> dict:
    meta = exp_dir / "experiment.json"
    if not meta.exists():
        raise UserError(f"no experiment at {exp_dir}: create it with `orchestrator init --exp "
                        f"{exp_dir.name} --bench BENCH`.")
    try:
        return json.loads(meta.read_text())
    except ValueError:
        raise UserError(f"{meta} is not valid JSON: repair or remove it.") from None


def _check_seed(ws: Workspace, commit: str, where: str) -> None:
    """The seed's knobs.json must parse and fit its schema (the gate judges later writes against it)."""
    empty = ws.run("hash-object", "-t", "tree", "/dev/null")
    reasons = gate.checks.check_knobs(ws, empty, ws.tree_of(commit), GateContext())[0]
    if reasons:
        raise UserError(f"the workspace {where} is not usable: {reasons[0]}")


def init_experiment(name: str, bench: str, runs_dir: Path | str, from_exp: str | None = None,
                    workspace: str | Path | None = None,
                    seed_knobs: dict[str, Any] | None = None) -> Path:
    """Create runs_dir/NAME; returns the experiment folder. `seed_knobs` (dotted knob -> value,
    `*` for every gym: {"env.*.demonstrations": 0}) are set in the seed before its first commit:
    the person's starting point, checked by the knob schema like the rest of the seed."""
    if not _NAME.fullmatch(name or ""):
        raise UserError(f"experiment name {name!r} must be letters, digits, '-', '_' or '.', "
                        f"starting with a letter or digit.")
    bench = canonical_bench_name(bench)
    runs_dir = Path(runs_dir).resolve()
    exp_dir = runs_dir / name
    if (exp_dir / "experiment.json").exists():
        raise UserError(f"experiment {name!r} already exists in {runs_dir}: pick another name or "
                        f"use it as it is.")
    created = not exp_dir.exists()
    if from_exp and workspace:
        raise UserError("give --from or --workspace, not both.")
    if workspace and seed_knobs:
        raise UserError("--knob seeds a new workspace; with --workspace, commit the change there.")
    if workspace:
        ws = Workspace(Path(workspace))
        if ws.main() is None:
            raise UserError(f"{ws.path} has no branch `main`: rename yours with `git branch -m main`.")
        _check_seed(ws, ws.main(), str(ws.path))
        exp_dir.mkdir(parents=True, exist_ok=True)
        (exp_dir / "workspace.link").write_text(str(ws.path) + "\n")
    else:
        seed, origin = _seed_folder(runs_dir, from_exp)
        temporary = seed.parent if from_exp else None     # a --from export, removed below
        try:
            _check_seed_folder(seed, origin)
            if seed_knobs:
                seed, origin = _with_knobs(seed, origin, seed_knobs)
                if temporary is not None:
                    shutil.rmtree(temporary, ignore_errors=True)
                temporary = seed.parent
            exp_dir.mkdir(parents=True, exist_ok=True)
            ws = Workspace.create(exp_dir / "workspace", seed, _seed_message(origin))
            _check_seed(ws, ws.main(), f"seeded from {origin}")
        except UserError:
            if created:
                shutil.rmtree(exp_dir, ignore_errors=True)
            raise
        finally:
            if temporary is not None:          # never the project's own workspace/
                shutil.rmtree(temporary, ignore_errors=True)
    gate.prepare_workspace(exp_dir, ws)
    first = ws.main()
    ws.set_ref(LIVE_REF, first)
    ws.set_ref(JUDGED_REF, first)
    _record_first_verdict(exp_dir, ws, first)
    meta = {"name": name, "bench": bench, "created": time.time(), "runs": [], "cap": RUN_CAP,
            "state": "initialized", "workspace": str(ws.path), "seeded_from": from_exp or
            (str(workspace) if workspace else "workspace/"), "seed_knobs": dict(seed_knobs or {})}
    (exp_dir / "experiment.json").write_text(json.dumps(meta, indent=2) + "\n")
    return exp_dir


def _seed_folder(runs_dir: Path, from_exp: str | None) -> tuple[Path, str]:
    if not from_exp:
        return project_root() / "workspace", "the project's workspace/"
    other = runs_dir / from_exp
    load_experiment(other)
    src = gate.open_experiment_workspace(other)
    live = src.rev(LIVE_REF) or src.main()
    tmp = Path(tempfile.mkdtemp(prefix="eau-seed-"))
    return src.export_tree(live, tmp / "tree"), f"experiment {from_exp} (live {live[:10]})"


def _with_knobs(seed: Path, origin: str, knobs: dict[str, Any]) -> tuple[Path, str]:
    """A copy of the seed folder with `knobs` set (a `*` part matches every key there); the
    copy lives in a temporary folder (its parent) that the caller removes."""
    tmp = Path(tempfile.mkdtemp(prefix="eau-seed-"))
    copy = tmp / "tree"
    shutil.copytree(seed, copy)
    data = json.loads((copy / "knobs.json").read_text())
    for dotted, value in knobs.items():
        hits = _set_knob(data, dotted.split("."), value)
        if not hits:
            shutil.rmtree(tmp, ignore_errors=True)
            raise UserError(f"--knob {dotted}: no such knob in knobs.json (e.g. "
                            f"env.intention.demonstrations, env.*.max_steps).")
    (copy / "knobs.json").write_text(json.dumps(data, indent=2) + "\n")
    shown = ", ".join(f"{k}={json.dumps(v)}" for k, v in knobs.items())
    return copy, f"{origin} with {shown}"


def _set_knob(node: Any, parts: list[str], value: Any) -> int:
    """Set the leaf(s) named by parts ("*" matches every key); returns how many were set."""
    if not isinstance(node, dict) or not parts:
        return 0
    head, rest = parts[0], parts[1:]
    keys = list(node) if head == "*" else [head] if head in node else []
    if not rest:
        for k in keys:
            node[k] = value
        return len(keys)
    return sum(_set_knob(node[k], rest, value) for k in keys)


def _check_seed_folder(seed: Path, origin: str) -> None:
    knobs = seed / "knobs.json"
    if not knobs.exists():
        raise UserError(f"{origin} has no knobs.json: restore it before creating an experiment.")
    try:
        json.loads(knobs.read_text())
    except ValueError as exc:
        raise UserError(f"knobs.json of {origin} is corrupt ({exc}): repair it first.") from None


def _seed_message(origin: str) -> str:
    return (f"Seed workspace from {origin}\n\nWhy: a new experiment starts from this workspace.\n"
            f"Expect: the first run trains on these knobs, rules, personas and reward modules.\n"
            f"Eau-Author: orchestrator\n")


def _record_first_verdict(exp_dir: Path, ws: Workspace, first: str) -> None:
    info = ws.info(first)
    empty = ws.run("hash-object", "-t", "tree", "/dev/null")
    files = ws.changed_paths(empty, first)
    v = gate.Verdict(commit=first, parent=info.parent, author=f"{info.author_name} <{info.author_email}>",
                     author_kind=author_kind(info), agent=None, session=None, files=list(files),
                     knob_changes=[], verdict="accepted", reasons=[], file_status=files)
    ws.add_note(first, json.dumps({"verdict": "accepted", "reasons": [], "note": "experiment seed"}))
    ledger.append_line(exp_dir, {"type": "verdict", **v.__dict__})


__all__ = ["init_experiment", "load_experiment", "canonical_bench_name"]
