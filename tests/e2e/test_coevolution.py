"""End to end: the meta-agent loop around a training run.

- The built-in agent with the real trainer on a tiny model: a user arm planted to leak (a
  collaborator rule that discloses a hidden fact every turn) is diagnosed from the trajectories,
  the fix is committed, passes the gate, is applied by the running trainer, and user/leak_rate
  falls; the ledger and `git log` show it. (slow: a few real PPO steps on the CPU)
- The same loop with the fake `claude` and `codex` executables (tests/fakes), one behaviour per
  session: no credentials, a hang killed at its time limit, an edit outside the workspace refused,
  then a good edit; training goes on through all of them and the good edit is applied.
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runlogs import FAKES  # noqa: E402

from orchestrator import ledger  # noqa: E402
from orchestrator.experiment import StartOptions, run_experiment  # noqa: E402
from orchestrator.experiment_init import init_experiment  # noqa: E402
from orchestrator.workspace import Workspace  # noqa: E402


def git(ws, *args):
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, check=True).stdout


def first_agent_commit(exp_dir: Path) -> str:
    """The first commit a meta-agent session made (the ledger's session lines say which)."""
    fixes = [s for s in ledger.read_lines(exp_dir, "session") if s["commits"]]
    assert fixes, ledger.read_lines(exp_dir, "session")
    return fixes[0]["commits"][0]


def plant_leaking_rule(exp_dir: Path) -> str:
    """A person's commit that plants the defect: a collaborator rule, first in order, that
    discloses the next hidden fact on every turn whatever was asked. The gate judges it."""
    from orchestrator import gate

    ws = exp_dir / "workspace"
    path = ws / "users" / "colbench" / "rules.json"
    rules = json.loads(path.read_text())
    rules["rules"].insert(0, {"id": "blurt", "gyms": ["colbench"], "when": {}, "reveal": "next",
                              "say": "By the way, {facts}"})
    path.write_text(json.dumps(rules, indent=2) + "\n")
    sha = Workspace(ws).commit_all("Add a chatty collaborator rule\n\nWhy: test the loop.\n"
                                   "Expect: the meta-agent finds the leak and repairs it.\n", ("tester", "t@x"))
    gate.judge_pending(exp_dir)          # nothing runs yet: the post-commit hook judged it already
    assert [v["verdict"] for v in ledger.read_lines(exp_dir, "verdict") if v["commit"] == sha] == ["accepted"]
    return sha


@pytest.mark.slow
def test_builtin_repairs_a_leaking_user_in_a_real_run(tmp_path, monkeypatch, tiny_model_dir):
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp_dir = init_experiment("leak", "colbench", tmp_path)
    plant_leaking_rule(exp_dir)
    # max_lag: the trainer waits for a session still running a step after it began, so the fix
    # lands mid-run however slowly the session's nice-19 process is scheduled (a CI machine once
    # finished all 7 steps before it committed); 64-token turns hold the shortest ColBench answer
    # (54 tokens), which `orchestrator start` requires (training/budget.py)
    opts = StartOptions(bench="colbench", agent="builtin", every=2, preset="cpu", steps=7, window=2,
                        model=str(tiny_model_dir), poll_s=0.5, max_lag=1,
                        overrides={"data.train_batch_size": 2, "rollout.n": 1, "rollout.max_turns": 3,
                                   "rollout.response_length": 64, "trainer.save_freq": 0,
                                   "trainer.trajectories_per_step": 8})
    exp, final = run_experiment("leak", opts, tmp_path)
    assert final == "finished"
    fix = first_agent_commit(exp.dir)
    subject = git(exp.ws.path, "log", "-1", "--format=%s%n%ae%n%b", fix)
    assert "Rein in user rule 'blurt'" in subject and "builtin-s001@agents.eau" in subject
    assert "Eau-Agent: builtin" in subject and "Why:" in subject
    verdict = [v for v in ledger.read_lines(exp.dir, "verdict") if v["commit"] == fix]
    assert verdict and verdict[0]["verdict"] == "accepted"
    applied = [a for a in ledger.read_lines(exp.dir, "applied") if a["commit"] == fix]
    assert applied, "the trainer never applied the fix"
    step = applied[0]["step"]
    assert not (exp.dir / "run-001" / "hold.json").exists()
    rows = [json.loads(x) for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    before = [r["user/leak_rate"] for r in rows if r["step"] < step]
    after = [r["user/leak_rate"] for r in rows if r["step"] >= step]
    assert before and after and min(before) > 0.5 and max(after) < min(before)
    live_at = {r["step"]: str(r["workspace/commit"]) for r in rows}
    assert fix.startswith(live_at[step]) or live_at[step].startswith(fix[:7])   # trained on the fix


def _cli_opts(agent, steps=24):
    # max_lag 1 holds the stand-in trainer for each session, so the four scripted sessions all
    # happen before the 24 steps end however slow the machine (on a loaded 2-core machine the run
    # once ended after three); 15 s per session: the fake CLI's edit-and-commit took over 5 s there
    return StartOptions(bench="colbench", agent=agent, every=3, preset="cpu", steps=steps, window=5,
                        trainer="fake_trainer", poll_s=0.1, session_time_s=15.0, max_lag=1,
                        overrides={"trainer.save_freq": 5})


@pytest.mark.slow          # ~40 s each: a 24-step stand-in run held for sessions, one hanging for its limit
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_cli_agents_through_the_loop_with_failing_sessions(agent, tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / "fake-modes.json").write_text(json.dumps(
        {"s001": "nologin", "s002": "hang", "s003": "outside", "s004": "edit"}))
    monkeypatch.setenv("HOME", str(home))
    # HOME's .codex must lie outside the temporary folder (the codex adapter refuses it there)
    (tmp_path / "tmpdir").mkdir()
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmpdir"))
    monkeypatch.setenv("PATH", f"{FAKES}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("PYTHONPATH", str(FAKES))
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.3")
    exp, final = run_experiment(f"{agent}-loop", _cli_opts(agent), tmp_path)
    assert final == "finished"
    sessions = ledger.read_lines(exp.dir, "session")
    status = [s["status"] for s in sessions[:4]]
    assert status[:2] == ["unavailable", "timeout"], sessions
    assert status[2] in ("refused", "no_change") and sessions[2]["commits"] == []
    assert status[3] == "ok" and len(sessions[3]["commits"]) == 1
    config = json.loads((exp.dir / "run-001" / "config.json").read_text())
    assert "hacked" not in config
    good = sessions[3]["commits"][0]
    assert f"Eau-Agent: {agent}" in git(exp.ws.path, "log", "-1", "--format=%B", good)
    assert [v["verdict"] for v in ledger.read_lines(exp.dir, "verdict") if v["commit"] == good] == ["accepted"]
    assert any(a["commit"] == good for a in ledger.read_lines(exp.dir, "applied"))
    steps = [json.loads(x)["step"] for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 25))          # training went on through every failed session


@pytest.mark.slow
def test_builtin_shows_worked_examples_when_every_turn_is_refused(tmp_path, monkeypatch, tiny_model_dir):
    """The README demo's story on a tiny model: an experiment started without worked examples
    (--knob env.*.demonstrations=0), whose untrained policy has every turn refused for its format;
    the built-in agent diagnoses the invalid actions, its commit raising the demonstrations passes
    the gate and the running trainer applies it, and from that step on the episodes are shown one
    example (their `demonstrations` field) while the earlier ones were shown none."""
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    opts = StartOptions(bench="usergym", agent="builtin", every=2, preset="cpu", steps=6, window=2,
                        model=str(tiny_model_dir), poll_s=0.5, max_lag=1,
                        seed_knobs={"env.*.demonstrations": 0},
                        overrides={"gyms": ["intention", "telepathy"], "data.train_batch_size": 2,
                                   "rollout.n": 2, "rollout.max_turns": 3,
                                   "rollout.response_length": 8, "trainer.save_freq": 0,
                                   "trainer.trajectories_per_step": 8})
    exp, final = run_experiment("format", opts, tmp_path)
    assert final == "finished"
    fix = first_agent_commit(exp.dir)
    body = git(exp.ws.path, "log", "-1", "--format=%s%n%b", fix)
    assert body.startswith("Show one more worked example") and "refused for their format" in body
    assert [v["verdict"] for v in ledger.read_lines(exp.dir, "verdict") if v["commit"] == fix] == ["accepted"]
    applied = [a for a in ledger.read_lines(exp.dir, "applied") if a["commit"] == fix]
    assert applied, "the trainer never applied the fix"
    step = applied[0]["step"]
    knobs = json.loads(git(exp.ws.path, "show", f"{fix}:knobs.json"))
    assert knobs["env"]["intention"]["demonstrations"] == knobs["env"]["telepathy"]["demonstrations"] == 1
    shown = {}
    for f in sorted((exp.dir / "run-001" / "trajectories").glob("step-*.jsonl")):
        s = int(f.stem.split("-")[1])
        shown[s] = {json.loads(x)["demonstrations"] for x in f.read_text().splitlines()}
    assert all(v == {0} for s, v in shown.items() if s < step), shown
    assert all(v == {1} for s, v in shown.items() if s >= step) and max(shown) >= step, shown
    rows = [json.loads(x) for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    assert all(r["episode/invalid_rate"] > 0.5 for r in rows if r["step"] < step)   # the finding's cause
