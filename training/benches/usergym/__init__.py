"""UserGym (UserRL's gyms, paper appendix B): travel, function, persuade, tau, turtle, intention,
telepathy, each a Gymnasium-style text environment with a simulated user (symbolic rules or an LLM,
mixed per episode by `user.<gym>.strategy_mix`). Search is left out: the paper uses it for
evaluation only, through a paid search API.

`BENCH` is the object the trainer and the evaluator use (contract in training/benches/__init__.py):
  BENCH.gyms                                  all seven gyms: the default of `orchestrator start --bench usergym`
  BENCH.load_tasks(split, gyms=None, data_dir=None)
                                              our shipped tasks (data/<gym>/<split>.jsonl), or UserRL's
                                              files when data_dir is given (training/benches/usergym/userrl.py)
  BENCH.make_env(task, snapshot, *, seed, llm=None)
                                              the gym's environment with its user for one episode
  BENCH.system_prompt(task)                   the agent's instructions (tool format, the gym's goal)
  BENCH.agent_prompt(task)                    the system prompt and the first observation
  BENCH.eval_protocol                         fixed evaluation settings (never read from a workspace)
  BENCH.fact_kinds                            kinds of hidden facts the gyms' data has
  BENCH.compile_rules(rules)                  compiled symbolic rules (training.users.symbolic)
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from training.benches.base import Task, TextEnv
from training.benches.usergym import function, intention, persuade, tau, telepathy, travel, turtle
from training.benches.usergym.common import DATA_DIR, check_action, read_jsonl, tools_text
from training.users.mixture import episode_user
from training.users.symbolic import CompiledRules, SymbolicUser, compile_rules

GYMS = ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy")
# The paper's split (section 5, UserGym results): Intention and Telepathy are held out of training
# and evaluated to measure transfer to unseen environments; training samples the other five.
HELD_OUT_GYMS = ("intention", "telepathy")
TRAIN_GYMS = tuple(g for g in GYMS if g not in HELD_OUT_GYMS)
MODULES = {"travel": travel, "function": function, "persuade": persuade, "tau": tau,
           "turtle": turtle, "intention": intention, "telepathy": telepathy}
ENVS = {"travel": travel.TravelEnv, "function": function.FunctionEnv, "persuade": persuade.PersuadeEnv,
        "tau": tau.TauEnv, "turtle": turtle.TurtleEnv, "intention": intention.IntentionEnv,
        "telepathy": telepathy.TelepathyEnv}
DEFAULT_RULES = Path(__file__).resolve().parents[3] / "workspace" / "users" / "usergym" / "rules.json"

_TOOL = ("You act through one tool: write exactly one line that starts with {tools}. You may first "
         "think between <think> and </think>.")
_GOALS = {  # the gym's goal; its tools are common.ACTS, named by tools_text
    "travel": ("TravelGym: plan the user's trip. [search] <aspect and query> searches the database, "
               "[action] <question> asks the user about their preferences, [answer] <option id> "
               "recommends one option (e.g. [answer] H3). The user wants the cheapest option that "
               "meets all their preferences."),
    "function": ("FunctionGym: a hidden function maps four numbers to one. [action] a b c d probes it "
                 "with four integers, [search] test shows the test case, [answer] <number> submits the "
                 "output for the test case (one try)."),
    "persuade": ("PersuadeGym: the user holds a claim you oppose. [answer] <argument> argues against it, "
                 "[action] <question> asks the user why they hold it."),
    "tau": ("TauGym: a customer-service desk. [action] <message> talks to the customer, [search] tools "
            "lists the tools, [answer] {\"name\": TOOL, \"arguments\": {...}} calls one; the first "
            "write call ends the task."),
    "turtle": ("TurtleGym: a lateral-thinking puzzle. [action] <yes/no question> asks the host, "
               "[answer] <the full hidden story> gives your explanation."),
    "intention": ("IntentionGym: the user's request is vague. [action] <one clarifying question> asks "
                  "about one missing detail at a time."),
    "telepathy": ("TelepathyGym: the user thinks of an entity. [action] <yes/no question> asks about it, "
                  "[answer] <name> guesses it."),
}


class UnknownGym(ValueError):
    """A gym name that UserGym does not have."""


def _check_gyms(gyms) -> tuple[str, ...]:
    gyms = tuple(GYMS if gyms is None else gyms)
    for g in gyms:
        if g not in GYMS:
            raise UnknownGym(f"unknown UserGym gym {g!r}: choose from {', '.join(GYMS)}.")
    return gyms


class UserGymBench:
    name = "usergym"
    gyms = GYMS
    train_gyms = TRAIN_GYMS          # what a run trains on unless its config names `gyms`
    held_out_gyms = HELD_OUT_GYMS    # evaluated, never trained on by default; reported apart
    fact_kinds = frozenset().union(*(m.FACT_KINDS for m in MODULES.values()))
    eval_protocol: dict[str, Any] = {
        "split": "test", "gyms": GYMS, "max_steps": {g: 16 for g in GYMS}, "user": "symbolic",
        "rules": str(DEFAULT_RULES), "seed": 0,
        "note": "UserRL's evaluation: test split, every gym but search, reward averaged within and across gyms",
    }

    def __init__(self) -> None:
        self._compiled: tuple[str, CompiledRules] | None = None

    def load_tasks(self, split: str, gyms=None, data_dir=None) -> list[Task]:
        gyms = _check_gyms(gyms)
        if split not in ("train", "test"):
            raise ValueError(f"unknown split {split!r}: choose train or test.")
        if data_dir is not None:
            from training.benches.usergym.userrl import load_userrl
            return load_userrl(Path(data_dir), split, gyms, self.agent_prompt)
        return [t for g in gyms for t in read_jsonl(DATA_DIR / g / f"{split}.jsonl")]

    def compile_rules(self, rules: dict) -> CompiledRules:
        key = json.dumps(rules, sort_keys=True)
        if self._compiled is None or self._compiled[0] != key:
            self._compiled = (key, compile_rules(rules, set(self.fact_kinds)))
        return self._compiled[1]

    def make_env(self, task: Task, snapshot, *, seed: int, llm=None) -> TextEnv:
        if task.gym not in ENVS:
            raise UnknownGym(f"task {task.id!r} is for gym {task.gym!r}, which UserGym does not have.")
        if task.data.get("source") == "userrl" and not task.data.get("runnable", False):
            raise ValueError(f"UserRL task {task.id!r} cannot be run offline: {task.data.get('why')}")
        rules = snapshot.rules.get("usergym")
        if rules is None:
            raise ValueError("the workspace has no users/usergym/rules.json: restore it from the project's "
                             "workspace/ folder.")
        symbolic = SymbolicUser(self.compile_rules(rules))
        symbolic.check_knobs(snapshot.knobs.get("user", {}).get(task.gym, {}))
        user, arm = episode_user(task.gym, snapshot.knobs, symbolic, llm, seed=seed, key=task.id)
        env = ENVS[task.gym](task, snapshot.knobs, user, seed=seed, user_arm=arm,
                             persona=snapshot.personas.get("usergym", ""))
        env.patches = getattr(snapshot, "patches", None)  # env_patches/<gym>.py, if any
        return env

    def system_prompt(self, task: Task) -> str:
        return "You are an agent that interacts with an environment and a user.\n" + \
            _GOALS[task.gym] + "\n" + _TOOL.format(tools=tools_text(task.gym))

    def agent_prompt(self, task: Task) -> str:
        """What the agent reads before its first turn: the system prompt and the gym's first
        observation (training.rollout.start_episode's context, less any worked examples). The
        UserRL loader keeps its words out of the facts' keys; no user is needed to render it."""
        return self.system_prompt(task) + "\n" + ENVS[task.gym](task, {}, None).intro()

    def check_action(self, gym: str, text: str) -> str | None:
        """Why `text` is not a `gym` action (None: it is): the demonstrations' check."""
        return check_action(gym, text)


BENCH = UserGymBench()
