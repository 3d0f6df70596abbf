"""The untrained policy's starting point per gym: how many of its turns are valid actions, and how
often it succeeds, with 0 and with k worked examples (env.<gym>.demonstrations) before the task.

    python benchmarks/starting_point.py                                   # CPU: a quick look
    python benchmarks/starting_point.py --device cuda --tasks 16 --turns 6 --tokens 128 \
        --benches usergym,colbench,tau2:retail --demos 0,1 --out starting_point.json

What it runs: held-out (test split) tasks, the first N of each gym, through the evaluation's own
code (training.evaluate: the pristine workspace, its demonstrations, the same rollout), with the
symbolic user answering (no second model), shorter turns and episodes than the protocol's
16 x 1,024 tokens so it fits a CPU, and the policy sampled at --temperature / --top-p. It prints
one row per gym and demonstration count: valid-action rate over all agent turns, the same over
first turns only, success, mean score, and (with --show) a few first turns to read.

Why: with every turn refused as an invalid action PPO has no signal;
this measures the signal a run starts with, and chooses the presets' sampling (see training/config.py).
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def run(args) -> list[dict]:
    import torch

    from training import evaluate as E

    models = E.load_policy(None, args.model, args.device)
    torch.set_num_threads(max(1, args.threads)) if args.threads else None
    rows = []
    for item in args.benches.split(","):
        bench_name, _, only = item.partition(":")
        bench = E.load_bench(bench_name)
        gyms = [only] if only else list(bench.gyms)
        if bench_name == "usergym" and not only:
            gyms = list(bench.eval_protocol.get("gyms") or bench.gyms)
        tasks = E.first_per_gym(bench.load_tasks("test", gyms=gyms), args.tasks)
        protocol = {**bench.eval_protocol, "max_steps": args.turns, "user": "symbolic",
                    "response_length": args.tokens, "max_episode_tokens": args.budget,
                    "temperature": args.temperature, "top_p": args.top_p}
        for demos in [int(d) for d in args.demos.split(",")]:
            snap = E.pristine_snapshot(protocol, tuple(gyms), bench_name)
            for g in gyms:
                snap.knobs["env"][g]["demonstrations"] = demos
            spec = E.EvalSpec(bench=bench_name, seed=args.seed, batch_size=args.batch,
                              device=args.device, user_llm="none")
            t0 = time.time()
            records = E.run_episodes(models, bench, tasks, snap, protocol, spec)
            took = time.time() - t0
            for g in gyms:
                mine = [r for r in records if r["gym"] == g]
                turns = [t for r in mine for t in r["turns"]]
                firsts = [r["turns"][0] for r in mine if r["turns"]]
                shown = min(demos, len(snap.demonstrations.get(bench_name, {}).get(g) or []))
                row = {"bench": bench_name, "gym": g, "demonstrations": shown, "episodes": len(mine),
                       "turns": len(turns),
                       "valid": statistics.fmean(not t.get("invalid_action") for t in turns) if turns else 0.0,
                       "first_valid": statistics.fmean(not t.get("invalid_action") for t in firsts) if firsts else 0.0,
                       "success": statistics.fmean(bool(r["success"]) for r in mine) if mine else 0.0,
                       "score": statistics.fmean(float(r["score"]) for r in mine) if mine else 0.0,
                       "seconds": round(took, 1),
                       "first_turns": [t["agent"][:120] for t in firsts[:args.show]]}
                rows.append(row)
                print(f"{bench_name:>8} {g:>10} demos {shown}: valid {row['valid']:.2f} "
                      f"(first turns {row['first_valid']:.2f}) success {row['success']:.2f} "
                      f"score {row['score']:.3f}  n={len(mine)} turns={len(turns)}", flush=True)
                for t in row["first_turns"]:
                    print(f"           | {t!r}")
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="default", help="'default' (packaged SmolLM2) or a folder")
    p.add_argument("--benches", default="usergym:intention", help="bench or bench:gym, comma-separated")
    p.add_argument("--tasks", type=int, default=8, help="test tasks per gym")
    p.add_argument("--demos", default="0,1", help="demonstration counts to compare")
    p.add_argument("--turns", type=int, default=3)
    p.add_argument("--tokens", type=int, default=48, help="new tokens per agent turn")
    p.add_argument("--budget", type=int, default=4096, help="tokens per episode")
    p.add_argument("--temperature", type=float, default=0.7)
    p.add_argument("--top-p", type=float, default=1.0)
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--show", type=int, default=0, help="first turns printed per gym")
    p.add_argument("--out", default=None, help="write the rows as JSON here")
    args = p.parse_args()
    rows = run(args)
    if args.out:
        Path(args.out).write_text(json.dumps({"args": vars(args), "rows": rows}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
