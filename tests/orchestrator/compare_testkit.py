"""Synthetic evaluations and results.json files, as `orchestrator compare` writes them, for the
tests of compare_stats and compare_merge (no model runs)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

PROTOCOL = {"split": "test", "data": "shipped", "user_llm": "none (symbolic arm only)",
            "user_protocol": "offline"}


def seed_entry(success: dict[str, float], score: dict[str, float] | None = None, turns: int = 4,
               refused: int = 1, source: str = "checkpoint", deviations: list | None = None,
               protocol: dict | None = None) -> dict[str, Any]:
    """One evaluation: success (and score, default = success) by "gym/task"; per_gym from them."""
    score = score if score is not None else success
    tasks = {k: {"success": float(v), "score": float(score[k]), "turns": turns, "refused": refused}
             for k, v in success.items()}
    gyms = sorted({k.split("/")[0] for k in tasks})
    per_gym = {g: {key: float(np.mean([r[key] for k, r in tasks.items() if k.startswith(g + "/")]))
                   for key in ("success", "score")} | {"invalid_rate": refused / turns, "turns": turns}
               for g in gyms}
    return {"per_gym": per_gym, "deviations": deviations or [], "source": source, "step": 2,
            "protocol": {**PROTOCOL, **(protocol or {})}, "tasks": tasks}


def bernoulli(rng: np.random.Generator, p: dict[str, float], tasks: int = 30, **kw) -> dict[str, Any]:
    """An evaluation whose tasks of gym g succeed with probability p[g]."""
    return seed_entry({f"{g}/t{i}": float(rng.random() < pg) for g, pg in p.items()
                       for i in range(tasks)}, **kw)


def write_results(path: Path, methods: dict[str, dict[str, dict]], bench: str = "usergym",
                  spec: dict | None = None, data_files: dict | None = None) -> Path:
    """A session's results.json: methods -> seed -> evaluation (raw: no aggregates, no stats)."""
    path.mkdir(parents=True, exist_ok=True)
    results = {"bench": bench, "data": "shipped",
               "methods": {m: {"seeds": seeds} for m, seeds in methods.items()},
               "jobs": [{"kind": "eval", "method": m, "seed": int(s), "rc": 0, "seconds": 1.0,
                         "log": f"logs/eval-{m}-s{s}.log", "exp": f"x-{m}-s{s}"}
                        for m, seeds in methods.items() for s in seeds],
               "trained_gyms": ["travel"], "held_out_gyms": ["intention"],
               "spec": {"command": f"orchestrator compare --bench {bench} --name {path.name}",
                        "model": None, "preset": "cpu", "user_mode": None, "steps": 2, "sets": [],
                        **(spec or {})}}
    if data_files is not None:
        results["data_files"] = data_files
    (path / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    return path / "results.json"
