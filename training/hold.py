"""A bound on how far training runs ahead of a meta-agent session (`orchestrator start --max-lag N`).

By default a session runs beside the training and the trainer never waits for it (paper section
4.5): a slow session's fix lands whenever it lands, possibly after the run ended. With a maximum
lag, the orchestrator writes `RUN/hold.json` when a session starts at step S, and the trainer, at
its step boundaries, finishes steps up to S+N and then waits before starting the next one, until
the session's commits are judged (and the live ref moved) and the file is gone.

A hold never outlives what set it, so nothing deadlocks: it names the orchestrator's pid and a
deadline; the trainer goes on when that process is gone or the deadline has passed, and a
SIGTERM ends the wait at once (the trainer checkpoints as usual). The file is written whole
(temporary file, then rename); one that does not parse is ignored with a warning.
"""
from __future__ import annotations

import json
import os
import time
import warnings
from pathlib import Path
from typing import Any

NAME = "hold.json"


def path(run_dir: Path | str) -> Path:
    return Path(run_dir) / NAME


def write(run_dir: Path | str, until_step: int, session: str, timeout_s: float,
          pid: int | None = None) -> dict[str, Any]:
    """Hold the trainer after step `until_step` for at most `timeout_s` seconds."""
    hold = {"until_step": int(until_step), "session": session, "pid": pid or os.getpid(),
            "deadline": time.time() + float(timeout_s), "written": time.time()}
    dest = path(run_dir)
    tmp = dest.with_name(f".{NAME}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(hold) + "\n", encoding="utf-8")
    os.replace(tmp, dest)
    return hold


def clear(run_dir: Path | str) -> None:
    path(run_dir).unlink(missing_ok=True)


def read(run_dir: Path | str) -> dict[str, Any] | None:
    try:
        text = path(run_dir).read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    try:
        hold = json.loads(text)
        int(hold["until_step"]), float(hold["deadline"]), int(hold["pid"])
        return hold
    except (ValueError, KeyError, TypeError) as exc:
        warnings.warn(f"{path(run_dir)} ignored (not a hold: {exc})", stacklevel=2)
        return None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def blocking(run_dir: Path | str, next_step: int, now: float | None = None) -> dict[str, Any] | None:
    """The hold that bars starting `next_step`, or None when training may go on."""
    hold = read(run_dir)
    if hold is None or next_step <= int(hold["until_step"]):
        return None
    if (now or time.time()) >= float(hold["deadline"]) or not _alive(int(hold["pid"])):
        return None
    return hold


def wait_at_boundary(run_dir: Path | str, next_step: int, dist, stop_requested, *,
                     is_main: bool, poll_s: float = 0.2) -> tuple[bool, dict[str, Any] | None, float]:
    """At a step boundary: wait while a hold bars `next_step` (rank 0 reads the hold and every
    process waits with it; `stop_requested()` ends the wait). Returns (waited, the hold, seconds
    waited)."""
    from training import distributed as D

    t0, hold, waited = time.monotonic(), None, False
    while True:
        current = blocking(run_dir, next_step) if is_main else None
        if not D.broadcast_object(current is not None, dist) or \
                D.any_true(stop_requested(), dist):
            break
        hold, waited = current or hold, True
        time.sleep(poll_s)
    return waited, hold, time.monotonic() - t0


class Heartbeat:
    """Touches the run's heartbeat file every `every_s` seconds from a thread, even during long
    generates (the supervisor takes a stale heartbeat for a hung trainer)."""

    def __init__(self, files, every_s: float):
        import threading

        self.files, self.every_s = files, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.files.touch_heartbeat()
            self._stop.wait(self.every_s)

    def start(self) -> "Heartbeat":
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2)
