"""Background work yields the CPU to the trainer (orchestrator/priority.py): a
session's thread and what it starts run at SCHED_IDLE on Linux, the gate watcher's thread and the
git hooks at nice 19 (an agent's hooks stay at SCHED_IDLE), the trainer at normal priority;
EAU_BACKGROUND_PRIORITY=off switches it off."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from gate_testkit import make_experiment
from orchestrator import priority
from orchestrator.agents.base import SessionResult
from orchestrator.scheduler import SessionRunner


@pytest.fixture(autouse=True)
def _idle_mode(monkeypatch):
    """These tests check the SCHED_IDLE level (EAU_BACKGROUND_PRIORITY=idle); the default is nice."""
    monkeypatch.setenv("EAU_BACKGROUND_PRIORITY", "idle")
from orchestrator.supervisor import Supervisor
from orchestrator.watcher import GateWatcher

pytestmark = pytest.mark.skipif(not priority.supported(), reason="Linux scheduling policies only")

PROBE = "import os; print(os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))"


def child_policy() -> tuple[int, int]:
    """(policy, nice) of a process started from the calling thread."""
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True)
    policy, nice = out.stdout.split()
    return int(policy), int(nice)


def in_thread(fn):
    box = {}
    t = threading.Thread(target=lambda: box.setdefault("v", fn()))
    t.start()
    t.join(30)
    return box["v"]


def test_lowered_thread_and_its_children_idle_main_thread_untouched(monkeypatch):
    monkeypatch.setenv(priority.ENV, "idle")

    def work():
        return priority.lower_this_thread(), os.sched_getscheduler(0), child_policy()

    done, policy, child = in_thread(work)
    assert done == "idle" and policy == os.SCHED_IDLE and child[0] == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == os.SCHED_OTHER and not priority.is_lowered()
    assert child_policy()[0] == os.SCHED_OTHER


def test_nice_mode_and_off_switch(monkeypatch):
    monkeypatch.setenv(priority.ENV, "nice")
    done, child = in_thread(lambda: (priority.lower_this_thread("idle"), child_policy()))
    assert done == "nice" and child == (os.SCHED_OTHER, 19)
    monkeypatch.delenv(priority.ENV)
    done, child = in_thread(lambda: (priority.lower_this_thread("nice"), child_policy()))
    assert done == "nice" and child == (os.SCHED_OTHER, 19)
    monkeypatch.setenv(priority.ENV, "off")
    done, child = in_thread(lambda: (priority.lower_this_thread(), child_policy()))
    assert done == "" and child[0] == os.SCHED_OTHER and child[1] == os.getpriority(os.PRIO_PROCESS, 0)


def test_session_thread_and_its_cli_run_idle(monkeypatch):
    monkeypatch.setenv(priority.ENV, "idle")
    seen = {}

    def fake_session(ctx):
        seen["thread"] = os.sched_getscheduler(0)
        seen["cli"] = child_policy()
        return SessionResult(agent="command", session_id="s001", status="no_change")

    runner = SessionRunner(run=fake_session)
    runner.submit(ctx=type("Ctx", (), {"session_id": "s001"})())
    runner.wait(30)
    assert seen["thread"] == os.SCHED_IDLE and seen["cli"][0] == os.SCHED_IDLE
    assert os.sched_getscheduler(0) == os.SCHED_OTHER


def test_gate_watcher_thread_runs_at_nice_19_unless_switched_off(tmp_path, monkeypatch):
    base = os.getpriority(os.PRIO_PROCESS, 0)
    for value, want in ((None, 19), ("off", base)):
        if value is None:
            monkeypatch.setenv(priority.ENV, "idle")
        else:
            monkeypatch.setenv(priority.ENV, value)
        exp = make_experiment(tmp_path / (value or "on"))
        watcher = GateWatcher(exp, poll_s=0.2).start()
        try:
            tid = watcher._thread.native_id
            deadline = time.time() + 5
            while os.getpriority(os.PRIO_PROCESS, tid) != want and time.time() < deadline:
                time.sleep(0.05)
            assert os.getpriority(os.PRIO_PROCESS, tid) == want
            assert os.sched_getscheduler(tid) == os.SCHED_OTHER     # never starved outright
        finally:
            watcher.stop()


HOOK = ("import os, sys; from orchestrator import gate; "
        "rc = gate.main(['--exp-dir', sys.argv[1], '--hook', 'commit-msg', sys.argv[2]]); "
        "print(rc, os.sched_getscheduler(0), os.getpriority(os.PRIO_PROCESS, 0))")


def test_git_hook_lowers_itself_and_an_agents_hook_stays_idle(tmp_path, monkeypatch):
    exp = make_experiment(tmp_path)
    msg = tmp_path / "msg"
    msg.write_text("x\n\nWhy: a test.\nExpect: nothing.\n")
    base = os.getpriority(os.PRIO_PROCESS, 0)
    for value, want in ((None, (os.SCHED_OTHER, 19)), ("off", (os.SCHED_OTHER, base))):
        env = {k: v for k, v in os.environ.items() if k != priority.ENV}
        if value:
            env[priority.ENV] = value
        out = subprocess.run([sys.executable, "-c", HOOK, str(exp), str(msg)],
                             cwd=exp / "workspace", env=env, capture_output=True, text=True)
        assert out.stdout.split() == ["0", str(want[0]), str(want[1])], out.stderr
    monkeypatch.setenv(priority.ENV, "idle")

    def from_a_session():                       # the hook of a commit an agent's CLI makes
        priority.lower_this_thread("idle")
        return subprocess.run([sys.executable, "-c", HOOK, str(exp), str(msg)],
                              cwd=exp / "workspace", capture_output=True, text=True)

    out = in_thread(from_a_session)
    assert out.stdout.split()[:2] == ["0", str(os.SCHED_IDLE)], out.stderr


def sleeper_run(tmp_path: Path) -> tuple[Path, dict]:
    mods = tmp_path / "mods"
    mods.mkdir(exist_ok=True)
    (mods / "eau_sleeper.py").write_text("import time\ntime.sleep(30)\n")
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    return run, {"PYTHONPATH": str(mods)}


def trainer_policy(sup: Supervisor) -> tuple[int, int]:
    try:
        return os.sched_getscheduler(sup.proc.pid), os.getpriority(os.PRIO_PROCESS, sup.proc.pid)
    finally:
        sup._kill()


def test_trainer_keeps_normal_priority(tmp_path, monkeypatch):
    monkeypatch.setenv(priority.ENV, "idle")
    run, env = sleeper_run(tmp_path)
    sup = Supervisor(run, env=env, module="eau_sleeper").start()
    assert trainer_policy(sup) == (os.SCHED_OTHER, os.getpriority(os.PRIO_PROCESS, 0))


@pytest.mark.skipif(os.geteuid() != 0, reason="leaving SCHED_IDLE needs CAP_SYS_NICE")
def test_trainer_started_from_a_lowered_thread_is_put_back(tmp_path, monkeypatch):
    monkeypatch.setenv(priority.ENV, "idle")
    run, env = sleeper_run(tmp_path)

    def start():
        priority.lower_this_thread()
        return Supervisor(run, env=env, module="eau_sleeper").start()

    sup = in_thread(start)
    assert trainer_policy(sup)[0] == os.SCHED_OTHER


def test_trainer_and_session_cli_stay_in_the_orchestrators_session(tmp_path, monkeypatch):
    """Autogroups share the CPU between sessions first: a trainer or CLI in a session of its own
    would not be held above / below by priorities at all."""
    from orchestrator.agents import base

    run, env = sleeper_run(tmp_path)
    sup = Supervisor(run, env=env, module="eau_sleeper").start()
    try:
        assert os.getsid(sup.proc.pid) == os.getsid(0)
        assert os.getpgid(sup.proc.pid) == sup.proc.pid            # still killable as a group
    finally:
        sup._kill()
    out = base.run_process([sys.executable, "-c", "import os; print(os.getsid(0), os.getpgid(0), os.getpid())"],
                           cwd=tmp_path, env=dict(os.environ), timeout_s=30,
                           stdout_path=tmp_path / "out", stderr_path=tmp_path / "err")
    sid, pgid, pid = map(int, out.stdout.split())
    assert sid == os.getsid(0) and pgid == pid
