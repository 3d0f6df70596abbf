"""What a reward module or a user knob would have done on the run's recent episodes: replayed,
not guessed, before an intervention is committed (and by the gate, for a commit whose Expect
line names a gym).

- `module_pay`: the module is imported and run in the sandbox the gate and the trainer use
  (training.sandbox), on every turn and episode of the recent trajectories whose gym it applies
  to, with `first_steps` marked as the trainer marks it (training.steps); per gym, how many
  turns and episodes it paid and how much.
- `user_disclosures`: the symbolic user replayed on the recorded agent turns
  (orchestrator.rule_replay, a child process) with the current and with the proposed user knobs;
  per gym, how many facts it disclosed under each.

Why: the built-in agent once enabled `eau_progress` "for function", which pays first disclosures,
while no function turn of the run had one (0 of 54, the CPU demo): a commit that could not pay.
"""
from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.novelty import repeated_marks
from training.steps import mark_first_steps

RECENT_FILES = 3           # the trajectory files the diagnosis reads (diagnostics.read_episodes)
OLDER_FILES = 12           # more, for a gym none of the newest files holds (older_episodes)
CALL_S = 5.0               # one call over all replayed turns (or episodes) of a module
LOAD_S = 5.0


@dataclass
class Pay:
    """What a module paid in one gym on the replayed episodes."""

    episodes: int = 0
    turns: int = 0
    paid_turns: int = 0          # turns (an episode's last turn for episode_reward) with value != 0
    paid_episodes: int = 0
    total: float = 0.0
    repeat_turns: int = 0        # paid turns that repeat an earlier turn of their episode
    on_repeats: float = 0.0      # what those were paid

    @property
    def pays(self) -> bool:
        return self.paid_turns > 0

    def text(self, gym: str) -> str:
        return (f"{self.paid_turns} of {self.turns} recent {gym} turns ({self.paid_episodes} of "
                f"{self.episodes} episodes), {self.total:+.2f} in all")


def recent_episodes(run_dir: Path | str | None) -> list[dict[str, Any]]:
    """The episodes the diagnosis reads: the newest RECENT_FILES trajectory files of the run."""
    from orchestrator import diagnostics

    return diagnostics.read_episodes(run_dir, RECENT_FILES) if run_dir else []


def older_episodes(run_dir: Path | str, gyms: list[str]) -> list[dict[str, Any]]:
    """Episodes of `gyms` from the OLDER_FILES trajectory files before the newest RECENT_FILES:
    with 4 episodes a step over 5 gyms (the CPU preset) a gym is often absent from 3 steps."""
    from orchestrator import diagnostics

    files = sorted((Path(run_dir) / "trajectories").glob("step-*.jsonl"))
    if len(files) <= RECENT_FILES:
        return []
    eps = diagnostics.read_episodes(run_dir, RECENT_FILES + OLDER_FILES)
    # read_episodes reads the newest files last: the episodes before the newest RECENT_FILES
    # files' are the older ones (one read of the folder, not two)
    first_recent = int(files[-RECENT_FILES].stem.split("-")[1])
    return [ep for ep in eps if ep.get("gym") in gyms and (ep.get("step") or 0) < first_recent]


def _marked(episodes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Copies with `first_steps` on every turn, as the trainer gives them to the modules."""
    out = []
    for ep in episodes:
        if isinstance(ep, dict) and isinstance(ep.get("turns"), list):
            ep = copy.deepcopy(ep)
            mark_first_steps(ep)
            out.append(ep)
    return out


_APPLIES = "list(APPLIES_TO)"
_VALUES = ("[float({fn}(x)) if g in APPLIES_TO else 0.0 for g, x in {pairs}] "
           "if callable(globals().get('{fn}')) else None")


def module_pay(source: str, episodes: list[dict[str, Any]]) -> tuple[dict[str, Pay], str | None]:
    """(gym -> Pay for every gym of APPLIES_TO with replayed episodes, None), or ({}, why not)
    when the module cannot be run (the gate's own checks name such a module's fault)."""
    from training.sandbox import Limits, run_calls      # plain Python, no torch

    eps = _marked(episodes)
    turns = [(ep.get("gym"), t) for ep in eps for t in ep["turns"]]
    limits = Limits(wall_s=LOAD_S, cpu_s=4 * (LOAD_S + 2 * CALL_S), memory_mb=512)
    meta, on_turns, on_eps = run_calls(source, [
        _APPLIES, _VALUES.format(fn="turn_reward", pairs=repr(turns)),
        _VALUES.format(fn="episode_reward", pairs=repr([(ep.get("gym"), ep) for ep in eps]))],
        limits, per_call_wall_s=CALL_S)
    for res in (meta, on_turns, on_eps):
        if not res.ok:
            return {}, f"the module could not be replayed ({(res.error or res.kind).strip()})"
    applies = {g for g in meta.value or [] if isinstance(g, str)}
    per_turn = list(on_turns.value or [0.0] * len(turns))
    per_ep = list(on_eps.value or [0.0] * len(eps))
    out: dict[str, Pay] = {}
    k = 0
    for ep, ep_value in zip(eps, per_ep):
        values = per_turn[k:k + len(ep["turns"])]
        k += len(ep["turns"])
        if ep.get("gym") not in applies:
            continue
        if values:
            values[-1] += ep_value
        pay = out.setdefault(ep["gym"], Pay())
        pay.episodes += 1
        pay.turns += len(values)
        paid = [v for v in values if v != 0]
        pay.paid_turns += len(paid)
        pay.paid_episodes += int(bool(paid))
        pay.total += sum(values)
        for v, rep in zip(values, repeated_marks(ep["turns"])):
            if v != 0 and rep:
                pay.repeat_turns += 1
                pay.on_repeats += v
    return out, None


def user_disclosures(bench: str, rules: dict[str, Any], user_knobs: dict[str, Any],
                     episodes: list[dict[str, Any]], measure: str = "disclosed") -> dict[str, int] | None:
    """gym -> what the symbolic user would disclose on the recorded agent turns under these user
    knobs ({gym: knobs}): `disclosed`, the distinct facts per episode, or `known`, the facts known
    after each turn (so a fact disclosed sooner counts more), summed over the gym's episodes.
    Gyms none of whose episodes has a task the bench loads are absent; None when the replay is
    unavailable (the bench cannot load its tasks)."""
    from orchestrator.rule_replay import replay

    result = replay(bench, rules, user_knobs, episodes)
    if result.get("skipped") or result.get("errors"):
        return None
    return {str(g): int(n) for g, n in (result.get(measure) or {}).items()}


def load_rules(workspace: Path | str, bench: str) -> dict[str, Any] | None:
    try:
        return json.loads((Path(workspace) / "users" / bench / "rules.json").read_text())
    except (OSError, ValueError):
        return None
