"""A tau2 domain and the state of one episode's world: the agent's database and, in telecom, the
user's device, with the tools that act on them.

`Domain` names a domain's parts (its folder holds data_model.py, tools.py, environment.py,
policy.md, db.json, tasks.json, generate.py). `World` is tau2-bench's `Environment`: it sets up the
initial state (initialization data and actions of a task), routes a tool call to the agent's or
the user's tools (`requestor`), keeps the two sides in sync after every call (telecom: the line's
status and roaming reach the phone), runs environment assertions, and hashes both databases for
the DB check (tau2 `EnvironmentEvaluator`).

Databases are parsed once per file and cached; every world gets its own copy-on-write view of
the cached base (store.py), so a world costs what its tools touch, not the whole file.
"""
from __future__ import annotations

import functools
import json
import pickle
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from training.benches.tau2.store import Base, state_hash
from training.benches.tau2.toolkit import ToolResult, Toolkit

DOMAINS = ("retail", "airline", "telecom")
PACKAGE_DIR = Path(__file__).resolve().parent


class Tau2DataError(ValueError):
    """A tau2 file (tasks, database, policy) is missing or malformed; the message says which."""


@dataclass(frozen=True)
class Domain:
    name: str
    tools: type[Toolkit]                                  # the agent's tools
    normalize_db: Callable[[Any, str], dict]              # raw file data -> our db (checked)
    user_tools: type[Toolkit] | None = None               # the user's tools (telecom's phone)
    normalize_user_db: Callable[[Any, str], dict] | None = None
    default_user_db: Callable[[], dict] | None = None     # a fresh device when no file is given
    sync: Callable[[Toolkit, Toolkit | None], None] | None = None

    @property
    def folder(self) -> Path:
        return PACKAGE_DIR / self.name

    def shipped_policy(self) -> str:
        return (self.folder / "policy.md").read_text()


def get_domain(name: str) -> Domain:
    if name not in DOMAINS:
        raise Tau2DataError(f"unknown tau2 domain {name!r}: choose one of {', '.join(DOMAINS)}.")
    import importlib

    return importlib.import_module(f"training.benches.tau2.{name}.environment").DOMAIN


@functools.lru_cache(maxsize=16)
def _pickled_file(path: str, mtime: float) -> bytes:
    p = Path(path)
    try:
        if p.suffix == ".toml":
            data = tomllib.loads(p.read_text())
        else:
            data = json.loads(p.read_text())
    except (OSError, ValueError) as exc:
        raise Tau2DataError(f"cannot read database {p}: {exc}.") from None
    return pickle.dumps(data)


def read_data_file(path: str | Path) -> Any:
    """A fresh copy of the parsed JSON/TOML file at `path` (parsed once, then copied)."""
    p = Path(path)
    if not p.is_file():
        raise Tau2DataError(f"database file {p} not found.")
    return pickle.loads(_pickled_file(str(p.resolve()), p.stat().st_mtime))


@functools.lru_cache(maxsize=16)
def _base(domain: str, path: str, mtime: float, user: bool) -> Base:
    d = get_domain(domain)
    raw = read_data_file(path)
    fn = d.normalize_user_db if user else d.normalize_db
    return Base(fn(raw, path))


def load_db(domain: str, path: str | Path | None = None, *, user: bool = False) -> dict:
    """A fresh (copy-on-write, see store.py) copy of a domain's database: the shipped one (path
    None or "shipped") or a file."""
    d = get_domain(domain)
    if user and d.user_tools is None:
        raise Tau2DataError(f"the {domain} domain has no user database.")
    if path in (None, "shipped"):
        if user:
            return d.default_user_db()
        path = d.folder / "db.json"
    p = Path(path)
    if not p.is_file():
        raise Tau2DataError(f"{domain} database file {p} not found: put tau2-bench's {p.name} "
                            f"there to run these tasks.")
    return _base(domain, str(p.resolve()), p.stat().st_mtime, user).copy()


class World:
    """One episode's databases and tools (tau2-bench's Environment)."""

    def __init__(self, domain: str, db: dict, user_db: dict | None = None):
        self.domain = get_domain(domain)
        self.tools = self.domain.tools(db)
        self.user_tools = None
        if self.domain.user_tools is not None:
            self.user_tools = self.domain.user_tools(
                user_db if user_db is not None else self.domain.default_user_db())
        self.sync()

    @classmethod
    def for_task(cls, task_data: dict[str, Any]) -> "World":
        """A fresh world for a task: its database, then its initial state applied."""
        world = cls(task_data["domain"], load_db(task_data["domain"], task_data.get("db")),
                    load_db(task_data["domain"], task_data.get("user_db"), user=True)
                    if get_domain(task_data["domain"]).user_tools else None)
        world.apply_initial_state(task_data.get("initial_state"))
        return world

    def sync(self) -> None:
        if self.domain.sync is not None:
            self.domain.sync(self.tools, self.user_tools)

    def toolkit(self, requestor: str) -> Toolkit:
        if requestor == "user":
            if self.user_tools is None:
                raise Tau2DataError(f"the {self.domain.name} domain has no user tools.")
            return self.user_tools
        if requestor != "assistant":
            raise Tau2DataError(f"requestor must be 'assistant' or 'user', not {requestor!r}.")
        return self.tools

    def call(self, name: str, arguments: Any, requestor: str = "assistant") -> ToolResult:
        """One tool call by the agent ("assistant") or the user; errors come back as results."""
        result = self.toolkit(requestor).call(name, arguments)
        self.sync()
        return result

    def run_function(self, env_type: str, func_name: str, arguments: dict) -> Any:
        """Run any function of either side (initialization actions, assertions); errors raise."""
        value = self.toolkit(env_type).run_function(func_name, arguments or {})
        self.sync()
        return value

    def apply_initial_state(self, initial_state: dict | None) -> None:
        """tau2 `set_state`: initialization data merged into the databases, then actions run."""
        if not initial_state:
            return
        data = initial_state.get("initialization_data") or {}
        if data.get("agent_data"):
            deep_update(self.tools.db, data["agent_data"])
        if data.get("user_data"):
            deep_update(self.toolkit("user").db, data["user_data"])
        for action in initial_state.get("initialization_actions") or []:
            self.run_function(action["env_type"], action["func_name"], action.get("arguments"))
        if initial_state.get("message_history"):
            raise Tau2DataError("tasks with a message_history in their initial state are not "
                                "supported; drop them or start them from scratch.")

    def check_assertion(self, assertion: dict) -> bool:
        """An environment assertion (telecom): the function's boolean equals assert_value."""
        try:
            value = self.run_function(assertion["env_type"], assertion["func_name"],
                                      assertion.get("arguments") or {})
        except (ValueError, KeyError, TypeError):
            return False
        return bool(value) == bool(assertion.get("assert_value", True))

    def hashes(self) -> tuple[str, str | None]:
        """(agent db hash, user db hash or None): the DB check compares both."""
        user = state_hash(self.user_tools.db) if self.user_tools is not None else None
        return state_hash(self.tools.db), user


def deep_update(target: dict, update: dict) -> None:
    for key, value in update.items():
        if isinstance(value, dict) and isinstance(target.get(key), dict):
            deep_update(target[key], value)
        else:
            target[key] = value
