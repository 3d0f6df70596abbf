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
module and is counted in `reward/module_errors` and `reward/module_errors/<name>`, with the
failure's line in the turn's `module_errors` of the trajectory; training goes on (a result nested
a thousand levels deep once crashed the step with RecursionError:
tests/faults/test_fault_os_walls.py). A module that fails to import, or whose sandbox cannot
start, makes the whole snapshot fail to load (training.live keeps the previous one).
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
    """What the reward modules did in one step, in all and per module: calls, failed calls (each
    scored 0) and the weighted credit paid."""
    errors: int = 0
    calls: int = 0
    per_module: dict[str, float] = field(default_factory=dict)   # summed weighted contribution
    module_errors: dict[str, int] = field(default_factory=dict)
    module_calls: dict[str, int] = field(default_factory=dict)

    @classmethod
    def merged(cls, parts: list["ScoreStats"]) -> "ScoreStats":
        """The sum of several processes' stats (training.distributed gathers one per rank)."""
        out = cls()
        for p in parts:
            out.errors += p.errors
            out.calls += p.calls
            for mine, theirs in ((out.per_module, p.per_module), (out.module_errors, p.module_errors),
                                 (out.module_calls, p.module_calls)):
                for name, value in theirs.items():
                    mine[name] = mine.get(name, 0) + value
        return out

    def metrics(self, episodes: int) -> dict[str, float]:
        """The step's lines of metrics.jsonl: `reward/module_errors` and `reward/module_calls` in
        all and per module (`reward/module_errors/<name>`), and each module's mean credit per
        episode (`reward/module/<name>`). A module whose calls fail scores 0 on those turns, so
        these counts are the only trace of it in the metrics: orchestrator.diagnostics reads them."""
        out: dict[str, float] = {"reward/module_errors": self.errors,
                                 "reward/module_calls": self.calls}
        for name, value in self.per_module.items():
            out[f"reward/module/{name}"] = value / max(episodes, 1)
        for name, calls in self.module_calls.items():
            out[f"reward/module_errors/{name}"] = self.module_errors.get(name, 0)
            out[f"reward/module_calls/{name}"] = calls
        return out


def errors_text(row: dict[str, Any]) -> str:
    """"" for a metrics.jsonl row where every reward-module call succeeded; else the words the
    step lines end with (the trainer's log, `orchestrator start`'s lines), e.g.
    "  reward modules failed 9 of 18 calls (late_fail 9 of 12)"."""
    errors = row.get("reward/module_errors") or 0
    if not errors:
        return ""
    failed = {key.rsplit("/", 1)[1]: value for key, value in sorted(row.items())
              if key.startswith("reward/module_errors/") and value}
    each = ", ".join(f"{name} {n} of {row.get(f'reward/module_calls/{name}', '?')}"
                     for name, n in failed.items())
    return (f"  reward modules failed {errors} of {row.get('reward/module_calls', '?')} calls"
            + (f" ({each})" if each else ""))


def _failure(res) -> str:
    """One line saying how a call failed: the exception's last line, or the sandbox's kind."""
    if res.ok:
        return f"returned {res.value!r:.80}, not a finite number"
    lines = (res.error or "").strip().splitlines()
    return lines[-1][:200] if lines else res.kind


def _call(module: RewardModule, func: str, arg: dict, stats: ScoreStats,
          failures: dict[str, str]) -> float:
    """The module's value for one turn or episode, 0 when it fails; counts the call and the
    failure, and puts the failure's line in `failures` under the module's name."""
    stats.calls += 1
    stats.module_calls[module.name] = stats.module_calls.get(module.name, 0) + 1
    try:
        res = module.worker.call(func, [arg], timeout_s=CALL_TIMEOUT_S)
    except Exception as exc:    # the sandbox failing (a process it cannot start): counted, 0
        res = None
        failures[module.name] = f"the sandbox failed ({type(exc).__name__}: {exc})"[:200]
    if res is not None and res.ok and is_finite_number(res.value):
        return float(res.value)
    if res is not None:
        failures[module.name] = _failure(res)
    stats.errors += 1
    stats.module_errors[module.name] = stats.module_errors.get(module.name, 0) + 1
    return 0.0


def score_episode(episode: dict[str, Any], modules: list[RewardModule], knobs: dict[str, Any],
                  stats: ScoreStats) -> list[float]:
    """Final per-turn rewards of one episode (formula in the module docstring); also writes
    turn["reward"], turn["module_rewards"] and turn["first_steps"] in place, and
    turn["module_errors"] (module -> how its call failed) on a turn where one failed.
    `first_steps` (the steps a turn took first in its episode, training.steps) is written before
    any module runs, so a module can pay a step once per episode, at the turn that first took it."""
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
        failures: dict[str, str] = {}
        for m in active:
            value = 0.0
            if m.has_turn:
                value += _call(m, "turn_reward", turn, stats, failures)
            if m.has_episode and i == len(turns) - 1:
                value += _call(m, "episode_reward", episode, stats, failures)
            parts[m.name] = m.weight * value
            stats.per_module[m.name] = stats.per_module.get(m.name, 0.0) + m.weight * value
        raw = float(turn.get("env_reward", 0.0)) + sum(parts.values())
        r = min(max(scale * raw, lo), hi)
        turn["module_rewards"] = parts
        if failures:                  # the trajectory says why a module's 0 was a failure
            turn["module_errors"] = failures
        turn["reward"] = r
        out.append(r)
    return out
