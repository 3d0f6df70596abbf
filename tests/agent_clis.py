"""The real Claude Code and Codex CLIs for tests, and the environment that points each at a
scripted model endpoint (orchestrator/agents/scripted.py).

`pinned_cli(agent)` returns the folder holding the pinned CLI (scripts/agent_clis.txt): found on
PATH or in the cache folder's agent-clis/ (orchestrator/agents/clis.py `prefix`), else installed
there once by scripts/install_agent_clis.sh (15-25 s and 808 MB here, with an empty npm cache),
else the test is skipped with the reason: no npm, an install that failed, or
EAU_INSTALL_AGENT_CLIS=0. Under CI=true (what GitHub Actions, GitLab CI and most runners set) no
npm or a failed install fails the test instead, with the reason: a skip there let CI pass without
ever running the real CLIs. EAU_INSTALL_AGENT_CLIS=0 still skips there, as a choice written into
the CI job for a reader to see.
"""
from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from orchestrator.agents import clis

ROOT = Path(__file__).resolve().parents[1]
_INSTALL: list[str] = []        # the install's outcome, tried once per test session: "" or why not


def _pinned_exe(agent: str) -> str | None:
    exe = clis.find(agent)
    return exe if exe and clis.version(exe) == clis.pinned(agent) else None


def _under_ci() -> bool:
    return os.environ.get("CI", "").lower() in ("true", "1")


def pinned_cli(agent: str) -> Path:
    """The folder of the pinned `claude`/`codex`, to put first on PATH; without it the test is
    skipped, or fails under CI=true (the module docstring says when)."""
    exe = _pinned_exe(agent)
    if exe is None and not _INSTALL:
        _INSTALL.append(_install())
    exe = exe or _pinned_exe(agent)
    if exe is None:
        missing = (f"{clis.EXE[agent]} {clis.pinned(agent)} is not installed and "
                   f"{_INSTALL[0] or 'the install did not provide it'}")
        if _under_ci() and os.environ.get("EAU_INSTALL_AGENT_CLIS") != "0":
            pytest.fail(f"{missing}: under CI=true the real-CLI tests must run, so give the job "
                        f"npm and a reachable npm registry (or set EAU_INSTALL_AGENT_CLIS=0 to "
                        f"leave them out on purpose).", pytrace=False)
        pytest.skip(f"{missing}: real-CLI test skipped.")
    return Path(exe).parent


def _install() -> str:
    if os.environ.get("EAU_INSTALL_AGENT_CLIS") == "0":
        return "EAU_INSTALL_AGENT_CLIS=0 forbids installing it"
    if shutil.which("npm") is None:
        return "npm is not installed (Node.js 18+ brings it)"
    try:
        out = subprocess.run(["bash", str(ROOT / "scripts" / "install_agent_clis.sh")],
                             capture_output=True, text=True, timeout=900, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return "scripts/install_agent_clis.sh ran past 15 minutes (no registry?)"
    if out.returncode != 0:
        tail = (out.stderr or out.stdout).strip().splitlines()
        return f"scripts/install_agent_clis.sh failed: {tail[-1] if tail else out.returncode}"
    return ""


def use_cli(monkeypatch, agent: str) -> None:
    """PATH with the pinned CLI first, then this Python's folder and the system's."""
    import sys

    monkeypatch.setenv("PATH", f"{pinned_cli(agent)}:{Path(sys.executable).parent}:/usr/bin:/bin")


def point_claude(monkeypatch, url: str, home: Path) -> None:
    """Claude Code at the scripted endpoint: ANTHROPIC_BASE_URL with a key it sends as x-api-key,
    and a HOME of its own (no login of the machine's person is read)."""
    home.mkdir(parents=True, exist_ok=True)
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("ANTHROPIC_BASE_URL", url)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "scripted")
    for key in ("ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN", "CLAUDE_CONFIG_DIR", "ANTHROPIC_MODEL"):
        monkeypatch.delenv(key, raising=False)


def point_codex(monkeypatch, base_url: str | None, tmp: Path) -> Path:
    """Codex at the scripted endpoint: a CODEX_HOME whose config.toml selects a custom model
    provider with wire_api "responses" (base_url None: no config, OpenAI's own provider). TMPDIR
    moves beside it, since Codex refuses to start its sandbox with CODEX_HOME inside TMPDIR."""
    home, tmpdir = tmp / "codex-home", tmp / "tmpdir"
    home.mkdir(parents=True, exist_ok=True)
    tmpdir.mkdir(parents=True, exist_ok=True)
    if base_url:
        (home / "config.toml").write_text(
            'model = "scripted"\nmodel_provider = "scripted"\n\n[model_providers.scripted]\n'
            f'name = "scripted"\nbase_url = "{base_url}"\nwire_api = "responses"\n')
    monkeypatch.setenv("HOME", str(tmp / "home"))
    monkeypatch.setenv("CODEX_HOME", str(home))
    monkeypatch.setenv("TMPDIR", str(tmpdir))
    for key in ("OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(key, raising=False)
    return home
