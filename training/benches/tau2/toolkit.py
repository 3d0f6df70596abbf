"""Tools as typed methods: the base class every tau2 domain's tool set derives from.

A tool is a method marked with `@tool("read" | "write" | "generic")`. Its type hints are the
argument types that calls are checked against, and its docstring is the description the agent
sees (summary, then an `Args:` section with one line per argument), as in tau2-bench's toolkits.
`Toolkit.call(name, arguments)` never raises for a bad call: an unknown tool, a missing or
ill-typed argument, or a failed precondition inside the tool (a `ToolError`/`ValueError`) comes
back as `ToolResult(error=True, content="Error: ...")`, which is what the agent reads, the way
tau2-bench turns tool exceptions into tool messages.

The database is plain JSON data (dicts and lists); its state hash (store.state_hash) is what the
DB check of the scorer compares (tau2: `get_db_hash`).
"""
from __future__ import annotations

import inspect
import json
import re
import types
import typing
from dataclasses import dataclass
from typing import Any, Callable, Literal, Union

ToolKind = Literal["read", "write", "generic"]


class ToolError(ValueError):
    """A tool refused the call (record not found, wrong status...); the agent reads the message."""


def tool(kind: ToolKind) -> Callable[[Callable], Callable]:
    """Mark a method as a tool the agent (or, in telecom, the user) may call."""
    if kind not in ("read", "write", "generic"):
        raise ValueError(f"tool kind must be read, write or generic, not {kind!r}")

    def mark(fn: Callable) -> Callable:
        fn.__tool_kind__ = kind
        return fn

    return mark


@dataclass(frozen=True)
class ToolResult:
    content: str          # what the caller reads: JSON of the returned record, a message, or "Error: ..."
    error: bool = False


@dataclass(frozen=True)
class ToolSpec:
    """A tool as the agent sees it: name, read/write kind, description and JSON-Schema parameters."""

    name: str
    kind: str
    description: str
    parameters: dict[str, Any]

    def as_openai(self) -> dict[str, Any]:
        return {"type": "function", "function": {"name": self.name, "description": self.description,
                                                 "parameters": self.parameters}}


class Toolkit:
    """Base of a domain's tools. Subclasses hold `self.db` (JSON data) and define marked methods."""

    def __init__(self, db: dict[str, Any]):
        self.db = db

    # -- discovery -------------------------------------------------------------------------------
    @classmethod
    def tool_names(cls) -> list[str]:
        return sorted(n for n, f in inspect.getmembers(cls, inspect.isfunction)
                      if getattr(f, "__tool_kind__", None))

    @classmethod
    def tool_kind(cls, name: str) -> str:
        return getattr(cls, name).__tool_kind__

    @classmethod
    def specs(cls) -> list[ToolSpec]:
        return [tool_spec(getattr(cls, n)) for n in cls.tool_names()]

    def has_tool(self, name: str) -> bool:
        return name in self.tool_names()

    # -- calling ---------------------------------------------------------------------------------
    def call(self, name: str, arguments: Any) -> ToolResult:
        """Validate and run one tool call; failures are returned as an error result, never raised."""
        if not isinstance(name, str) or not self.has_tool(name):
            return ToolResult(f"Error: unknown tool {name!r}; available tools: "
                              f"{', '.join(self.tool_names())}", True)
        try:
            kwargs = check_arguments(getattr(type(self), name), arguments)
            value = getattr(self, name)(**kwargs)
        except (ToolError, ValueError, KeyError, TypeError) as exc:
            # KeyError/TypeError: a malformed nested record the type check let through.
            return ToolResult(f"Error: {exc_message(exc)}", True)
        return ToolResult(to_content(value))

    def run_function(self, name: str, arguments: dict[str, Any]) -> Any:
        """Run any public method (tool or not: initial-state set-up, assertions); errors raise."""
        if name.startswith("_") or not callable(getattr(self, name, None)):
            raise ToolError(f"no function {name!r} in {type(self).__name__}")
        return getattr(self, name)(**arguments)

    def db_hash(self) -> str:
        from training.benches.tau2.store import state_hash

        return state_hash(self.db)


def calculate_expression(expression: str) -> str:
    """The `calculate` tool of every domain: arithmetic on numbers with + - * / and parentheses,
    rounded to 2 decimals. `**` is refused: `9**9**9**9` would hang the trainer's process."""
    if not expression.strip() or any(c not in "0123456789+-*/(). " for c in expression) \
            or "**" in expression:
        raise ToolError("Invalid characters in expression")
    try:
        value = eval(expression, {"__builtins__": {}}, {})   # only digits and operators pass
    except (SyntaxError, ZeroDivisionError, TypeError) as exc:
        raise ToolError(f"Invalid expression: {exc}") from None
    return str(round(float(value), 2))


def exc_message(exc: BaseException) -> str:
    if isinstance(exc, KeyError):
        return f"missing field {exc.args[0]!r}" if exc.args else "missing field"
    return str(exc)


def to_content(value: Any) -> str:
    """A tool's return value as the text the caller reads: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    return json.dumps(value, default=str)


# -- argument checking ---------------------------------------------------------------------------
def check_arguments(fn: Callable, arguments: Any) -> dict[str, Any]:
    """Check `arguments` against `fn`'s signature and type hints; return the kwargs to call with."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, dict):
        raise ToolError("arguments must be a JSON object mapping argument names to values")
    sig = inspect.signature(fn)
    hints = typing.get_type_hints(fn)
    params = {n: p for n, p in sig.parameters.items() if n != "self"}
    unknown = sorted(set(arguments) - set(params))
    if unknown:
        raise ToolError(f"unexpected argument(s) {', '.join(unknown)} for {fn.__name__}; "
                        f"expected: {', '.join(params) or 'none'}")
    kwargs = {}
    for name, param in params.items():
        if name not in arguments:
            if param.default is inspect.Parameter.empty:
                raise ToolError(f"missing required argument {name!r} for {fn.__name__}")
            continue
        kwargs[name] = coerce(arguments[name], hints.get(name, Any), name)
    return kwargs


def coerce(value: Any, hint: Any, where: str) -> Any:
    """Return `value` checked against `hint` (ints accepted for floats); raise ToolError if not."""
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if hint is Any:
        return value
    if origin in (Union, types.UnionType):
        for option in args:
            try:
                return coerce(value, option, where)
            except ToolError:
                continue
        raise ToolError(f"argument {where!r} has the wrong type: got {json.dumps(value, default=str)}")
    if origin is Literal:
        if value not in args:
            raise ToolError(f"argument {where!r} must be one of {', '.join(map(repr, args))}, "
                            f"got {value!r}")
        return value
    if hint is type(None):
        if value is not None:
            raise ToolError(f"argument {where!r} must be null")
        return None
    if origin is list:
        if not isinstance(value, list):
            raise ToolError(f"argument {where!r} must be a list, got {type(value).__name__}")
        inner = args[0] if args else Any
        return [coerce(v, inner, f"{where}[{i}]") for i, v in enumerate(value)]
    if origin is dict or hint is dict:
        if not isinstance(value, dict):
            raise ToolError(f"argument {where!r} must be an object, got {type(value).__name__}")
        return value
    if typing.is_typeddict(hint):
        return coerce_record(value, hint, where)
    if hint is bool:
        if not isinstance(value, bool):
            raise ToolError(f"argument {where!r} must be true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ToolError(f"argument {where!r} must be an integer, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ToolError(f"argument {where!r} must be a number, got {value!r}")
        return value
    if hint is str:
        if not isinstance(value, str):
            raise ToolError(f"argument {where!r} must be a string, got {value!r}")
        return value
    raise TypeError(f"unsupported tool argument type {hint!r}")   # a bug in a tool signature


def coerce_record(value: Any, hint: Any, where: str) -> dict[str, Any]:
    """Check a JSON object against a TypedDict: required keys present, no unknown keys, types."""
    if not isinstance(value, dict):
        raise ToolError(f"argument {where!r} must be an object, got {json.dumps(value, default=str)}")
    fields = typing.get_type_hints(hint)
    required = hint.__required_keys__
    missing = sorted(required - set(value))
    if missing:
        raise ToolError(f"argument {where!r} is missing field(s) {', '.join(missing)}")
    unknown = sorted(set(value) - set(fields))
    if unknown:
        raise ToolError(f"argument {where!r} has unknown field(s) {', '.join(unknown)}")
    return {k: coerce(v, fields[k], f"{where}.{k}") for k, v in value.items()}


# -- descriptions --------------------------------------------------------------------------------
_ARG_LINE = re.compile(r"^\s{4,}(\w+):\s*(.*)$")


def parse_docstring(doc: str) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into (description, {argument: description})."""
    lines = inspect.cleandoc(doc or "").splitlines()
    summary, arg_docs, section, current = [], {}, None, None
    for line in lines:
        stripped = line.strip()
        if stripped in ("Args:", "Returns:", "Raises:"):
            section = stripped
            continue
        if section is None:
            summary.append(stripped)
        elif section == "Args:":
            m = re.match(r"^(\w+):\s*(.*)$", stripped)
            if m and not line.startswith("        "):
                current = m.group(1)
                arg_docs[current] = m.group(2)
            elif current and stripped:
                arg_docs[current] += " " + stripped
    return " ".join(s for s in summary if s).strip(), arg_docs


def json_schema(hint: Any) -> dict[str, Any]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        options = [json_schema(a) for a in args if a is not type(None)]
        return options[0] if len(options) == 1 else {"anyOf": options}
    if origin is Literal:
        return {"type": "string", "enum": list(args)}
    if origin is list:
        return {"type": "array", "items": json_schema(args[0]) if args else {}}
    if typing.is_typeddict(hint):
        fields = typing.get_type_hints(hint)
        return {"type": "object", "properties": {k: json_schema(v) for k, v in fields.items()},
                "required": sorted(hint.__required_keys__)}
    simple = {str: "string", int: "integer", float: "number", bool: "boolean", dict: "object"}
    return {"type": simple.get(hint, "string")} if hint in simple else {}


def tool_spec(fn: Callable) -> ToolSpec:
    description, arg_docs = parse_docstring(fn.__doc__ or "")
    hints = typing.get_type_hints(fn)
    props, required = {}, []
    for name, param in inspect.signature(fn).parameters.items():
        if name == "self":
            continue
        schema = json_schema(hints.get(name, Any))
        if name in arg_docs:
            schema["description"] = arg_docs[name]
        props[name] = schema
        if param.default is inspect.Parameter.empty:
            required.append(name)
    return ToolSpec(fn.__name__, fn.__tool_kind__, description,
                    {"type": "object", "properties": props, "required": required})
