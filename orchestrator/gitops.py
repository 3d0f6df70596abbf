"""The few git operations the meta-agent loop needs on an experiment workspace.

Every command goes through `orchestrator.workspace.Workspace.run` (STYLE.md point 7: git behind
one module); these helpers are the loop's narrow view of it: commit a session's edits under the
session's own identity with its trailers, list the commits a session made, and read a file or a
message at a commit. It lives beside workspace.py, below its users (the agent adapters,
orchestrator.effects and orchestrator.experience), so each imports it at the top and none reaches
up into the agents package for git.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.workspace import LIVE_REF, GitError, Workspace

__all__ = ["GitError", "LIVE_REF", "git", "head", "live", "commits_between", "message",
           "author_email", "show_file", "knobs_at", "dirty_paths", "with_trailers", "identity_env",
           "commit_all"]


def git(ws: Path | str, *args: str, env: dict[str, str] | None = None, check: bool = True) -> str:
    return Workspace(ws).run(*args, env=env, check=check) + "\n"


def head(ws: Path | str) -> str:
    return git(ws, "rev-parse", "HEAD").strip()


def live(ws: Path | str) -> str | None:
    out = git(ws, "rev-parse", "--verify", "-q", LIVE_REF, check=False).strip()
    return out or None


def commits_between(ws: Path | str, base: str, tip: str = "HEAD") -> list[str]:
    """Commits reachable from tip and not from base, oldest first."""
    out = git(ws, "rev-list", "--reverse", f"{base}..{tip}")
    return out.split()


def message(ws: Path | str, sha: str) -> str:
    return git(ws, "log", "-1", "--format=%B", sha)


def author_email(ws: Path | str, sha: str) -> str:
    return git(ws, "log", "-1", "--format=%ae", sha).strip()


def show_file(ws: Path | str, sha: str, path: str) -> str | None:
    data = Workspace(ws).read_file(sha, path)
    return data.decode(errors="replace") if data is not None else None


def knobs_at(ws: Path | str, sha: str) -> dict[str, Any]:
    text = show_file(ws, sha, "knobs.json")
    return json.loads(text) if text else {}


def dirty_paths(ws: Path | str) -> list[str]:
    """Paths with uncommitted changes (modified, added, untracked), relative to the workspace."""
    out = git(ws, "status", "--porcelain", "-uall")
    return [line[3:].split(" -> ")[-1] for line in out.splitlines() if line.strip()]


def with_trailers(msg: str, agent: str, session: str) -> str:
    """Append `Eau-Agent:` / `Eau-Session:` trailers (DESIGN.md: `git log` shows who intervened)."""
    msg = msg.rstrip() + "\n"
    if "Eau-Agent:" not in msg:
        msg += f"\nEau-Agent: {agent}\nEau-Session: {session}\n"
    return msg


def identity_env(agent: str, session: str) -> dict[str, str]:
    """Each session commits under its own identity: <agent>-<session>@agents.eau."""
    name, email = f"{agent} ({session})", f"{agent}-{session}@agents.eau"
    return {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email,
            "GIT_COMMITTER_NAME": name, "GIT_COMMITTER_EMAIL": email}


def commit_all(ws: Path | str, msg: str, agent: str, session: str) -> str | None:
    """Stage every change in the workspace and commit it; None when there is nothing to commit.

    The workspace's pre-commit hook (the gate, orchestrator/gate.py) may refuse: that raises
    GitError with its verdict.
    """
    if not dirty_paths(ws):
        return None
    git(ws, "add", "-A")
    git(ws, "commit", "-q", "-m", with_trailers(msg, agent, session), env=identity_env(agent, session))
    return head(ws)
