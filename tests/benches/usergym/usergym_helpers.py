"""Helpers for the UserGym tests: a snapshot of the project's default workspace with knob overrides,
and an environment for a hand-made or shipped task."""
from __future__ import annotations

import copy
import dataclasses
from pathlib import Path

from training.benches.usergym import BENCH
from training.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[3]
_BASE = Snapshot.from_dir(ROOT / "workspace")


def snapshot(env=None, user=None, reward=None) -> Snapshot:
    """The default workspace with `env`/`user` = {gym: {knob: value}} and `reward` = {knob: value} set."""
    knobs = copy.deepcopy(_BASE.knobs)
    for group, over in (("env", env or {}), ("user", user or {})):
        for gym, values in over.items():
            knobs[group][gym].update(values)
    knobs["reward"].update(reward or {})
    return dataclasses.replace(_BASE, knobs=knobs)


def first_task(gym: str, split: str = "train", index: int = 0):
    return BENCH.load_tasks(split, [gym])[index]


def make(task, seed: int = 0, **over):
    env = BENCH.make_env(task, snapshot(**over), seed=seed)
    env.reset()
    return env


def run(env, actions):
    """Step through `actions`; returns the list of (obs, reward, terminated, truncated, info)."""
    return [env.step(a) for a in actions]
