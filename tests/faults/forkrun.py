"""Start the real trainer (`training.trainer.main`) from a fork server that has imported torch,
the trainer and transformers' model classes once, so a test can kill and restart it twenty times
in CI time (24.8 s for the twenty, 70-86 s while the preloads silently failed).

A plain `python -m training.trainer` start costs the torch/transformers imports (seconds, tens of
seconds on a loaded 2-core machine); a fork of a process that has imported them but never run a
torch op costs milliseconds. `ForkSupervisor` is the real `orchestrator.supervisor.Supervisor`
(poll, crash detection, restart with --resume from the newest whole checkpoint) with only its
`start` replaced: the trainer child gets its own session (process group), its output in
trainer.log and its pid in trainer.pid, as with Popen.

`phase_hooks` (optional) makes the child write what it is doing into RUN/.phase (rollout, update,
checkpoint) so a test can SIGKILL it inside a chosen phase; during a checkpoint it pauses a little
after each file, so that a kill lands between two files of one checkpoint.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.supervisor import Supervisor

_CTX = None


def context():
    global _CTX
    if _CTX is None:
        from multiprocessing import forkserver

        _CTX = mp.get_context("forkserver")
        _CTX.set_forkserver_preload(["training.trainer", "toy_env", "forkrun", "forkrun_warm"])
        # Python 3.11's fork server is handed the parent's sys.path and does not apply it, so
        # this folder's modules failed to preload (silently: ImportError is skipped) and every
        # child imported them, and transformers, itself. The server is started here with them
        # on PYTHONPATH, which only it sees.
        here = Path(__file__).resolve().parent
        saved = os.environ.get("PYTHONPATH")
        os.environ["PYTHONPATH"] = os.pathsep.join(
            [str(here), str(here.parent / "training")] + ([saved] if saved else []))
        try:
            forkserver.ensure_running()
        finally:
            if saved is None:
                del os.environ["PYTHONPATH"]
            else:
                os.environ["PYTHONPATH"] = saved
    return _CTX


def _write_phase(run_dir: str, text: str) -> None:
    fd = os.open(os.path.join(run_dir, ".phase"), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, text.encode())
    os.close(fd)


def _install_phase_hooks(run_dir: str, pause_s: float) -> None:
    import torch

    from training import trainer

    rollout, update, save = trainer.rollout, trainer.ppo_update, torch.save

    def rollout_hook(*a, **k):
        _write_phase(run_dir, "rollout")
        return rollout(*a, **k)

    def update_hook(*a, **k):
        _write_phase(run_dir, "update")
        return update(*a, **k)

    def save_hook(obj, path, *a, **k):
        _write_phase(run_dir, "checkpoint")
        out = save(obj, path, *a, **k)
        time.sleep(pause_s)
        return out

    trainer.rollout, trainer.ppo_update, torch.save = rollout_hook, update_hook, save_hook


def _child(argv: list[str], log_path: str, run_dir: str, hooks: bool, pause_s: float) -> None:
    os.setsid()
    fd = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    if hooks:
        _install_phase_hooks(run_dir, pause_s)
    from training import trainer

    sys.exit(trainer.main(argv))


class ForkedProc:
    """The part of subprocess.Popen the supervisor uses, over a multiprocessing.Process."""

    def __init__(self, proc):
        self._proc = proc
        self.pid = proc.pid

    @property
    def returncode(self) -> int | None:
        return self._proc.exitcode

    def poll(self) -> int | None:
        return self._proc.exitcode

    def wait(self, timeout: float | None = None) -> int:
        self._proc.join(timeout)
        if self._proc.exitcode is None:
            raise subprocess.TimeoutExpired("trainer", timeout)
        return self._proc.exitcode


class ForkSupervisor(Supervisor):
    """orchestrator.supervisor.Supervisor whose trainer is forked from the warm fork server."""

    def __init__(self, run_dir, *, phase_hooks: bool = False, pause_s: float = 0.05, **kw):
        super().__init__(run_dir, **kw)
        self.phase_hooks, self.pause_s = phase_hooks, pause_s
        self.starts: list[tuple[int, bool]] = []        # (pid, resume) of every start

    def start(self, resume: bool | None = None) -> "ForkSupervisor":
        resume = self.resume if resume is None else resume
        argv = self.argv(resume)[3:]                      # drop python -m training.trainer
        proc = context().Process(target=_child, args=(
            argv, str(self.run_dir / "trainer.log"), str(self.run_dir), self.phase_hooks,
            self.pause_s), daemon=False)
        proc.start()
        self.proc = ForkedProc(proc)
        self.started_at = time.time()
        (Path(self.run_dir) / "trainer.pid").write_text(f"{self.proc.pid}\n")
        self.starts.append((self.proc.pid, resume))
        return self
