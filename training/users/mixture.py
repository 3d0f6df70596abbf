"""The epsilon mixture of user simulators (paper section 4.2): per episode, the symbolic arm with
probability `user.<gym>.strategy_mix`, else the LLM arm; the draw is seeded, and the arm is logged
per episode (info["user_arm"]) so metrics can be split by arm.

Why per episode and not per turn: a user that changes character mid-conversation is neither arm;
the paper's run (appendix A.2, "Fixed mixture") reports the two arms differing by 0.29 in success,
which only makes sense with whole episodes per arm.

Unlike the paper's recorded implementation (table 8, note b: the selector was keyed by
travel/colbench/tau2 only, so four gyms could not be split), every gym reads its own
`user.<gym>.strategy_mix`.
"""
from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Iterable


def pick_arm(strategy_mix: float, seed: int, key: str) -> str:
    """"symbolic" with probability strategy_mix, else "llm"; the same (seed, key) gives the same arm."""
    rng = random.Random(f"eau-mixture:{seed}:{key}")
    return "symbolic" if rng.random() < float(strategy_mix) else "llm"


def episode_user(gym: str, knobs: dict[str, Any], symbolic: Any, llm: Any | None, *,
                 seed: int, key: str) -> tuple[Any, str]:
    """(user, arm) for one episode of `gym`; without an LLM backend the symbolic arm always answers."""
    if llm is None:
        return symbolic, "symbolic"
    mix = float(knobs.get("user", {}).get(gym, {}).get("strategy_mix", 1.0))
    arm = pick_arm(mix, seed, key)
    return (symbolic if arm == "symbolic" else llm), arm


def arm_metrics(episodes: Iterable[dict]) -> dict[str, float]:
    """Metrics split by arm from episode records {"gym", "user_arm", "reward", "success"}:
    `user/symbolic_frac`, `reward/arm_<arm>`, `success/arm_<arm>`."""
    by_arm: dict[str, list[dict]] = defaultdict(list)
    for ep in episodes:
        by_arm[ep.get("user_arm") or "none"].append(ep)
    total = sum(len(v) for v in by_arm.values())
    out: dict[str, float] = {}
    if total:
        out["user/symbolic_frac"] = len(by_arm.get("symbolic", [])) / total
    for arm, eps in by_arm.items():
        out[f"reward/arm_{arm}"] = sum(float(e.get("reward", 0.0)) for e in eps) / len(eps)
        out[f"success/arm_{arm}"] = sum(bool(e.get("success")) for e in eps) / len(eps)
    return out
