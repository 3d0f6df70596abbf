"""A reward module that passes the gate and fails only later, in training: the experiment shows
its failed calls (the diagnosis, `status`, the report, the step lines of `start`) and switches it
off by a commit the gate judges (orchestrator/reward_guard.py). Real git, the real sandbox."""
from __future__ import annotations

import json

from gate_testkit import commit, make_experiment, set_knob, write, ws_of
from orchestrator import diagnostics, gate, reward_guard
from orchestrator.cli import main
from orchestrator.experiment import Experiment
from orchestrator.workspace import LIVE_REF, ORCHESTRATOR_IDENTITY
from training import rewards

# Behaves for its first 40 calls, then fails every call: the gate's replay (a few synthetic
# turns in a fresh process) never sees it fail; the trainer's worker, imported once, does.
LATE = """APPLIES_TO = ["travel"]
calls = 0
def turn_reward(turn):
    global calls
    calls += 1
    if calls > 40:
        raise ZeroDivisionError("division by zero")
    return 0.1
"""
WINDOW = 2


def _episode(step: int, i: int) -> dict:
    return {"gym": "travel", "task_id": f"t{i}", "user_arm": "symbolic", "score": 0.0,
            "success": False, "truncated": False,
            "turns": [{"turn": k + 1, "agent": f"[action] question {step}-{i}-{k}?", "user": "Hm.",
                       "env_reward": 0.0, "revealed_facts": [], "leaked_facts": [],
                       "asked_question": True, "answered": False, "rule_id": "r", "tool_calls": []}
                      for k in range(4)]}


def _train(exp, ws, live: str, steps: range, module) -> None:
    """Steps of 4 episodes x 4 turns scored by the live module's real worker, written as the
    trainer writes them: a metrics line each (training.rewards.ScoreStats.metrics) and the
    trajectories with each turn's module_errors."""
    run = exp / "run-001"
    (run / "trajectories").mkdir(parents=True, exist_ok=True)
    knobs = json.loads(ws.read_file(live, "knobs.json"))
    for step in steps:
        stats, eps = rewards.ScoreStats(), [_episode(step, i) for i in range(4)]
        for ep in eps:
            rewards.score_episode(ep, module, knobs, stats)
        row = {"step": step, "workspace/commit": live, "reward/mean": 0.0, **stats.metrics(len(eps))}
        with open(run / "metrics.jsonl", "a") as f:
            f.write(json.dumps(row) + "\n")
        (run / "trajectories" / f"step-{step:06d}.jsonl").write_text(
            "".join(json.dumps({"step": step, **ep}) + "\n" for ep in eps))


def test_a_module_failing_after_its_first_calls_is_shown_then_switched_off(tmp_path, capsys):
    exp = make_experiment(tmp_path, "e1")
    ws = ws_of(exp)
    write(ws, {"rewards/late.py": LATE})
    set_knob(ws, "reward.modules.late", {"enabled": True, "weight": 1.0})
    commit(ws, "A reward module that behaves at first")
    assert all(v.accepted for v in gate.judge_pending(exp))       # the gate cannot tell
    live = ws.rev(LIVE_REF)
    meta = Experiment(exp)
    meta.runs.append({"name": "run-001", "reason": "initial", "state": "running",
                      "start_commit": live})
    meta.save()
    module = rewards.load_modules({"late": ws.path / "rewards" / "late.py"},
                                  {"reward": {"modules": {"late": {"enabled": True}}}})
    try:
        _train(exp, ws, live, range(1, 4), module)         # 48 calls: 40 fine, then 8 fail
        run = exp / "run-001"

        # the diagnosis names it at once, with the failure's own line
        found = [f for f in diagnostics.diagnose(run, WINDOW) if f.kind == "module_errors"]
        assert [f.message for f in found] == [
            "reward module late failed 8 of its 32 calls in the last 2 steps (step 3), each "
            "scored 0; e.g. ZeroDivisionError: division by zero."]
        # a quarter of its calls: not "mostly", so no switch-off yet
        done: set[str] = set()
        assert reward_guard.switch_off_failing(exp, ws, run, WINDOW, done) == []

        # `start`'s step line, `status` and the report say so
        from orchestrator.commands.run_cmds import LiveView
        lines = LiveView(exp, enabled=False).plain_lines(
            {"run": "run-001", "step": 3, "total_steps": 8, "session_running": False, "sessions": 0})
        assert lines[-1].startswith("run-001 step 3/8") and \
            lines[-1].endswith("  reward modules failed 8 of 16 calls (late 8 of 16)")
        assert main(["--runs-dir", str(exp.parent), "status", "e1"]) == 0
        assert "warning: reward module late failed 8 of its 48 calls in the last 3 steps" in \
            " ".join(capsys.readouterr().out.split())
        assert main(["--runs-dir", str(exp.parent), "report", "e1"]) == 0
        page = (exp / "report" / "index.html").read_text()
        assert "run-001: reward module late failed 8 of its 48 calls in the last 3 steps" in page

        _train(exp, ws, live, range(4, 5), module)         # 16 more calls, every one fails
    finally:
        rewards.close_all(module)
    head = ws.main()
    verdicts = reward_guard.switch_off_failing(exp, ws, run, WINDOW, done)
    assert len(verdicts) == 1 and verdicts[0].accepted, verdicts
    sha = verdicts[0].commit
    info = ws.info(sha)
    assert info.parent == head and (info.author_name, info.author_email) == ORCHESTRATOR_IDENTITY
    assert ws.rev(LIVE_REF) == sha and verdicts[0].knob_changes == [
        {"path": "reward.modules.late.enabled", "old": True, "new": False}]
    assert info.message.startswith("Switch off reward module late: 24 of its 32 calls failed\n")
    assert ("Why: in run-001, reward module late failed 24 of its 32 calls in the last 2 steps "
            "(steps 3-4), each scored 0; e.g. ZeroDivisionError: division by zero.") in info.message
    assert "\nExpect: reward/module_errors falls to 0." in info.message
    # once: the module is off on main, and this run has tried it
    assert reward_guard.switch_off_failing(exp, ws, run, WINDOW, set()) == []
    assert reward_guard.switch_off_failing(exp, ws, run, WINDOW, done) == []
    assert ws.main() == sha


def test_failures_on_an_earlier_commit_do_not_count(tmp_path):
    """A session's fix of the module is a new live commit: steps trained before it do not switch
    the fixed module off."""
    exp = make_experiment(tmp_path, "e2")
    ws = ws_of(exp)
    old = ws.rev(LIVE_REF)
    set_knob(ws, "agent.entropy_coeff", 0.002)
    commit(ws, "a newer live commit")
    assert gate.judge_pending(exp)[0].accepted
    rows = [{"step": s, "workspace/commit": old, "reward/module_errors": 16,
             "reward/module_calls": 16, "reward/module_errors/elicited_fact": 16,
             "reward/module_calls/elicited_fact": 16} for s in (1, 2)]
    (exp / "run-001").mkdir()
    (exp / "run-001" / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert reward_guard.switch_off_failing(exp, ws, exp / "run-001", WINDOW, set()) == []
    with open(exp / "run-001" / "metrics.jsonl", "a") as f:       # the same on the live commit
        f.write(json.dumps({**rows[0], "step": 3, "workspace/commit": ws.rev(LIVE_REF)}) + "\n")
    verdicts = reward_guard.switch_off_failing(exp, ws, exp / "run-001", WINDOW, set())
    assert [v.knob_changes for v in verdicts] == [
        [{"path": "reward.modules.elicited_fact.enabled", "old": True, "new": False}]]
