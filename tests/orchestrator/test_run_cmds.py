"""`orchestrator start | status | stop | agents` through the CLI, with the stand-in trainer."""
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runlogs import FAKES  # noqa: E402

from orchestrator.cli import main  # noqa: E402

ORCH = [sys.executable, "-m", "orchestrator.cli"]


def test_start_stop_status_through_the_cli(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(FAKES), "FAKE_TRAINER_STEP_S": "0.1",
           "EAU_EXPERIENCE_DIR": str(tmp_path / "pool")}
    start = subprocess.Popen(ORCH + ["--runs-dir", str(tmp_path), "start", "--agent", "none", "--bench",
                                     "ColBench", "--preset", "cpu", "--steps", "500", "--no-live", "--exp",
                                     "cli", "--trainer-module", "fake_trainer"], env=env,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    metrics = tmp_path / "cli" / "run-001" / "metrics.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 3):
        time.sleep(0.2)
    out = subprocess.run(ORCH + ["--runs-dir", str(tmp_path), "stop", "cli"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert out.returncode == 0 and "experiment cli stopped after step " in out.stdout
    assert "(checkpoint step-" in out.stdout
    assert start.wait(timeout=60) == 0
    assert "run-001 stopped" in start.stdout.read()
    exp = json.loads((tmp_path / "cli" / "experiment.json").read_text())
    assert exp["runs"][0]["state"] == "stopped" and exp["state"] == "stopped"
    events = [json.loads(x)["event"] for x in (tmp_path / "cli" / "run-001" / "events.jsonl").read_text().splitlines()]
    assert events[-2:] == ["checkpoint", "finished"]
    ckpts = list((tmp_path / "cli" / "run-001" / "checkpoints").glob("*/state.json"))
    assert ckpts and not any(json.loads(p.read_text()).get("policy_only") for p in ckpts)  # resumable
    status = subprocess.run(ORCH + ["--runs-dir", str(tmp_path), "status"], env=env, capture_output=True, text=True)
    assert status.returncode == 0 and "run-001" in status.stdout and "colbench" in status.stdout
    assert "sessions: 0" in status.stdout


def test_start_says_what_it_does_before_the_first_step_line(tmp_path):
    """The experiment created, the model loading, then the step under way with what it does and
    how long such a step took (the first minute of the demo printed nothing)."""
    env = {**os.environ, "PYTHONPATH": str(FAKES), "FAKE_TRAINER_STEP_S": "3",
           "FAKE_TRAINER_WORK_FIRST": "1", "EAU_EXPERIENCE_DIR": str(tmp_path / "pool")}
    argv = ORCH + ["--runs-dir", str(tmp_path), "start", "--agent", "none", "--bench", "ColBench",
                   "--preset", "cpu", "--steps", "1", "--no-live", "--exp", "cli",
                   "--trainer-module", "fake_trainer"]
    out = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == (f"experiment cli: creating {tmp_path / 'cli'} (a git workspace seeded from "
                        "the project's workspace/, with the gate's hooks), then its first run.")
    assert lines[1] == (f"run-001: the trainer is loading the model and the bench's tasks (its log: "
                        f"{tmp_path / 'cli' / 'run-001' / 'trainer.log'})")
    assert lines[2].startswith("run-001: model loaded (") and lines[2].endswith(
        "); step 1/1 under way: 4 episodes of up to 6 turns of 128 tokens, then the update "
        "(20-45 s a step for the CPU demo on an idle 2-core machine, seconds on a GPU)")
    assert lines[3].startswith("run-001 step 1/1 ")
    (tmp_path / "cli" / "run-001" / "checkpoints").mkdir(exist_ok=True)
    again = subprocess.run(argv[:-5] + ["--steps", "2", "--no-live", "--exp", "cli",
                                        "--trainer-module", "fake_trainer"],
                           env=env, capture_output=True, text=True, timeout=120)
    assert again.stdout.splitlines()[0] == f"experiment cli: continuing in {tmp_path / 'cli'}; a run starts."
    assert "step 1/2 under way: about 3 s, as this experiment's steps took" in again.stdout


def test_stop_prints_the_line_of_the_step_finished_while_stopping(tmp_path):
    """SIGTERM during a step's update lets that step finish before the checkpoint: its line is
    the last one `start` prints, and `stop` names it too (the log once ended at step 1/8 while
    status said 2/8)."""
    env = {**os.environ, "PYTHONPATH": str(FAKES), "FAKE_TRAINER_STEP_S": "1.0",
           "FAKE_TRAINER_WORK_FIRST": "1", "EAU_EXPERIENCE_DIR": str(tmp_path / "pool")}
    start = subprocess.Popen(ORCH + ["--runs-dir", str(tmp_path), "start", "--agent", "none",
                                     "--bench", "ColBench", "--preset", "cpu", "--steps", "500",
                                     "--no-live", "--exp", "cli", "--trainer-module",
                                     "fake_trainer"], env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)
    metrics = tmp_path / "cli" / "run-001" / "metrics.jsonl"
    deadline = time.time() + 60
    while time.time() < deadline and (not metrics.exists() or len(metrics.read_text().splitlines()) < 2):
        time.sleep(0.2)
    out = subprocess.run(ORCH + ["--runs-dir", str(tmp_path), "stop", "cli"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert start.wait(timeout=60) == 0
    last = json.loads(metrics.read_text().splitlines()[-1])["step"]
    steps = [line.split()[2] for line in start.stdout.read().splitlines()
             if line.startswith("run-001 step ")]
    assert steps[-1] == f"{last}/500", steps
    assert f"stopped after step {last}/500" in out.stdout


def test_agents_lists_why_an_adapter_is_unusable(capsys, monkeypatch):
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("EAU_AGENT_CLIS", "")       # nor installed in the cache folder
    assert main(["agents"]) == 0
    out = capsys.readouterr().out
    assert "builtin" in out and "claude is not installed" in out and "codex is not installed" in out


def test_agents_shows_each_clis_version_credentials_and_last_session(tmp_path, monkeypatch, capsys):
    from orchestrator import ledger

    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")
    monkeypatch.setenv("EAU_AGENT_CLIS", "")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "k")
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))     # no login, no config
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    runs = tmp_path / "runs"
    for exp, agent, sid, status, reason, ts in (
            ("a", "claude-code", "s001", "ok", "Raised entropy", 1.0),
            ("b", "claude-code", "s004", "failed", "claude exited 1: boom", 2.0),
            ("a", "codex", "s002", "unavailable", "codex cannot reach its model endpoint (offline)", 1.5)):
        ledger.append_line(runs / exp, {"type": "session", "ts": ts, "agent": agent, "session_id": sid,
                                        "status": status, "reason": reason, "duration_s": 3.2})
    assert main(["--runs-dir", str(runs), "agents"]) == 0
    out = capsys.readouterr().out
    claude, codex = out.split("claude-code:")[1].split("codex:")
    assert claude.startswith(" usable") and f"cli:          {FAKES / 'claude'}" in claude
    assert "version:      2.1.332\n" in claude and "credentials:  ANTHROPIC_API_KEY\n" in claude
    assert "last session: did not work: failed (b s004, 3 s): claude exited 1: boom" in claude
    assert codex.startswith(" not usable") and "version:      0.171.0\n" in codex
    assert "credentials:  none: set OPENAI_API_KEY or run `codex login`" in codex
    assert "last session: did not work: unavailable (a s002, 3 s): codex cannot reach" in codex


def test_bad_input_ends_in_one_sentence(tmp_path, capsys):
    assert main(["--runs-dir", str(tmp_path), "start", "--exp", "nope"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("orchestrator: no experiment 'nope'") and "Traceback" not in err
    assert main(["--runs-dir", str(tmp_path), "status", "nope"]) == 2
    assert main(["--runs-dir", str(tmp_path), "start", "--bench", "nobench", "--exp", "x"]) == 2
    assert "unknown bench" in capsys.readouterr().err


def test_live_view_renders_progress_metrics_and_sessions(tmp_path):
    from rich.console import Console

    from orchestrator.commands.run_cmds import LiveView
    from runlogs import write_run

    write_run(tmp_path / "exp" / "run-001", 4)
    out = open(tmp_path / "view.txt", "w")
    view = LiveView(tmp_path / "exp", console=Console(file=out, width=120, force_terminal=False))
    with view:
        view.update({"run": "run-001", "step": 4, "total_steps": 10, "state": "running",
                     "session_running": False, "sessions": 0})
    out.close()
    text = (tmp_path / "view.txt").read_text()
    assert "run-001" in text and "4/10" in text and "reward/mean" in text and "meta-agent sessions" in text


def _experiment_with_a_run(tmp_path):
    """runs/e1 with one run of 3 metric lines and one accepted person's commit applied at step 2."""
    from gate_testkit import knob_commit, make_experiment, write_metrics, ws_of

    from orchestrator import ledger
    from orchestrator.experiment import Experiment

    exp_dir = make_experiment(tmp_path, "e1")
    ws = ws_of(exp_dir)
    sha = knob_commit(ws, "agent.entropy_coeff", 0.003)
    assert main(["--runs-dir", str(tmp_path / "runs"), "gate", "--exp", "e1"]) == 0
    write_metrics(exp_dir, [{"step": s, "reward/mean": 0.1 * s, "success/travel": 0.2} for s in (1, 2, 3)])
    exp = Experiment(exp_dir)
    exp.runs.append({"name": "run-001", "reason": "first", "state": "finished"})
    exp.save()
    ledger.append_line(exp_dir, {"type": "applied", "commit": sha, "run": "run-001", "step": 2})
    return exp_dir, sha


def test_status_shows_an_unmeasured_effect_with_its_reason(tmp_path, capsys):
    from orchestrator import ledger

    exp_dir, sha = _experiment_with_a_run(tmp_path)
    # the run ended two steps after the commit: effects.update_effects(final=True) writes delta null
    ledger.append_line(exp_dir, {"type": "effect", "commit": sha, "run": "run-001", "metric": "reward/mean",
                                 "before": None, "after": None, "delta": None, "noise": None,
                                 "label": "unmeasured", "reason": "the run ended first"})
    capsys.readouterr()
    assert main(["--runs-dir", str(tmp_path / "runs"), "status", "e1"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())    # cells may wrap
    assert "unmeasured" in out and "the run ended first" in out and "run-001 step 2" in out


def test_the_seed_commit_shows_who_made_it_and_the_run_that_started_on_it(tmp_path, capsys):
    """The seed is the orchestrator's, not a person's, and run-001 trained on it from its start:
    not "EAU gate (person)" and "pending" (`status`) or "-" (`log`)."""
    from gate_testkit import knob_commit, ws_of

    from orchestrator.experiment import Experiment

    exp_dir, sha = _experiment_with_a_run(tmp_path)
    ws = ws_of(exp_dir)
    seed = ws.first_parent_history()[-1]
    exp = Experiment(exp_dir)
    exp.runs[0]["start_commit"] = seed
    exp.save()
    later = knob_commit(ws, "agent.entropy_coeff", 0.004)             # accepted, not applied yet
    bad = knob_commit(ws, "agent.entropy_coeff", 0.04)                # refused
    main(["--runs-dir", str(tmp_path / "runs"), "gate", "e1"])
    capsys.readouterr()
    assert main(["--runs-dir", str(tmp_path / "runs"), "status", "e1"]) == 0
    rows = {line.split("│")[1].strip(): [c.strip() for c in line.split("│")[2:-1]]
            for line in capsys.readouterr().out.splitlines() if line.count("│") == 6}
    assert rows[seed[:10]][:3] == ["orchestrator", "accepted", "run-001 start"]
    assert rows[sha[:10]][:3] == ["person", "accepted", "run-001 step 2"]
    assert rows[later[:10]][2] == "pending" and rows[bad[:10]][1:3] == ["rejected", "-"]
    assert main(["--runs-dir", str(tmp_path / "runs"), "log", "e1"]) == 0
    seed_row = next(line for line in capsys.readouterr().out.splitlines() if seed[:10] in line)
    assert "EAU orchestrator" in seed_row and "run-001 start" in seed_row and "person" not in seed_row


def test_start_refuses_a_missing_agent_cli_before_the_trainer_with_require_agent(tmp_path, monkeypatch, capsys):
    from orchestrator.commands import run_cmds

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("EAU_AGENT_CLIS", "")       # nor installed in the cache folder
    monkeypatch.setattr(run_cmds, "run_experiment", lambda *a, **k: pytest.fail("the trainer started"))
    for agent, cli in (("claude-code", "claude"), ("codex", "codex")):
        assert main(["--runs-dir", str(tmp_path), "start", "--agent", agent, "--bench", "usergym",
                     "--exp", "x", "--require-agent"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"orchestrator: --agent {agent}: {cli} is not installed")
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert not (tmp_path / "x").exists()


def test_start_warns_at_once_about_a_missing_agent_cli_and_trains_on(tmp_path, monkeypatch, capsys):
    from orchestrator.commands import run_cmds

    seen = {}

    def fake_run(name, opts, root, **kw):       # stands for the trainer starting
        seen["err"] = capsys.readouterr().err
        return SimpleNamespace(runs=[{"name": "run-001", "state": "finished"}],
                               dir=Path(root) / name), "finished"

    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    monkeypatch.setenv("EAU_AGENT_CLIS", "")       # nor installed in the cache folder
    monkeypatch.setattr(run_cmds, "run_experiment", fake_run)
    assert main(["--runs-dir", str(tmp_path), "start", "--agent", "claude-code", "--bench", "usergym",
                 "--exp", "x", "--no-live"]) == 0
    assert seen["err"].count("\n") == 1 and "claude is not installed" in seen["err"]
    assert "--require-agent" in seen["err"]
    monkeypatch.setattr(run_cmds, "run_experiment", fake_run)
    assert main(["--runs-dir", str(tmp_path), "start", "--agent", "builtin", "--bench", "usergym",
                 "--exp", "y", "--no-live", "--require-agent"]) == 0
    assert seen["err"] == ""


def test_an_installed_cli_without_login_is_told_to_log_in_not_to_install(tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.setenv("PATH", f"{FAKES}:/usr/bin:/bin")          # a `claude` on PATH
    monkeypatch.setenv("HOME", str(tmp_path / "home"))           # never logged in
    for key in ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                "CLAUDE_CONFIG_DIR"):
        monkeypatch.delenv(key, raising=False)
    assert main(["--runs-dir", str(tmp_path), "start", "--agent", "claude-code", "--bench",
                 "usergym", "--exp", "x", "--require-agent"]) == 2
    err = capsys.readouterr().err
    assert err == ("orchestrator: --agent claude-code: claude has no credentials: set "
                   "ANTHROPIC_API_KEY or run `claude /login`; or drop --require-agent to train "
                   "without it.\n")


def test_plain_view_prints_each_step_session_and_verdict_once(tmp_path, capsys):
    from orchestrator import ledger
    from orchestrator.commands.run_cmds import LiveView
    from runlogs import write_run

    exp = tmp_path / "exp"
    (exp / "run-001").mkdir(parents=True)
    ledger.append_line(exp, {"type": "verdict", "commit": "0" * 40, "verdict": "accepted"})  # the seed
    view = LiveView(exp, enabled=False)
    st = {"run": "run-001", "step": 0, "total_steps": 8, "state": "running", "session_running": False,
          "sessions": 0}
    view.update(st)
    write_run(exp / "run-001", 3, metric_fn=lambda s, rng: {"success/mean": 0.25, "perf/step_s": 81.5})
    view.update({**st, "step": 3, "session_running": True})
    ledger.append_line(exp, {"type": "session", "session_id": "s001", "agent": "builtin", "status": "ok",
                             "commits": ["abcdef0123"], "duration_s": 12.0})
    ledger.append_line(exp, {"type": "verdict", "commit": "abcdef0123", "agent": "builtin", "verdict": "accepted",
                             "knob_changes": [{"path": "agent.entropy_coeff", "old": 0.001, "new": 0.003}]})
    view.update({**st, "step": 3, "sessions": 1})
    lines = capsys.readouterr().out.splitlines()
    assert lines.pop(0).startswith("run-001: the trainer is loading the model")   # no `started` yet
    assert [ln.split("  ")[0] for ln in lines[:3]] == [f"run-001 step {s}/8" for s in (1, 2, 3)]
    assert "success/mean 0.250" in lines[0] and "step 81.5 s" in lines[0] and "(one running)" in lines[2]
    assert lines[3] == "session s001 (builtin) ok after 12 s: abcdef01"
    assert lines[4] == "gate accepted abcdef01 by builtin: agent.entropy_coeff 0.001 -> 0.003"
    assert len(lines) == 5


def test_start_prints_a_line_per_step_when_stdout_is_not_a_terminal(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(FAKES), "FAKE_TRAINER_STEP_S": "0.3",
           "EAU_EXPERIENCE_DIR": str(tmp_path / "pool")}
    out = subprocess.run(ORCH + ["--runs-dir", str(tmp_path), "start", "--agent", "none", "--bench", "colbench",
                                 "--preset", "cpu", "--steps", "3", "--exp", "piped",
                                 "--trainer-module", "fake_trainer"], env=env, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    steps = [ln for ln in out.stdout.splitlines() if ln.startswith("run-001 step ")]
    assert steps and steps[-1].startswith("run-001 step 3/3  reward/mean ")
    assert all("success/mean" in ln for ln in steps)


def test_status_shows_the_share_of_refused_actions_per_gym(tmp_path, capsys):
    """A run whose turns are refused for their format shows it in status: the run's rate and
    each gym's (episode/invalid_rate, invalid/<gym>)."""
    from gate_testkit import write_metrics

    exp_dir, _ = _experiment_with_a_run(tmp_path)
    write_metrics(exp_dir, [{"step": s, "reward/mean": 0.0, "success/travel": 0.0,
                             "success/intention": 0.0, "episode/invalid_rate": 0.875,
                             "invalid/travel": 1.0, "invalid/intention": 0.75} for s in (1, 2)])
    capsys.readouterr()
    assert main(["--runs-dir", str(tmp_path / "runs"), "status", "e1"]) == 0
    out = capsys.readouterr().out
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if line.count("│") >= 3}
    assert "0.875" in rows["episode/invalid_rate"]
    assert "1" in rows["invalid/travel"] and "0.75" in rows["invalid/intention"]


def test_start_refuses_a_config_under_which_no_episode_can_succeed(tmp_path, capsys, monkeypatch,
                                                                    tiny_model_dir):
    """tau2's policy prompt (1,347-1,933 tokens) over a 1,024-token episode budget: one sentence,
    exit 2, no run folder and no trainer (training/budget.py, checked before the launch)."""
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    code = main(["--runs-dir", str(tmp_path), "start", "--agent", "none", "--bench", "tau2",
                 "--preset", "cpu", "--set", "rollout.max_episode_tokens=1024", "--model",
                 str(tiny_model_dir), "--no-live", "--exp", "tight", "--trainer-module", "fake_trainer"])
    err = capsys.readouterr().err
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("orchestrator: rollout.max_episode_tokens 1,024 is below the tau2 retail "
                          "prompt") and err.strip().endswith("raise it to at least 2,000.")
    assert json.loads((tmp_path / "tight" / "experiment.json").read_text())["runs"] == []
    assert not (tmp_path / "tight" / "run-001").exists()
    assert not list(tmp_path.rglob("trainer.pid"))


def test_status_shows_a_long_session_reason_as_whole_sentences_and_words(tmp_path, capsys, monkeypatch):
    """The CPU demo's sessions cut '... with 0 demonstration(s) sho' and 'eau_step_function_…':
    a long reason keeps whole sentences and whole words, and points to the session's record."""
    from orchestrator import ledger

    exp_dir, _ = _experiment_with_a_run(tmp_path)
    reason = ("no remedy for: 100% of recent function agent turns (12 of 12) were refused for their "
              "format, with 0 demonstration(s) shown. Add step reward eau_step_function_probe at a "
              "function episode's first probe. " + "More detail follows here. " * 6)
    ledger.append_line(exp_dir, {"type": "session", "session_id": "s002", "agent": "builtin",
                                 "status": "no_change", "reason": reason, "commits": [],
                                 "transcript": "x", "duration_s": 1.0})
    monkeypatch.setenv("COLUMNS", "400")      # one line per row: the reason reads as written
    capsys.readouterr()
    assert main(["--runs-dir", str(tmp_path / "runs"), "status", "e1"]) == 0
    out = " ".join(capsys.readouterr().out.replace("│", " ").split())
    assert "\u2026" not in out and "sho " not in out
    # the first sentence fits the 160 characters and the second would not: it is left out whole
    assert "with 0 demonstration(s) shown. (the rest: agents/s002/transcript.md)" in out
    assert "eau_step_function" not in out
