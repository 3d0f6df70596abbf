"""Time of the write gate on one commit: a knob-only commit and a reward-module commit.

Each sample makes one commit in a real temporary experiment workspace and times
`orchestrator.gate.judge_pending` (checks, verdict note, live ref, ledger line), and separately
the pre-commit hook as git runs it (a fresh Python process). Prints the median of N samples.
Targets: knob-only under 0.5 s, reward module under 3 s.

    .venv/bin/python benchmarks/gate_bench.py [--n 20]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from orchestrator import gate
from orchestrator.experiment_init import init_experiment

WHY = "\n\nWhy: benchmark write.\nExpect: nothing.\n"
IDENT = ("Bench", "bench@example.org")
MODULE = ("APPLIES_TO = ['travel', 'tau']\n\ndef turn_reward(turn):\n"
          "    return 0.1 * len(turn.get('revealed_facts') or []) + {i} * 0.0\n")


def _knob_write(ws, i):
    k = json.loads((ws.path / "knobs.json").read_text())
    k["agent"]["entropy_coeff"] = 0.001 + (i % 2) * 0.001
    (ws.path / "knobs.json").write_text(json.dumps(k, indent=2))


def _module_write(ws, i):
    (ws.path / "rewards" / "bench_module.py").write_text(MODULE.format(i=i))


def time_gate(exp: Path, write, n: int) -> list[float]:
    ws = gate.open_experiment_workspace(exp)
    out = []
    for i in range(n):
        write(ws, i)
        ws.commit_all(f"bench {i}{WHY}", IDENT, verify=False)
        t0 = time.perf_counter()
        verdicts = gate.judge_pending(exp, ws)
        out.append(time.perf_counter() - t0)
        assert len(verdicts) == 1 and verdicts[0].accepted, verdicts
    return out


def time_hook(exp: Path, write, n: int) -> list[float]:
    ws = gate.open_experiment_workspace(exp)
    hook = ws.git_dir / "hooks" / "pre-commit"
    out = []
    for i in range(n):
        write(ws, i + 1000)
        ws.run("add", "-A")
        t0 = time.perf_counter()
        proc = subprocess.run([str(hook)], cwd=ws.path, capture_output=True, text=True)
        out.append(time.perf_counter() - t0)
        assert proc.returncode == 0, proc.stderr
        ws.run("commit", "-q", "--no-verify", "-m", f"hook {i}{WHY}")
    return out


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=20)
    n = p.parse_args().n
    with tempfile.TemporaryDirectory() as tmp:
        rows = []
        for label, write in (("knob-only", _knob_write), ("reward module", _module_write)):
            exp = init_experiment(label.replace(" ", "-"), "usergym", Path(tmp) / "runs")
            rows.append((label, "gate (in process)", statistics.median(time_gate(exp, write, n))))
            rows.append((label, "pre-commit hook", statistics.median(time_hook(exp, write, n))))
    print(f"median of {n} commits on {os.cpu_count()} CPUs")
    for label, what, s in rows:
        print(f"  {label:14} {what:18} {s:.3f} s")


if __name__ == "__main__":
    main()
