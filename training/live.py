"""Hot reload: follow the workspace's live ref and build the snapshot the trainer swaps in.

DESIGN.md, "Hot reload"; paper section 4.5. A `LiveWatcher` notices a new commit on
`refs/eau/live` (watchdog on the ref file and packed-refs, with a polling fallback every
`poll_s`), and records when it saw it. At the next step boundary the trainer calls
`load_commit`, which exports that commit's tree into the run folder (`git archive`, read-only on
the repository), parses the Snapshot (knobs, rules, personas), starts its reward modules and its
environment patches (training/env_patches.py, each in a sandboxed worker) and lets
the trainer's own check build an environment per gym; only when all of that succeeds is the new
`LiveSnapshot` swapped in, all at once. Any failure leaves the previous snapshot running.

Reloads are cheap when little changed (benchmarks/commit_load_bench.py: a meta-agent committing
200 times a minute): a reward module or an environment patch whose source is unchanged keeps its
sandboxed worker (no new
probe, no new process; its module-level state carries over, as if no reload happened), shared
between the old and the new snapshot until the last one using it is closed; a changed source gets
a fresh worker. The watcher wakes only on writes to the ref's file or packed-refs (not on reads,
not on the objects, notes and index writes of every commit), so commits do not busy the trainer's
process.
"""
from __future__ import annotations

import dataclasses
import hashlib
import io
import os
import shutil
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from training import env_patches, rewards
from training.snapshot import Snapshot


class SnapshotError(ValueError):
    """A workspace commit cannot be run; the message says what is wrong with it."""


@dataclass
class LiveSnapshot:
    """What the trainer runs: the parsed snapshot (its `patches` started) and its started reward
    modules."""

    snapshot: Snapshot
    modules: list[rewards.RewardModule] = field(default_factory=list)

    @property
    def commit(self) -> str:
        return self.snapshot.commit

    @property
    def knobs(self) -> dict[str, Any]:
        return self.snapshot.knobs

    def close(self) -> None:
        rewards.close_all(self.modules)
        if self.snapshot.patches is not None:
            self.snapshot.patches.close()


def git_dir(repo: Path) -> Path:
    """The repository's git folder (a plain `.git` folder, or the repo itself when bare)."""
    repo = Path(repo)
    if (repo / ".git").is_dir():
        return repo / ".git"
    if (repo / "HEAD").exists() and (repo / "refs").is_dir():
        return repo
    if (repo / ".git").is_file():            # a linked worktree: "gitdir: PATH"
        text = (repo / ".git").read_text().strip()
        return (repo / text.split(":", 1)[1].strip()).resolve()
    raise SnapshotError(f"{repo} is not a git repository: set workspace.repo to the experiment's "
                        "workspace folder.")


def read_ref(gdir: Path, ref: str) -> str | None:
    """The commit a ref names, read from the ref file or packed-refs; None when it does not exist.

    Files are read directly (no git process) so polling every 0.5 s stays cheap.
    """
    loose = gdir / ref
    try:
        text = loose.read_text().strip()
        if text.startswith("ref:"):
            return read_ref(gdir, text[4:].strip())
        if text:
            return text
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        pass
    try:
        for line in (gdir / "packed-refs").read_text().splitlines():
            parts = line.split()
            if len(parts) == 2 and parts[1] == ref and not line.startswith(("#", "^")):
                return parts[0]
    except FileNotFoundError:
        pass
    return None


def export_commit(repo: Path, commit: str, dest: Path) -> Path:
    """Write the tree of `commit` into `dest` (replaced if present) via `git archive`."""
    gdir = git_dir(repo)
    proc = subprocess.run(["git", f"--git-dir={gdir}", "archive", "--format=tar", commit],
                          capture_output=True)
    if proc.returncode != 0:
        raise SnapshotError(f"cannot export commit {commit[:12]}: "
                            f"{proc.stderr.decode(errors='replace').strip()}.")
    tmp = dest.with_name(dest.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    with tarfile.open(fileobj=io.BytesIO(proc.stdout)) as tar:
        tar.extractall(tmp, filter="data")
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    return dest


class _Shared:
    """One started module (a reward module or an environment patch), used by every live snapshot
    with the same source: `started` is what its start function returned, the worker last."""

    def __init__(self, key: tuple[str, str], started: tuple):
        self.key = key
        self.started, self.worker = started[:-1], started[-1]
        self.users = 0


_SHARED: dict[tuple[str, str], _Shared] = {}
_SHARED_LOCK = threading.Lock()


class SharedWorker:
    """One snapshot's handle on a shared module worker: calls go to the worker; `close` lets
    go of it, and the worker itself is closed when its last handle is."""

    def __init__(self, entry: _Shared):
        self._entry = entry
        self._closed = False

    @property
    def worker(self):
        return self._entry.worker

    def call(self, func: str, args: list, timeout_s: float | None = None):
        return self._entry.worker.call(func, args, timeout_s=timeout_s)

    def close(self) -> None:
        with _SHARED_LOCK:
            if self._closed:
                return
            self._closed = True
            entry = self._entry
            entry.users -= 1
            last = entry.users == 0
            if last and _SHARED.get(entry.key) is entry:
                del _SHARED[entry.key]
        if last:
            entry.worker.close()


def _shared(name: str, source: str, start: Callable[[str, str], tuple]) -> tuple:
    """`start(name, source)`'s result with its worker (last) shared: the running worker of this
    exact source, or a new one."""
    key = (name, hashlib.sha256(source.encode()).hexdigest())
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is not None:
            entry.users += 1
            return (*entry.started, SharedWorker(entry))
    started = start(name, source)       # outside the lock: probes take a while
    with _SHARED_LOCK:
        entry = _SHARED.get(key)
        if entry is None:
            entry = _SHARED[key] = _Shared(key, started)
        else:                       # another thread started the same source meanwhile
            started[-1].close()
        entry.users += 1
        return (*entry.started, SharedWorker(entry))


def _shared_module(name: str, source: str) -> tuple:
    """rewards.load_modules' `start`: the running worker of this exact source, or a new one."""
    return _shared(name, source, rewards.start_module)


def _shared_patch(gym: str, source: str) -> tuple:
    """env_patches.load_patches' `start`, shared as reward modules are (keyed apart from them)."""
    return _shared(f"{env_patches.FOLDER}/{gym}", source,
                   lambda _, src: env_patches.start_patch(gym, src))


def shared_keys() -> frozenset[tuple[str, str]]:
    """The (name, source digest) of every worker the live snapshots of this process share now."""
    with _SHARED_LOCK:
        return frozenset(_SHARED)


def shared_workers() -> int:
    """How many reward module workers the live snapshots of this process share now."""
    with _SHARED_LOCK:
        return len(_SHARED)


def build(root: Path, commit: str, check: Callable[[Snapshot], None] | None = None) -> LiveSnapshot:
    """Parse a folder into a LiveSnapshot with started reward modules; raise SnapshotError."""
    try:
        snap = Snapshot.from_dir(root, commit=commit)
    except (OSError, ValueError) as exc:
        raise SnapshotError(f"workspace files do not parse: {exc}") from None
    for group in ("agent", "env", "user", "reward"):
        if not isinstance(snap.knobs.get(group), dict):
            raise SnapshotError(f"knobs.json has no {group!r} group.")
    try:
        modules = rewards.load_modules(snap.reward_files, snap.knobs, start=_shared_module)
    except rewards.RewardModuleError as exc:
        raise SnapshotError(str(exc)) from None
    try:
        patches = env_patches.load_patches(snap.env_patch_files, start=_shared_patch)
    except env_patches.EnvPatchError as exc:
        rewards.close_all(modules)
        raise SnapshotError(str(exc)) from None
    snap = dataclasses.replace(snap, patches=patches)
    live = LiveSnapshot(snap, modules)
    if check is not None:
        try:
            check(snap)
        except Exception as exc:  # an env or user that cannot be built from this snapshot
            live.close()
            raise SnapshotError(f"environments cannot be built from this snapshot: "
                                f"{type(exc).__name__}: {exc}") from None
    return live


def load_commit(repo: Path, commit: str, into: Path,
                check: Callable[[Snapshot], None] | None = None) -> LiveSnapshot:
    """Export `commit` of `repo` to `into/<commit>` and build it (see `build`)."""
    dest = export_commit(repo, commit, into / commit)
    return build(dest, commit, check)


def load_folder(folder: Path, into: Path,
                check: Callable[[Snapshot], None] | None = None) -> LiveSnapshot:
    """A plain workspace folder (no git): copied once into `into/plain`, never watched."""
    if not (Path(folder) / "knobs.json").exists():
        raise SnapshotError(f"{folder} has no knobs.json: set workspace.dir to a workspace folder.")
    dest = into / "plain"
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(folder, dest, ignore=shutil.ignore_patterns(".git"))
    return build(dest, "", check)


_READ_EVENTS = ("opened", "closed_no_write")


def write_events(modified: bool = False) -> list:
    """watchdog's event_filter for watching git write refs: a ref update creates `NAME.lock`,
    writes and closes it, and renames it over NAME; `modified` adds appends (reflogs). The
    filter narrows the inotify mask itself, so the kernel never queues the opens and reads of
    every git process in the repository: under 200 commits a minute those kept the trainer's
    watchdog threads at 0.19 of a core, taken from its main thread through the GIL."""
    from watchdog.events import (FileClosedEvent, FileCreatedEvent, FileModifiedEvent,
                                 FileMovedEvent)
    return [FileCreatedEvent, FileClosedEvent, FileMovedEvent] + ([FileModifiedEvent] if modified else [])


class LiveWatcher:
    """Notices new commits on the live ref within about `poll_s` (watchdog makes it sooner).

    `latest()` returns (commit, monotonic time it was first seen) of the ref's current value.
    """

    def __init__(self, repo: Path, ref: str = "refs/eau/live", poll_s: float = 0.5):
        self.gdir = git_dir(repo)
        self.ref = ref
        self.poll_s = poll_s
        self._lock = threading.Lock()
        self._seen: tuple[str | None, float] = (read_ref(self.gdir, ref), time.monotonic())
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="live-ref-watch", daemon=True)
        self._observer = None
        self.events = 0             # file events delivered (the mask keeps reads out)

    def start(self) -> "LiveWatcher":
        self._thread.start()
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer

            wake, watcher = self._wake, self
            names = (Path(self.ref).name, "packed-refs")

            class _Handler(FileSystemEventHandler):
                def on_any_event(self, event):
                    watcher.events += 1
                    # reads are events too (watchdog >= 4 reports opened / closed_no_write):
                    # waking on them made check()'s own read of the ref wake it again, a loop
                    # that kept a core busy in the trainer's process; only writes to the ref count
                    if event.event_type in _READ_EVENTS:
                        return
                    paths = (event.src_path, getattr(event, "dest_path", "") or "")
                    if any(os.path.basename(os.fsdecode(p)).startswith(names) for p in paths if p):
                        wake.set()

            observer = Observer()
            # the ref's own folder (a ref update renames a lock file there) and the git folder
            # itself for packed-refs, neither recursively: a commit's objects, notes and index
            # writes would otherwise wake this process hundreds of times a second under load
            folder = (self.gdir / self.ref).parent
            only = write_events()
            if folder.is_dir() and folder != self.gdir:
                observer.schedule(_Handler(), str(folder), recursive=False, event_filter=only)
            observer.schedule(_Handler(), str(self.gdir), recursive=False, event_filter=only)
            observer.start()
            self._observer = observer
        except Exception:   # no inotify here: the polling loop alone keeps the 0.5 s promise
            self._observer = None
        return self

    def _loop(self) -> None:
        while not self._stop.is_set():
            self._wake.wait(self.poll_s)
            self._wake.clear()
            self.check()

    def check(self) -> None:
        value = read_ref(self.gdir, self.ref)
        with self._lock:
            if value != self._seen[0]:
                self._seen = (value, time.monotonic())

    def latest(self) -> tuple[str | None, float]:
        with self._lock:
            return self._seen

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=2)
        self._thread.join(timeout=2)


class AgreedSnapshots:
    """The snapshot every process of a run trains on, loaded the same on all of them.

    With one process it is simply `load_commit` / `load_folder`. Under torchrun rank 0 reads the
    live ref and exports and builds first (one writer of snapshots/); the broadcast of its outcome
    is also the barrier after which the others build from the exported files; a failure on any
    process is a failure on all (each closes what it built), so no two processes ever train one
    step on different commits."""

    def __init__(self, ws, into: Path, check: Callable[[Snapshot], None], dist):
        self.ws, self.into, self.check, self.dist = ws, into, check, dist

    def initial(self, commit: str | None = None) -> LiveSnapshot:
        """The live ref's commit (or `commit`; or the plain workspace.dir) on every process."""
        from training import distributed as D
        from training.config import ConfigError

        ws = self.ws
        if ws.repo:
            error = None
            if self.dist.is_main:        # rank 0 reads the ref once; every process loads that
                try:
                    commit = commit or read_ref(git_dir(Path(ws.repo)), ws.live_ref)
                except SnapshotError as exc:
                    error = str(exc)
            commit, error = D.broadcast_object((commit, error), self.dist)
            if error is not None:
                raise SnapshotError(error)
            if commit is None:
                raise ConfigError(f"{ws.repo} has no {ws.live_ref}: promote a commit through the "
                                  "gate (or `git update-ref`) before starting the trainer.")
            return self.load(commit)
        if ws.dir:
            return self.load(None)
        raise ConfigError("config.json names no workspace: set workspace.repo (a git workspace) "
                          "or workspace.dir (a plain folder).")

    def _here(self, commit: str | None, export: bool) -> LiveSnapshot:
        """Build `commit`'s snapshot (None: the plain workspace.dir); `export` writes its files
        into snapshots/ first (rank 0), the other processes build from those files."""
        if commit is not None:
            if export:
                return load_commit(Path(self.ws.repo), commit, self.into, self.check)
            return build(self.into / commit, commit, self.check)
        if export:
            return load_folder(Path(self.ws.dir), self.into, self.check)
        return build(self.into / "plain", "", self.check)

    def load(self, commit: str | None) -> LiveSnapshot:
        """The snapshot loaded on every process, or SnapshotError raised on every process."""
        from training import distributed as D

        if not self.dist.active:
            return self._here(commit, export=True)
        new, error = None, None
        if self.dist.is_main:
            try:
                new = self._here(commit, export=True)
            except SnapshotError as exc:
                error = str(exc)
        error = D.broadcast_object(error, self.dist)
        if error is not None:
            raise SnapshotError(error)
        if not self.dist.is_main:
            try:
                new = self._here(commit, export=False)
            except SnapshotError as exc:
                error = str(exc)
        errors = [e for e in D.gather_objects(error, self.dist) if e]
        if errors:
            if new is not None:
                new.close()
            raise SnapshotError(errors[0])
        return new

    def next_commit(self, watcher: "LiveWatcher | None", current: str,
                    failed: set[str]) -> tuple[str | None, float]:
        """The promoted commit to swap in at this step boundary (rank 0's watcher decides and
        broadcasts it, so every process swaps the same commit at the same step), or None; and
        when the watcher saw it."""
        from training import distributed as D

        commit, seen_at = None, 0.0
        if watcher is not None:
            watcher.check()
            commit, seen_at = watcher.latest()
            if not commit or commit == current or commit in failed:
                commit = None
        return D.broadcast_object(commit, self.dist), seen_at
