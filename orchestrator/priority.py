"""CPU priority of background work: the trainer first (under commit load it kept 0.97 of its core,
benchmarks/RESULTS-commit-load.md).

Meta-agent sessions, the gate and the git hooks yield the CPU to the trainer. They lower the
calling *thread* (on Linux `sched_setscheduler(0, ...)` and `setpriority(PRIO_PROCESS, 0, ...)` act
on the calling thread, not the whole process) and every process started from it inherits that.
Two levels:
- "idle" for a session's thread (the agent's CLI, its git commands and hooks): `SCHED_IDLE`, CPU
  time nothing of normal priority wants; the agent works slower on a busy machine;
- "nice" for the gate (the watcher thread, a person's git hooks): nice 19, a small share that is
  always there, so every commit is still judged (and a person's `git commit` still ends) while the
  trainer or anything else keeps the CPUs busy. A process already at SCHED_IDLE stays there.
The trainer is started from the orchestrator's main thread, which is never lowered, and keeps its
normal priority; `Supervisor.start` checks that (`restore_preexec`).

Linux's autogroups (`/proc/sys/kernel/sched_autogroup_enabled`, on by default) share the CPU
fairly between sessions first; policy and nice only act within one. So the trainer and a session's
CLI get their own process group (for killing them) but stay in the orchestrator's session: in a
session of its own, a SCHED_IDLE spinner slowed a one-thread matmul by 60 % here, in the same
session not at all. A person's git hooks run in the person's session and cannot be held below
the trainer this way.

`EAU_BACKGROUND_PRIORITY`: `nice` (default: nice 19 for sessions too; SCHED_IDLE starved a session while the trainer held every core), `idle` (sessions at SCHED_IDLE),
`off` (no change). An unprivileged process cannot undo either (leaving SCHED_IDLE, or lowering
nice again, needs CAP_SYS_NICE or an RLIMIT_NICE allowance; Linux refuses it by default), which is
why only threads that never start the trainer are lowered. Elsewhere than Linux nothing changes.
"""
from __future__ import annotations

import os
import sys
from typing import Callable

ENV = "EAU_BACKGROUND_PRIORITY"
MODES = ("idle", "nice", "off")
NICE = 19
try:                                    # the main thread's nice value: what a reset goes back to
    _BASE_NICE = os.getpriority(os.PRIO_PROCESS, os.getpid())
except (OSError, AttributeError):
    _BASE_NICE = 0


def mode() -> str:
    value = os.environ.get(ENV, "nice").strip().lower() or "nice"
    return value if value in MODES else "nice"


def supported() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "sched_setscheduler")


def lower_this_thread(level: str = "idle") -> str:
    """Lower the calling thread (and what it starts from now on) to `level` ("idle" or "nice",
    capped by EAU_BACKGROUND_PRIORITY); returns what it runs at now: "idle", "nice", or ""
    (switched off, not Linux, or refused)."""
    m = mode()
    if m == "off" or not supported():
        return ""
    try:
        if os.sched_getscheduler(0) == os.SCHED_IDLE:
            return "idle"              # e.g. a hook of an agent's commit: already below nice
    except OSError:
        pass
    if m == "idle" and level == "idle":
        try:
            os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))
            return "idle"
        except (OSError, AttributeError):
            pass                       # e.g. a kernel or seccomp policy without SCHED_IDLE: nice
    try:
        os.setpriority(os.PRIO_PROCESS, 0, max(NICE, os.getpriority(os.PRIO_PROCESS, 0)))
        return "nice"
    except OSError:
        return ""


def is_lowered(pid: int = 0) -> bool:
    """Whether a thread (0: the calling one; else a thread/process id) runs lowered."""
    if not supported():
        return False
    try:
        return (os.sched_getscheduler(pid) == os.SCHED_IDLE
                or os.getpriority(os.PRIO_PROCESS, pid) >= NICE > _BASE_NICE)
    except OSError:
        return False


def _restore() -> None:
    try:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
        os.setpriority(os.PRIO_PROCESS, 0, _BASE_NICE)
    except OSError:
        pass                           # unprivileged: Linux refuses; the caller warned


def restore_preexec() -> Callable[[], None] | None:
    """For Popen(preexec_fn=...) of the trainer: None when the calling thread runs at normal
    priority (the child inherits it); else a function that puts the child back to normal where
    Linux allows it (root or CAP_SYS_NICE), with a warning on stderr either way."""
    if not is_lowered():
        return None
    print("eau: the trainer is being started from a lowered thread; resetting its priority "
          f"(needs CAP_SYS_NICE; {ENV}=off avoids lowering altogether).", file=sys.stderr)
    return _restore
