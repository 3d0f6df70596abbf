"""Starts and watches the trainer subprocess (DESIGN.md, "The parts": supervisor.py).

`python -m training.trainer --run DIR [--resume]` runs in its own process group (in the
orchestrator's session: a session of its own would be an autogroup of its own, see
orchestrator/priority.py) with its output
in `DIR/trainer.log` and its pid in `DIR/trainer.pid`. The supervisor reads its exit code and
heartbeat: exit 0 is a finished (or stopped) run; a non-zero exit or a heartbeat older than
`stall_s` is a crash, after which the trainer is started again with `--resume` from its newest
whole checkpoint (at most `max_restarts` times; a crash before any checkpoint starts it afresh).
`stop()` sends SIGTERM: the trainer checkpoints the last finished step, then exits 0.
The trainer runs at normal priority while gate, hooks and sessions yield to it
(orchestrator/priority.py): it must be started from a thread that was not lowered.

With `trainer.nproc_per_node` N > 1 in the run's config.json the trainer runs as N processes,
one per GPU: `python -m torch.distributed.run --standalone --nproc_per_node N -m training.trainer
--run-dir DIR ...`; stop() sends SIGTERM to each worker process (each checkpoints; torchrun then
exits 0). A SIGTERM to torchrun itself is forwarded to them too, with `--shutdown_timeout` for
their checkpoint before it kills them.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

RUNNING, FINISHED, STOPPED, CRASHED, RESTARTED = "running", "finished", "stopped", "crashed", "restarted"


@dataclass
class TrainerState:
    state: str               # running | finished | stopped | crashed (gave up) | restarted (just now)
    step: int
    returncode: int | None
    restarts: int
    reason: str = ""


def last_step(run_dir: Path) -> int:
    """The newest step in metrics.jsonl (reads only the file's tail)."""
    path = run_dir / "metrics.jsonl"
    if not path.exists():
        return 0
    with open(path, "rb") as fh:
        fh.seek(0, os.SEEK_END)
        size = fh.tell()
        fh.seek(max(0, size - 65536))
        lines = fh.read().decode(errors="replace").splitlines()
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (ValueError, KeyError, TypeError):
            continue
    return 0


def pid_alive(pid) -> bool:
    """Whether a process with this pid runs (`orchestrator start`'s pid in experiment.json, the
    trainer's in trainer.pid); an exited child its parent has not reaped (a zombie) does not."""
    if not pid:
        return False
    try:
        os.kill(int(pid), 0)
    except (ProcessLookupError, PermissionError, ValueError):
        return False
    try:        # an exited child its parent has not reaped yet (a zombie) still answers signal 0
        return Path(f"/proc/{int(pid)}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return True


def has_checkpoint(run_dir: Path) -> bool:
    return any(p.is_dir() for p in (run_dir / "checkpoints").glob("step-*"))


class Supervisor:
    def __init__(self, run_dir: Path | str, *, resume: bool = False, max_restarts: int = 3,
                 stall_s: float = 300.0, python: str = sys.executable, env: dict | None = None,
                 module: str = "training.trainer"):
        self.run_dir = Path(run_dir)
        self.resume, self.max_restarts, self.stall_s = resume, max_restarts, stall_s
        self.python, self.env, self.module = python, env, module
        self.proc: subprocess.Popen | None = None
        self.restarts = 0
        self.stopping = False
        self.started_at = 0.0

    def nproc(self) -> int:
        """trainer.nproc_per_node of the run's config.json (1 when absent or unreadable)."""
        try:
            cfg = json.loads((self.run_dir / "config.json").read_text())
            return max(int(cfg.get("trainer", {}).get("nproc_per_node", 1)), 1)
        except (OSError, ValueError, TypeError, AttributeError):
            return 1

    def argv(self, resume: bool) -> list[str]:
        n = self.nproc()
        if n == 1:
            return [self.python, "-m", self.module, "--run", str(self.run_dir)] + \
                (["--resume"] if resume else [])
        # --run-dir (the trainer's alias of --run): torchrun's parser would take `--run` for an
        # abbreviation of its own --run-path
        tail = ["-m", self.module, "--run-dir", str(self.run_dir)] + \
            (["--resume"] if resume else [])
        # stop() waits 120 s for the checkpoint; torchrun must not SIGKILL the workers sooner
        return [self.python, "-m", "torch.distributed.run", "--standalone",
                "--nproc_per_node", str(n), "--shutdown_timeout", "150"] + tail

    def start(self, resume: bool | None = None) -> "Supervisor":
        resume = self.resume if resume is None else resume
        log = open(self.run_dir / "trainer.log", "a")
        from orchestrator import priority
        from orchestrator.paths import project_root
        env = {**os.environ, **(self.env or {})}
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(project_root()), env.get("PYTHONPATH")]))
        self.proc = subprocess.Popen(self.argv(resume), stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=subprocess.STDOUT, process_group=0, env=env,
                                     cwd=project_root(), preexec_fn=priority.restore_preexec())
        log.close()
        self.started_at = time.time()
        (self.run_dir / "trainer.pid").write_text(f"{self.proc.pid}\n")
        return self

    def heartbeat_age(self) -> float:
        hb = self.run_dir / "heartbeat"
        ref = hb.stat().st_mtime if hb.exists() else self.started_at
        return time.time() - max(ref, self.started_at)

    def poll(self) -> TrainerState:
        """Check the trainer once; restart it from its checkpoint after a crash."""
        step = last_step(self.run_dir)
        if self.proc is None:
            return TrainerState(CRASHED, step, None, self.restarts, "not started")
        rc = self.proc.poll()
        if rc is None:
            if not self.stopping and self.heartbeat_age() > self.stall_s:
                self._kill()
                return self._after_crash(step, f"no heartbeat for {self.stall_s:.0f} s")
            return TrainerState(RUNNING, step, None, self.restarts)
        if rc == 0:
            return TrainerState(STOPPED if self.stopping else FINISHED, step, 0, self.restarts)
        if self.stopping:
            return TrainerState(STOPPED, step, rc, self.restarts, f"exit code {rc} while stopping")
        return self._after_crash(step, f"exit code {rc}: {self._log_tail()}")

    def _after_crash(self, step: int, reason: str) -> TrainerState:
        if self.restarts >= self.max_restarts:
            return TrainerState(CRASHED, step, self.proc.returncode if self.proc else None,
                                self.restarts, f"{reason}; gave up after {self.restarts} restarts")
        self.restarts += 1
        self.start(resume=has_checkpoint(self.run_dir))
        return TrainerState(RESTARTED, step, None, self.restarts, reason)

    def _log_tail(self, lines: int = 3) -> str:
        path = self.run_dir / "trainer.log"
        text = path.read_text(errors="replace").strip().splitlines() if path.exists() else []
        return " | ".join(text[-lines:])[-400:]

    def stop(self, timeout_s: float = 120.0) -> int | None:
        """SIGTERM (the trainer checkpoints, then exits), SIGKILL after `timeout_s`."""
        self.stopping = True
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        try:
            for pid in self._trainer_pids():
                os.kill(pid, signal.SIGTERM)
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self._kill()
            return self.proc.returncode
        except ProcessLookupError:
            return self.proc.poll()

    def _trainer_pids(self) -> list[int]:
        """Whom stop() signals: the trainer; under torchrun its worker processes, so that each
        checkpoints and exits 0 and torchrun then exits 0 too (signalled itself, torchrun
        forwards the signal but exits 1). Falls back to the launched process."""
        if self.proc is None:
            return []
        if self.nproc() > 1:
            try:
                kids = Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text()
                pids = [int(x) for x in kids.split()]
                mine = [c for c in pids if str(self.run_dir) in Path(f"/proc/{c}/cmdline")
                        .read_bytes().decode(errors="replace")]
                if mine:
                    return mine
            except (OSError, ValueError):
                pass
        return [self.proc.pid]

    def _kill(self) -> None:
        if self.proc is None:
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=10)
