"""What one sandboxed call costs on this machine: fresh processes and a persistent worker.

    .venv/bin/python benchmarks/sandbox_bench.py [--n 40] [--out FILE.json]

Three figures, each the median of `--repeats` passes:
- `fresh_calls_per_s`: `run_function` on a small reward module, one new sandboxed process per
  call (what the gate's replay, a ColBench answer and a module probe pay);
- `worker_calls_per_s`: `ModuleWorker.call` on an already started worker (what the trainer pays
  per turn and module);
- `worker_start_s`: starting a worker up to its loaded module (what a hot reload pays per module).
Run it with PYTHONPATH pointing at another checkout to measure that checkout's sandbox (the
figures before and after the OS walls in benchmarks/RESULTS-sandbox.md were taken this way).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from training import sandbox
from training.sandbox import Limits, ModuleWorker, run_function

MODULE = ("APPLIES_TO = ['travel']\n\ndef turn_reward(turn):\n"
          "    return 0.1 * len(turn.get('revealed_facts') or [])\n")
TURN = {"turn": 1, "agent": "[search] flights to Oslo", "user": "in May", "revealed_facts": ["month"]}
LIMITS = Limits(wall_s=5.0, cpu_s=60.0, memory_mb=512)


def fresh_rate(n: int) -> float:
    t0 = time.perf_counter()
    for _ in range(n):
        res = run_function(MODULE, "turn_reward", [TURN], LIMITS)
        assert res.ok and res.value == 0.1, res
    return n / (time.perf_counter() - t0)


def worker_rate(n: int) -> float:
    with ModuleWorker(MODULE, LIMITS) as w:
        assert w.load_result.ok, w.load_result
        t0 = time.perf_counter()
        for _ in range(n):
            res = w.call("turn_reward", [TURN], timeout_s=2.0)
            assert res.ok and res.value == 0.1, res
        return n / (time.perf_counter() - t0)


def worker_start() -> float:
    t0 = time.perf_counter()
    w = ModuleWorker(MODULE, LIMITS)
    elapsed = time.perf_counter() - t0
    assert w.load_result.ok, w.load_result
    w.close()
    return elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="calls per pass")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    fresh_rate(2)                       # warm the page cache and the isolation probe
    isolation = getattr(sandbox, "isolation", None)   # absent in checkouts before the OS walls
    result = {
        "sandbox": sandbox.__file__,
        "isolation": isolation().describe() if isolation else "audit hook only (before the OS walls)",
        "fresh_calls_per_s": round(statistics.median(fresh_rate(args.n) for _ in range(args.repeats)), 1),
        "worker_calls_per_s": round(statistics.median(worker_rate(10 * args.n)
                                                      for _ in range(args.repeats)), 1),
        "worker_start_s": round(statistics.median(worker_start() for _ in range(args.repeats * 3)), 3),
        "load_average_1min": round(os.getloadavg()[0], 2),   # the machine is shared
        "cpus": os.cpu_count(),
    }
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
