"""Hot reload: follow the workspace's live ref and build the snapshot the trainer swaps in.

DESIGN.md, "Hot reload"; paper section 4.5. A `LiveWatcher` notices a new commit on
`refs/eau/live` (watchdog on the ref file and packed-refs, with a polling fallback every
`poll_s`), and records when it saw it. At the next step boundary the trainer calls
`load_commit`, which exports that commit's tree into the run folder (`git archive`, read-only on
the repository), parses the Snapshot (knobs, rules, personas), starts its reward modules and lets
the trainer's own check build an environment per gym; only when all of that succeeds is the new
`LiveSnapshot` swapped in, all at once. Any failure leaves the previous snapshot running.
"""
from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from training import rewards
from training.snapshot import Snapshot


class SnapshotError(ValueError):
    """A workspace commit cannot be run; the message says what is wrong with it."""


@dataclass
class LiveSnapshot:
    """What the trainer runs: the parsed snapshot and its started reward modules."""

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
        modules = rewards.load_modules(snap.reward_files, snap.knobs)
    except rewards.RewardModuleError as exc:
        raise SnapshotError(str(exc)) from None
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

    def start(self) -> "LiveWatcher":
        self._thread.start()
        try:
            from watchdog.events import FileSystemEventHandler
            from watchdog.observers import Observer

            wake = self._wake

            class _Handler(FileSystemEventHandler):
                def on_any_event(self, event):
                    wake.set()

            observer = Observer()
            observer.schedule(_Handler(), str(self.gdir), recursive=True)
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
