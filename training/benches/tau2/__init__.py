"""tau2-bench (paper appendix B): customer service in three domains, retail, airline and telecom.

The agent follows a domain policy, calls tools that read and write the domain's database, and
talks to a simulated user; in telecom the user also acts on their own phone (dual control).
A task is solved when the final state matches the annotated target (DB hash, environment
assertions) and all required information was told to the user (scoring.py).

Layout: one folder per domain with the same files (data_model.py, tools.py, environment.py,
generate.py, policy.md, db.json, tasks.json; telecom adds user_tools.py for the phone); shared
code: toolkit.py (typed tools), domain.py (a world of databases and tools), loader.py (our tasks
and tau2-bench's files by path), scoring.py, env.py (the text environment), users.py.

`BENCH` is the object training/benches/__init__.py describes.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from training.benches.base import Task
from training.benches.tau2.domain import DOMAINS, Tau2DataError, get_domain
from training.benches.tau2.env import AGENT_STOP_TOKEN, Tau2Env, check_action
from training.benches.tau2.loader import find_domain_dir, load_domain_tasks, load_shipped_tasks
from training.benches.tau2.users import FACT_KINDS, symbolic_user

ACTION_FORMAT = f"""## How to act
Each turn, do exactly one of these:
- call one tool: write <tool_call>{{"name": "TOOL_NAME", "arguments": {{...}}}}</tool_call>
  and nothing else; you will get the tool's result;
- write a plain message to the customer;
- when the conversation is over, write {AGENT_STOP_TOKEN}.
Follow the policy. Before any action that changes the database, tell the customer what you will
do and wait for their explicit "yes"."""


class Tau2Bench:
    name = "tau2"
    gyms = DOMAINS
    fact_kinds = FACT_KINDS      # the kinds scenario facts can have (loader.scenario_facts)
    # Fixed evaluation (DESIGN.md "Evaluation is walled off"): tau2's own protocol, whatever the
    # workspace says: the test split, 50 agent turns, the LLM user at temperature 0 (10 tool
    # errors end an episode: env.MAX_ERRORS).
    eval_protocol: dict[str, Any] = {"split": "test", "max_steps": 50, "user": "llm",
                                     "user_temperature": 0.0}

    def load_tasks(self, split: str, gyms: list[str] | tuple[str, ...] | None = None,
                   data_dir: str | Path | None = None) -> list[Task]:
        """Our shipped tasks, or tau2-bench's files under `data_dir` (repository root, its
        data/tau2/domains folder, or a folder holding the domain folders)."""
        domains = tuple(gyms) if gyms else DOMAINS
        for d in domains:
            get_domain(d)   # refuses an unknown domain with a clear sentence
        tasks: list[Task] = []
        for d in domains:
            if data_dir is None:
                tasks += load_shipped_tasks(d, split)
                continue
            folder = find_domain_dir(data_dir, d)
            if folder is None:
                raise Tau2DataError(f"no tau2 {d} tasks under {data_dir}: give the tau2-bench "
                                    f"repository or its data/tau2/domains folder.")
            tasks += load_domain_tasks(folder, d, split)
        return tasks

    def make_env(self, task: Task, snapshot, *, seed: int, llm=None) -> Tau2Env:
        """The episode's environment; the user arm is drawn per episode from
        user.<domain>.strategy_mix (training/users/mixture.py), symbolic when `llm` is None."""
        from training.users.mixture import episode_user

        rules = snapshot.rules.get("tau2")
        if rules is None:
            raise ValueError("the workspace has no users/tau2/rules.json: restore it from the "
                             "project's workspace/ folder.")
        symbolic = _symbolic_for(json.dumps(rules, sort_keys=True), rules)
        symbolic.check_knobs(snapshot.knobs.get("user", {}).get(task.gym, {}))
        user, arm = episode_user(task.gym, snapshot.knobs, symbolic, llm, seed=seed, key=task.id)
        return Tau2Env(task, snapshot.knobs, user, seed=seed, arm=arm,
                       persona=snapshot.personas.get("tau2", ""))

    def check_action(self, gym: str, text: str) -> str | None:
        """Why `text` is not a `gym` agent turn (None: it is): the demonstrations' check."""
        specs = get_domain(gym).tools.specs()
        return check_action(text, {t.name: set(t.parameters.get("properties", {})) for t in specs})

    def system_prompt(self, task: Task) -> str:
        """The agent's instructions: the domain policy, the tools (JSON schemas), the format."""
        return "\n\n".join([
            f"You are a customer service agent ({task.gym}). Help the customer within the policy.",
            "## Policy\n" + task.data["policy"].strip(),
            "## Tools\n" + render_tools(get_domain(task.gym).tools.specs()),
            ACTION_FORMAT])


_EXAMPLE = re.compile(r"such as (\'[^\']*\'|\"[^\"]*\"|\[[^\]]*\]|\{[^}]*\})")


def _type(schema: dict) -> str:
    if "enum" in schema:
        return "|".join(json.dumps(v) for v in schema["enum"])
    if schema.get("type") == "array":
        return f"list[{_type(schema.get('items', {}))}]"
    if schema.get("type") == "object" and "properties" in schema:
        return "{" + ", ".join(schema["properties"]) + "}"
    return {"string": "str", "integer": "int", "number": "float", "boolean": "bool"}.get(
        schema.get("type", ""), schema.get("type", "any"))


def render_tools(specs) -> str:
    """One line per tool: its signature (argument types, an example value from the docstring) and
    its description. Shorter than JSON schemas by half, which small policies on a CPU budget need
    (about 1,900 prompt tokens instead of 3,100 for retail)."""
    lines = []
    for spec in specs:
        args = []
        for name, schema in spec.parameters["properties"].items():
            arg = f"{name}: {_type(schema)}"
            example = _EXAMPLE.search(schema.get("description", ""))
            if example and "enum" not in schema:
                arg += f" (e.g. {example.group(1)})"
            if name not in spec.parameters["required"]:
                arg += " = optional"
            args.append(arg)
        lines.append(f"- {spec.name}({', '.join(args)}) [{spec.kind}]: {spec.description}")
    return "\n".join(lines)


_SYMBOLIC_CACHE: dict[str, Any] = {}


def _symbolic_for(key: str, rules: dict):
    if key not in _SYMBOLIC_CACHE:
        _SYMBOLIC_CACHE.clear()   # one live rules version at a time
        _SYMBOLIC_CACHE[key] = symbolic_user(rules)
    return _SYMBOLIC_CACHE[key]


BENCH = Tau2Bench()
