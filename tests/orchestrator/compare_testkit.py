"""Synthetic evaluations, as `orchestrator compare` keeps them in results.json, for the tests of
compare_stats (no model runs)."""
from __future__ import annotations

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

