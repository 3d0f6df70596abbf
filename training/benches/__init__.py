"""The benches: UserGym's gyms, ColBench backend programming, tau2's domains.

Each bench package exposes `BENCH`, an object with:
  name: str                      canonical name ("usergym" | "colbench" | "tau2")
  gyms: tuple[str, ...]          its gyms (UserGym's seven; ("colbench",); tau2's three domains)
  train_gyms (optional)          the gyms a run trains on when its config names none (UserGym
                                 holds Intention and Telepathy out, as the paper does); else gyms
  load_tasks(split, gyms=None, data_dir=None) -> list[Task]
                                 our shipped tasks, or the original files under data_dir
  make_env(task, snapshot, *, seed, llm=None) -> TextEnv
                                 the environment with its user (the symbolic/LLM mixture drawn per
                                 episode from `user.<gym>.strategy_mix`, seeded); `llm` is an LLM
                                 user backend (training.users.llm) or None (symbolic arm only)
  system_prompt(task) -> str     the agent's instructions for that task (tools, answer format)
  eval_protocol: dict            fixed evaluation settings (split, max_steps, user), never from a workspace
"""
from __future__ import annotations

import importlib
from pathlib import Path

# The paper's spellings and ours; matched without regard to case.
_ALIASES = {"usergym": "usergym", "user-gym": "usergym", "user_gym": "usergym",
            "colbench": "colbench", "col-bench": "colbench",
            "tau2": "tau2", "tau2-bench": "tau2", "tau2bench": "tau2", "tau2_bench": "tau2",
            "τ2": "tau2", "τ2-bench": "tau2"}

BENCH_NAMES = ("usergym", "colbench", "tau2")


class UnknownBench(ValueError):
    pass


def canonical_bench(name: str) -> str:
    key = name.strip().lower()
    if key not in _ALIASES:
        raise UnknownBench(f"unknown bench {name!r}: choose one of usergym, colbench, tau2.")
    return _ALIASES[key]


def get_bench(name: str):
    return importlib.import_module(f"training.benches.{canonical_bench(name)}").BENCH


def train_gyms(bench) -> tuple[str, ...]:
    """The gyms a run trains on when its config names none: the bench's training gyms (UserGym
    holds Intention and Telepathy out, as the paper does), else all of its gyms."""
    return tuple(getattr(bench, "train_gyms", None) or bench.gyms)


class TaskDataError(ValueError):
    """A bench's tasks cannot be read from the folder a user named; the message says which."""


def unrunnable(tasks) -> dict[str, tuple[int, str]]:
    """gym -> (how many, why) of tasks that cannot run offline: loaded from original files that
    lack what the environment needs (UserRL ships no TravelGym option database, for one)."""
    out: dict[str, tuple[int, str]] = {}
    for t in tasks:
        if t.data.get("runnable", True) is False:
            n, why = out.get(t.gym, (0, str(t.data.get("why") or "not runnable offline")))
            out[t.gym] = (n + 1, why)
    return out


def load_bench_tasks(bench, split: str | None, gyms, data_dir: str | None = None, *,
                     strict: bool = True) -> list:
    """`bench.load_tasks` with a user's data folder checked first: one sentence naming what is
    missing (the folder, the gyms it holds no `split` tasks for, the tasks it holds that cannot
    run) instead of a traceback or an empty run. `data_dir` "" or None: the tasks shipped in the
    project. `strict=False` (the evaluation, which records them as deviations): gyms without tasks
    and tasks that cannot run are returned as found, not refused."""
    gyms = list(gyms) if gyms else None
    if not data_dir:
        return list(bench.load_tasks(split, gyms=gyms) if gyms else bench.load_tasks(split))
    folder = Path(data_dir).expanduser()
    if not folder.is_dir():
        raise TaskDataError(f"data folder {folder} does not exist: give the folder of the "
                            f"{bench.name} files (UserRL's repository, ColBench's JSONL, or "
                            f"tau2-bench's repository).")
    try:
        tasks = list(bench.load_tasks(split, gyms=gyms, data_dir=folder))
    except ValueError as exc:            # the loaders' own sentence (which folder they expect)
        raise TaskDataError(str(exc)) from None
    except (OSError, KeyError) as exc:
        raise TaskDataError(f"{bench.name} tasks cannot be read from {folder}: {exc}.") from None
    if not strict:
        return tasks
    missing = [g for g in (gyms or bench.gyms) if not any(t.gym == g for t in tasks)]
    if missing:
        raise TaskDataError(f"{folder} holds no {split} tasks for {', '.join(missing)}: add their "
                            f"files or leave those gyms out (--set 'gyms=[...]').")
    bad = unrunnable(tasks)
    if bad:
        raise TaskDataError(f"{folder}'s " + "; ".join(f"{g} tasks ({n}) cannot run: {why}"
                                                       for g, (n, why) in sorted(bad.items()))
                            + ": leave those gyms out (--set 'gyms=[...]').")
    return tasks
