"""Every subcommand that acts on an experiment takes its name positionally or with --exp
(orchestrator/commands/common.py), and names that disagree end in one sentence."""
from __future__ import annotations

import pytest

from gate_testkit import knob_commit, make_experiment, ws_of
from orchestrator.cli import main


@pytest.fixture
def runs(tmp_path):
    make_experiment(tmp_path, "e1")
    make_experiment(tmp_path, "e2")
    return str(tmp_path / "runs")


@pytest.mark.parametrize("command", ["status", "stop", "log", "gate"])
def test_positional_name_and_exp_option_are_the_same(runs, command, capsys):
    assert main(["--runs-dir", runs, command, "e1"]) == 0
    positional = capsys.readouterr().out
    assert main(["--runs-dir", runs, command, "--exp", "e1"]) == 0
    assert capsys.readouterr().out == positional
    assert main(["--runs-dir", runs, command, "e1", "--exp", "e1"]) == 0


@pytest.mark.parametrize("command", ["status", "stop", "log", "gate", "init", "start", "eval"])
def test_two_different_names_end_in_one_sentence(runs, command, capsys):
    bench = ["--bench", "usergym"] if command == "init" else []
    assert main(["--runs-dir", runs, command, "e1", "--exp", "e2", *bench]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "orchestrator: the experiment is named twice, 'e1' and --exp 'e2': give it once."


def test_gate_takes_a_commit_after_either_form(runs, capsys):
    from pathlib import Path

    ws = ws_of(Path(runs) / "e1")
    sha = knob_commit(ws, "agent.entropy_coeff", 0.003)
    assert main(["--runs-dir", runs, "gate", "--exp", "e1", sha]) == 0
    assert main(["--runs-dir", runs, "gate", "e1", sha]) == 0
    assert capsys.readouterr().out.count(f"accepted {sha[:10]}") == 2


def test_init_start_and_eval_take_a_positional_name(tmp_path, capsys):
    runs = str(tmp_path / "runs")
    assert main(["--runs-dir", runs, "init", "fresh", "--bench", "usergym"]) == 0
    assert (tmp_path / "runs" / "fresh" / "experiment.json").exists()
    assert main(["--runs-dir", runs, "start", "nope"]) == 2
    assert "no experiment 'nope'" in capsys.readouterr().err
    assert main(["--runs-dir", runs, "eval", "--exp", "fresh", "--bench", "usergym"]) == 2
    assert "experiment 'fresh' has no runs yet" in capsys.readouterr().err


def test_report_takes_names_either_way(runs, tmp_path, capsys):
    assert main(["--runs-dir", runs, "report", "e1", "--exp", "e2", "--out", str(tmp_path / "r")]) == 0
    assert main(["--runs-dir", runs, "report", "--exp", "e1", "--out", str(tmp_path / "r1")]) == 0
    assert (tmp_path / "r1" / "index.html").exists()
    assert main(["--runs-dir", runs, "report"]) == 2
    assert "name the experiments" in capsys.readouterr().err


def test_every_command_module_registers_its_commands():
    """cli.py imports its command modules by name: each group's subcommands are all there."""
    from orchestrator.cli import build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert sorted(sub.choices) == sorted(["init", "gate", "log", "diff", "start", "status", "stop",
                                          "agents", "eval", "report", "compare", "compare-merge",
                                          "fork", "replay-session", "warmstart", "prune"])
