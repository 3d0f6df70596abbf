"""Environment patches (training/env_patches.py): hook modules of the workspace that replace a
piece of an environment's code, run in the sandbox; the gate replays them and the trainer applies
them at a step boundary, like any live commit."""
from __future__ import annotations

import hashlib
import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from training import env_patches, metrics

PROJECT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(PROJECT / "tests" / "orchestrator"))

# The repair: a turn that says anything to the collaborator counts as asking it something (the
# planted bug counted nothing, so min_questions refused every answer).
REPAIR = '''\
def count_question(turn):
    return bool(turn["message"].strip())
'''


def test_a_patch_answers_its_hook_and_falls_back_to_the_built_in_code(tmp_path):
    (tmp_path / "colbench.py").write_text(
        "def count_question(turn):\n    return turn['turn'] > 1\n\n"
        "def parse_answer(text):\n    return 'not a pair'\n")
    patches = env_patches.load_patches({"colbench": tmp_path / "colbench.py"})
    try:
        turn = env_patches.turn_input(2, "hi", "hi", None, False, 0, {})
        assert patches.call("colbench", "count_question", turn, False) is True
        # a value of the wrong type: the built-in code's answer, counted as an error
        assert patches.call("colbench", "parse_answer", "text", ("text", None)) == ("text", None)
        # a gym without a patch, and a hook the patch does not define: the built-in code's
        assert patches.call("travel", "count_question", turn, False) is False
        assert (patches.calls, patches.errors) == (2, 1)
    finally:
        patches.close()


def test_a_patch_without_a_hook_fails_to_load_in_one_sentence(tmp_path):
    (tmp_path / "travel.py").write_text("def counter(turn):\n    return True\n")
    with pytest.raises(env_patches.EnvPatchError) as exc:
        env_patches.load_patches({"travel": tmp_path / "travel.py"})
    assert str(exc.value) == ("env_patches/travel.py defines none of travel's hooks "
                              "(count_question).")


def _events(run: Path, kind: str) -> list[dict]:
    return [e for e in metrics.read_lines(run / "events.jsonl") if e["event"] == kind]


def _wait(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


def test_a_patch_repairs_a_planted_counter_bug_in_a_live_run(tmp_path, tiny_model_dir):
    """A live ColBench run whose counter never counts (tests/training/patch_env.py): a person
    commits env_patches/colbench.py, the gate replays it on the run's trajectories and accepts it,
    and from the step boundary the trainer applies it at, every turn is counted by the patch."""
    from gate_testkit import commit, make_experiment, write, ws_of
    from toy_env import write_run

    from orchestrator import gate
    from orchestrator.workspace import LIVE_REF
    from training.benches.colbench.env import split_action

    exp = make_experiment(tmp_path, bench="colbench")
    ws = ws_of(exp)
    run = exp / "run-001"
    write_run(run, repo=ws.path, model_dir=tiny_model_dir,
              bench=f"{PROJECT / 'tests' / 'training' / 'patch_env.py'}:BENCH",
              overrides={"trainer.total_steps": 1000, "data.train_batch_size": 1, "rollout.n": 2,
                         "rollout.max_turns": 2, "rollout.response_length": 64,
                         "actor.ppo_mini_batch_size": 1})
    proc = subprocess.Popen([sys.executable, "-m", "training.trainer", "--run", str(run)],
                            cwd=PROJECT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        _wait(lambda: (run / "trajectories" / "step-000001.jsonl").exists(), 300, "the first step")
        write(ws, {"env_patches/colbench.py": REPAIR})
        sha = commit(ws, "Repair the question counter",
                     body="\n\nWhy: asked_question is false on every turn, so min_questions "
                          "refuses every answer.\nExpect: episode/question_rate rises.\n")
        (verdict,) = gate.judge_pending(exp)
        assert verdict.accepted, verdict.reasons
        assert ws.rev(LIVE_REF) == sha
        applied = _wait(lambda: _events(run, "applied"), 300, "the patch applied")[0]
        assert applied["commit"] == sha
        step = applied["step"]
        _wait(lambda: (run / "trajectories" / f"step-{step:06d}.jsonl").exists(), 300,
              "a step with the patch")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    turns = {s: [t for ep in metrics.read_lines(run / "trajectories" / f"step-{s:06d}.jsonl")
                 for t in ep["turns"]] for s in range(1, step + 1)}
    before = [t for s in range(1, step) for t in turns[s]]
    assert before and not any(t["asked_question"] for t in before)       # the planted bug
    after = turns[step]
    repaired = [bool(split_action(t["agent"])[0].strip()) for t in after]
    assert [t["asked_question"] for t in after] == repaired and any(repaired)
    rows = {r["step"]: r for r in metrics.read_lines(run / "metrics.jsonl")}
    assert rows[1]["episode/question_rate"] == 0.0 and rows[step]["episode/question_rate"] > 0
    # each step says how often the patch was called and how often it failed
    assert rows[1]["env_patch/calls"] == 0 and rows[step]["env_patch/calls"] >= len(after)
    assert rows[step]["env_patch/errors"] == 0


def test_the_skill_names_every_hook_and_where_patches_live():
    """The meta-agent learns what it may patch from SKILL.md: the folder and every hook."""
    skill = (PROJECT / "skills" / "eau" / "SKILL.md").read_text()
    assert "`env_patches/<gym>.py`" in skill and "env_patches/colbench.py" in skill
    for hook in env_patches.HOOKS:
        assert f"`{hook}(" in skill, hook


def test_an_unchanged_patch_keeps_its_worker_across_reloads(tmp_path):
    """As reward modules do: a hot reload whose patch source is unchanged reuses the running
    sandboxed worker; a failing patch fails the snapshot, whose modules are closed."""
    import shutil

    from training import live

    def folder(name: str, source: str) -> Path:
        root = tmp_path / name
        shutil.copytree(PROJECT / "workspace", root)
        (root / "env_patches").mkdir()
        (root / "env_patches" / "travel.py").write_text(source)
        return root

    # counted by key, not by number: a worker an earlier test left running for the same source
    # is reused too, so only the set of keys says what this build started
    before = live.shared_keys()
    a = live.build(folder("a", REPAIR), "a")
    b = live.build(folder("b", REPAIR), "b")
    try:
        started = live.shared_keys()
        patch_key = ("env_patches/travel", hashlib.sha256(REPAIR.encode()).hexdigest())
        assert patch_key in started and len(started) <= len(before) + 1 + len(a.modules)
        assert [m.worker._entry for m in b.modules] == [m.worker._entry for m in a.modules]
        assert a.snapshot.patches.has("travel", "count_question")
        assert b.snapshot.patches.has("travel", "count_question")
        with pytest.raises(live.SnapshotError, match="env_patches/travel.py defines none"):
            live.build(folder("c", "def other(turn):\n    return True\n"), "c")
        assert live.shared_keys() == started
    finally:
        a.close()
        b.close()
    assert live.shared_keys() == before
