"""Shared behaviour of the fake `claude` and `codex` executables used by the adapter tests.

The mode comes from FAKE_MODE (edit, nocommit, hang, outside, nologin, error, read_eval, noop);
every call appends its argv and its stdin kind to $FAKE_LOG when set, so tests can check flags.
"""
from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path


def mode(default: str = "edit") -> str:
    """FAKE_MODE, else the mode for this session in $HOME/fake-modes.json ({"s001": "hang"}),
    so a whole experiment can give each session its own behaviour."""
    if os.environ.get("FAKE_MODE"):
        return os.environ["FAKE_MODE"]
    path = Path(os.environ.get("HOME", "/nonexistent")) / "fake-modes.json"
    if path.exists():
        return json.loads(path.read_text()).get(os.environ.get("EAU_SESSION", ""), default)
    return default


def log_call(name: str) -> None:
    if os.environ.get("FAKE_LOG"):
        st = os.fstat(0)
        devnull = stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat("/dev/null").st_rdev
        with open(os.environ["FAKE_LOG"], "a") as fh:
            fh.write(json.dumps({"exe": name, "argv": sys.argv[1:], "stdin_devnull": devnull,
                                 "cwd": os.getcwd(), "env_session": os.environ.get("EAU_SESSION"),
                                 "max_retries": os.environ.get("CLAUDE_CODE_MAX_RETRIES")}) + "\n")


def wait_on_open_stdin() -> None:
    """Both real CLIs wait on an open stdin: a fake given a pipe or a terminal blocks the same way."""
    st = os.fstat(0)
    if not (stat.S_ISCHR(st.st_mode) and st.st_rdev == os.stat("/dev/null").st_rdev):
        sys.stdin.read()


def hang() -> None:
    signal.signal(signal.SIGTERM, signal.SIG_IGN)     # ignores SIGTERM: only SIGKILL ends it
    while True:
        time.sleep(1)


def edit_knob(ws: Path) -> str:
    path = os.environ.get("FAKE_KNOB", "agent.entropy_coeff")
    knobs = json.loads((ws / "knobs.json").read_text())
    node = knobs
    parts = path.split(".")
    for p in parts[:-1]:
        node = node[p]
    old = node[parts[-1]]
    new = json.loads(os.environ["FAKE_VALUE"]) if os.environ.get("FAKE_VALUE") else round(old + 0.002, 6)
    node[parts[-1]] = new
    (ws / "knobs.json").write_text(json.dumps(knobs, indent=2) + "\n")
    return f"Set {path} {old} -> {new}\n\nWhy: entropy is falling in the run.\nExpect: actor/entropy rises.\n"


def git_commit(ws: Path, message: str) -> None:
    subprocess.run(["git", "-C", str(ws), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(ws), "commit", "-q", "-m", message], check=True)


def outside_target() -> Path:
    """A file outside the workspace a misbehaving agent tries to write (the run's config)."""
    return Path(os.environ["EAU_RUN_DIR"]) / "config.json"
