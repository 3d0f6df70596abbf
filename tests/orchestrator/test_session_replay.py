"""`orchestrator replay-session`: the built-in agent of this checkout at a past session, on the
experiment as it stood then (workspace, ledger, metrics and trajectories cut at the session),
without writing into the experiment."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from episodes import ep, turn, write_steps  # noqa: E402
from runlogs import make_workspace, write_run  # noqa: E402

from orchestrator import gitops, ledger  # noqa: E402
from orchestrator.cli import main  # noqa: E402


def looping_tau() -> dict:
    q = "I'm not sure; could you tell me more about what you need?"
    return ep("tau", [turn(q, "I need to return an order.", repeated=i > 0) for i in range(5)])


def knob(ws: Path) -> bool:
    return json.loads((ws / "knobs.json").read_text())["reward"]["modules"]["no_repeat"]["enabled"]


def experiment(runs: Path) -> tuple[Path, str]:
    """An experiment whose session s001 (step 6) switched no_repeat on for tau's loops, and whose
    later session s002 (step 10) switched it off again."""
    exp = runs / "e"
    ws = make_workspace(exp / "workspace")
    run = write_run(exp / "run-001", 12, gym="tau")
    write_steps(run, {s: [looping_tau() for _ in range(3)] for s in range(1, 13)})
    (run / "config.json").write_text(json.dumps({"gyms": []}))
    (exp / "experiment.json").write_text(json.dumps(
        {"name": "e", "bench": "usergym", "runs": [{"name": "run-001", "created": 0}]}))
    shas = []
    for session, step, value in (("s001", 6, True), ("s002", 10, False)):
        k = json.loads((ws / "knobs.json").read_text())
        k["reward"]["modules"]["no_repeat"]["enabled"] = value
        (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
        sha = gitops.commit_all(ws, f"Set no_repeat {value}\n\nWhy: a test.\nExpect: episode/repeat_rate falls.\n",
                                "builtin", session)
        shas.append(sha)
        ledger.append_line(exp, {"type": "verdict", "commit": sha, "verdict": "accepted"})
        ledger.append_line(exp, {"type": "session", "agent": "builtin", "session_id": session, "status": "ok",
                                 "commits": [sha], "step": step, "ts": 2e9})
    return exp, shas[0]


def test_a_past_session_is_replayed_on_what_it_read_and_the_experiment_is_untouched(tmp_path, capsys):
    runs = tmp_path / "runs"
    exp, first = experiment(runs)
    before = ((exp / "ledger.jsonl").read_text(), gitops.head(exp / "workspace"))
    assert main(["--runs-dir", str(runs), "replay-session", "e", "s001", "--window", "2"]) == 0
    out = capsys.readouterr().out
    copy = runs / "e-replay-s001"
    assert f"replayed e s001 in {copy}" in out and "[loop/tau]" in out
    # the experiment as the session found it: no_repeat off, nothing of s001 or later
    assert gitops.git(copy / "workspace", "rev-parse", "HEAD~1").strip() == \
        gitops.git(exp / "workspace", "rev-parse", f"{first}^").strip()
    assert {json.loads(x)["step"] for x in (copy / "run-001" / "metrics.jsonl").read_text().splitlines()} \
        == set(range(1, 7))
    assert sorted(p.name for p in (copy / "run-001" / "trajectories").iterdir())[-1] == "step-000006.jsonl"
    assert [x["session_id"] for x in ledger.read_lines(copy) if x.get("type") == "session"] == ["s999"]
    # this checkout's agent made its own decision there, judged by the copy's gate
    assert knob(copy / "workspace") is True and "s999" in gitops.message(copy / "workspace", "HEAD")
    assert any(x.get("type") == "verdict" and x.get("verdict") == "accepted" and
               x.get("commit") == gitops.head(copy / "workspace") for x in ledger.read_lines(copy))
    assert ((exp / "ledger.jsonl").read_text(), gitops.head(exp / "workspace")) == before


def test_a_session_the_ledger_lacks_is_one_sentence(tmp_path, capsys):
    runs = tmp_path / "runs"
    experiment(runs)
    assert main(["--runs-dir", str(runs), "replay-session", "e", "s009"]) != 0
    err = capsys.readouterr().err
    assert "e has no session s009 in its ledger (its sessions: s001, s002)." in err
    assert not (runs / "e-replay-s009").exists()
