"""Meta-agent adapters (DESIGN.md, "Interfaces"): `run_session(ctx) -> SessionResult` per agent.

`get_adapter(name)` returns the module for claude-code, codex, builtin or command; the adapters
share the context, result and commit helpers of `orchestrator.agents.base`.
"""
from __future__ import annotations

import importlib

AGENT_NAMES = ("claude-code", "codex", "builtin", "command")
_MODULES = {"claude-code": "claude_code", "codex": "codex", "builtin": "builtin", "command": "command"}


def get_adapter(name: str):
    if name not in _MODULES:
        from orchestrator.errors import UserError
        raise UserError(f"unknown agent {name!r}: choose one of {', '.join(AGENT_NAMES)} or none.")
    return importlib.import_module(f"orchestrator.agents.{_MODULES[name]}")
