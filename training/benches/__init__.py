"""The benches: UserGym's gyms, ColBench backend programming, tau2's domains.

Each bench package exposes `BENCH`, an object with:
  name: str                      canonical name ("usergym" | "colbench" | "tau2")
  gyms: tuple[str, ...]          its gyms (UserGym's seven; ("colbench",); tau2's three domains)
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
