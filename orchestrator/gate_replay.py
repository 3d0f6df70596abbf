"""The gate's refusal of a reward module that cannot pay where its commit says it will.

A commit that switches on or adds a reward module and whose `Expect:` line names a gym
(`score/travel`, `success/function`, `reward/tau`, `took/tau/identify`) is refused when the
module, replayed on that gym's recent turns (the newest trajectory files the diagnosis reads,
orchestrator.replay), pays nothing there: nothing it pays on happened in that gym lately, so the
effect the commit expects cannot come from it. A gym with too few recent turns to say
(orchestrator.progress_findings' IDLE_MIN_TURNS) is not judged. The built-in agent runs the same
replay before it commits; this makes the rule hold for Claude Code, Codex and people too.
"""
from __future__ import annotations

import json
import re
from typing import Any

from orchestrator import replay
from orchestrator.gate_context import GateContext
from orchestrator.progress_findings import IDLE_MIN_TURNS
from orchestrator.workspace import Workspace

# took/<gym>/<step>: the share of episodes taking a step, the built-in agent's Expect for a
# missing step (orchestrator.agents.remedies.step_expect); its gym is the name after took/
_EXPECT_GYM = re.compile(r"\b(?:took|success|score|reward)/([\w-]+)")


def expected_gyms(message: str, gyms: tuple[str, ...]) -> list[str]:
    """The gyms named by the metrics of the commit's Expect line(s)."""
    out = []
    for line in message.splitlines():
        if line.strip().lower().startswith("expect:"):
            out += [g for g in _EXPECT_GYM.findall(line) if g in gyms and g not in out]
    return out


def _modules(ws: Workspace, tree: str) -> dict[str, Any]:
    try:
        knobs = json.loads((ws.read_file(tree, "knobs.json") or b"{}").decode())
        modules = knobs.get("reward", {}).get("modules", {})
    except (ValueError, AttributeError):
        return {}
    return modules if isinstance(modules, dict) else {}


def switched_on(ws: Workspace, old_tree: str, new_tree: str, files: dict[str, str]) -> list[str]:
    """Reward modules enabled in the new tree that were off (or absent) in the old one, or whose
    source the commit changed while they are enabled."""
    old, new = _modules(ws, old_tree), _modules(ws, new_tree)

    def on(mods: dict, name: str) -> bool:
        spec = mods.get(name)
        return isinstance(spec, dict) and spec.get("enabled", True) is True

    return sorted(n for n in new if on(new, n) and (not on(old, n) or f"rewards/{n}.py" in files))


def check_expected_pay(ws: Workspace, old_tree: str, new_tree: str, files: dict[str, str],
                       message: str, ctx: GateContext) -> list[str]:
    """Reasons to refuse (see the module docstring); [] when nothing is expected of a module."""
    gyms = expected_gyms(message, ctx.bench_gyms())
    names = switched_on(ws, old_tree, new_tree, files) if gyms else []
    if not names:
        return []
    episodes = replay.recent_episodes(ctx.run_dir())
    reasons = []
    for name in names:
        source = ws.read_file(new_tree, f"rewards/{name}.py")
        if source is None:
            continue        # a missing file is check_knobs' reason to refuse
        pay, err = replay.module_pay(source.decode(errors="replace"), episodes)
        if err:
            continue        # a module that fails is check_reward_module's reason to refuse
        for gym in gyms:
            p = pay.get(gym)
            if p is not None and p.turns >= IDLE_MIN_TURNS and not p.pays:
                reasons.append(
                    f"rewards/{name}.py: replayed on the {p.turns} recent {gym} turns it pays "
                    f"nothing, yet the Expect line names {gym}: nothing it pays on happened there "
                    f"lately.")
    return reasons
