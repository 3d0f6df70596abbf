"""Reward modules of a workspace snapshot, run in sandboxed worker processes, never in the trainer.

A reward module (DESIGN.md, "Interfaces") is `rewards/<name>.py` with `APPLIES_TO = [gyms]` and
`turn_reward(turn) -> float` and/or `episode_reward(episode) -> float`, where `turn` and `episode`
are the plain dicts of the trajectory files. knobs `reward.modules.<name>.{enabled, weight}` switch
it on and weight it. Each enabled module gets a `training.sandbox.ModuleWorker` (imported once).

Per agent turn k of an episode in gym g (the env's own reward included):
    raw_k = env_reward_k + sum_m weight_m * turn_reward_m(turn_k)
            (+ sum_m weight_m * episode_reward_m(episode) on the last turn)
    r_k   = clip(default_scale * per_gym_scale[g] * raw_k, turn_reward_clip.min, .max)
A module that fails on a live turn (exception, timeout, non-finite value, a refused system call,
a result the sandbox refuses to parse, or the sandbox itself failing) gives 0 for that turn and
module and is counted in `reward/module_errors`; training goes on (a result nested a thousand
levels deep once crashed the step with RecursionError: tests/faults/test_fault_os_walls.py). A
module that fails to import, or whose sandbox cannot start, makes the whole snapshot fail to
load (training.live keeps the previous one).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from training.sandbox import Limits, ModuleWorker, is_finite_number, run_calls
from training.steps import mark_first_steps


class RewardModuleError(ValueError):
    """A reward module cannot be used (fails to import, bad APPLIES_TO, no reward function)."""


LIMITS = Limits(wall_s=5.0, cpu_s=60.0, memory_mb=512)
CALL_TIMEOUT_S = 2.0


@dataclass
class RewardModule:
    name: str
    applies_to: tuple[str, ...]
    has_turn: bool
    has_episode: bool
    weight: float
    worker: ModuleWorker

    def close(self) -> None:
        self.worker.close()


def probe(name: str, source: str) -> tuple[tuple[str, ...], bool, bool]:
    """(APPLIES_TO, has turn_reward, has episode_reward) of a module, imported in a sandbox."""
    res = run_calls(source, ["list(APPLIES_TO)", "callable(globals().get('turn_reward'))",
                             "callable(globals().get('episode_reward'))"], LIMITS)
    if not res[0].ok:
        first = (res[0].error or res[0].kind).strip().splitlines()
        raise RewardModuleError(f"reward module {name} fails to load: "
                                f"{first[-1] if first else res[0].kind}.")
    applies = res[0].value
    if not isinstance(applies, list) or not all(isinstance(g, str) for g in applies):
        raise RewardModuleError(f"reward module {name}: APPLIES_TO must be a list of gym names.")
    has_turn, has_episode = bool(res[1].value), bool(res[2].value)
    if not (has_turn or has_episode):
        raise RewardModuleError(f"reward module {name} defines neither turn_reward nor "
                                "episode_reward.")
    return tuple(applies), has_turn, has_episode


def start_module(name: str, source: str) -> tuple[tuple[str, ...], bool, bool, Any]:
    """(APPLIES_TO, has turn_reward, has episode_reward, started worker) of one module's source;
    the worker is anything with `call(func, args, timeout_s)` and `close()`."""
    applies, has_turn, has_episode = probe(name, source)
    worker = ModuleWorker(source, LIMITS)
    if not worker.load_result.ok:
        worker.close()
        raise RewardModuleError(f"reward module {name} fails to load: "
                                f"{worker.load_result.error}.")
    return applies, has_turn, has_episode, worker


def load_modules(reward_files: dict[str, Path], knobs: dict[str, Any],
                 start: Callable[[str, str], tuple] = start_module) -> list[RewardModule]:
    """Start a worker for every module switched on in knobs reward.modules; raise on the first
    that cannot be used (the callers treat that as a failed snapshot). `start` (name, source)
    gives a module's worker (training.live passes one that reuses the worker of an unchanged
    module across hot reloads)."""
    settings = knobs.get("reward", {}).get("modules", {})
    modules: list[RewardModule] = []
    try:
        for name, spec in sorted(settings.items()):
            if not spec.get("enabled", True):
                continue
            if name not in reward_files:
                raise RewardModuleError(f"knobs reward.modules.{name} is enabled but "
                                        f"rewards/{name}.py does not exist.")
            source = reward_files[name].read_text()
            try:
                applies, has_turn, has_episode, worker = start(name, source)
            except RewardModuleError:
                raise
            except Exception as exc:   # the sandbox could not start it: a failed snapshot, no crash
                raise RewardModuleError(f"reward module {name} cannot be started in the sandbox "
                                        f"({type(exc).__name__}: {exc}).") from None
            modules.append(RewardModule(name, applies, has_turn, has_episode,
                                        float(spec.get("weight", 1.0)), worker))
    except BaseException:
        close_all(modules)
        raise
    return modules


def close_all(modules: list[RewardModule]) -> None:
    for m in modules:
        m.close()


@dataclass
class ScoreStats:
    errors: int = 0
    calls: int = 0
    per_module: dict[str, float] = field(default_factory=dict)   # summed weighted contribution


def _call(module: RewardModule, func: str, arg: dict, stats: ScoreStats) -> float:
    stats.calls += 1
    try:
        res = module.worker.call(func, [arg], timeout_s=CALL_TIMEOUT_S)
    except Exception:           # the sandbox failing (a process it cannot start): counted, 0
        stats.errors += 1
        return 0.0
    if not res.ok or not is_finite_number(res.value):
        stats.errors += 1
        return 0.0
    return float(res.value)


def score_episode(episode: dict[str, Any], modules: list[RewardModule], knobs: dict[str, Any],
                  stats: ScoreStats) -> list[float]:
    """Final per-turn rewards of one episode (formula in the module docstring); also writes
    turn["reward"], turn["module_rewards"] and turn["first_steps"] in place. `first_steps` (the
    steps a turn took first in its episode, training.steps) is written before any module runs, so
    a module can pay a step once per episode, at the turn that first took it."""
    gym = episode["gym"]
    mark_first_steps(episode)
    reward_knobs = knobs.get("reward", {})
    scale = float(reward_knobs.get("default_scale", 1.0)) * float(
        reward_knobs.get("per_gym_scale", {}).get(gym, 1.0))
    clip = reward_knobs.get("turn_reward_clip", {})
    lo, hi = float(clip.get("min", -math.inf)), float(clip.get("max", math.inf))
    turns = episode["turns"]
    active = [m for m in modules if gym in m.applies_to]
    out = []
    for i, turn in enumerate(turns):
        parts: dict[str, float] = {}
        for m in active:
            value = 0.0
            if m.has_turn:
                value += _call(m, "turn_reward", turn, stats)
            if m.has_episode and i == len(turns) - 1:
                value += _call(m, "episode_reward", episode, stats)
            parts[m.name] = m.weight * value
            stats.per_module[m.name] = stats.per_module.get(m.name, 0.0) + m.weight * value
        raw = float(turn.get("env_reward", 0.0)) + sum(parts.values())
        r = min(max(scale * raw, lo), hi)
        turn["module_rewards"] = parts
        turn["reward"] = r
        out.append(r)
    return out
