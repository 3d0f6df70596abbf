"""`orchestrator init | gate | log | diff`: what a person sees, and one sentence on bad input."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from gate_testkit import PERSON, knob_commit, make_experiment, write_metrics, ws_of
from orchestrator import ledger
from orchestrator.cli import main
from orchestrator.workspace import LIVE_REF


def run_cli(tmp_path, *args):
    """The real console entry in a child process: exit code and stderr as a person gets them."""
    proc = subprocess.run([sys.executable, "-m", "orchestrator.cli", "--runs-dir",
                           str(tmp_path / "runs"), *args], capture_output=True, text=True, cwd=tmp_path)
    return proc.returncode, proc.stdout, proc.stderr


def plain_repo(path, knobs_text):
    path.mkdir(parents=True)
    (path / "knobs.json").write_text(knobs_text)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(path), "-c", f"user.name={PERSON[0]}", "-c",
                    f"user.email={PERSON[1]}", "commit", "-qm", "init"], check=True)
    return path


@pytest.mark.parametrize("case", ["missing experiment", "corrupt knobs", "not a repository",
                                  "unknown bench"])
def test_bad_input_ends_in_one_sentence(tmp_path, case):
    args = {"missing experiment": ["gate", "--exp", "nope"],
            "corrupt knobs": ["init", "--exp", "e", "--bench", "usergym", "--workspace",
                              str(plain_repo(tmp_path / "repo", '{"agent": {'))],
            "not a repository": ["init", "--exp", "e", "--bench", "tau2", "--workspace", str(tmp_path)],
            "unknown bench": ["init", "--exp", "e", "--bench", "webshop"]}[case]
    rc, out, err = run_cli(tmp_path, *args)
    expected = {"missing experiment": "no experiment at", "corrupt knobs": "knobs.json: not valid JSON",
                "not a repository": "is not a git repository", "unknown bench": "unknown bench 'webshop'"}
    assert rc != 0
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    assert err.startswith("orchestrator: ") and expected[case] in err
    assert not (tmp_path / "runs" / "e" / "experiment.json").exists()


def test_init_accepts_the_papers_bench_spellings(tmp_path):
    rc, out, err = run_cli(tmp_path, "init", "--exp", "a", "--bench", "tau2-bench")
    assert rc == 0, err
    meta = json.loads((tmp_path / "runs/a/experiment.json").read_text())
    assert meta["bench"] == "tau2" and meta["cap"] == 5
    ws = ws_of(tmp_path / "runs/a")
    assert ws.rev(LIVE_REF) == ws.main() and "live:" in out
    assert ledger.read_lines(tmp_path / "runs/a", "verdict")[0]["verdict"] == "accepted"
    assert (ws.git_dir / "hooks" / "pre-commit").exists()
    assert main(["--runs-dir", str(tmp_path / "runs"), "init", "--exp", "b", "--bench", "UserGym",
                 "--from", "a"]) == 0
    assert ws_of(tmp_path / "runs/b").tree_of("main") == ws.tree_of("main")


def test_gate_log_and_diff(tmp_path, capsys):
    exp = make_experiment(tmp_path, "e1")
    make_experiment(tmp_path, "e2")
    runs = str(tmp_path / "runs")
    ws = ws_of(exp)
    good = knob_commit(ws, "agent.entropy_coeff", 0.003)
    bad = knob_commit(ws, "env.travel.max_steps", 99)
    assert main(["--runs-dir", runs, "gate", "--exp", "e1"]) == 1          # a rejection: exit 1
    out = capsys.readouterr().out
    assert f"accepted {good[:10]}" in out and f"rejected {bad[:10]}" in out and "maximum of 60" in out
    assert main(["--runs-dir", runs, "gate", "--exp", "e1", good]) == 0    # judged once: shown
    assert main(["--runs-dir", runs, "gate", "--exp", "e1"]) == 0
    assert "nothing to judge" in capsys.readouterr().out

    (exp / "run-001").mkdir()
    (exp / "run-001" / "events.jsonl").write_text(json.dumps({"event": "applied", "commit": good,
                                                              "step": 12}) + "\n")
    ledger.append_line(exp, {"type": "effect", "commit": good, "metric": "reward/mean", "before": 0.2,
                             "after": 0.3, "delta": 0.1, "noise": 0.02, "label": "helped"})
    assert main(["--runs-dir", runs, "log", "e1"]) == 0
    out = capsys.readouterr().out
    assert "agent.entropy_coeff: 0.001 -> 0.003" in out and "run-001@12" in out
    assert "+0.1 (helped)" in out and "rejected" in out and "Pat Person (person)" in out

    write_metrics(exp, [{"step": 1, "reward/mean": 0.1, "success/travel": 0.2},
                        {"step": 2, "reward/mean": 0.4, "success/travel": 0.1}])
    (exp / "run-001" / "config.json").write_text(json.dumps({"actor": {"entropy_coeff": 0.003}}))
    assert main(["--runs-dir", runs, "diff", "e1/run-001", "e2"]) == 0
    out = capsys.readouterr().out
    assert '"entropy_coeff": 0.003' in out and '"entropy_coeff": 0.001' in out   # workspace diff
    assert "actor.entropy_coeff" in out                                          # config diff
    assert "0.4 / 0.4" in out and "0.1 / 0.2" in out                             # final / best
    assert main(["--runs-dir", runs, "diff", "e1/run-009", "e2"]) == 2
    assert "has no run 'run-009'" in capsys.readouterr().err


def test_log_shows_where_a_commit_applied_inside_a_later_one_went_in(tmp_path, capsys):
    """A session's two commits for two gyms: the trainer applies the second, which includes the
    first; the first's effect line says at which step it went in, and `log` shows that step
    rather than "pending"."""
    exp = make_experiment(tmp_path, "e1")
    ws = ws_of(exp)
    first = knob_commit(ws, "env.tau.demonstrations", 2)
    second = knob_commit(ws, "env.travel.demonstrations", 2)
    assert main(["--runs-dir", str(tmp_path / "runs"), "gate", "--exp", "e1"]) == 0
    (exp / "run-001").mkdir()
    (exp / "run-001" / "events.jsonl").write_text(json.dumps({"event": "applied", "commit": second,
                                                              "step": 8}) + "\n")
    ledger.append_line(exp, {"type": "effect", "commit": first, "run": "run-001", "step": 8,
                             "metric": "took/tau/identify", "delta": 0.3, "label": "helped"})
    capsys.readouterr()
    assert main(["--runs-dir", str(tmp_path / "runs"), "log", "e1"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if first[:10] in line)
    assert "run-001@8 (inside a later" in row and "pending" not in row


def test_log_without_a_name_needs_exactly_one_experiment(tmp_path, capsys):
    runs = str(tmp_path / "runs")
    assert main(["--runs-dir", runs, "log"]) == 2
    assert "no experiments" in capsys.readouterr().err
    make_experiment(tmp_path, "only")
    assert main(["--runs-dir", runs, "log"]) == 0
    make_experiment(tmp_path, "second")
    assert main(["--runs-dir", runs, "log"]) == 2
    assert "several experiments" in capsys.readouterr().err


def test_diff_lists_every_gym_of_the_bench(tmp_path, capsys):
    """A step samples a few gyms, so the last metrics line names 2 of UserGym's 7: the table
    still lists all seven (a gym a run never logged shows '-')."""
    make_experiment(tmp_path, "e1")
    exp = make_experiment(tmp_path, "e2")
    write_metrics(exp, [{"step": 1, "reward/mean": 0.1, "success/travel": 0.2, "success/tau": 0.5},
                        {"step": 2, "reward/mean": 0.2, "success/turtle": 0.3, "success/function": 0.1}])
    assert main(["--runs-dir", str(tmp_path / "runs"), "diff", "e1", "e2"]) == 0
    out = capsys.readouterr().out
    table = out[out.index("main metrics"):]
    for gym in ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy"):
        assert f"success/{gym}" in table
    assert "0.2 / 0.2" in table and "0.5 / 0.5" in table        # travel and tau: logged at step 1


@pytest.mark.parametrize("command", ["diff", "status", "stop", "agents", "log", "gate"])
def test_every_argument_has_help(command):
    from orchestrator.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices[command]
    assert sub.description, f"{command} has no description"
    for action in sub._actions:
        assert action.help, f"{command} {action.option_strings or action.dest} has no help"
