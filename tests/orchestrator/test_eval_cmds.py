"""`orchestrator eval` as a process: its options reach training.evaluate, and stopping it stops
the evaluation it started (a real subprocess pair, SIGTERM and SIGINT)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.commands import eval_cmds

ROOT = Path(__file__).resolve().parents[2]
BENCH = "tests.training.fake_eval_bench:BENCH"


def test_batch_size_and_quicker_settings_reach_the_evaluation(tmp_path):
    args = cli.build_parser().parse_args(["eval", "--model", "default", "--bench", "usergym",
                                          "--batch-size", "4", "--max-turns", "3",
                                          "--max-new-tokens", "64", "--episodes", "1",
                                          "--gyms", "tau"])
    t = eval_cmds.resolve_target(None, "default", str(tmp_path))
    cmd = eval_cmds.eval_command(t, "usergym", args)
    for flag, value in (("--batch-size", "4"), ("--max-turns", "3"), ("--max-new-tokens", "64"),
                        ("--episodes", "1"), ("--gyms", "tau")):
        assert cmd[cmd.index(flag) + 1] == value
    plain = eval_cmds.eval_command(t, "usergym", cli.build_parser().parse_args(
        ["eval", "--model", "default", "--bench", "usergym"]))
    assert not {"--batch-size", "--max-turns", "--max-new-tokens", "--episodes", "--data-dir",
                "--gyms"} & set(plain)
    # a data folder reaches the evaluation as an absolute path (the child runs from the project)
    data = cli.build_parser().parse_args(["eval", "--model", "default", "--bench", "usergym",
                                          "--data-dir", str(tmp_path / "userrl")])
    cmd = eval_cmds.eval_command(t, "usergym", data)
    assert cmd[cmd.index("--data-dir") + 1] == str((tmp_path / "userrl").resolve())
    user = cli.build_parser().parse_args(["eval", "--model", "default", "--bench", "usergym",
                                          "--user-url", "http://h/v1", "--user-model", "gpt-4o-mini",
                                          "--user-key-env", "OPENAI_API_KEY"])
    cmd = eval_cmds.eval_command(t, "usergym", user)
    assert cmd[cmd.index("--user-url") + 1] == "http://h/v1" and "OPENAI_API_KEY" in cmd
    start = cli.build_parser().parse_args(["start", "--bench", "usergym", "--data-dir", "x"])
    assert start.data_dir == "x"


def test_demonstrations_reach_the_evaluation_and_a_bad_count_is_one_sentence(tmp_path, capsys):
    """`eval --demonstrations 0` (the paper's protocol: no worked example) reaches the
    evaluation process; the default passes nothing (the shipped count); a count the knob cannot
    take is refused in one sentence."""
    t = eval_cmds.resolve_target(None, "default", str(tmp_path))
    zero = cli.build_parser().parse_args(["eval", "--model", "default", "--bench", "usergym",
                                          "--demonstrations", "0"])
    cmd = eval_cmds.eval_command(t, "usergym", zero)
    assert cmd[cmd.index("--demonstrations") + 1] == "0"
    plain = cli.build_parser().parse_args(["eval", "--model", "default", "--bench", "usergym"])
    assert "--demonstrations" not in eval_cmds.eval_command(t, "usergym", plain)
    assert cli.main(["--runs-dir", str(tmp_path), "eval", "--model", "default",
                     "--demonstrations", "5"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("orchestrator: --demonstrations 5:") and len(err.splitlines()) == 1


def test_prompting_methods_reach_the_evaluation(tmp_path, capsys):
    """`eval --prompting react|reflexion` (paper table 1's prompting rows) reaches the evaluation
    process; --attempts goes only with reflexion, else one sentence."""
    t = eval_cmds.resolve_target(None, "default", str(tmp_path))
    args = cli.build_parser().parse_args(["eval", "--model", "default", "--bench", "usergym",
                                          "--prompting", "reflexion", "--attempts", "2"])
    cmd = eval_cmds.eval_command(t, "usergym", args)
    assert cmd[cmd.index("--prompting") + 1] == "reflexion" and cmd[cmd.index("--attempts") + 1] == "2"
    assert cli.main(["--runs-dir", str(tmp_path), "eval", "--model", "default", "--prompting",
                     "react", "--attempts", "2"]) == 2
    err = capsys.readouterr().err.strip()
    assert "with --prompting reflexion" in err and len(err.splitlines()) == 1


@pytest.mark.parametrize("flag", ["--batch-size", "--max-turns", "--max-new-tokens"])
def test_settings_below_one_end_in_one_sentence(tmp_path, capsys, flag):
    assert cli.main(["--runs-dir", str(tmp_path), "eval", "--model", "default", flag, "0"]) == 2
    assert capsys.readouterr().err.strip() == f"orchestrator: {flag} must be at least 1."


def _children(pid: int) -> list[int]:
    out = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == pid and fields[0] != "Z":
            out.append(int(stat.parent.name))
    return out


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT])
def test_stopping_orchestrator_eval_stops_its_evaluation(tmp_path, tiny_model_dir, sig):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "FAKE_EVAL_SLEEP_S": "120"}
    parent = subprocess.Popen([sys.executable, "-m", "orchestrator.cli", "--runs-dir", str(tmp_path),
                               "eval", "--model", str(tiny_model_dir), "--bench", BENCH, "--device",
                               "cpu", "--episodes", "2"], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
    child = None
    try:
        first = parent.stderr.readline()           # the evaluation's estimate: it is running
        assert first.startswith("eval fake/test: 2 episodes"), first
        (child,) = _children(parent.pid)
        time.sleep(1.0)                            # into the model load or the first episode
        parent.send_signal(sig)
        assert parent.wait(timeout=60) == 128 + sig
        deadline = time.time() + 10
        while _alive(child) and time.time() < deadline:
            time.sleep(0.1)
        assert not _alive(child), "the evaluation outlived `orchestrator eval`"
        err = parent.stderr.read()
        assert f"stopped ({signal.Signals(sig).name}); no results were written." in err
        assert "Traceback" not in err
        assert not list((tmp_path / "prompting").glob("eval/*/summary.json"))
    finally:
        if parent.poll() is None:
            parent.kill()
        if child is not None and _alive(child):     # a failed test leaves no evaluation behind
            os.kill(child, signal.SIGKILL)
