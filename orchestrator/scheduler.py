"""When to start a meta-agent session, and running one beside the training (paper section 4.5).

A session is due every K trainer steps (`--every K`) or every T minutes (`--minutes T`), whichever
comes first; never two at once: while one runs, nothing else starts, and the count restarts
when it ends. The session runs in a thread of the orchestrator (the CLI agents in their own
processes under it), so the trainer keeps training meanwhile; its result is picked up by `poll`.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from typing import Callable

from orchestrator import priority
from orchestrator.agents.base import SessionContext, SessionResult, run_session


@dataclass
class Scheduler:
    """The clock of sessions: `due(step)` says whether one should start now."""

    every_steps: int | None = 10          # K: trainer steps between sessions (None: by time only)
    every_minutes: float | None = None    # T: minutes between sessions (None: by steps only)
    clock: Callable[[], float] = time.monotonic
    last_step: int = 0                    # step at which the last session ended (or training began)
    last_time: float = field(default=0.0)
    busy: bool = False

    def __post_init__(self) -> None:
        if not self.last_time:
            self.last_time = self.clock()

    def due(self, step: int) -> bool:
        if self.busy:
            return False
        by_steps = self.every_steps is not None and step - self.last_step >= self.every_steps
        by_time = self.every_minutes is not None and \
            self.clock() - self.last_time >= 60.0 * self.every_minutes
        return by_steps or by_time

    def started(self) -> None:
        self.busy = True

    def finished(self, step: int) -> None:
        """The interval counts from the end of a session, so a slow session never piles up more."""
        self.busy, self.last_step, self.last_time = False, step, self.clock()


class SessionRunner:
    """Runs at most one session at a time in a background thread."""

    def __init__(self, run: Callable[[SessionContext], SessionResult] = run_session):
        self._run = run
        self._thread: threading.Thread | None = None
        self._result: SessionResult | None = None
        self.ctx: SessionContext | None = None

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def submit(self, ctx: SessionContext, before: Callable[[], None] | None = None,
               after: Callable[[SessionResult], None] | None = None) -> None:
        """Start a session; `before`/`after` run in the thread around it (e.g. the gate's lock)."""
        if self.running:
            raise RuntimeError("a meta-agent session is already running.")
        self.ctx, self._result = ctx, None

        def work() -> None:
            # the session's CLI, its git commands and hooks, and the judging after it yield the
            # CPU to the trainer (orchestrator/priority.py); this thread never starts a trainer
            priority.lower_this_thread()
            if before:
                before()
            res = self._run(ctx)
            if after:
                after(res)
            self._result = res

        self._thread = threading.Thread(target=work, name=f"eau-session-{ctx.session_id}", daemon=True)
        self._thread.start()

    def poll(self) -> SessionResult | None:
        """The finished session's result, once (None while it runs or when none ran)."""
        if self._thread is None or self._thread.is_alive():
            return None
        self._thread = None
        return self._result

    def wait(self, timeout: float | None = None) -> SessionResult | None:
        if self._thread is not None:
            self._thread.join(timeout)
        return self.poll()
