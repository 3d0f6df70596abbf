"""Disk and data faults.

- A full disk while a checkpoint is written leaves the previous checkpoint whole and usable
  (resume works from it), leaves no temporary folder, and the trainer says so (an event and a
  line on stderr). Simulated with a small tmpfs mounted under the run's checkpoints folder when
  this process may mount (root), else with the checkpoint's file writes raising ENOSPC.
- A corrupt or truncated metrics.jsonl / events.jsonl / ledger.jsonl line is skipped with a
  warning by every reader: `orchestrator log`, `orchestrator diff`, the report, diagnostics
  (and the skill scripts built on it); none crashes and the whole lines are still used.
"""
from __future__ import annotations

import contextlib
import errno
import json
import os
import subprocess
import warnings
from pathlib import Path

import pytest
import torch

from gate_testkit import make_experiment
from orchestrator import cli, diagnostics, ledger
from orchestrator.report import build_report
from toy_env import write_run, write_workspace
from training import checkpoint, metrics
from training.trainer import Trainer

CKPT_MB = 50            # one checkpoint of the tiny model (policy, critic, two AdamW states;
                        # the critic's embedding moments, mostly zero rows, stored small)


@contextlib.contextmanager
def full_disk_after_one_checkpoint(folder: Path, monkeypatch, how: str):
    """Room for one checkpoint in `folder`, not two: a small tmpfs ("tmpfs", root only), or the
    checkpoint's second file write raising ENOSPC ("enospc")."""
    folder.mkdir(parents=True, exist_ok=True)
    mounted = False
    if how == "tmpfs":
        size = f"{int(CKPT_MB * 1.5)}m"
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder)],
            capture_output=True).returncode == 0
        if not mounted:
            pytest.skip("cannot mount a tmpfs here (not root): the enospc case covers it")
    else:
        real = torch.save
        saved: list[str] = []

        def save(obj, path, *a, **k):
            if Path(path).parent.parent == folder and "step-000001" not in str(path):
                saved.append(str(path))
                if len(saved) > 1:          # the second file of the second checkpoint
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))
            return real(obj, path, *a, **k)
        monkeypatch.setattr(checkpoint.torch, "save", save)
    try:
        yield mounted
    finally:
        if mounted:
            subprocess.run(["umount", "-l", str(folder)], capture_output=True)


@pytest.mark.parametrize("how", ["tmpfs", "enospc"])
def test_full_disk_while_checkpointing_keeps_previous_checkpoint(tmp_path, tiny_model_dir,
                                                                  monkeypatch, capfd, how):
    run = tmp_path / "run"
    write_run(run, workspace_dir=write_workspace(tmp_path / "ws"), model_dir=tiny_model_dir,
              overrides={"trainer.total_steps": 2, "trainer.save_freq": 1,
                         "trainer.keep_checkpoints": 2, "rollout.response_length": 4,
                         "rollout.max_turns": 2})
    with full_disk_after_one_checkpoint(run / "checkpoints", monkeypatch, how):
        trainer = Trainer(run)
        assert trainer.run() == 0                     # training itself goes on
        names = sorted(p.name for p in (run / "checkpoints").iterdir())
        assert names == ["step-000001"], names        # no half checkpoint, no temporary folder
        failed = [e for e in metrics.read_lines(run / "events.jsonl")
                  if e["event"] == "checkpoint_failed"]
        assert failed and failed[0]["step"] == 2
        assert "MB free" in failed[0]["error"] and failed[0]["usable"] == "step-000001"
        err = capfd.readouterr().err
        assert "step-000002" in err and "step-000001" in err and "still usable" in err
        # the previous checkpoint loads and a resume starts from it
        tensors, meta, _ = checkpoint.load(checkpoint.latest(run / "checkpoints"), ["policy"])
        assert meta["step"] == 1 and tensors["policy"]
        resumed = Trainer(run, resume=True)
        assert resumed.step == 1
        resumed.live.close()
    assert [r["step"] for r in metrics.read_lines(run / "metrics.jsonl")] == [1]


# ---- corrupt JSON lines ------------------------------------------------------------------

GOOD = [{"step": i, "reward/mean": 0.1 * i, "success/travel": 0.5, "episode/turns": 3.0,
         "episode/question_rate": 0.4, "user/leak_rate": 0.0, "actor/entropy": 1.0, "kl/ref": 0.0,
         "workspace/commit": "x"} for i in range(1, 7)]
CORRUPT = [b'{"step": 3, "reward/me', b"\x00\x00\x00\x00", b"\xff\xfe not utf-8 {",
           b"[1, 2, 3]", b'"just a string"', b"null", b"{not json at all}",
           b'{"step": "seven", "reward/mean": "high"}', b'{"step": null}',
           b'{"step": 8, "reward/mean": NaN}']


def write_corrupt(path: Path, good: list[dict], torn_tail: bytes) -> None:
    lines = [json.dumps(r).encode() for r in good]
    for i, bad in enumerate(CORRUPT):               # bad lines between good ones
        lines.insert(1 + 2 * i % max(len(lines), 1), bad)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\n".join(lines) + b"\n" + torn_tail)     # the last line cut mid-write


@pytest.fixture
def corrupt_exp(tmp_path):
    exp = make_experiment(tmp_path)
    run = exp / "run-001"
    (run / "trajectories").mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"trainer": {"total_steps": 10}}))
    write_corrupt(run / "metrics.jsonl", GOOD, b'{"step": 7, "reward/mean": 0.')
    write_corrupt(run / "events.jsonl", [{"event": "started", "step": 0, "time": 1.0}],
                  b'{"event": "applied", "comm')
    ep = {"step": 6, "gym": "travel", "task_id": "t", "success": False, "user_arm": "symbolic",
          "turns": [{"agent": "hi?", "user": "no", "reward": 0.0, "revealed_facts": [],
                     "leaked_facts": [], "asked_question": True, "answered": False}]}
    write_corrupt(run / "trajectories" / "step-000006.jsonl", [ep], b'{"step": 6, "tu')
    with open(exp / "ledger.jsonl", "ab") as f:
        f.write(b'{"type": "verdict", "comm\n\xff\xfe\n[]\n{"type": "effect", "commit": "ab')
    return exp


def _warned(record, needle: str) -> bool:
    return any(needle in str(w.message) for w in record)


def test_every_reader_skips_corrupt_lines_with_a_warning(corrupt_exp, tmp_path, capsys):
    exp, run = corrupt_exp, corrupt_exp / "run-001"
    runs = ["--runs-dir", str(exp.parent)]
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert cli.main(runs + ["log", exp.name]) == 0
    assert _warned(rec, "ledger.jsonl")
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        assert cli.main(runs + ["diff", exp.name, f"{exp.name}/run-001"]) == 0
    out = capsys.readouterr().out
    assert _warned(rec, "metrics.jsonl")
    assert "0.6" in out                               # the last whole line's reward/mean
    with warnings.catch_warnings(record=True) as rec:
        warnings.simplefilter("always")
        rows = diagnostics.read_metrics(run)
        summary = diagnostics.summarize(run)
        findings = diagnostics.diagnose(run)
    # a NaN value is data (diagnostics reports it), not a corrupt line
    assert [r["step"] for r in rows] == [1, 2, 3, 4, 5, 6, 8]
    assert summary["steps"] == 8 and isinstance(findings, list)
    assert _warned(rec, "metrics.jsonl") and _warned(rec, "events.jsonl")
    assert _warned(rec, "step-000006.jsonl")
    index = build_report([exp], tmp_path / "report")
    err = capsys.readouterr().err
    assert index.exists() and "metrics.jsonl" in err and "corrupt or truncated" in err
    # the skill scripts the meta-agent runs by hand go through the same readers
    for script in ("summarize.py", "diagnose.py"):
        proc = subprocess.run([os.sys.executable, str(Path(cli.__file__).parents[1] / "skills" /
                                                      "eau" / "scripts" / script), str(run)],
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert "metrics.jsonl" in proc.stderr, proc.stderr[-2000:]
    assert len(ledger.read_lines(exp, "verdict")) >= 1          # the init verdict survives
