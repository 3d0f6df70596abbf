"""The experience pool: what earlier interventions did, kept across runs and experiments (paper 4.6).

One markdown file per finding in the pool's folder: `_experience/` in the runs folder (`runs/` by
default; the underscore keeps it apart from experiment names, which start with a letter or a
digit), or $EAU_EXPERIENCE_DIR. Runs write it, so it lives with them, outside the project's
source tree: in the project's own `experience/` folder a demo left its findings untracked in the
checkout. Each file has a front matter block whose values are JSON (so it is also valid YAML):

    ---
    bench: "colbench"
    target: "env.colbench.max_steps"          # a knob path, or a rule id / reward module
    change: "10 -> 14"
    evidence: {"experiment": "demo", "run": "run-001", "steps": [40, 60], "effect": "helped",
               "metric": "success/colbench", "delta": 0.12, "noise_floor": 0.05}
    commit: "3f2a..."
    ---
    free text: what was seen, what was done, what to try next

Sessions get `index()` in their prompt (the LLM agents also read the files, and add theirs in
the same format); the built-in agent writes one finding per measured effect (`record_effects`)
and avoids repeating what harmed. `effect` is the label of orchestrator.effects: the metric of
the commit's `Expect:` line over the W steps after the trainer applied it against the W before,
helped / harmed beyond a noise floor of twice the standard error of its step-to-step variation,
inconclusive within it. Findings come from training-side logs only; evaluation results never
enter the pool.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

from orchestrator import gitops
from orchestrator.paths import runs_dir

POOL = "_experience"


def pool_dir(override: Path | str | None = None, runs_root: Path | str | None = None) -> Path:
    """The pool's folder (made if missing): `override`, else $EAU_EXPERIENCE_DIR, else POOL in
    `runs_root` (an experiment's parent folder), else in the default runs folder."""
    path = Path(override or os.environ.get("EAU_EXPERIENCE_DIR")
                or Path(runs_root or runs_dir()) / POOL)
    path.mkdir(parents=True, exist_ok=True)
    return path


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:60] or "finding"


def write_finding(bench: str, target: str, change: str, evidence: dict[str, Any], body: str,
                  pool: Path | str | None = None, commit: str = "") -> Path:
    """Write one finding file; the name is unique (bench, target, experiment, run, commit)."""
    folder = pool_dir(pool)
    stem = _slug(f"{bench}-{target}-{evidence.get('experiment', '')}-{evidence.get('run', '')}"
                 f"-{commit[:8]}")
    path, n = folder / f"{stem}.md", 2
    while path.exists():
        path, n = folder / f"{stem}-{n}.md", n + 1
    meta = {"bench": bench, "target": target, "change": change, "evidence": evidence, "commit": commit}
    front = "\n".join(f"{k}: {json.dumps(v, sort_keys=True)}" for k, v in meta.items())
    path.write_text(f"---\n{front}\n---\n{body.strip()}\n")
    return path


def parse_finding(path: Path) -> dict[str, Any] | None:
    """Front matter as a dict plus `body` and `path`; None for a file without front matter."""
    text = path.read_text(errors="replace")
    m = re.match(r"---\n(.*?)\n---\n?(.*)", text, re.S)
    if not m:
        return None
    meta: dict[str, Any] = {}
    for line in m.group(1).splitlines():
        if ":" not in line:
            continue
        key, raw = line.split(":", 1)
        raw = raw.strip()
        try:
            meta[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            meta[key.strip()] = raw.strip("'\"")     # a person's hand-written plain YAML scalar
    meta["body"] = m.group(2).strip()
    meta["path"] = str(path)
    return meta


def read_findings(pool: Path | str | None = None, bench: str | None = None) -> list[dict[str, Any]]:
    out = []
    for path in sorted(pool_dir(pool).glob("*.md")):
        if path.name.lower() == "readme.md":
            continue
        meta = parse_finding(path)
        if meta and (bench is None or meta.get("bench") in (bench, "any")):
            out.append(meta)
    return out


def index(pool: Path | str | None = None, bench: str | None = None) -> str:
    """A markdown table of the pool for a session's prompt: one row per finding."""
    rows = read_findings(pool, bench)
    if not rows:
        return "(the experience pool has no findings for this bench yet)"
    lines = ["| bench | target | change | effect | metric (delta / floor) | experiment/run | file |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        ev = r.get("evidence") if isinstance(r.get("evidence"), dict) else {}
        lines.append(f"| {r.get('bench')} | {r.get('target')} | {r.get('change')} | "
                     f"{ev.get('effect', '?')} | {ev.get('metric', '')} ({ev.get('delta', '')} / "
                     f"{ev.get('noise_floor', '')}) | {ev.get('experiment', '')}/{ev.get('run', '')} | "
                     f"{Path(r['path']).name} |")
    return "\n".join(lines)


def harmful_changes(pool: Path | str | None = None, bench: str | None = None) -> set[tuple[str, str]]:
    """(target, change) pairs the pool records as harmful: the built-in agent does not repeat them."""
    return {(r.get("target"), r.get("change")) for r in read_findings(pool, bench)
            if isinstance(r.get("evidence"), dict) and r["evidence"].get("effect") == "harmed"}


def record_effects(exp_dir: Path | str, bench: str, workspace: Path | str,
                   pool: Path | str | None = None) -> list[Path]:
    """One finding per ledger effect line not yet in the pool (matched by commit and run)."""
    from orchestrator import diagnostics, effects

    exp_dir = Path(exp_dir)
    pool = pool_dir(pool, runs_root=exp_dir.parent)
    seen = {(r.get("commit"), (r.get("evidence") or {}).get("run")) for r in read_findings(pool)
            if isinstance(r.get("evidence"), dict)}
    written = []
    for e in effects.ledger_read(exp_dir, "effect"):
        if (e["commit"], e["run"]) in seen or e.get("label") == "unmeasured":
            continue                                  # nothing was learnt from an unmeasured one
        try:
            parents = gitops.git(workspace, "rev-list", "--parents", "-n1", e["commit"]).split()[1:]
            old = gitops.knobs_at(workspace, parents[0]) if parents else {}
            changed = diagnostics.knob_changes(old, gitops.knobs_at(workspace, e["commit"]))
            subject = gitops.message(workspace, e["commit"]).splitlines()[0]
        except (gitops.GitError, IndexError):
            continue
        target = ", ".join(changed) or "workspace files"
        change = "; ".join(f"{a} -> {b}" for a, b in changed.values()) or subject
        evidence = {"experiment": exp_dir.name, "run": e["run"],
                    "steps": [e["step"] - e["window"], e["step"] + e["window"]],
                    "effect": e["label"], "metric": e["metric"], "before": e["before"],
                    "after": e["after"], "delta": e["delta"], "noise_floor": e["noise_floor"]}
        body = (f"{subject}\n\nMeasured over {e['window']} steps either side of step {e['step']}: "
                f"{e['metric']} {e['before']} -> {e['after']} (delta {e['delta']}, noise floor "
                f"{e['noise_floor']}): {e['label']}.")
        written.append(write_finding(bench, target, change, evidence, body, pool, commit=e["commit"]))
        seen.add((e["commit"], e["run"]))
    return written
