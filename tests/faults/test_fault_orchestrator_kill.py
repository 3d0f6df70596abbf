"""The orchestrator killed (SIGKILL) while a meta-agent session runs, and while
the gate judges a commit; `orchestrator start --exp NAME` again picks up: every commit on main
judged once, the live ref never at an unjudged commit, no agent or trainer process of the killed
orchestrator left running.

The orchestrator is the real CLI (a subprocess) with the stand-in trainer (tests/fakes) and the
`command` adapter running a shell agent; the gate crash points are every ref, note and ledger
write of one judgement, each killed in a child process in turn.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from gate_testkit import AGENT, PERSON, knob_commit, make_experiment, ws_of
from orchestrator import gate, ledger
from orchestrator.workspace import LIVE_REF

TESTS = Path(__file__).resolve().parents[1]
ORCH = [sys.executable, "-m", "orchestrator.cli"]


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:                                   # a zombie is not running
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


def wait_for(predicate, timeout: float, what: str):
    deadline = time.time() + timeout
    while time.time() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def assert_judged_once(exp: Path) -> None:
    ws = ws_of(exp)
    counts: dict[str, int] = {}
    for v in ledger.read_lines(exp, "verdict"):
        counts[v["commit"]] = counts.get(v["commit"], 0) + 1
    for sha in ws.first_parent_history():
        note = gate.judged_verdict(ws, sha)
        assert note is not None, f"{sha[:10]} on main was never judged"
        # the gate's own commits (the seed, reverts, restores) carry a note, at most one line
        made_by_gate = ws.info(sha).author_email == "gate@eau.local"
        allowed = (0, 1) if made_by_gate else (1,)
        assert counts.get(sha, 0) in allowed, (sha[:10], counts.get(sha))
    live = ws.rev(LIVE_REF)
    assert gate.judged_verdict(ws, live)["verdict"] == "accepted"
    assert ws.tree_of("main") == ws.tree_of(LIVE_REF)


AGENT_SCRIPT = """#!/bin/sh
cd "$EAU_WORKSPACE"
test -f "{pidfile}" && exit 0          # later sessions: nothing to do
echo $$ > "{pidfile}"
sed -i 's/"entropy_coeff": 0.001/"entropy_coeff": 0.002/' knobs.json
printf 'entropy up\\n\\nWhy: test\\nExpect: test\\n' > "$EAU_SESSION_DIR/message.txt"
sleep 600
"""


def test_orchestrator_killed_during_a_session_picks_up(tmp_path):
    pidfile = tmp_path / "agent.pid"
    prog = tmp_path / "agent.sh"
    prog.write_text(AGENT_SCRIPT.format(pidfile=pidfile))
    prog.chmod(0o755)
    env = {**os.environ, "PYTHONPATH": str(TESTS / "fakes"), "FAKE_TRAINER_STEP_S": "0.2",
           "EAU_EXPERIENCE_DIR": str(tmp_path / "pool")}
    args = ORCH + ["--runs-dir", str(tmp_path / "runs"), "start", "--exp", "k", "--no-live",
                   "--trainer-module", "fake_trainer", "--agent", "command", "--agent-cmd",
                   str(prog), "--every", "2", "--steps", "400"]
    first = subprocess.Popen(args + ["--bench", "colbench"], env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL)
    exp = tmp_path / "runs" / "k"
    agent_pid = wait_for(lambda: pidfile.exists() and pidfile.read_text().strip(), 120,
                         "the agent session")
    agent_pid = int(agent_pid)
    trainer_pid = int((exp / "run-001" / "trainer.pid").read_text())
    # a person commits meanwhile; the session holds the gate, so it is not judged yet
    ws = ws_of(exp)
    person = knob_commit(ws, "agent.kl_loss_coef", 0.002)
    os.kill(first.pid, signal.SIGKILL)
    first.wait(timeout=30)
    second = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: not alive(agent_pid), 60, "the killed orchestrator's agent to be stopped")
        wait_for(lambda: not alive(trainer_pid), 120, "the orphaned trainer to be stopped")
        wait_for(lambda: gate.judged_verdict(ws, person), 60, "the person's commit to be judged")
        runs = json.loads((exp / "experiment.json").read_text())["runs"]
        assert runs[-1]["name"] == "run-001"              # the same run, resumed
        new_trainer = int((exp / "run-001" / "trainer.pid").read_text())
        assert new_trainer != trainer_pid and alive(new_trainer)
    finally:
        os.kill(second.pid, signal.SIGTERM)
        second.wait(timeout=120)
    ws = ws_of(exp)
    gate.judge_pending(exp)
    assert_judged_once(exp)
    rows = [json.loads(x) for x in (exp / "run-001" / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in rows]
    assert steps == sorted(set(steps)), "a step appears twice: two trainers wrote the run"


# ---- the gate killed mid-judgement ---------------------------------------------------------
KILL_AT = r"""
import os, signal, sys
from orchestrator import gate, ledger
from orchestrator.workspace import Workspace
n = int(sys.argv[2]); calls = [0]
def deadly(orig):
    def wrapper(*a, **k):
        calls[0] += 1
        if calls[0] == n:
            os.kill(os.getpid(), signal.SIGKILL)
        return orig(*a, **k)
    return wrapper
for name in ("set_ref", "add_note", "advance_main"):
    setattr(Workspace, name, deadly(getattr(Workspace, name)))
ledger.append_line = deadly(ledger.append_line)
gate.judge_pending(sys.argv[1])
print("finished", calls[0])
"""


@pytest.mark.parametrize("kill_at", range(1, 8))
def test_gate_killed_at_each_write_then_judged_once(tmp_path, kill_at):
    """A burst of two commits (one accepted, one rejected: a revert too), the judging process
    SIGKILLed at its n-th write; the next judgement completes the work: each commit judged
    once, live never at an unjudged commit, main's tree back to live's."""
    exp = make_experiment(tmp_path)
    ws = ws_of(exp)
    knob_commit(ws, "agent.entropy_coeff", 0.002, identity=AGENT)
    knob_commit(ws, "agent.entropy_coeff", 0.5, identity=PERSON)       # over the delta
    out = subprocess.run([sys.executable, "-c", KILL_AT, str(exp), str(kill_at)],
                         capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(Path(gate.__file__).parents[1])})
    killed = out.returncode == -signal.SIGKILL
    live = ws.rev(LIVE_REF)
    note = gate.judged_verdict(ws, live)
    assert note is not None and note["verdict"] == "accepted", (kill_at, live[:10], note)
    gate.judge_pending(exp)
    assert_judged_once(exp)
    if not killed:
        assert "finished" in out.stdout, out.stderr[-2000:]
