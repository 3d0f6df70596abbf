"""`orchestrator init | gate | log | diff`: the experiment workspace, its gate and its history.

init  creates runs/NAME with its git workspace (orchestrator.experiment_init)
gate  judges every commit on main not yet judged, or shows/judges the one named
log   every intervention as a table: commit, author, files and knob changes, verdict and reasons,
      where the trainer applied it, and its measured effect when known (ledger.jsonl)
diff  two runs or experiments: workspace diff between their live commits, config differences,
      main metrics side by side (final and best)
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path

from rich.console import Console
from rich.table import Table

from orchestrator import gate, ledger
from orchestrator.commands.common import add_experiment_args, experiment_arg, only_experiment
from orchestrator.errors import UserError
from orchestrator.experiment_init import init_experiment, load_experiment
from orchestrator.paths import runs_dir
from orchestrator.workspace import LIVE_REF


def register(sub) -> None:
    p = sub.add_parser("init", help="create an experiment: runs/NAME with its git workspace")
    add_experiment_args(p, "experiment name (letters, digits, '-', '_', '.')")
    p.add_argument("--bench", required=True, help="usergym, colbench or tau2 (any case, tau2-bench)")
    p.add_argument("--from", dest="from_exp", default=None, help="seed from another experiment's live tree")
    p.add_argument("--workspace", default=None, help="use this existing git repository as the workspace")
    p.set_defaults(func=cmd_init)

    p = sub.add_parser("gate", help="judge the commits on the workspace's main not yet judged",
                       description="Judge every commit on the workspace's main not yet judged, in "
                                   "order: an accepted one becomes live, a rejected one is reverted "
                                   "on main; each verdict is written as a git note. Exit 1 when one "
                                   "is rejected.",
                       usage="orchestrator gate [-h] [NAME] [COMMIT] | --exp NAME [COMMIT]")
    add_experiment_args(p, "experiment (default: the only one)")
    p.add_argument("commit", nargs="?", metavar="COMMIT",
                   help="show this commit's verdict (judging it, and the ones before it, first)")
    p.set_defaults(func=cmd_gate)

    p = sub.add_parser("log", help="every intervention of an experiment, as a table",
                       description="Every intervention of an experiment: commit, author, files and "
                                   "knob changes, verdict and reasons, where the trainer applied "
                                   "it, and its measured effect.")
    add_experiment_args(p, "experiment (default: the only one)")
    p.set_defaults(func=cmd_log)

    p = sub.add_parser("diff", help="compare two experiments or runs (EXP or EXP/run-NNN)",
                       description="Compare two experiments or runs: the workspace diff between "
                                   "their live commits, their config differences, and the main "
                                   "metrics side by side (final value / best value, success for "
                                   "every gym of the bench).")
    p.add_argument("a", metavar="A", help="the first side: an experiment (its latest run and live "
                                          "commit) or EXP/run-NNN (that run and the commit it last applied)")
    p.add_argument("b", metavar="B", help="the second side, named as A")
    p.set_defaults(func=cmd_diff)


# -- init and gate ----------------------------------------------------------------------------
def cmd_init(args) -> int:
    name = experiment_arg(args)
    if not name:
        raise UserError("name the new experiment: `orchestrator init NAME --bench B`.")
    exp = init_experiment(name, args.bench, runs_dir(args.runs_dir), from_exp=args.from_exp,
                          workspace=args.workspace)
    ws = gate.open_experiment_workspace(exp)
    print(f"experiment {name}: {exp}\nworkspace: {ws.path}\nlive: {ws.rev(LIVE_REF)}")
    return 0


def _exp_dir(name: str, override: str | None) -> Path:
    exp = runs_dir(override) / name
    load_experiment(exp)
    return exp


def _print_verdict(v: dict, sha: str) -> None:
    changes = ", ".join(f"{k['path']} {json.dumps(k['old'])} -> {json.dumps(k['new'])}"
                        for k in v.get("knob_changes") or [])
    print(f"{v.get('verdict', '?'):8} {sha[:10]}" + (f"  {changes}" if changes else ""))
    for r in v.get("reasons") or []:
        print(f"         - {r}")
    if v.get("reverted_by"):
        print(f"         reverted by {v['reverted_by'][:10]}")


def cmd_gate(args) -> int:
    if (args.exp and args.name and not args.commit             # `gate --exp NAME COMMIT`
            and not (runs_dir(args.runs_dir) / args.name / "experiment.json").exists()):
        args.name, args.commit = None, args.name
    exp = _exp_dir(experiment_arg(args) or only_experiment(args.runs_dir), args.runs_dir)
    ws = gate.open_experiment_workspace(exp)
    if args.commit:
        sha = ws.rev(args.commit)
        if sha is None:
            raise UserError(f"no commit {args.commit!r} in the workspace {ws.path}.")
        if gate.judged_verdict(ws, sha) is None:
            if not ws.is_ancestor(sha, ws.main()):
                raise UserError(f"commit {sha[:10]} is not on main: the gate judges main's commits only.")
            gate.judge_pending(exp, ws)        # in order: the ones before it first
        v = gate.judged_verdict(ws, sha) or {}
        _print_verdict(v, sha)
        return 0 if v.get("verdict") == "accepted" else 1
    verdicts = gate.judge_pending(exp, ws)
    if not verdicts:
        print(f"nothing to judge: main is at {ws.main()[:10]}, live at {ws.rev(LIVE_REF)[:10]}.")
    for v in verdicts:
        _print_verdict(v.__dict__, v.commit)
    return 0 if all(v.accepted for v in verdicts) else 1


# -- log --------------------------------------------------------------------------------------
def _changes_text(rec: dict) -> str:
    lines = [f"{k['path']}: {json.dumps(k['old'])} -> {json.dumps(k['new'])}"
             for k in rec.get("knob_changes") or []]
    status = rec.get("file_status") or {}
    lines += [f"{p} ({status.get(p, 'changed')})" for p in rec.get("files") or []
              if p != "knobs.json" or not lines]
    return "\n".join(lines[:12]) or "-"


def cmd_log(args) -> int:
    name = experiment_arg(args) or only_experiment(args.runs_dir)
    exp = _exp_dir(name, args.runs_dir)
    ledger.sync_applied(exp)
    records = ledger.read_lines(exp)
    applied, effects = {}, {}
    for r in records:
        if r["type"] == "applied":
            applied.setdefault(r.get("commit"), []).append(f"{r.get('run')}@{r.get('step')}")
        elif r["type"] == "effect":
            effects.setdefault(r.get("commit"), []).append(ledger.effect_text(r))
    # a commit the trainer applied inside a later one (a session's commits for different gyms)
    # has no "applied" line of its own; its effect line says at which step it went in
    for r in records:
        if r["type"] == "effect" and r.get("commit") not in applied and r.get("step") is not None \
                and "before the trainer applied it" not in str(r.get("reason") or ""):
            applied[r.get("commit")] = [f"{r.get('run')}@{r.get('step')} (inside a later commit)"]
    table = Table(title=f"interventions of {name}", show_lines=True)
    for col in ("commit", "author", "files and knob changes", "verdict", "applied", "effect"):
        table.add_column(col, overflow="fold")
    runs = load_experiment(exp).get("runs") or []
    for r in (r for r in records if r["type"] == "verdict"):
        verdict = r.get("verdict", "?") + "".join(f"\n- {x}" for x in r.get("reasons") or [])
        table.add_row(str(r.get("commit", ""))[:10], ledger.author_text(r), _changes_text(r), verdict,
                      ledger.applied_text(r, applied.get(r.get("commit"), []), runs),
                      "\n".join(effects.get(r.get("commit"), [])) or "-")
    Console(width=160).print(table)
    return 0


# -- diff -------------------------------------------------------------------------------------
MAIN_METRICS = (("reward/mean", max), ("episode/turns", None), ("episode/invalid_rate", min),
                ("episode/question_rate", max),
                ("user/leak_rate", min), ("actor/entropy", None), ("kl/ref", None))


def _resolve(spec: str, override: str | None) -> dict:
    """EXP or EXP/run-NNN -> {label, exp, ws, commit, run}."""
    name, _, run = spec.partition("/")
    exp = _exp_dir(name, override)
    ws = gate.open_experiment_workspace(exp)
    runs = sorted(p for p in exp.glob("run-[0-9]*") if p.is_dir())
    if run:
        run_dir = exp / run
        if not run_dir.is_dir():
            raise UserError(f"experiment {name} has no run {run!r} (runs: "
                            f"{', '.join(p.name for p in runs) or 'none yet'}).")
        applied = [r["commit"] for r in ledger.read_lines(exp, "applied") if r.get("run") == run]
        commit = (applied[-1] if applied else None) or ws.rev(f"refs/tags/{run}-start") or ws.rev(LIVE_REF)
    else:
        run_dir = runs[-1] if runs else None
        commit = ws.rev(LIVE_REF)
    return {"label": spec, "exp": exp, "ws": ws, "commit": commit, "run": run_dir}


def _read_jsonl(path: Path) -> list[dict]:
    """Whole JSON objects of a JSON-lines file; a corrupt or torn line is skipped with a warning
    (a trainer killed mid-write leaves a half line)."""
    out = []
    if path.exists():
        for n, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
            try:
                rec = json.loads(raw)
            except ValueError:
                rec = None
            if isinstance(rec, dict):
                out.append(rec)
            elif raw.strip():
                warnings.warn(f"{path}: line {n} skipped (corrupt or truncated)", stacklevel=2)
    return out


def _config(side: dict) -> dict:
    from orchestrator.gate_checks import flatten
    cfg = {"bench": load_experiment(side["exp"]).get("bench")}
    if side["run"] is not None and (side["run"] / "config.json").exists():
        try:
            cfg.update(flatten(json.loads((side["run"] / "config.json").read_text())))
        except ValueError:
            cfg["config.json"] = "(not valid JSON)"
    return cfg


def _workspace_diff(a: dict, b: dict) -> str:
    if a["ws"].path == b["ws"].path:
        return a["ws"].diff(a["commit"], b["commit"])
    import difflib
    import tempfile
    with tempfile.TemporaryDirectory() as tmp:
        da = a["ws"].export_tree(a["commit"], Path(tmp) / "a")
        db = b["ws"].export_tree(b["commit"], Path(tmp) / "b")
        files = sorted({str(p.relative_to(d)) for d in (da, db) for p in d.rglob("*") if p.is_file()})
        out = []
        for f in files:
            ta = (da / f).read_text(errors="replace").splitlines() if (da / f).exists() else []
            tb = (db / f).read_text(errors="replace").splitlines() if (db / f).exists() else []
            out += difflib.unified_diff(ta, tb, f"a/{f}", f"b/{f}", lineterm="")
        return "\n".join(out)


def _metric_cells(side: dict, keys: list[str]) -> dict[str, str]:
    recs = _read_jsonl(side["run"] / "metrics.jsonl") if side["run"] else []
    out = {}
    for key, best in ((k, dict(MAIN_METRICS).get(k, max)) for k in keys):
        vals = [r[key] for r in recs if isinstance(r.get(key), (int, float))]
        if vals:
            out[key] = f"{vals[-1]:.4g}" + (f" / {best(vals):.4g}" if best else "")
    return out


def _success_keys(*sides: dict) -> list[str]:
    """success/mean, then success/<gym> for every gym of both sides' benches and any other gym a
    run logged. A step samples only some gyms (8 episodes over UserGym's 7), so the last metrics
    line alone named 2 of the 7."""
    from training.benches import get_bench      # plain module: no torch

    gyms: list[str] = []
    for side in sides:
        bench = load_experiment(side["exp"]).get("bench")
        gyms += [g for g in (get_bench(bench).gyms if bench else ()) if g not in gyms]
    logged = []
    for side in sides:
        for r in _read_jsonl(side["run"] / "metrics.jsonl") if side["run"] else []:
            logged += [k for k in r if k.startswith("success/") and k not in logged]
    keys = [f"success/{g}" for g in gyms]
    return ["success/mean"] + keys + sorted(k for k in logged if k not in keys and k != "success/mean")


def cmd_diff(args) -> int:
    a, b = _resolve(args.a, args.runs_dir), _resolve(args.b, args.runs_dir)
    console = Console(width=160)
    console.rule(f"workspace: {a['label']} {a['commit'][:10]} -> {b['label']} {b['commit'][:10]}")
    console.print(_workspace_diff(a, b) or "(identical workspaces)", markup=False, highlight=False)
    ca, cb = _config(a), _config(b)
    table = Table(title="config differences")
    for col in ("key", a["label"], b["label"]):
        table.add_column(col)
    for key in sorted(set(ca) | set(cb)):
        if ca.get(key) != cb.get(key):
            table.add_row(key, json.dumps(ca.get(key)), json.dumps(cb.get(key)))
    console.print(table if table.row_count else "config: no differences")
    keys = [k for k, _ in MAIN_METRICS] + _success_keys(a, b)
    gym_rows = {k for k in keys if k.startswith("success/")}
    ma, mb = _metric_cells(a, keys), _metric_cells(b, keys)
    table = Table(title="main metrics: final / best")
    for col in ("metric", a["label"], b["label"]):
        table.add_column(col)
    for key in keys:
        if key in ma or key in mb or key in gym_rows:
            table.add_row(key, ma.get(key, "-"), mb.get(key, "-"))
    console.print(table if table.row_count else "metrics: no run has written metrics yet")
    return 0
