"""Hot reload against a real temporary git workspace, with the trainer as a subprocess
(paper section 4.5): a promoted commit is applied at the next step boundary; a broken reward
module is refused while training goes on; SIGTERM checkpoints and exits 0."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import git
import pytest

from toy_env import KNOBS, write_run
from training import live, metrics

PROJECT = Path(__file__).resolve().parents[2]


def commit_knobs(repo: git.Repo, knobs: dict, message: str, files: dict[str, str] | None = None):
    root = Path(repo.working_tree_dir)
    (root / "knobs.json").write_text(json.dumps(knobs, indent=1))
    paths = ["knobs.json"]
    for rel, text in (files or {}).items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        paths.append(rel)
    repo.index.add(paths)
    return repo.index.commit(message)


def promote(repo: git.Repo, commit) -> None:
    repo.git.update_ref("refs/eau/live", commit.hexsha)


def wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def events(run: Path, kind: str) -> list[dict]:
    return [e for e in metrics.read_lines(run / "events.jsonl") if e["event"] == kind]


def steps(run: Path) -> list[dict]:
    return list(metrics.read_lines(run / "metrics.jsonl"))


def test_watcher_sees_ref_within_a_second(tmp_path):
    repo = git.Repo.init(tmp_path / "ws")
    c1 = commit_knobs(repo, KNOBS, "one")
    promote(repo, c1)
    watcher = live.LiveWatcher(tmp_path / "ws", poll_s=0.5).start()
    try:
        assert watcher.latest()[0] == c1.hexsha
        c2 = commit_knobs(repo, {**KNOBS, "agent": {**KNOBS["agent"], "entropy_coeff": 0.002}}, "two")
        t0 = time.monotonic()
        promote(repo, c2)
        wait_for(lambda: watcher.latest()[0] == c2.hexsha, 3.0, "the watcher")
        assert watcher.latest()[1] - t0 < 1.0
        repo.git.pack_refs("--all")                      # packed refs are read too
        assert live.read_ref(live.git_dir(tmp_path / "ws"), "refs/eau/live") == c2.hexsha
    finally:
        watcher.stop()


def test_watcher_wakes_on_ref_writes_not_on_git_reads(tmp_path):
    """Polling left out (every 30 s): the promotion still arrives within a second through file
    events, while git commands reading the repository deliver none to the trainer's process."""
    repo = git.Repo.init(tmp_path / "ws")
    promote(repo, commit_knobs(repo, KNOBS, "one"))
    watcher = live.LiveWatcher(tmp_path / "ws", poll_s=30.0).start()
    try:
        if watcher._observer is None:
            pytest.skip("no inotify here: the watcher polls")
        time.sleep(0.3)
        base = watcher.events
        for _ in range(10):
            repo.git.rev_parse("refs/eau/live")
            repo.git.log("-1", "--format=%H")
        time.sleep(0.3)
        assert watcher.events == base, "git reads reached the watcher"
        c2 = commit_knobs(repo, {**KNOBS, "agent": {**KNOBS["agent"], "entropy_coeff": 0.002}}, "two")
        t0 = time.monotonic()
        promote(repo, c2)
        wait_for(lambda: watcher.latest()[0] == c2.hexsha, 3.0, "the watcher")
        assert watcher.latest()[1] - t0 < 1.0 and watcher.events > base
    finally:
        watcher.stop()


def live_run(tmp_path, tiny_model_dir, overrides: dict):
    """A git workspace whose live knobs give 3-turn toy episodes, and a run following it."""
    repo = git.Repo.init(tmp_path / "ws")
    knobs = json.loads(json.dumps(KNOBS))
    knobs["env"]["toy"]["max_steps"] = 3
    promote(repo, commit_knobs(repo, knobs, "start"))
    run = tmp_path / "run"
    write_run(run, repo=tmp_path / "ws", model_dir=tiny_model_dir,
              overrides={"rollout.max_turns": 3, **overrides})
    return repo, knobs, run


def test_hot_reload_applies_at_next_step_and_refuses_broken_module(tmp_path, tiny_model_dir):
    repo, knobs, run = live_run(tmp_path, tiny_model_dir, {"trainer.total_steps": 1000})
    proc = subprocess.Popen([sys.executable, "-m", "training.trainer", "--run", str(run)],
                            cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: len(steps(run)) >= 1, 120, "the first step")
        assert steps(run)[0]["episode/turns"] == 3          # the tiny model never answers
        # 1. fewer turns and a larger entropy bonus, promoted while the trainer runs
        knobs["env"]["toy"]["max_steps"] = 1
        knobs["agent"]["entropy_coeff"] = 0.003
        good = commit_knobs(repo, knobs, "fewer turns")
        promote(repo, good)
        applied = wait_for(lambda: events(run, "applied"), 60, "applied")[0]
        assert applied["commit"] == good.hexsha
        wait_for(lambda: any(r["step"] >= applied["step"] for r in steps(run)), 60, "next step")
        after = [r for r in steps(run) if r["step"] >= applied["step"]]
        before = [r for r in steps(run) if r["step"] < applied["step"]]
        assert all(r["workspace/commit"] == good.hexsha for r in after)
        assert all(r["episode/turns"] == 1 for r in after)
        assert all(r["episode/turns"] == 3 for r in before)
        row = after[0]
        assert row["actor/entropy_coeff"] == 0.003
        # the coefficient in the loss is the new one: loss = pg - c_ent * H + c_kl * KL
        assert row["actor/loss"] == pytest.approx(
            row["actor/pg_loss"] - 0.003 * row["actor/entropy"]
            + row["actor/kl_loss_coef"] * row["kl/ref"], abs=1e-6)
        # 2. a reward module that fails to import: not applied, training goes on
        knobs["reward"]["modules"] = {"broken": {"enabled": True, "weight": 1.0}}
        bad = commit_knobs(repo, knobs, "broken module",
                           {"rewards/broken.py": "APPLIES_TO = ['toy']\nimport no_such_module\n"})
        promote(repo, bad)
        failed = wait_for(lambda: events(run, "reload_failed"), 60, "reload_failed")[0]
        assert failed["commit"] == bad.hexsha and "broken" in failed["error"]
        last = steps(run)[-1]["step"]
        wait_for(lambda: steps(run)[-1]["step"] >= last + 1, 60, "a step after the failure")
        assert steps(run)[-1]["workspace/commit"] == good.hexsha
        # 3. SIGTERM: checkpoint, then exit 0
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 0
        ckpts = events(run, "checkpoint")
        assert ckpts and ckpts[-1]["reason"] == "sigterm"
        state = json.loads((run / ckpts[-1]["path"] / "state.json").read_text())
        assert state["commit"] == good.hexsha
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
