"""scripts/gpu/h200_compare.sh runs comparisons joined by --then one after another in one
detached shell, each with its own arguments intact, and refuses a second start while they run.
On 2026-12-07 the PPO seed queued after a GRPO pair needed a start of its own, got no machine,
and was never run. A stub `python3` stands in for the comparison here (no GPU, no model)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu" / "h200_compare.sh"


def _env(tmp_path: Path) -> dict[str, str]:
    stub = tmp_path / "bin"
    stub.mkdir()
    record = tmp_path / "calls.txt"
    # each call records its arguments one a line, then a blank line, and takes a moment
    (stub / "python3").write_text(
        f'#!/bin/bash\nfor a in "$@"; do echo "$a"; done >> {record}\necho >> {record}\nsleep 0.5\n')
    (stub / "python3").chmod(0o755)
    return {**os.environ, "PATH": f"{stub}:{os.environ['PATH']}", "H200_STATE": str(tmp_path),
            "H200_START_WAIT": "0"}


def _start(env, *args):
    return subprocess.run(["bash", str(SCRIPT), "start", *args], env=env, capture_output=True,
                          text=True, timeout=60)


def test_comparisons_joined_by_then_run_in_order_with_their_arguments(tmp_path):
    env = _env(tmp_path)
    out = _start(env, "--bench", "usergym", "--name", "a", "--set", "note=two words",
                 "--then", "--bench", "usergym", "--name", "b")
    assert out.returncode == 0, out.stderr
    assert "2 comparison(s) queued" in out.stdout
    # while the queue runs, a second start is refused
    again = _start(env, "--bench", "usergym", "--name", "c")
    assert again.returncode == 1 and "a comparison is running already" in again.stdout
    pid = int((tmp_path / "h200_compare.queue.pid").read_text())
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            break
        time.sleep(0.1)
    calls = [c.split("\n") for c in (tmp_path / "calls.txt").read_text().strip().split("\n\n")]
    head = ["-m", "orchestrator.cli", "compare", "--device", "cuda", "--bench", "usergym", "--name"]
    assert calls == [head + ["a", "--set", "note=two words"], head + ["b"]]


def test_poll_returns_each_finished_comparisons_results_json(tmp_path):
    """A queue cut short by a lost machine still returns the comparisons that ended: every poll
    copies each runs/NAME/results.json into $OUT (they are what compare-merge reads). The script
    is run from a copy of the tree, so that no runs/ is written into the source tree."""
    tree = tmp_path / "tree"
    (tree / "scripts" / "gpu").mkdir(parents=True)
    script = tree / "scripts" / "gpu" / "h200_compare.sh"
    script.write_text(SCRIPT.read_text())
    done = tree / "runs" / "compare-usergym-s0"
    done.mkdir(parents=True)
    (done / "results.json").write_text('{"bench": "usergym"}\n')
    (tree / "runs" / "compare-usergym-s1").mkdir()          # still running: nothing to return
    out = tmp_path / "out"
    out.mkdir()
    env = {**_env(tmp_path), "OUT": str(out)}
    res = subprocess.run(["bash", str(script), "poll", "0"], env=env, capture_output=True,
                         text=True, timeout=60)
    assert res.returncode == 0, res.stderr
    assert (out / "results-compare-usergym-s0.json").read_text() == '{"bench": "usergym"}\n'
    assert not (out / "results-compare-usergym-s1.json").exists()
    assert "ended" in res.stdout and (out / "runs.tgz").exists()
