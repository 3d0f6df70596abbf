"""Judges a person's (or anyone's) commit on the workspace's main within seconds while an
experiment runs, without waiting for a meta-agent session.

A watchdog observer on the repository's `refs/heads/` and `logs/` folders (a commit rewrites
`refs/heads/main` through a lock file and appends to `logs/HEAD`) wakes a worker thread; the
worker also polls main's commit every `poll_s` seconds, which covers file systems where inotify
events do not arrive (network mounts, containers) and a packed `main` (`git pack-refs` moves it
into `packed-refs`). Judging itself is `orchestrator.gate.judge_pending`, under the gate's lock.
The worker thread runs at background priority (orchestrator/priority.py).
"""
from __future__ import annotations

import logging
import threading
from pathlib import Path

from orchestrator import gate, priority

log = logging.getLogger(__name__)


class GateWatcher:
    def __init__(self, exp_dir: Path | str, poll_s: float = 1.0, debounce_s: float = 0.2):
        self.exp_dir = Path(exp_dir)
        self.ws = gate.open_experiment_workspace(self.exp_dir)
        self.poll_s = poll_s
        self.debounce_s = debounce_s
        self.judged: list[gate.Verdict] = []          # every verdict this watcher produced
        self.errors: list[str] = []
        self._wake = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._observer = None

    def start(self) -> "GateWatcher":
        self._thread = threading.Thread(target=self._loop, name="eau-gate-watcher", daemon=True)
        self._thread.start()
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer

            from training.live import write_events    # writes only: no open/read events queued

            wake = self._wake

            class _Handler(FileSystemEventHandler):
                def on_any_event(self, event):
                    # watchdog >= 4 reports reads too: git reading refs/heads/main for us would
                    # wake us again, forever (a git process every debounce_s); writes only
                    if event.event_type not in ("opened", "closed_no_write"):
                        wake.set()

            self._observer = Observer()
            for sub in ("refs/heads", "logs"):
                folder = self.ws.git_dir / sub
                folder.mkdir(parents=True, exist_ok=True)
                self._observer.schedule(_Handler(), str(folder), recursive=True,
                                        event_filter=write_events(modified=True))
            self._observer.start()
        except (ImportError, OSError) as exc:     # no inotify here: polling alone
            log.warning("gate watcher: file events unavailable (%s); polling every %.1f s", exc, self.poll_s)
            self._observer = None
        return self

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=5)
        if self._thread is not None:
            self._thread.join(timeout=30)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def _loop(self) -> None:
        priority.lower_this_thread("nice")    # this thread only: the trainer comes first
        last = None
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            if self._stop.is_set():
                break
            if self._wake.is_set():
                self._wake.clear()
                self._stop.wait(self.debounce_s)      # let a burst of ref updates settle
            try:
                head = self.ws.main()                 # a git error here must not end the thread
                if head == last:
                    continue
                self.judged += gate.judge_pending(self.exp_dir, self.ws)
                # the head read before judging, not main now: a commit landing between the
                # judgement and a second read would count as judged and wait for the next one
                # (found under commit load: benchmarks/commit_load_bench.py); a gate revert costs
                # one idle pass
                last = head
            except Exception as exc:                  # keep watching; the next change retries
                self.errors.append(f"{type(exc).__name__}: {exc}")
                log.error("gate watcher: judging failed: %s", exc)
