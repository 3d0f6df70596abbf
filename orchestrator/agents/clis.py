"""The Claude Code and Codex CLIs on this machine: where each is, its version beside the pinned
one, whether it has credentials, and how the adapter's last session ended.

`orchestrator start --agent claude-code|codex` asks `usable` before the trainer starts;
`orchestrator agents` shows `describe` for every adapter. The pinned versions are the ones the
adapters' flags and the end-to-end tests were checked against (scripts/agent_clis.txt);
scripts/install_agent_clis.sh installs them into `agent-clis/` of this machine's cache folder
(~/.cache/eau by default: 808 MB does not belong in the source tree), which `find` looks in after
PATH (so a person's own installation wins, and the tests' fake CLIs on PATH too).
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tomllib
from pathlib import Path
from typing import Any

from orchestrator import ledger
from orchestrator.paths import cache_dir, project_root

PINS_FILE = project_root() / "scripts" / "agent_clis.txt"
EXE = {"claude-code": "claude", "codex": "codex"}
PACKAGE = {"claude-code": "@anthropic-ai/claude-code", "codex": "@openai/codex"}
INSTALL = ("run `bash scripts/install_agent_clis.sh` (the pinned versions, into agent-clis/ of the "
           "cache folder, ~/.cache/eau by default)")
_VERSION = re.compile(r"\d+\.\d+\.\d+")


def prefix() -> Path | None:
    """Where the install script puts the CLIs: $EAU_AGENT_CLIS, else agent-clis/ in the cache
    folder (orchestrator.paths.cache_dir; EAU_AGENT_CLIS="" looks on PATH only)."""
    value = os.environ.get("EAU_AGENT_CLIS")
    if value == "":
        return None
    return Path(value) if value else cache_dir() / "agent-clis"


def find(agent: str) -> str | None:
    """The CLI's executable: on PATH, else in the project's install folder; None when neither."""
    exe = EXE[agent]
    found = shutil.which(exe)
    if found:
        return found
    root = prefix()
    local = root / "node_modules" / ".bin" / exe if root else None
    return str(local) if local and os.access(local, os.X_OK) else None


def pinned(agent: str) -> str:
    """The version scripts/agent_clis.txt pins (the line `<package>@<version>`)."""
    for line in PINS_FILE.read_text().splitlines():
        if line.startswith(PACKAGE[agent] + "@"):
            return line.rsplit("@", 1)[1].strip()
    raise ValueError(f"{PINS_FILE} pins no {PACKAGE[agent]}")


def version(exe: str) -> str | None:
    """`EXE --version`'s version number (both CLIs print it and exit at once), None when it fails."""
    try:
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    m = _VERSION.search(out.stdout)
    return m.group(0) if out.returncode == 0 and m else None


def codex_home() -> Path:
    return Path(os.environ.get("CODEX_HOME") or Path.home() / ".codex")


def codex_provider() -> dict[str, Any] | None:
    """The custom model provider Codex's config.toml selects (`model_provider` naming a
    `[model_providers.X]` table), None when it uses OpenAI's own."""
    try:
        config = tomllib.loads((codex_home() / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        return None
    name = config.get("model_provider")
    table = (config.get("model_providers") or {}).get(name) if name else None
    return {"id": name, **table} if isinstance(table, dict) else None


def credentials(agent: str) -> tuple[bool, str]:
    """(found, which) or (not found, what to do): from the variables and files each CLI reads."""
    if agent == "claude-code":
        url = os.environ.get("ANTHROPIC_BASE_URL")
        where = f" for {url}" if url else ""
        for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN"):
            if os.environ.get(key):
                return True, f"{key}{where}"
        login = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude") / ".credentials.json"
        if login.exists():
            return True, f"logged in ({login})"
        return False, "set ANTHROPIC_API_KEY or run `claude /login`"
    provider = codex_provider()
    if provider:
        key = provider.get("env_key")
        where = f"provider {provider['id']!r} at {provider.get('base_url', '?')}"
        if key and not os.environ.get(key):
            return False, f"set ${key}, which {where} wants"
        return True, where + (f" with ${key}" if key else " (no key)")
    if os.environ.get("OPENAI_API_KEY"):
        return True, "OPENAI_API_KEY"
    if (codex_home() / "auth.json").exists():
        return True, f"logged in ({codex_home() / 'auth.json'})"
    return False, "set OPENAI_API_KEY or run `codex login`"


def last_session(agent: str, runs_root: Path) -> dict[str, Any] | None:
    """The newest session line of this adapter in any experiment's ledger under runs_root."""
    best = None
    for led in sorted(runs_root.glob(f"*/{ledger.LEDGER}")):
        for line in ledger.read_lines(led.parent, "session"):
            if line.get("agent") == agent and (best is None or line.get("ts", 0) >= best.get("ts", 0)):
                best = {**line, "experiment": led.parent.name}
    return best


def usable(agent: str) -> tuple[bool, str]:
    """(usable, why) for a CLI adapter: installed and with credentials."""
    exe = find(agent)
    if exe is None:
        return False, f"{EXE[agent]} is not installed: {INSTALL}"
    ok, creds = credentials(agent)
    return ok, f"{exe}, credentials: {creds}" if ok else f"{EXE[agent]} has no credentials: {creds}"


def describe(agent: str, runs_root: Path) -> dict[str, str]:
    """One row of `orchestrator agents`: the CLI, its version, credentials, the last session."""
    exe = find(agent)
    ver = version(exe) if exe else None
    pin = pinned(agent)
    found, creds = credentials(agent)
    last = last_session(agent, runs_root)
    return {
        "cli": exe or f"{EXE[agent]} is not installed: {INSTALL}",
        "version": ("-" if not exe else "? (--version failed)" if ver is None else
                    ver if ver == pin else f"{ver} (tested: {pin})"),
        "credentials": creds if found else f"none: {creds}",
        "last session": _last_text(last),
    }


def _last_text(last: dict[str, Any] | None) -> str:
    if not last:
        return "none yet"
    worked = "worked" if last.get("status") in ("ok", "no_change") else "did not work"
    reason = str(last.get("reason") or "").strip().splitlines()
    tail = f": {reason[0][:120]}" if reason else ""
    return (f"{worked}: {last.get('status')} ({last['experiment']} {last.get('session_id')}, "
            f"{last.get('duration_s', 0):.0f} s){tail}")
