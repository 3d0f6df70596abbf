"""A co-evolution run over several processes against one process.

Runs the whole system twice through the real CLI (`orchestrator start --agent builtin`): once with
one trainer process, once with `trainer.parallel` (default fsdp) over `--nproc` processes under
torchrun, with the same global batch, greedy rollouts (so both roll out the same episodes) and the
built-in meta-agent making its live interventions. Then it reports:

  - the steps each run made and the commits the trainer applied live (with their steps);
  - agreement: for the steps before the first live change in either run, the largest difference
    between the two runs' losses, KL, entropy, values and grad norms (rewards must be equal);
  - throughput: rollout tokens/s (generated tokens / rollout seconds) and update tokens/s, medians
    over steps 2.., and scaling efficiency = (parallel rate / one-process rate) / nproc.

    .venv/bin/python benchmarks/parallel_run.py                       # CPU: 2 gloo processes, tiny model
    python benchmarks/parallel_run.py --device cuda --nproc 2 --model PATH   # a machine with 2 GPUs

On the CPU every process, in both runs, gets cores / N threads: scaling efficiency compares N
workers against one worker of the same size (the standard definition), not against one process
spread over all cores.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

COMPARED = ("actor/pg_loss", "critic/value_loss", "actor/entropy", "kl/ref", "actor/grad_norm",
            "critic/grad_norm", "critic/values_mean")


def read_jsonl(path: Path) -> list[dict]:
    from training import metrics

    return list(metrics.read_lines(path)) if path.exists() else []


def start(runs: Path, exp: str, args, extra: list[str]) -> float:
    cmd = [sys.executable, "-m", "orchestrator.cli", "--runs-dir", str(runs), "start",
           "--agent", "builtin", "--bench", args.bench, "--preset", "cpu", "--exp", exp,
           "--steps", str(args.steps), "--no-live", "--set", "rollout.temperature=0",
           "--set", f"model.device={args.device}"]
    if args.model:
        cmd += ["--model", args.model]
    for item in args.set + extra:
        cmd += ["--set", item]
    print("$ " + " ".join(cmd), flush=True)
    t0 = time.monotonic()
    # the built-in agent files findings in the experience pool: keep a benchmark's out of the project's
    env = dict(os.environ, EAU_EXPERIENCE_DIR=str(runs / "experience"))
    proc = subprocess.run(cmd, cwd=ROOT, text=True, capture_output=True, env=env)
    (runs / f"{exp}.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        raise SystemExit(f"{exp} failed (exit {proc.returncode}); log: {runs / exp}.log\n"
                         + (proc.stdout + proc.stderr)[-3000:])
    return time.monotonic() - t0


def summary(runs: Path, exp: str) -> dict:
    run = runs / exp / "run-001"
    rows = read_jsonl(run / "metrics.jsonl")
    applied = [(e["step"], e["commit"][:10]) for e in read_jsonl(run / "events.jsonl")
               if e.get("event") == "applied"]
    started = next((e for e in read_jsonl(run / "events.jsonl") if e.get("event") == "started"), {})
    later = rows[1:] or rows

    def med(f):
        vals = [f(r) for r in later]
        vals = [v for v in vals if v is not None]
        return statistics.median(vals) if vals else None

    return {"steps": len(rows), "applied": applied,
            "world_size": started.get("world_size", 1), "parallel": started.get("parallel", "none"),
            "step_s": med(lambda r: r.get("perf/step_s")),
            "rollout_tok_per_s": med(lambda r: r["perf/generated_tokens"] / r["perf/rollout_s"]
                                     if r.get("perf/rollout_s") else None),
            "update_tok_per_s": med(lambda r: r.get("perf/update_tokens_per_s")),
            "rows": rows}


def agreement(one: dict, par: dict) -> dict:
    first_change = min([s for s, _ in one["applied"] + par["applied"]] or [10**9])
    steps = [r["step"] for r in one["rows"] if r["step"] < first_change]
    by_step = {r["step"]: r for r in par["rows"]}
    worst: dict[str, float] = {}
    worst_abs: dict[str, float] = {}
    rewards_equal = True
    for r in one["rows"]:
        if r["step"] not in steps or r["step"] not in by_step:
            continue
        p = by_step[r["step"]]
        rewards_equal &= r.get("reward/mean") == p.get("reward/mean")
        for key in COMPARED:
            a, b = r.get(key), p.get(key)
            if isinstance(a, (int, float)) and isinstance(b, (int, float)):
                worst_abs[key] = max(worst_abs.get(key, 0.0), abs(a - b))
                if abs(a) > 1e-4:          # relative only where the value is not ~0
                    worst[key] = max(worst.get(key, 0.0), abs(a - b) / abs(a))
    return {"compared_steps": steps, "rewards_equal": rewards_equal,
            "largest_absolute_difference": worst_abs,
            "largest_relative_difference": worst}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nproc", type=int, default=2)
    ap.add_argument("--strategy", default="fsdp", choices=("ddp", "fsdp"))
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--bench", default="usergym")
    ap.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    ap.add_argument("--model", default="", help="model folder (default on the CPU: the tiny model)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config override for both runs")
    ap.add_argument("--runs-dir", default="", help="keep the experiments here (default: a temp dir)")
    ap.add_argument("--out", default="", help="also write the JSON result here")
    args = ap.parse_args()
    if not args.model and args.device == "cpu":
        from training.smollm2 import tiny_model_dir
        args.model = str(tiny_model_dir())
    runs = Path(args.runs_dir or tempfile.mkdtemp(prefix="eau-parallel-")).resolve()
    runs.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%H%M%S")
    cores = os.cpu_count() or 1
    threads = [f"trainer.threads={max(cores // args.nproc, 1)}"] if args.device == "cpu" else []
    one_extra = threads
    par_extra = [f"trainer.parallel={args.strategy}", f"trainer.nproc_per_node={args.nproc}"] + threads
    wall_one = start(runs, f"one-{stamp}", args, one_extra)
    wall_par = start(runs, f"par-{stamp}", args, par_extra)
    one, par = summary(runs, f"one-{stamp}"), summary(runs, f"par-{stamp}")
    result = {"device": args.device, "nproc": args.nproc, "strategy": args.strategy,
              "steps": args.steps, "model": args.model or "SmolLM2-135M-Instruct",
              "runs_dir": str(runs), "loadavg_1m": os.getloadavg()[0],
              "wall_s": {"one": round(wall_one, 1), "parallel": round(wall_par, 1)}}
    for name, s in (("one", one), ("parallel", par)):
        result[name] = {k: v for k, v in s.items() if k != "rows"}
    result["agreement"] = agreement(one, par)
    for key in ("rollout_tok_per_s", "update_tok_per_s"):
        if one[key] and par[key]:
            result[f"scaling_efficiency_{key.split('_')[0]}"] = round(
                par[key] / one[key] / args.nproc, 3)
    text = json.dumps(result, indent=1, default=str)
    print(text)
    if args.out:
        Path(args.out).write_text(text + "\n")
    ok = (one["steps"] == par["steps"] == args.steps and result["agreement"]["rewards_equal"]
          and par["world_size"] == args.nproc and par["applied"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
