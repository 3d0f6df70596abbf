"""Read an experiment folder into plain data for the report: runs, metrics, ledger, evaluations.

The report only reads files (DESIGN.md, "The trainer subprocess" and paths.py give the layout):
experiment.json, ledger.jsonl, run-NNN/{config.json, metrics.jsonl, events.jsonl} and
eval/<id>/summary.json. A trainer killed mid-write or a disk that filled up can leave a corrupt or
truncated JSONL line; every reader skips such a line with a warning and goes on, never crashes.
The results table of the paper (tables 1, 2, 4) is built here too: one row per
experiment and evaluated model, cells as mean and spread over repeated evaluations.
"""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import diagnostics
from orchestrator.errors import UserError

USERGYM_GYMS = ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy")
TAU2_DOMAINS = ("retail", "airline", "telecom")
GYM_TITLES = {"travel": "Travel", "function": "Func.", "persuade": "Pers.", "tau": "Tau",
              "turtle": "Turtle", "intention": "Inten.", "telepathy": "Tele.",
              "retail": "Retail", "airline": "Airline", "telecom": "Telecom"}
_RUN_RE = re.compile(r"^run-(\d+)$")


def read_json(path: Path, warnings: list[str]) -> dict[str, Any]:
    """A JSON object file, or {} with a warning when it is missing or corrupt."""
    try:
        value = json.loads(path.read_text())
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        warnings.append(f"{path}: unreadable ({exc}); ignored")
        return {}
    if not isinstance(value, dict):
        warnings.append(f"{path}: not a JSON object; ignored")
        return {}
    return value


def read_jsonl(path: Path, warnings: list[str]) -> list[dict[str, Any]]:
    """The JSON objects of a JSONL file; a corrupt, truncated or non-object line is skipped and
    named in `warnings` (a trainer killed mid-write leaves a half line at the end)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    except OSError as exc:
        warnings.append(f"{path}: unreadable ({exc}); ignored")
        return []
    records = []
    for number, line in enumerate(raw.split(b"\n"), start=1):
        if not line.strip():
            continue
        try:
            value = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            warnings.append(f"{path}:{number}: corrupt or truncated line skipped")
            continue
        if not isinstance(value, dict):
            warnings.append(f"{path}:{number}: not a JSON object, skipped")
            continue
        records.append(value)
    return records


@dataclass
class RunData:
    """One trainer run folder (run-NNN)."""

    name: str                       # "run-001"
    index: int                      # 1
    config: dict[str, Any]
    metrics: list[dict[str, Any]]   # one object per step, sorted by "step"
    events: list[dict[str, Any]]

    def steps(self) -> list[int]:
        return [int(m["step"]) for m in self.metrics]

    def series(self, key: str) -> tuple[list[int], list[float]]:
        """(steps, values) of one metric, skipping steps that lack it or hold a non-number."""
        xs, ys = [], []
        for m in self.metrics:
            value = m.get(key)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                xs.append(int(m["step"]))
                ys.append(float(value))
        return xs, ys

    def last_step(self) -> int:
        return max(self.steps(), default=0)


@dataclass
class Intervention:
    """An applied workspace commit, joined with its gate verdict and measured effect."""

    commit: str
    run: str                        # "run-001"
    step: int
    what: str                       # "agent.entropy_coeff 0.001->0.002" or the files touched
    effect: str                     # "helped" | "harmed" | "inconclusive" | "" (not measured yet)
    effect_detail: str = ""         # "success/travel +0.12 (noise 0.03)"
    knob_changes: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class ExperimentData:
    name: str
    root: Path
    meta: dict[str, Any]            # experiment.json
    runs: list[RunData]
    ledger: list[dict[str, Any]]
    interventions: list[Intervention]
    evals: list[dict[str, Any]]     # eval summaries, each with "_dir"
    warnings: list[str]

    @property
    def method(self) -> str:
        """The row label in the paper's vocabulary: PPO, EAU, generic meta-agent."""
        agent = str(self.meta.get("agent") or "")
        if not agent:      # experiment.json may not say: the ledger's sessions name their agent
            agent = next((str(r["agent"]) for r in self.ledger
                          if r.get("type") == "session" and r.get("agent")), "")
        skill = str(self.meta.get("skill") or "")
        if agent == "none":
            return "PPO"
        if skill == "generic":
            return f"Generic meta-agent ({agent})" if agent else "Generic meta-agent"
        if agent:
            return f"EAU ({agent})"
        # no agent recorded and no meta-agent session ever ran: plain PPO in effect
        return "PPO (no meta-agent sessions)" if self.runs else "training"


def _run_key(value: Any) -> str:
    """Ledger lines name a run as "run-002" or 2; one spelling for both."""
    if isinstance(value, int) and not isinstance(value, bool):
        return f"run-{value:03d}"
    text = str(value or "")
    return f"run-{int(text):03d}" if text.isdigit() else text


def _describe_change(verdict: dict[str, Any] | None) -> tuple[str, list[dict[str, Any]]]:
    if not verdict:
        return "", []
    changes = [c for c in verdict.get("knob_changes") or [] if isinstance(c, dict)]
    if changes:
        text = ", ".join(f"{c.get('path')} {c.get('old')}\u2192{c.get('new')}" for c in changes)
        return text, changes
    files = [str(f) for f in verdict.get("files") or []]
    return ", ".join(files), []


def join_interventions(ledger: list[dict[str, Any]],
                       runs: list[RunData]) -> list[Intervention]:
    """Every applied commit (ledger "applied" lines, else the runs' "applied" events), labelled
    with its knob or files (the "verdict" line) and its measured effect (the "effect" line)."""
    verdicts = {str(r.get("commit")): r for r in ledger if r.get("type") == "verdict"}
    effects = {str(r.get("commit")): r for r in ledger if r.get("type") == "effect"}
    applied: dict[tuple[str, str], int] = {}
    for r in ledger:
        if r.get("type") == "applied" and isinstance(r.get("step"), (int, float)):
            applied[(_run_key(r.get("run")), str(r.get("commit")))] = int(r["step"])
    for run in runs:
        for e in run.events:
            if e.get("event") == "applied" and isinstance(e.get("step"), (int, float)):
                applied.setdefault((run.name, str(e.get("commit"))), int(e["step"]))
    out = []
    for (run, commit), step in sorted(applied.items(), key=lambda kv: (kv[0][0], kv[1])):
        what, changes = _describe_change(verdicts.get(commit))
        eff = effects.get(commit) or {}
        detail = ""
        if eff.get("metric") is not None and isinstance(eff.get("delta"), (int, float)):
            detail = f"{eff['metric']} {eff['delta']:+.3g}"
            if isinstance(eff.get("noise"), (int, float)):
                detail += f" (noise {eff['noise']:.2g})"
        elif eff.get("label") == "unmeasured":      # the whole reason, as `orchestrator log` shows it
            detail = f"{eff.get('metric')}: {eff.get('reason') or 'the run ended first'}"
        out.append(Intervention(commit=commit, run=run, step=step, what=what or commit[:8],
                                effect=str(eff.get("label") or ""), effect_detail=detail,
                                knob_changes=changes))
    return out


def load_experiment(root: Path) -> ExperimentData:
    """Everything the report shows about one experiment folder."""
    root = Path(root)
    if not root.is_dir():
        raise UserError(f"no experiment folder at {root}: give a name under the runs folder "
                        "or a path to an experiment.")
    warnings: list[str] = []
    meta = read_json(root / "experiment.json", warnings)
    runs = []
    for d in sorted(root.iterdir()):
        m = _RUN_RE.match(d.name)
        if not (m and d.is_dir()):
            continue
        metrics = [r for r in read_jsonl(d / "metrics.jsonl", warnings)
                   if isinstance(r.get("step"), (int, float))]
        metrics.sort(key=lambda r: r["step"])
        runs.append(RunData(name=d.name, index=int(m.group(1)),
                            config=read_json(d / "config.json", warnings), metrics=metrics,
                            events=read_jsonl(d / "events.jsonl", warnings)))
    for run in runs:             # failed calls scored 0 in silence: the report says so
        warnings += [f"{run.name}: {f.message}"
                     for f in diagnostics.find_module_errors(run.metrics, [], len(run.metrics))]
    ledger = read_jsonl(root / "ledger.jsonl", warnings)
    evals = []
    if (root / "eval").is_dir():
        for summary in sorted((root / "eval").glob("*/summary.json")):
            s = read_json(summary, warnings)
            if isinstance(s.get("per_gym"), dict):
                evals.append({**s, "_dir": summary.parent})
    return ExperimentData(name=str(meta.get("name") or root.name), root=root, meta=meta,
                          runs=runs, ledger=ledger,
                          interventions=join_interventions(ledger, runs), evals=evals,
                          warnings=warnings)


# ---- the results table (paper tables 1, 2 and 4) --------------------------------------------

def _bench_cells(bench: str, per_gym: dict[str, Any]) -> dict[str, float]:
    """One evaluation's numbers as the paper's columns: UserGym's per-gym score, ColBench's Pass
    (mean fraction of hidden tests passed) and Succ. (all passed), tau2's success in percent."""
    def mean_of(gym: str, key: str) -> float | None:
        v = (per_gym.get(gym) or {}).get(key)
        return float(v) if isinstance(v, (int, float)) else None

    cells: dict[str, float] = {}
    if bench == "usergym":
        for gym in USERGYM_GYMS:
            v = mean_of(gym, "score")
            if v is not None:
                cells[f"usergym/{gym}"] = v
    elif bench == "colbench":
        for col, key in (("pass", "score"), ("success", "success")):
            v = mean_of("colbench", key)
            if v is not None:
                cells[f"colbench/{col}"] = v
    elif bench == "tau2":
        for dom in TAU2_DOMAINS:
            v = mean_of(dom, "success")
            if v is not None:
                cells[f"tau2/{dom}"] = 100.0 * v
    return cells


def _with_averages(cells: dict[str, float]) -> dict[str, float]:
    """Add the averages the paper prints: UserGym Avg. over its gyms, ColBench Avg. of Pass and
    Succ., tau2 Avg. over domains, and Overall = mean of UserGym's 7 gyms and ColBench's 2 numbers
    (table 1: e.g. Gemini-3-Flash 5.456 / 9 = 0.606)."""
    out = dict(cells)
    groups = {"usergym/avg": [f"usergym/{g}" for g in USERGYM_GYMS],
              "colbench/avg": ["colbench/pass", "colbench/success"],
              "tau2/avg": [f"tau2/{d}" for d in TAU2_DOMAINS]}
    for avg, keys in groups.items():
        present = [cells[k] for k in keys if k in cells]
        if present:
            out[avg] = sum(present) / len(present)
    overall = groups["usergym/avg"] + groups["colbench/avg"]
    if all(k in cells for k in overall):
        out["overall"] = sum(cells[k] for k in overall) / len(overall)
    return out


def final_checkpoint_key(evals: list[dict[str, Any]]) -> tuple[int, int] | None:
    """(run index, step) of the newest checkpoint evaluated: the final checkpoint of the final
    run (paper section 5.1: no selection on test results)."""
    keys = [(int(e.get("run_index") or 0), int(e.get("step") or 0))
            for e in evals if e.get("source") == "checkpoint"]
    return max(keys) if keys else None


@dataclass
class TableRow:
    experiment: str
    method: str
    model: str                                   # "final checkpoint (run-002 step 50)" / model
    cells: dict[str, tuple[float, float, int]]   # column -> (mean, std, number of evaluations)


def _deviating(e: dict[str, Any]) -> str:
    """A label suffix for an evaluation that departed from its bench's protocol (fewer tasks,
    turns or tokens a turn: training/evaluate.py "deviations"), so its numbers get a row of their
    own, marked, instead of being averaged with the protocol's."""
    parts = [f"{d.get('setting')} {d.get('used')}" for d in e.get("deviations") or []
             if isinstance(d, dict) and d.get("setting") != "gyms"]
    if any(isinstance(d, dict) and d.get("setting") == "gyms" for d in e.get("deviations") or []):
        parts.append("gyms " + ", ".join(next(d for d in e["deviations"] if isinstance(d, dict)
                                              and d.get("setting") == "gyms").get("used") or []))
    label = f" [not the protocol: {'; '.join(parts)}]" if parts else ""
    # another user or another task set is another protocol: never averaged with the offline
    # evaluation of the shipped tasks (paper section 5.1 evaluates with one fixed LLM user)
    if e.get("user_protocol", "offline") != "offline":
        label += f" [user: {e['user_protocol']}]"
    if e.get("data", "shipped") != "shipped":
        label += f" [tasks: {e['data']}]"
    return label


def table_rows(exp: ExperimentData) -> list[TableRow]:
    """Rows for one experiment: the prompting rows (untrained models it evaluated) first, then its
    final checkpoint; each cell the mean and sample spread over repeated evaluations (seeds)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = {}
    final = final_checkpoint_key(exp.evals)
    for e in exp.evals:
        if e.get("source") == "model":
            groups.setdefault(("Prompting", f"model {e.get('model')}" + _deviating(e)), []).append(e)
        elif final and (int(e.get("run_index") or 0), int(e.get("step") or 0)) == final:
            label = f"{e.get('run')} step {e.get('step')}" + _deviating(e)
            groups.setdefault((exp.method, label), []).append(e)
    rows = []
    for (method, label), evals in sorted(groups.items(), key=lambda kv: kv[0][0] != "Prompting"):
        per_eval: list[dict[str, float]] = []
        by_seed: dict[Any, dict[str, float]] = {}
        for e in evals:
            # one evaluation per (bench, seed) merges into one record of all benches
            by_seed.setdefault(e.get("seed"), {}).update(
                _bench_cells(str(e.get("bench")), e.get("per_gym") or {}))
        per_eval = [_with_averages(c) for c in by_seed.values()]
        cells = {}
        for col in sorted({k for c in per_eval for k in c}):
            values = [c[col] for c in per_eval if col in c]
            spread = statistics.stdev(values) if len(values) > 1 else 0.0
            cells[col] = (statistics.fmean(values), spread, len(values))
        rows.append(TableRow(experiment=exp.name, method=method, model=label, cells=cells))
    return rows


def table_columns(rows: list[TableRow]) -> list[tuple[str, str, str]]:
    """(group title, column title, key) for every column some row fills, in the paper's order."""
    order = ([("UserGym", GYM_TITLES[g], f"usergym/{g}") for g in USERGYM_GYMS]
             + [("UserGym", "Avg.", "usergym/avg"),
                ("ColBench", "Pass", "colbench/pass"), ("ColBench", "Succ.", "colbench/success"),
                ("ColBench", "Avg.", "colbench/avg"), ("", "Overall", "overall")]
             + [("\u03c4\u00b2-bench", GYM_TITLES[d], f"tau2/{d}") for d in TAU2_DOMAINS]
             + [("\u03c4\u00b2-bench", "Avg.", "tau2/avg")])
    filled = {k for r in rows for k in r.cells}
    return [c for c in order if c[2] in filled]
