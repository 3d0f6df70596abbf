"""Helpers for the workspace/gate tests: an experiment in a real temporary git repository, and
one-line ways to commit knob changes, files and metrics into it."""
from __future__ import annotations

import json
from pathlib import Path

from orchestrator import gate
from orchestrator.experiment_init import init_experiment
from orchestrator.paths import project_root
from orchestrator.workspace import Workspace

PERSON = ("Pat Person", "pat@example.org")
AGENT = ("claude", "claude@agents.eau")
WHY = "\n\nWhy: a test write.\nExpect: the gate's verdict.\n"
GYMS = ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy")


def _kinds() -> dict[str, list[str]]:
    """Fact kinds per UserGym gym as the gate would learn them from the bench: those the shipped
    rules name, plus a few; never "shape" (a ColBench kind, used to test a refusal)."""
    rules = json.loads((project_root() / "workspace/users/usergym/rules.json").read_text())
    named = {k for r in rules["rules"] for k in r.get("kinds", [])}
    return {g: sorted(named | {"preference", "budget", "rule"}) for g in GYMS}



def make_experiment(tmp_path: Path, name: str = "exp", bench: str = "usergym") -> Path:
    exp = init_experiment(name, bench, tmp_path / "runs")
    cache = exp / ".gate-cache"
    cache.mkdir(exist_ok=True)                   # fact kinds known without asking the bench
    (cache / "fact_kinds-usergym-shipped.json").write_text(json.dumps(_kinds()))
    return exp


def ws_of(exp: Path) -> Workspace:
    return gate.open_experiment_workspace(exp)


def knobs(ws: Workspace) -> dict:
    return json.loads((ws.path / "knobs.json").read_text())


def set_knob(ws: Workspace, dotted: str, value) -> None:
    k = knobs(ws)
    node = k
    parts = dotted.split(".")
    for p in parts[:-1]:
        node = node[p]
    node[parts[-1]] = value
    (ws.path / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")


def write(ws: Workspace, files: dict[str, str | None]) -> None:
    for path, text in files.items():
        target = ws.path / path
        if text is None:
            target.unlink()
        else:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(text)


def commit(ws: Workspace, subject: str = "change", body: str = WHY, identity=PERSON,
           verify: bool = False) -> str:
    return ws.commit_all(subject + body, identity, verify=verify)


def knob_commit(ws: Workspace, dotted: str, value, **kw) -> str:
    set_knob(ws, dotted, value)
    return commit(ws, f"set {dotted} = {value}", **kw)


def write_metrics(exp: Path, rows: list[dict], run: str = "run-001") -> Path:
    path = exp / run / "metrics.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
