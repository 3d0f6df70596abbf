"""A person's commit on main is judged within seconds while the watcher runs."""
from __future__ import annotations

import time

from gate_testkit import knob_commit, make_experiment, ws_of
from orchestrator.watcher import GateWatcher
from orchestrator.workspace import LIVE_REF


def wait_for(cond, timeout=10.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if cond():
            return True
        time.sleep(0.05)
    return False


def test_person_commits_are_judged_within_seconds(tmp_path):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    with GateWatcher(exp, poll_s=30.0) as watcher:       # file events, not the 30 s poll, wake it
        t0 = time.monotonic()
        good = knob_commit(ws, "agent.entropy_coeff", 0.002)
        assert wait_for(lambda: ws.rev(LIVE_REF) == good), watcher.errors
        assert time.monotonic() - t0 < 8.0               # loose: 2 shared CPUs under load
        bad = knob_commit(ws, "env.travel.max_steps", 1)
        assert wait_for(lambda: ws.main() != bad and ws.tree_of("main") == ws.tree_of(LIVE_REF))
    assert [v.commit for v in watcher.judged] == [good, bad]
    assert [v.verdict for v in watcher.judged] == ["accepted", "rejected"]
    assert watcher.errors == []


def test_polling_alone_catches_a_commit(tmp_path, monkeypatch):
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    import watchdog.observers
    monkeypatch.setattr(watchdog.observers, "Observer", lambda: (_ for _ in ()).throw(OSError("no inotify")))
    with GateWatcher(exp, poll_s=0.3):
        good = knob_commit(ws, "agent.kl_loss_coef", 0.002)
        assert wait_for(lambda: ws.rev(LIVE_REF) == good)


def test_a_commit_landing_right_after_a_judgement_is_judged(tmp_path, monkeypatch):
    """Under commit load a commit can land between the end of a judgement and the
    watcher's next look at main; it must be judged without waiting for yet another commit."""
    from orchestrator import gate

    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    real = gate.judge_pending
    late = []

    def judge_then_commit(*args, **kwargs):
        out = real(*args, **kwargs)
        if not late:                                      # once: right after the first judgement
            late.append(knob_commit(ws, "agent.entropy_coeff", 0.001))
        return out

    monkeypatch.setattr(gate, "judge_pending", judge_then_commit)
    import watchdog.observers
    monkeypatch.setattr(watchdog.observers, "Observer", lambda: (_ for _ in ()).throw(OSError("no inotify")))
    with GateWatcher(exp, poll_s=0.2) as watcher:
        first = knob_commit(ws, "agent.entropy_coeff", 0.002)
        assert wait_for(lambda: late and ws.rev(LIVE_REF) == late[0]), \
            f"the late commit was never judged: {watcher.errors}"
    assert [v.commit for v in watcher.judged] == [first, late[0]]
