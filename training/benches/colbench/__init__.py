"""ColBench backend programming (paper appendix B): write a Python function from an
underspecified description by asking a collaborator who holds the reference; hidden tests score it.

Files (same layout as the other benches):
  spec.py, families_*.py, tasks.py   seeded task families and the generator of data/{train,test}.jsonl
  data.py                            loader: ours, or original-format JSONL given by path
  env.py                             the episode (ColBenchEnv): questions, min_questions, answer
  scorer.py                          Pass / Success from sandboxed hidden tests (training/sandbox.py)
The symbolic collaborator's rules live in the workspace: users/colbench/rules.json.

`BENCH` follows training/benches/__init__.py.
"""
from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

from training.benches.base import Task
from training.benches.colbench import data
from training.benches.colbench.env import GYM, ColBenchEnv, check_action as _check_turn
from training.benches.colbench.scorer import score_answer, score_many
from training.benches.colbench.spec import FACT_KINDS
from training.users.mixture import episode_user
from training.users.symbolic import CompiledRules, SymbolicUser, UnknownFactKind, compile_rules

DEFAULT_RULES = Path(__file__).resolve().parents[3] / "workspace" / "users" / GYM / "rules.json"

SYSTEM_PROMPT = """You are a coding assistant working with a human collaborator on one Python function.
The task description you get is incomplete: the collaborator knows the details (what the arguments
mean, what exactly to return, special cases, business rules) and answers your questions.
Each turn, either ask the collaborator a question, or submit your solution by writing
I WANT TO ANSWER:
followed by the complete Python code of the function (imports included). You have a limited number
of turns, and your code is scored by hidden unit tests, so ask about what you need before answering."""


@functools.lru_cache(maxsize=1)
def known_fact_kinds() -> frozenset[str]:
    """Kinds of the shipped data (what `withhold_kinds` may name)."""
    return frozenset(data.fact_kinds())


@functools.lru_cache(maxsize=16)
def _compile(rules_json: str, kinds: frozenset[str]) -> CompiledRules:
    return compile_rules(json.loads(rules_json), set(kinds))


def check_withhold(knobs: dict[str, Any], task: Task | None = None) -> list[str]:
    """The kinds `user.colbench.withhold_kinds` names; refuses a kind no task has (paper table 7:
    the filter named `shape` while the leak was `return`)."""
    kinds = known_fact_kinds() | (task.fact_kinds() if task else set())
    withheld = list(knobs.get("user", {}).get(GYM, {}).get("withhold_kinds", []) or [])
    for kind in withheld:
        if kind not in kinds:
            raise UnknownFactKind(f"user.colbench.withhold_kinds names {kind!r}, but no ColBench task has "
                                  f"facts of that kind (kinds in the data: {', '.join(sorted(kinds))}).")
    return withheld


def symbolic_user(snapshot, task: Task | None = None) -> SymbolicUser:
    rules = snapshot.rules.get(GYM) if snapshot is not None else None
    if rules is None:
        rules = json.loads(DEFAULT_RULES.read_text())
    kinds = known_fact_kinds() | (task.fact_kinds() if task else set())
    return SymbolicUser(_compile(json.dumps(rules, sort_keys=True), frozenset(kinds)))


def make_env(task: Task, snapshot, *, seed: int, llm=None) -> ColBenchEnv:
    """The episode with its collaborator: symbolic with probability user.colbench.strategy_mix,
    else `llm` (seeded per task and seed; without an LLM backend, always symbolic)."""
    check_withhold(snapshot.knobs, task)
    user, arm = episode_user(GYM, snapshot.knobs, symbolic_user(snapshot, task), llm,
                             seed=seed, key=task.id)
    env = ColBenchEnv(task, snapshot.knobs, user, seed=seed, user_arm=arm)
    env.patches = getattr(snapshot, "patches", None)      # env_patches/colbench.py, if any
    return env


def system_prompt(task: Task) -> str:
    return SYSTEM_PROMPT


def check_action(gym: str, text: str) -> str | None:
    """Why `text` is not a ColBench turn (None: it is): the demonstrations' check."""
    return _check_turn(text)


class _ColBench:
    name = "colbench"
    gyms = (GYM,)
    # Fixed evaluation (DESIGN.md "Evaluation is walled off"; keys as training/evaluate.py reads
    # them): the test split, the paper's 10 turns, no question quota, a 400-character reply limit
    # and the default collaborator, whatever an experiment's workspace says.
    eval_protocol = {"split": "test", "max_steps": {GYM: 10},
                     "user": {GYM: {"strategy_mix": 0.5, "facts_per_reply": 1, "match_threshold": 0.5,
                                    "volunteer_interval": 0, "max_reveals": 8, "withhold_kinds": []}},
                     "knobs": {"env": {GYM: {"min_questions": 0, "human_response_char_limit": 400}}},
                     "metrics": {"score": "Pass", "success": "Success"}}

    load_tasks = staticmethod(data.load_tasks)
    make_env = staticmethod(make_env)
    system_prompt = staticmethod(system_prompt)
    check_action = staticmethod(check_action)
    fact_kinds = frozenset(FACT_KINDS)        # as UserGym's BENCH.fact_kinds: what the data has
    check_withhold = staticmethod(check_withhold)
    score_answer = staticmethod(score_answer)
    score_many = staticmethod(score_many)


BENCH = _ColBench()
