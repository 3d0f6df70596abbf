"""End to end with the real CLIs: one scripted session of Claude Code and one of Codex in a real
experiment, with the tiny-model trainer, under `orchestrator start`'s loop.

The model behind each CLI is the scripted endpoint (orchestrator/agents/scripted.py), which
replays the same story for both: run the skill's diagnose script, read a trajectory file and
knobs.json, show one worked example per gym (knobs.json, env.*.demonstrations 0 -> 1), commit
it; then try what a session must not: write outside the workspace, read the eval folder (with
the CLI's file tool where it has one, and with `cat`), move refs/eau/live, `git reset`. The
recorded requests show what each CLI sent back: the skill's text, the diagnose output, each
refusal. The ledger's session line lists the refusals; the commit carries the session's
identity, the gate accepts it and the running trainer applies it (the episodes from that step on
are shown one example, those before none). The experiment starts without worked examples, so
every turn is refused for its format and diagnose.py has a finding to report.

Slow: 3 PPO steps of the tiny model on the CPU, plus the session (seconds).
"""
import json
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from agent_clis import point_claude, point_codex, use_cli  # noqa: E402

from orchestrator import ledger  # noqa: E402
from orchestrator.agents.scripted import ScriptedEndpoint, request_text, tool_results  # noqa: E402
from orchestrator.experiment import StartOptions, run_experiment  # noqa: E402
from orchestrator.experiment_init import init_experiment  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
SKILL_HEADING = "# EAU meta-agent skill"       # a line of skills/eau/SKILL.md
SUBJECT = "Show one worked example per gym (env.*.demonstrations 0 -> 1)"
WHY = "Why: diagnose.py finds every turn refused for its format (invalid_action)."
EXPECT = "Expect: episode/invalid_rate falls"
GYMS = ["intention", "telepathy"]
FORBIDDEN = ("outside", "eval_read", "eval_cat", "live", "reset")


def git(ws, *args):
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, check=True).stdout


def session_script(agent: str, exp: Path) -> dict:
    """The model's turns; paths are the experiment's, known before it starts."""
    ws, run = exp / "workspace", exp / "run-001"
    knobs = json.loads((ws / "knobs.json").read_text())
    for gym in GYMS:
        knobs["env"][gym]["demonstrations"] = 1
    scripts = ROOT / "skills" / "eau" / "scripts"
    commit = f'git add knobs.json && git commit -q -m "{SUBJECT}" -m "{WHY}" -m "{EXPECT}"'
    final = f"{SUBJECT}\n\n{WHY}\n{EXPECT}\n" if agent == "codex" else "Committed one change."
    return {"turns": [
        {"say": "Looking at the run first.", "calls": [
            {"id": "diagnose", "shell": f"{sys.executable} {scripts}/diagnose.py {run}"},
            {"id": "trajectory", "read": str(run / "trajectories" / "step-000001.jsonl")},
            {"id": "knobs_read", "read": str(ws / "knobs.json")}]},
        {"calls": [{"id": "knobs", "write": {"path": str(ws / "knobs.json"),
                                             "content": json.dumps(knobs, indent=2)}}]},
        {"calls": [{"id": "commit", "shell": commit}]},
        {"say": "Now what a session must not do.", "calls": [
            {"id": "outside", "write": {"path": str(exp / "outside.md"), "content": "x\n"}},
            {"id": "eval_read", "read": str(exp / "eval" / "results.json")},
            {"id": "eval_cat", "shell": f"cat {exp / 'eval' / 'results.json'}"},
            {"id": "live", "shell": "git update-ref refs/eau/live HEAD"},
            {"id": "reset", "shell": "git reset --hard HEAD"}]},
        {"say": final},
    ]}


@pytest.mark.slow
@pytest.mark.parametrize("agent", ["claude-code", "codex"])
def test_a_real_cli_session_reaches_the_gate_and_the_trainer(agent, tmp_path, monkeypatch, tiny_model_dir):
    use_cli(monkeypatch, agent)
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    root = tmp_path / "runs"
    exp = init_experiment("real", "usergym", root, seed_knobs={"env.*.demonstrations": 0})
    (exp / "eval").mkdir()
    (exp / "eval" / "results.json").write_text('{"test_success": 0.42}\n')
    live_before = git(exp / "workspace", "rev-parse", "refs/eau/live").strip()
    with ScriptedEndpoint(session_script(agent, exp), tmp_path / "requests.jsonl") as ep:
        if agent == "claude-code":
            point_claude(monkeypatch, ep.url, tmp_path / "home")
        else:
            point_codex(monkeypatch, ep.url + "/v1", tmp_path)
        # a session when the loop sees step 2 or later; max_lag 0: the trainer, at most one step
        # ahead of what the loop saw, then waits until the session's commit is judged, and the
        # next step trains on it. A later session (every 2 steps) gets the script's end at once.
        opts = StartOptions(bench="usergym", agent=agent, every=2, preset="cpu", steps=6, window=1,
                            model=str(tiny_model_dir), poll_s=0.5, max_lag=0, session_time_s=300,
                            overrides={"gyms": GYMS, "data.train_batch_size": 2, "rollout.n": 2,
                                       "rollout.max_turns": 3, "rollout.response_length": 8,
                                       "trainer.save_freq": 0, "trainer.trajectories_per_step": 8})
        _, final = run_experiment("real", opts, root)
        recorded = ep.requests()
    assert final == "finished"
    # nothing the session started outlives it (codex's file-system helper ran in a session of
    # its own, out of reach of the CLI's process group, and stayed under init)
    from orchestrator.agents.base import naming
    assert naming(str(exp / "workspace")) == []

    # what the CLI sent its model: the skill, the diagnose output, the files, each refusal
    main = [r for r in recorded if r.get("turn") is not None and r["conversation"] == 0]
    assert [r["turn"] for r in main] == [0, 1, 2, 3, 4], [(r["path"], r.get("turn")) for r in recorded]
    assert SKILL_HEADING in request_text(main[0]["body"])
    results = tool_results(recorded)
    diagnosis = results["diagnose"]["text"]
    assert '"kind": "invalid_actions"' in diagnosis, diagnosis
    assert '"task_id": "' in results["trajectory"]["text"] and '"turns": [' in results["trajectory"]["text"]
    assert '"demonstrations": 0' in results["knobs_read"]["text"]
    if agent == "claude-code":
        assert not results["knobs"]["is_error"] and not results["commit"]["is_error"], results
        for name in FORBIDDEN:
            assert results[name]["is_error"] and "denied" in results[name]["text"], (name, results[name])
        # the deny rules of the adapter's --settings file answered (a settings file that fails
        # validation is ignored under -p, and dontAsk alone would answer "don't ask mode")
        assert "denied by your permission settings" in results["eval_read"]["text"]
        assert "with command git reset --hard HEAD has been denied" in results["reset"]["text"]
    else:
        assert "Process exited with code 0" in results["knobs"]["text"]
        assert "Read-only file system" in results["commit"]["text"]      # .git: the adapter commits
        for name in ("outside", "live", "reset"):
            assert "Read-only file system" in results[name]["text"], (name, results[name])
        for name in ("eval_read", "eval_cat"):
            assert "Permission denied" in results[name]["text"], (name, results[name])
    assert not any("0.42" in r["text"] for r in results.values())
    assert not (exp / "outside.md").exists()

    # the ledger: the session ok, its commit, the refusals named; any later one changed nothing
    sessions = ledger.read_lines(exp, "session")
    assert [s["status"] for s in sessions] == ["ok"] + ["no_change"] * (len(sessions) - 1), sessions
    session = sessions[0]
    print(f"\n{agent} scripted session: {session['duration_s']} s")
    assert len(session["commits"]) == 1
    denied = " ".join(session["denials"])
    for target in ("outside.md", "eval/results.json", "git reset --hard HEAD"):
        assert target in denied, session["denials"]
    if agent == "claude-code":
        assert "git update-ref refs/eau/live HEAD" in denied

    # the commit: the session's identity and trailers, accepted, applied by the running trainer
    fix = session["commits"][0]
    head = git(exp / "workspace", "log", "-1", "--format=%ae%n%B", fix)
    assert head.startswith(f"{agent}-s001@agents.eau\n{SUBJECT}") and WHY in head and EXPECT in head
    assert f"Eau-Agent: {agent}" in head and "Eau-Session: s001" in head
    verdicts = [v["verdict"] for v in ledger.read_lines(exp, "verdict") if v["commit"] == fix]
    assert verdicts == ["accepted"], ledger.read_lines(exp, "verdict")
    applied = [a for a in ledger.read_lines(exp, "applied") if a["commit"] == fix]
    assert applied, ledger.read_lines(exp, "applied")
    step = applied[0]["step"]
    assert git(exp / "workspace", "rev-parse", "refs/eau/live").strip() == fix != live_before
    shown = {}
    for f in sorted((exp / "run-001" / "trajectories").glob("step-*.jsonl")):
        shown[int(f.stem.split("-")[1])] = {json.loads(x)["demonstrations"] for x in f.read_text().splitlines()}
    assert sorted(shown) == [1, 2, 3, 4, 5, 6] and step >= 3, (step, shown)
    assert all(v == ({1} if s >= step else {0}) for s, v in shown.items()), (step, shown)
