"""The trainer SIGKILLed at random points (during rollout, during the update,
during a checkpoint write), 20 times, seeded. After every kill the supervisor restarts it from the
newest whole checkpoint; metrics.jsonl never keeps a half line or a step twice; the live commit in
effect after the restart is the one in effect before the crash (the live ref is moved on purpose
between kills, so the commit differs from the run's first one).

The trainer is the real one (tiny model, toy bench, the cheapest config), forked from a warm
fork server (tests/faults/forkrun.py) so that twenty restarts fit in CI time.
"""
from __future__ import annotations

import json
import os
import random
import signal
import time
from pathlib import Path

import git
import pytest

from forkrun import ForkSupervisor
from orchestrator.supervisor import RESTARTED, RUNNING
from toy_env import KNOBS, write_run
from training import checkpoint, metrics

KILLS = 20
SEED = 20260


def wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


def raw_metric_lines(run: Path) -> list[str]:
    path = run / "metrics.jsonl"
    return path.read_text().splitlines() if path.exists() else []


def assert_metrics_whole(run: Path) -> list[int]:
    """Every line of metrics.jsonl parses and steps run 1, 2, ... with none twice; the steps."""
    steps = []
    for line in raw_metric_lines(run):
        steps.append(json.loads(line)["step"])          # a half line raises here
    assert steps == list(range(1, len(steps) + 1)), f"steps out of order or twice: {steps}"
    return steps


def events(run: Path, kind: str | None = None) -> list[dict]:
    return [e for e in metrics.read_lines(run / "events.jsonl") if kind in (None, e["event"])]


def commit_in_effect(run: Path, pid: int) -> str:
    """The commit the trainer process `pid` runs now: its start or its last applied commit."""
    mine = [e for e in events(run) if e.get("pid") == pid or e["event"] == "applied"]
    started = max(i for i, e in enumerate(mine) if e.get("pid") == pid)
    applied = [e for e in mine[started:] if e["event"] == "applied"]
    return (applied[-1] if applied else mine[started])["commit"]


def promote(repo: git.Repo, knobs: dict, message: str) -> str:
    root = Path(repo.working_tree_dir)
    (root / "knobs.json").write_text(json.dumps(knobs, indent=1))
    repo.index.add(["knobs.json"])
    sha = repo.index.commit(message).hexsha
    repo.git.update_ref("refs/eau/live", sha)
    return sha


@pytest.mark.slow
def test_twenty_sigkills_resume_from_whole_checkpoints(tmp_path, tiny_model_dir):
    rng = random.Random(SEED)
    repo = git.Repo.init(tmp_path / "ws")
    first = promote(repo, KNOBS, "initial knobs")
    run = tmp_path / "run"
    write_run(run, repo=tmp_path / "ws", model_dir=tiny_model_dir, overrides={
        "trainer.total_steps": 10_000, "trainer.save_freq": 1, "trainer.keep_checkpoints": 2,
        "rollout.response_length": 4, "rollout.max_turns": 2, "workspace.poll_s": 0.1})
    sup = ForkSupervisor(run, phase_hooks=True, max_restarts=KILLS + 1, stall_s=600).start()
    phases = {"rollout": 0, "update": 0, "checkpoint": 0}
    live = first
    try:
        for kill in range(KILLS):
            # the first kill lands in the very first checkpoint (a crash before any whole
            # checkpoint exists); then a seeded mix of phases
            phase = "checkpoint" if kill == 0 else rng.choice(sorted(phases))
            pid = sup.proc.pid
            if kill % 5 == 4:          # the live ref moves: the new commit must be applied first
                knobs = json.loads(json.dumps(KNOBS))
                knobs["agent"]["entropy_coeff"] = round(0.001 + 0.0001 * kill, 6)
                live = promote(repo, knobs, f"entropy {kill}")
                wait_for(lambda: any(e["commit"] == live for e in events(run, "applied")
                                     if e["time"] > sup.started_at), 120, "the new live commit")
            (run / ".phase").unlink(missing_ok=True)
            wait_for(lambda: (run / ".phase").exists() and (run / ".phase").read_text() == phase,
                     120, f"phase {phase} (kill {kill})")
            time.sleep(rng.uniform(0.0, 0.03))
            before = commit_in_effect(run, pid)
            assert before == live
            os.killpg(pid, signal.SIGKILL)
            sup.proc.wait(timeout=30)
            phases[phase] += 1
            st = sup.poll()
            assert st.state == RESTARTED and st.restarts == kill + 1, st
            new_pid = sup.proc.pid
            started = wait_for(lambda: [e for e in events(run, "started") if e["pid"] == new_pid],
                               120, "the restarted trainer")[0]
            newest = checkpoint.latest(run / "checkpoints")
            resumed_at = int(newest.name.split("-")[1]) if newest else 0
            assert started["step"] == resumed_at            # from the newest whole checkpoint
            assert sup.starts[-1][1] == (newest is not None)
            assert_metrics_whole(run)
            if kill % 5 in (0, 4):     # after a live move (and a few more): a step must follow
                # the first step after the restart runs the commit in effect before the crash
                row = wait_for(lambda: [r for r in metrics.read_lines(run / "metrics.jsonl")
                                        if r["step"] == resumed_at + 1], 120,
                               "a step after resume")[0]
                assert row["workspace/commit"] == before, (kill, phase, resumed_at)
                assert_metrics_whole(run)
            assert sup.poll().state == RUNNING
        assert min(phases.values()) >= 3, phases
        assert sup.stop(timeout_s=120) == 0
    finally:
        if sup.proc is not None and sup.proc.poll() is None:
            os.killpg(sup.proc.pid, signal.SIGKILL)
    steps = assert_metrics_whole(run)
    assert steps and steps[-1] == int(checkpoint.latest(run / "checkpoints").name.split("-")[1])
    assert [e for e in events(run) if e["event"] == "finished"][-1]["reason"] == "sigterm"
