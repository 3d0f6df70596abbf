"""`orchestrator start --max-lag N`: the trainer waits at a step boundary while a session holds the
run (training/hold.py), trains on the commit promoted meanwhile, and never waits for a hold whose
writer is gone, whose deadline passed, or that it cannot read; a stop ends the wait."""
from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from test_live import commit_knobs, events, live_run, promote, steps, wait_for
from training import checkpoint, hold
from training.trainer import Trainer


def test_blocking_reads_step_deadline_and_writer(tmp_path):
    assert hold.blocking(tmp_path, 5) is None                       # no file
    hold.write(tmp_path, until_step=3, session="s001", timeout_s=60)
    assert hold.blocking(tmp_path, 3) is None                       # steps up to 3 may run
    assert hold.blocking(tmp_path, 4)["session"] == "s001"
    assert hold.blocking(tmp_path, 4, now=time.time() + 61) is None  # past its deadline
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    hold.write(tmp_path, until_step=3, session="s002", timeout_s=60, pid=dead.pid)
    assert hold.blocking(tmp_path, 4) is None                       # its orchestrator is gone
    hold.path(tmp_path).write_text('{"until_step": 3, "sess')
    with pytest.warns(UserWarning, match="hold.json ignored"):
        assert hold.blocking(tmp_path, 4) is None
    hold.clear(tmp_path)
    hold.clear(tmp_path)                                            # clearing twice is fine
    assert not hold.path(tmp_path).exists()


def _run(tmp_path, tiny_model_dir, total: int):
    return live_run(tmp_path, tiny_model_dir, {"trainer.total_steps": total, "trainer.save_freq": 0})


def _held_after_step_1(run):
    """The trainer in a thread, held after step 1 by session s001; returns when step 1 is logged."""
    hold.write(run, until_step=1, session="s001", timeout_s=300)
    trainer = Trainer(run)
    done = threading.Thread(target=trainer.run, daemon=True)
    done.start()
    wait_for(lambda: len(steps(run)) >= 1, 120, "the first step")
    return trainer, done


def test_held_trainer_waits_then_trains_on_the_fix(tmp_path, tiny_model_dir):
    repo, knobs, run = _run(tmp_path, tiny_model_dir, total=3)
    trainer, done = _held_after_step_1(run)
    time.sleep(2.0)                                   # a tiny step takes well under a second
    assert [r["step"] for r in steps(run)] == [1], "trained past the hold"
    knobs["env"]["toy"]["max_steps"] = 1              # the session's fix, promoted while held
    fix = commit_knobs(repo, knobs, "fewer turns")
    promote(repo, fix)
    hold.clear(run)
    done.join(120)
    assert not done.is_alive()
    rows = steps(run)
    assert [r["step"] for r in rows] == [1, 2, 3]
    assert rows[1]["workspace/commit"] == fix.hexsha and rows[1]["episode/turns"] == 1
    held = events(run, "held")
    assert len(held) == 1 and held[0]["step"] == 2 and held[0]["session"] == "s001"
    assert held[0]["waited_s"] >= 2.0
    assert events(run, "applied")[0]["step"] == 2


def test_stop_ends_the_wait_with_a_checkpoint(tmp_path, tiny_model_dir):
    _, _, run = _run(tmp_path, tiny_model_dir, total=5)
    trainer, done = _held_after_step_1(run)
    wait_for(lambda: trainer.step == 1, 30, "the boundary")
    trainer.stop_requested = True                     # what SIGTERM's handler sets
    done.join(60)
    assert not done.is_alive(), "the hold outlived a stop"
    assert [r["step"] for r in steps(run)] == [1]
    assert checkpoint.latest(run / "checkpoints").name == "step-000001"
    assert events(run, "finished")[0]["reason"] == "sigterm"
