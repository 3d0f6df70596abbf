"""How fast ColBench answers are scored in the sandbox on this machine.

    .venv/bin/python benchmarks/colbench_sandbox_bench.py [--repeats 3] [--out FILE.json]

Over the test split, one answer per task (the reference itself, so every test call runs to the
end; reference outputs are computed first and cached, as in training), scored with one worker and
with two (two sandboxed processes at a time). Reports answers scored per second: the median over
`--repeats` passes over the split, and the median latency of one answer.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import time

from training.benches.colbench.data import load_tasks
from training.benches.colbench.scorer import ReferenceCache, score_answer, score_many


def one_pass(pairs, workers: int, cache: ReferenceCache) -> float:
    t0 = time.perf_counter()
    scores = score_many(pairs, workers, cache=cache)
    elapsed = time.perf_counter() - t0
    assert all(s.success for s in scores), "a reference failed its own tests"
    return len(pairs) / elapsed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)
    tasks = load_tasks("test")
    pairs = [(t, t.data["ground_truth"]) for t in tasks]
    cache = ReferenceCache()
    t0 = time.perf_counter()
    for t in tasks:
        cache.get(t)
    ref_s = time.perf_counter() - t0
    latency = []
    for t, code in pairs:
        s0 = time.perf_counter()
        score_answer(t, code, cache=cache)
        latency.append(time.perf_counter() - s0)
    result = {"tasks": len(tasks), "tests_per_task": statistics.median(len(t.data["test_cases"]) for t in tasks),
              "reference_outputs_s": round(ref_s, 2),
              "latency_median_ms": round(1000 * statistics.median(latency), 1)}
    for workers in (1, 2):
        rates = [one_pass(pairs, workers, cache) for _ in range(args.repeats)]
        result[f"answers_per_s_{workers}_worker"] = round(statistics.median(rates), 1)
    result["load_average_1min"] = round(os.getloadavg()[0], 2)    # the machine is shared
    result["cpus"] = os.cpu_count()
    print(json.dumps(result, indent=2))
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
