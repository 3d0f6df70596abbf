"""Commit load (issue 9, item 7): a meta-agent commits 200 times in a minute while a person
commits too, with the gate watcher judging and the real trainer hot-reloading, and then checks
that every commit was judged once, in order, that none was lost, that the live ref never pointed
at an unjudged commit, and how much the trainer's step time moved.

    .venv/bin/python benchmarks/commit_load_bench.py [--commits 200] [--seconds 60]
        [--person-every 3] [--baseline-s 60] [--out benchmarks/RESULTS-commit-load.md]

Phases: the trainer (tiny model, ColBench, CPU preset, hot reload on the experiment's workspace)
runs alone for --baseline-s, then under the commit load for --seconds, then alone again; step
time is the wall time between consecutive metrics.jsonl lines (it includes the hot reloads) and
the trainer's own perf/step_s; medians of the load phase are compared with both quiet phases.
Committers write to `main` as two separate tools would: each builds its commit on the current
main and moves main with a compare-and-swap (git update-ref NEW OLD), retrying when the other
(or the gate's revert) moved it first. Every 25th agent commit breaks the entropy delta (the gate
must reject it and revert it). The process exits non-zero when an invariant fails.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator import gate, ledger  # noqa: E402
from orchestrator.experiment_init import init_experiment  # noqa: E402
from orchestrator.supervisor import Supervisor  # noqa: E402
from orchestrator.watcher import GateWatcher  # noqa: E402
from orchestrator.workspace import LIVE_REF, MAIN, Workspace  # noqa: E402

AGENT = ("claude (s-load)", "claude-s-load@agents.eau")
PERSON = ("Pat Person", "pat@example.org")


def commit_knob(ws: Workspace, path: tuple[str, str], value, message: str,
                identity: tuple[str, str]) -> str:
    """A commit on top of the current main changing one knob; main moved by compare-and-swap."""
    while True:
        head = ws.main()
        knobs = json.loads(ws.read_file(head, "knobs.json"))
        knobs[path[0]][path[1]] = value
        blob = ws.run("hash-object", "-w", "--stdin", input=json.dumps(knobs, indent=2) + "\n")
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            ws.run("read-tree", head, env=env)
            ws.run("update-index", "--cacheinfo", f"100644,{blob},knobs.json", env=env)
            tree = ws.run("write-tree", env=env)
        sha = ws.commit_tree(tree, head, message, identity)
        if ws.set_ref(MAIN, sha, head):
            return sha


def agent_loop(ws_path: Path, n: int, seconds: float, made: list, stop: threading.Event):
    ws = Workspace(ws_path)
    t0 = time.monotonic()
    for i in range(n):
        bad = i % 25 == 24
        value = 0.5 if bad else (0.002 if i % 2 else 0.001)
        msg = (f"entropy {value} ({i})\n\nWhy: load test.\nExpect: the gate judges it.\n\n"
               f"Eau-Agent: claude\nEau-Session: s-load\n")
        made.append(("agent", commit_knob(ws, ("agent", "entropy_coeff"), value, msg, AGENT), bad))
        wait = t0 + (i + 1) * seconds / n - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    stop.set()


def person_loop(ws_path: Path, every: float, made: list, stop: threading.Event):
    ws = Workspace(ws_path)
    i = 0
    while not stop.wait(every):
        value = 0.002 if i % 2 else 0.001
        msg = f"kl {value} ({i})\n\nWhy: a person's tweak.\nExpect: the gate judges it.\n"
        made.append(("person", commit_knob(ws, ("agent", "kl_loss_coef"), value, msg, PERSON), False))
        i += 1


def live_monitor(ws_path: Path, seen: set, stop: threading.Event):
    ws = Workspace(ws_path)
    while not stop.is_set():
        seen.add(ws.rev(LIVE_REF))
        time.sleep(0.05)


def metric_rows(run: Path) -> list[dict]:
    rows = []
    if (run / "metrics.jsonl").exists():
        for line in (run / "metrics.jsonl").read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def step_times(run: Path, t_from: float, t_to: float) -> tuple[list[float], list[float]]:
    """(wall time between consecutive metric lines, perf/step_s) for lines written in [t_from, t_to)."""
    rows = metric_rows(run)
    walls, own = [], []
    for a, b in zip(rows, rows[1:]):
        if t_from <= b["time"] < t_to:
            walls.append(b["time"] - a["time"])
            own.append(b["perf/step_s"])
    return walls, own


def check(exp: Path, ws: Workspace, made: list, live_seen: set) -> list[str]:
    """The invariants; returns the failures."""
    failures = []
    verdicts = ledger.read_lines(exp, "verdict")
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v["commit"]] = counts.get(v["commit"], 0) + 1
    history = ws.first_parent_history()[::-1]
    index = {sha: i for i, sha in enumerate(history)}
    for who, sha, bad in made:
        if sha not in index:
            failures.append(f"{who} commit {sha[:10]} is not on main's first-parent history (lost)")
        if counts.get(sha, 0) != 1:
            failures.append(f"{who} commit {sha[:10]} judged {counts.get(sha, 0)} times")
        v = next((x for x in verdicts if x["commit"] == sha), None)
        stale = v is not None and any("does not apply on the live tree" in r for r in v["reasons"])
        if v is not None and (v["verdict"] == "rejected") != bad and not stale:
            failures.append(f"{who} commit {sha[:10]}: verdict {v['verdict']} (expected "
                            f"{'rejected' if bad else 'accepted'}): {v['reasons'][:1]}")
    order = [index[v["commit"]] for v in verdicts if v["commit"] in index]
    if order != sorted(order):
        failures.append("verdicts are not in main's order")
    for sha in live_seen - {None}:
        note = gate.judged_verdict(ws, sha)
        if not note or note.get("verdict") != "accepted":
            failures.append(f"live pointed at {sha[:10]}, which the gate had not accepted")
    return failures


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=200)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--person-every", type=float, default=3.0)
    p.add_argument("--baseline-s", type=float, default=60.0)
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS-commit-load.md"))
    a = p.parse_args(argv)

    from training.config import resolve
    from training.smollm2 import tiny_model_dir

    tmp = Path(tempfile.mkdtemp(prefix="eau-commit-load-"))
    exp = init_experiment("load", "colbench", tmp / "runs")
    ws = gate.open_experiment_workspace(exp)
    run = exp / "run-001"
    run.mkdir()
    cfg = resolve("colbench", "cpu", {"model.path": str(tiny_model_dir()), "workspace.repo": str(ws.path),
                                      "trainer.total_steps": 100_000, "trainer.save_freq": 0,
                                      "trainer.threads": 1, "rollout.response_length": 8,
                                      "rollout.max_turns": 2,
                                      "workspace.poll_s": 0.5})
    (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    sup = Supervisor(run, stall_s=600).start()
    watcher = GateWatcher(exp, poll_s=0.5).start()
    made: list = []
    live_seen: set = set()
    try:
        while len(metric_rows(run)) < 3:                      # warm up: model loaded, steps going
            if sup.proc.poll() is not None:
                raise SystemExit(f"the trainer exited: {(run / 'trainer.log').read_text()[-2000:]}")
            time.sleep(1)
        t_base0 = time.time()
        time.sleep(a.baseline_s)
        t_load0 = time.time()
        stop_person, stop_mon = threading.Event(), threading.Event()
        threads = [threading.Thread(target=agent_loop, args=(ws.path, a.commits, a.seconds, made, stop_person)),
                   threading.Thread(target=person_loop, args=(ws.path, a.person_every, made, stop_person)),
                   threading.Thread(target=live_monitor, args=(ws.path, live_seen, stop_mon))]
        for t in threads:
            t.start()
        threads[0].join()
        threads[1].join()
        t_load1 = time.time()
        t_caught_up = time.time()
        gate.judge_pending(exp)                               # the gate catches up, if behind
        caught_up_s = time.time() - t_caught_up
        time.sleep(a.baseline_s)
        t_base1 = time.time()
        stop_mon.set()
        threads[2].join()
    finally:
        watcher.stop()
        sup.stop(timeout_s=120)
    gate.judge_pending(exp)                                   # anything the watcher left
    failures = check(exp, Workspace(ws.path), made, live_seen)
    before = step_times(run, t_base0, t_load0)
    during = step_times(run, t_load0, t_load1)
    after = step_times(run, t_load1 + caught_up_s, t_base1)
    applied = [e for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
               if e.get("event") == "applied" and t_load0 <= e["time"] < t_load1]
    med = {k: (statistics.median(v[0]) if v[0] else float("nan"),
               statistics.median(v[1]) if v[1] else float("nan"), len(v[0]))
           for k, v in (("before", before), ("during", during), ("after", after))}
    quiet_wall = statistics.median(before[0] + after[0])
    quiet_own = statistics.median(before[1] + after[1])
    result = {
        "commits": {"agent": sum(w == "agent" for w, _, _ in made),
                    "person": sum(w == "person" for w, _, _ in made),
                    "meant_to_be_rejected": sum(b for _, _, b in made),
                    # built on a rejected commit before the gate reverted it: refused, by design
                    "rejected_as_built_on_a_rejected_one": sum(
                        any("does not apply on the live tree" in r for r in v["reasons"])
                        for v in ledger.read_lines(exp, "verdict"))},
        "load_seconds": round(t_load1 - t_load0, 1),
        "gate_behind_at_end_s": round(caught_up_s, 2),
        "gate_watcher_errors": watcher.errors[:5],
        "hot_reloads_during_load": len(applied),
        "step_wall_s_median": {k: round(v[0], 3) for k, v in med.items()},
        "step_perf_s_median": {k: round(v[1], 3) for k, v in med.items()},
        "steps": {k: v[2] for k, v in med.items()},
        "step_wall_change": round(med["during"][0] / quiet_wall - 1, 4),
        "step_perf_change": round(med["during"][1] / quiet_own - 1, 4),
        "failures": failures,
    }
    text = json.dumps(result, indent=1)
    print(text)
    Path(a.out).write_text(
        "# Commit load (issue 9, item 7)\n\n"
        f"`.venv/bin/python benchmarks/commit_load_bench.py --commits {a.commits} --seconds {a.seconds:g} "
        f"--person-every {a.person_every:g} --baseline-s {a.baseline_s:g}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} (this 2-core machine, shared):\n\n"
        f"```json\n{text}\n```\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
