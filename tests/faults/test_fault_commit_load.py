"""Commit load, the parts that keep the trainer's step time: a hot reload reuses
the sandboxed worker of a reward module whose source did not change (and still picks up one that
did, and a weight change), and the live-ref watcher is not woken by a commit's object writes.
The whole load is measured by benchmarks/commit_load_bench.py."""
from __future__ import annotations

import json
import subprocess
import threading
import time
from pathlib import Path

from training import live, rewards

GROUPS = {"agent": {}, "env": {}, "user": {}}
MOD_A = "APPLIES_TO = ['toy']\n\ndef turn_reward(turn):\n    return 1.0\n"
MOD_A2 = "APPLIES_TO = ['toy']\n\ndef turn_reward(turn):\n    return 2.0\n"
MOD_B = ("APPLIES_TO = ['toy']\nCALLS = [0]\n\ndef turn_reward(turn):\n"
         "    CALLS[0] += 1\n    return float(CALLS[0])\n")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def commit(repo: Path, files: dict[str, str], weight_a: float = 1.0) -> str:
    knobs = {**GROUPS, "reward": {"modules": {"a": {"enabled": True, "weight": weight_a},
                                              "b": {"enabled": True, "weight": 1.0}}}}
    files = {"knobs.json": json.dumps(knobs), **files}
    for rel, text in files.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    git(repo, "add", "-A")
    git(repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "c")
    return git(repo, "rev-parse", "HEAD")


def score(snap: live.LiveSnapshot) -> dict[str, float]:
    ep = {"gym": "toy", "turns": [{"env_reward": 0.0}]}
    rewards.score_episode(ep, snap.modules, snap.knobs, rewards.ScoreStats())
    return ep["turns"][0]["module_rewards"]


def test_reload_reuses_unchanged_module_workers_and_picks_up_changes(tmp_path):
    repo = tmp_path / "ws"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, {"rewards/a.py": MOD_A, "rewards/b.py": MOD_B})
    c2 = commit(repo, {"rewards/a.py": MOD_A2}, weight_a=0.5)      # a changed, b the same
    c3 = commit(repo, {}, weight_a=3.0)                              # only a weight
    into = tmp_path / "snapshots"
    before = live.shared_workers()

    s1 = live.load_commit(repo, c1, into)
    assert live.shared_workers() == before + 2
    assert score(s1) == {"a": 1.0, "b": 1.0}
    s2 = live.load_commit(repo, c2, into)
    b1, b2 = (next(m for m in s.modules if m.name == "b") for s in (s1, s2))
    a1, a2 = (next(m for m in s.modules if m.name == "a") for s in (s1, s2))
    assert b2.worker.worker is b1.worker.worker          # same source: the same process
    assert a2.worker.worker is not a1.worker.worker      # changed source: a new one
    s1.close()                                           # the trainer closes the old snapshot
    assert live.shared_workers() == before + 2           # b still used by s2, a2 by s2
    # the changed module and weight are picked up; b's state carried over (it counted s1's call)
    assert score(s2) == {"a": 0.5 * 2.0, "b": 2.0}
    s3 = live.load_commit(repo, c3, into)
    s2.close()
    assert score(s3) == {"a": 3.0 * 2.0, "b": 3.0}
    worker_b = next(m for m in s3.modules if m.name == "b").worker.worker
    s3.close()
    assert live.shared_workers() == before
    assert worker_b._child is None                       # the last user closed the process


def test_a_failed_reload_leaves_the_running_snapshot_usable(tmp_path):
    repo = tmp_path / "ws"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, {"rewards/a.py": MOD_A, "rewards/b.py": MOD_B})
    c2 = commit(repo, {"rewards/a.py": "APPLIES_TO = ['toy']\nraise ValueError('broken')\n"})
    s1 = live.load_commit(repo, c1, tmp_path / "snapshots")
    try:
        live.load_commit(repo, c2, tmp_path / "snapshots")
        raise AssertionError("a broken module must fail the snapshot")
    except live.SnapshotError as exc:
        assert "fails to load" in str(exc)
    assert score(s1) == {"a": 1.0, "b": 1.0}             # b's worker was not closed by the failure
    s1.close()


def test_live_watcher_ignores_object_writes_but_sees_the_ref(tmp_path):
    repo = tmp_path / "ws"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    c1 = commit(repo, {"rewards/a.py": MOD_A})
    git(repo, "update-ref", "refs/eau/live", c1)
    watcher = live.LiveWatcher(repo, poll_s=60.0)          # polling alone would take a minute
    wakes = []
    real = watcher.check
    lock = threading.Lock()

    def counting_check():
        with lock:
            wakes.append(time.monotonic())
        real()

    watcher.check = counting_check
    watcher.start()
    try:
        time.sleep(0.5)
        wakes.clear()
        for i in range(20):                                # a burst of commits' object writes
            subprocess.run(["git", "hash-object", "-w", "--stdin"], cwd=repo, input=f"blob {i}",
                           text=True, check=True, capture_output=True)
        git(repo, "notes", "--ref", "eau", "add", "-m", "{}", c1)
        time.sleep(1.0)
        assert wakes == [], f"woken {len(wakes)} times by writes that are not the live ref"
        c2 = commit(repo, {"rewards/a.py": MOD_A2})
        git(repo, "update-ref", "refs/eau/live", c2)
        deadline = time.time() + 3
        while watcher.latest()[0] != c2 and time.time() < deadline:
            time.sleep(0.05)
        assert watcher.latest()[0] == c2
    finally:
        watcher.stop()


def test_a_rejected_commit_landing_mid_judgement_is_still_reverted(tmp_path, monkeypatch):
    """Under load a commit lands between the gate's read of main and its walk of the pending
    commits; it must not be judged in that pass (whose revert and judged ref stop at the head it
    read), or a rejected commit stays on main unreverted and main and live drift apart."""
    from gate_testkit import knob_commit, make_experiment, ws_of
    from orchestrator import gate
    from orchestrator.workspace import LIVE_REF

    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    good = knob_commit(ws, "agent.entropy_coeff", 0.002)
    real = gate.pending_commits
    late = []

    def pending_after_a_late_commit(*args, **kwargs):
        if not late:
            late.append(knob_commit(ws, "agent.entropy_coeff", 0.5))   # over the schema's maximum
        return real(*args, **kwargs)

    monkeypatch.setattr(gate, "pending_commits", pending_after_a_late_commit)
    first = gate.judge_pending(exp, ws)
    monkeypatch.setattr(gate, "pending_commits", real)
    second = gate.judge_pending(exp, ws)
    assert [v.commit for v in first] == [good] and [v.commit for v in second] == late
    assert second[0].verdict == "rejected" and second[0].reverted_by
    assert ws.rev(LIVE_REF) == good
    assert ws.tree_of("main") == ws.tree_of(LIVE_REF)
    assert gate.judge_pending(exp, ws) == []
