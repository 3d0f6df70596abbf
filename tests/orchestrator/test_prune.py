"""Checkpoints keep what can still be read (orchestrator/prune.py): `orchestrator prune`, the
slimming of runs that will not resume, and a resume's copy of a checkpoint as hard links."""
from __future__ import annotations

import json
import os
from pathlib import Path

from gate_testkit import make_experiment
from orchestrator.cli import main
from orchestrator.experiment import Experiment, StartOptions

FILES = ("policy.pt", "critic.pt", "actor_optim.pt", "critic_optim.pt", "rng.pt")


def _checkpoint(run: Path, step: int) -> Path:
    """A whole checkpoint folder as training/checkpoint.py lays it out (bytes standing in)."""
    folder = run / "checkpoints" / f"step-{step:06d}"
    folder.mkdir(parents=True)
    for name in FILES:
        (folder / name).write_bytes(name.encode() * 4096)
    (folder / "state.json").write_text(json.dumps({"step": step, "commit": "c", "algorithm": "ppo"}))
    return folder


def _experiment(tmp_path: Path, states: dict[str, str]) -> Path:
    exp_dir = make_experiment(tmp_path, "e1")
    exp = Experiment(exp_dir)
    for name, state in states.items():
        exp.runs.append({"name": name, "reason": "initial", "state": state})
        for step in (2, 4):
            _checkpoint(exp_dir / name, step)
    exp.save()
    return exp_dir


def _files(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_prune_keeps_the_newest_checkpoint_whole_only_where_a_resume_can_happen(tmp_path, capsys):
    exp = _experiment(tmp_path, {"run-001": "finished", "run-002": "stopped"})
    assert main(["--runs-dir", str(exp.parent), "prune", "e1"]) == 0
    out = capsys.readouterr().out
    for run in ("run-001", "run-002"):
        assert [p.name for p in (exp / run / "checkpoints").iterdir()] == ["step-000004"]
    finished = exp / "run-001" / "checkpoints" / "step-000004"
    assert _files(finished) == ["policy.pt", "state.json"]              # what eval reads
    assert json.loads((finished / "state.json").read_text())["policy_only"] is True
    stopped = exp / "run-002" / "checkpoints" / "step-000004"
    assert _files(stopped) == sorted(FILES + ("state.json",))            # `start e1` resumes it
    assert "policy_only" not in json.loads((stopped / "state.json").read_text())
    assert "removed run-001/step-000002\n" in out and "removed run-002/step-000002\n" in out
    assert "removed the resume state of run-001/step-000004\n" in out
    assert "kept run-002/step-000004 (whole: the run may resume)" in out
    assert out.splitlines()[-1].startswith("experiment e1: ") and " GiB -> " in out


def test_prune_refuses_a_running_experiment_and_keep_zero_in_one_sentence(tmp_path, capsys):
    exp = _experiment(tmp_path, {"run-001": "running"})
    assert main(["--runs-dir", str(exp.parent), "prune", "e1", "--keep", "0"]) == 2
    assert capsys.readouterr().err.count(".") == 1
    meta = json.loads((exp / "experiment.json").read_text())
    (exp / "experiment.json").write_text(json.dumps({**meta, "state": "running", "pid": os.getpid()}))
    assert main(["--runs-dir", str(exp.parent), "prune", "e1"]) == 2
    err = capsys.readouterr().err
    assert err == ("orchestrator: experiment e1 is running (its trainer writes checkpoints): "
                   "`orchestrator stop e1` first, then prune.\n")
    assert len(list((exp / "run-001" / "checkpoints").iterdir())) == 2


def test_a_resumed_checkpoint_is_hard_linked_and_the_old_run_slimmed(tmp_path):
    """A control.json resume copies the checkpoint into the new run as hard links, then the run
    it came from (never resumed again) keeps only its policy: the new run keeps every byte."""
    exp_dir = _experiment(tmp_path, {"run-001": "restarted"})
    exp = Experiment(exp_dir)
    src = exp_dir / "run-001" / "checkpoints" / "step-000004"
    critic = (src / "critic.pt").read_bytes()
    exp.new_run(StartOptions(bench="usergym", preset="cpu"), "resume", from_run="run-001",
                from_checkpoint="step-000004")
    copied = exp_dir / "run-002" / "checkpoints" / "step-000004"
    assert _files(copied) == sorted(FILES + ("state.json",)) and (copied / "critic.pt").read_bytes() == critic
    assert (copied / "policy.pt").stat().st_ino == (src / "policy.pt").stat().st_ino
    assert "policy_only" not in json.loads((copied / "state.json").read_text())
    assert _files(src) == ["policy.pt", "state.json"]
    assert json.loads((src / "state.json").read_text())["policy_only"] is True
