"""The experiment loop with a stand-in trainer (tests/fakes/fake_trainer.py, same files, fast):
the built-in agent repairs a planted deadlock live; a restart through control.json makes run-002
from the carried workspace and the cap holds, and one under which no episode could succeed is
refused; a stopped experiment resumes; a crash restarts."""
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runlogs import FAKES  # noqa: E402

from orchestrator import ledger  # noqa: E402
from orchestrator.experiment import StartOptions, run_experiment  # noqa: E402


@pytest.fixture
def env(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", str(FAKES))
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    return tmp_path


def opts(**kw):
    base = dict(bench="colbench", agent="builtin", every=5, preset="cpu", steps=40, window=5,
                trainer="fake_trainer", poll_s=0.1, overrides={"trainer.save_freq": 5})
    base.update(kw)
    return StartOptions(**base)


def git(ws, *args):
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, check=True).stdout


def test_builtin_repairs_a_planted_deadlock_live(env, monkeypatch):
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.25")      # a session (with the gate) takes ~1-2 s
    # max_lag 1: the trainer waits for a session one step behind, so a slow machine (a session
    # took over 10 s under load here) cannot let the 40 steps finish before the fix is measured
    exp, final = run_experiment("dl", opts(max_lag=1), env)
    assert final == "finished"
    sessions = [s for s in ledger.read_lines(exp.dir, "session") if s["commits"]]
    fix = sessions[0]["commits"][0]
    assert "min_questions 1 -> 0" in git(exp.ws.path, "log", "-1", "--format=%s", fix)
    verdict = [v for v in ledger.read_lines(exp.dir, "verdict") if v["commit"] == fix][0]
    assert verdict["verdict"] == "accepted"
    applied = [a for a in ledger.read_lines(exp.dir, "applied") if a["commit"] == fix]
    assert applied and applied[0]["run"] == "run-001"
    effect = [e for e in ledger.read_lines(exp.dir, "effect") if e["commit"] == fix][0]
    assert effect["metric"] == "success/colbench" and effect["label"] == "helped"
    metrics = [json.loads(x) for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    step = applied[0]["step"]
    assert all(m["success/colbench"] < 0.1 for m in metrics if m["step"] < step)
    assert all(m["success/colbench"] >= 0.6 for m in metrics if m["step"] >= step)
    assert git(exp.ws.path, "rev-parse", "run-001-start").strip() == exp.runs[0]["start_commit"]
    assert "builtin-s" in git(exp.ws.path, "log", "--format=%ae", fix)
    # a finished run is never resumed: its checkpoints keep only the policy (orchestrator/prune.py)
    states = [json.loads(p.read_text()) for p in (exp.dir / "run-001" / "checkpoints").glob("*/state.json")]
    assert states and all(s["policy_only"] for s in states)


def test_restart_request_makes_run_002_and_the_cap_holds(env, monkeypatch):
    monkeypatch.setenv("FAKE_TRAINER_NAN_AT", "8")
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.2")
    # max_lag 1: the trainer waits for each session, so the restart request cannot lose a race
    # with the run's last step (on a loaded machine run-001 once finished first)
    exp, final = run_experiment("nan", opts(max_runs=2, steps=30, max_lag=1), env)
    assert [r["name"] for r in exp.runs] == ["run-001", "run-002"]
    controls = ledger.read_lines(exp.dir, "control")
    assert [c["status"] for c in controls] == ["honoured", "refused"]
    assert controls[0]["action"] == "resume" and controls[0]["new_run"] == "run-002"
    assert "cap of 2 runs" in controls[1]["reason"]
    run2 = exp.runs[1]
    assert run2["from_run"] == "run-001" and run2["from_checkpoint"] == "step-000005"
    # run-002 starts from the carried workspace: its tag is the live commit holding the request
    tag = git(exp.ws.path, "rev-parse", "run-002-start").strip()
    assert json.loads(git(exp.ws.path, "show", f"{tag}:control.json"))["action"] == "resume"
    started = json.loads((exp.dir / "run-002" / "events.jsonl").read_text().splitlines()[0])
    assert started["resumed"] and started["step"] == 5
    # run-002 resumed from its whole copy (above); the run it came from, never resumed again,
    # keeps only its policy
    state = "checkpoints/step-000005/state.json"
    assert json.loads((exp.dir / "run-001" / state).read_text())["policy_only"] is True


def test_stopped_experiment_resumes_from_its_checkpoint(env, monkeypatch):
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.1")
    stop = threading.Event()
    exp, final = run_experiment("res", opts(agent="none", steps=25), env, stop=stop,
                                on_tick=lambda st: st["step"] >= 6 and stop.set())
    assert final == "stopped" and exp.runs[0]["state"] == "stopped"
    assert any((exp.dir / "run-001" / "checkpoints").iterdir())
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.01")
    exp, final = run_experiment("res", opts(agent="none", steps=25), env)
    assert final == "finished" and len(exp.runs) == 1
    steps = [json.loads(x)["step"] for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 26))


def test_crash_restarts_the_trainer_from_its_checkpoint(env, monkeypatch):
    monkeypatch.setenv("FAKE_TRAINER_CRASH_AT", "7")
    exp, final = run_experiment("crash", opts(agent="none", steps=12), env)
    assert final == "finished"
    assert [c["action"] for c in ledger.read_lines(exp.dir, "control")] == ["crash-restart"]
    events = [json.loads(x) for x in (exp.dir / "run-001" / "events.jsonl").read_text().splitlines()]
    assert [e["resumed"] for e in events if e["event"] == "started"] == [False, True]


SLOW_FIX = """import json, pathlib, sys, time
time.sleep(3.0)       # a slow session: the stand-in trainer makes 30 steps meanwhile unless held
knobs = json.loads(pathlib.Path("knobs.json").read_text())
knobs["env"]["colbench"]["min_questions"] = 0
pathlib.Path("knobs.json").write_text(json.dumps(knobs, indent=2) + "\\n")
import os
pathlib.Path(os.environ["EAU_SESSION_DIR"], "message.txt").write_text(
    "Lift the question minimum\\n\\nWhy: episodes deadlock.\\nExpect: success/colbench rises.\\n")
print("lifted")
"""


def test_max_lag_holds_the_trainer_for_a_slow_session(env, monkeypatch):
    """--max-lag 1: a session begun at step S is trained on from step S+2 at the latest, however
    long it takes; the hold is gone when the session is judged, and training ends normally."""
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.1")
    script = env / "slow_fix.py"
    script.write_text(SLOW_FIX)
    exp, final = run_experiment("lag", opts(agent="command", agent_cmd=[sys.executable, str(script)],
                                            every=4, steps=12, max_lag=1), env)
    assert final == "finished"
    session = ledger.read_lines(exp.dir, "session")[0]
    assert session["status"] == "ok" and len(session["commits"]) == 1, session
    fix = session["commits"][0]
    assert [v["verdict"] for v in ledger.read_lines(exp.dir, "verdict") if v["commit"] == fix] == ["accepted"]
    events = [json.loads(x) for x in (exp.dir / "run-001" / "events.jsonl").read_text().splitlines()]
    held = [e for e in events if e["event"] == "held"]
    applied = [e for e in events if e["event"] == "applied" and e["commit"] == fix]
    assert held and held[0]["session"] == "s001" and held[0]["waited_s"] > 1.0, events
    assert applied and applied[0]["step"] == held[0]["step"]          # trained on at the held step
    # S: the step the loop saw when it began the session; the trainer may be a step past it
    assert session["step"] >= 4 and held[0]["step"] <= session["step"] + 1 + 2
    assert not (exp.dir / "run-001" / "hold.json").exists()
    steps = [json.loads(x)["step"] for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(1, 13))


def plant_live(ws: Path, files: dict[str, str], message: str) -> None:
    """A commit on top of refs/eau/live with `files` changed, made the live ref directly (as if
    the gate had promoted it); main and the working tree stay as they are."""
    env = {**os.environ, "GIT_INDEX_FILE": str(ws / ".git" / "planted-index")}

    def g(*args, stdin=None):
        return subprocess.run(["git", "-C", str(ws), *args], input=stdin, capture_output=True,
                              text=True, check=True, env=env).stdout.strip()

    live = g("rev-parse", "refs/eau/live")
    g("read-tree", live)
    for path, text in files.items():
        g("update-index", "--add", "--cacheinfo", f"100644,{g('hash-object', '-w', '--stdin', stdin=text)},{path}")
    commit = g("commit-tree", g("write-tree"), "-p", live, "-m", message)
    g("update-ref", "refs/eau/live", commit)


def test_a_restart_no_episode_could_succeed_under_is_refused(env, monkeypatch):
    """A restart requested while the live knobs ask ColBench for 7 answered questions (the cpu
    preset gives 6 turns) is refused in the ledger with the sentence; the run goes on."""
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.1")
    planted = []

    def plant(st):
        if st["step"] >= 3 and not planted:
            ws = env / "imp" / "workspace"
            knobs = json.loads((ws / "knobs.json").read_text())
            knobs["env"]["colbench"]["min_questions"] = 7
            plant_live(ws, {"knobs.json": json.dumps(knobs), "control.json": json.dumps(
                {"action": "restart", "why": "a fresh start"})}, "Ask more, restart")
            planted.append(True)

    exp, final = run_experiment("imp", opts(agent="none", steps=15), env, on_tick=plant)
    assert final == "finished" and [r["name"] for r in exp.runs] == ["run-001"]
    control = [c for c in ledger.read_lines(exp.dir, "control") if c["action"] == "restart"]
    assert [c["status"] for c in control] == ["refused"]
    assert control[0]["reason"].startswith("rollout.max_turns 6 leaves ColBench 6 turn(s), but a "
                                           "solved episode takes 8")


def test_inter_run_control_reviews_each_finished_run_and_starts_the_next(env, monkeypatch):
    """--control inter-run (the paper's inter-run-only contrast): no session while a run trains;
    the session after run-001 repairs the planted deadlock, run-002 starts from that workspace and
    succeeds from its first step, and a review that changes nothing ends the experiment."""
    monkeypatch.setenv("FAKE_TRAINER_STEP_S", "0.05")
    exp, final = run_experiment("ir", opts(control="inter-run", steps=12, max_runs=4), env)
    assert final == "finished" and [r["name"] for r in exp.runs] == ["run-001", "run-002"]
    sessions = ledger.read_lines(exp.dir, "session")
    assert [s["step"] for s in sessions] == [12, 12]               # after each run, never during
    fix = sessions[0]["commits"][0]
    assert "min_questions 1 -> 0" in git(exp.ws.path, "log", "-1", "--format=%s", fix)
    controls = ledger.read_lines(exp.dir, "control")
    assert [(c["action"], c["status"]) for c in controls] == [("next", "honoured"), ("next", "refused")]
    assert git(exp.ws.path, "rev-parse", "run-002-start").strip() == exp.runs[1]["start_commit"]
    run1 = [json.loads(x) for x in (exp.dir / "run-001" / "metrics.jsonl").read_text().splitlines()]
    run2 = [json.loads(x) for x in (exp.dir / "run-002" / "metrics.jsonl").read_text().splitlines()]
    assert all(m["success/colbench"] < 0.1 for m in run1)         # nothing changed during run-001
    assert all(m["success/colbench"] >= 0.6 for m in run2)
