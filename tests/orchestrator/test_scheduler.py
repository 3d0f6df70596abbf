"""Sessions every K steps or T minutes, never two at once, training going on meanwhile."""
import threading

import pytest

from orchestrator.agents.base import SessionResult
from orchestrator.scheduler import Scheduler, SessionRunner


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def test_every_k_steps_counted_from_the_end_of_the_last_session():
    s = Scheduler(every_steps=5)
    assert not s.due(4) and s.due(5)
    s.started()
    assert not s.due(50)                       # never two at once
    s.finished(step=12)
    assert not s.due(16) and s.due(17)


def test_every_t_minutes_or_k_steps_whichever_first():
    clock = Clock()
    s = Scheduler(every_steps=100, every_minutes=2, clock=clock)
    assert not s.due(3)
    clock.t += 121
    assert s.due(3)
    s.started()
    s.finished(step=3)
    assert not s.due(4) and s.due(103)


def test_time_only_schedule():
    clock = Clock()
    s = Scheduler(every_steps=None, every_minutes=0.5, clock=clock)
    assert not s.due(1000)
    clock.t += 30
    assert s.due(0)


def test_runner_runs_one_session_in_the_background():
    gate = threading.Event()

    def slow(ctx):
        gate.wait(5)
        return SessionResult("builtin", ctx.session_id, "ok")

    class Ctx:
        session_id = "s001"

    runner = SessionRunner(slow)
    seen = []
    runner.submit(Ctx(), after=lambda r: seen.append(r.status))
    assert runner.running and runner.poll() is None      # the caller (training loop) goes on
    with pytest.raises(RuntimeError):
        runner.submit(Ctx())
    gate.set()
    res = runner.wait(5)
    assert res.status == "ok" and seen == ["ok"] and not runner.running
    assert runner.poll() is None                          # a result is handed out once
