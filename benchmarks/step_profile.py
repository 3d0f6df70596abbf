"""Profile of the trainer's real PPO step: its own `perf/*` per step, and torch.profiler on one step.

What a speed change is judged by (README "How we want the work done": profile the real workload,
quote before and after on the same command). It runs `training.trainer.Trainer` itself, on a
workspace seeded from the project's `workspace/`, exactly as `orchestrator start --agent none`
would, minus the supervisor:

    python3 benchmarks/step_profile.py --steps 5 --profile-step 3 --out $OUT \
        --set model.device=cuda --set data.train_batch_size=16 --set rollout.n=4 \
        --set rollout.max_turns=10 --set rollout.response_length=128 \
        --set actor.ppo_micro_batch_size=4 --set critic.ppo_micro_batch_size=4

Writes to --out: `perf.jsonl` (the trainer's metrics line of every step), `profile.txt` (the
profiled step: the trainer's phases, `eau/*` ranges, then the top operators by device and by host
time) and `trajectories.jsonl` (the last step's episodes, to read what the policy wrote).
Prints one line per step: step, rollout, update seconds and tokens/s, peak memory.
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

PERF_KEYS = ("perf/step_s", "perf/rollout_s", "perf/generate_s", "perf/env_s", "perf/score_s",
             "perf/update_s", "perf/rollout_tokens_per_s", "perf/update_tokens_per_s",
             "perf/generated_tokens", "perf/peak_mem_mb")


def seed_workspace(into: Path) -> Path:
    """A git workspace seeded from the project's workspace/, its first commit live."""
    import git

    shutil.copytree(ROOT / "workspace", into)
    repo = git.Repo.init(into)
    repo.git.add("-A")
    first = repo.index.commit("seed")
    repo.git.update_ref("refs/eau/live", first.hexsha)
    return into


def profile_table(prof, device: bool) -> str:
    """The profiled step: the eau/* ranges first (the trainer's phases), then the top operators."""
    events = prof.key_averages()
    sort = "self_device_time_total" if device else "self_cpu_time_total"
    phases = [e for e in events if e.key.startswith("eau/")]
    lines = ["phase                               host ms   device ms   calls"]
    for e in sorted(phases, key=lambda e: -e.cpu_time_total):
        dev = getattr(e, "device_time_total", 0.0) / 1e3
        lines.append(f"{e.key:34s} {e.cpu_time_total / 1e3:9.1f} {dev:11.1f} {e.count:7d}")
    lines.append("")
    lines.append(events.table(sort_by=sort, row_limit=40, max_name_column_width=60))
    if device:
        lines.append(events.table(sort_by="self_cpu_time_total", row_limit=25,
                                  max_name_column_width=60))
    return "\n".join(lines)


def profiled_step(trainer, step: int, cuda: bool):
    """One step under two profilers: the rollout on the host only (CUDA activity tracing
    instruments every kernel of every graph replay: a step of ~1,000 replays did not finish in
    4 minutes on the H200), then the update (old/reference passes and PPO epochs) on host and
    device. Returns the step's metrics and the two tables."""
    from torch.profiler import ProfilerActivity, profile

    rollout, score = trainer._rollout, trainer._score
    held: dict = {}

    def profiled_rollout(episodes):
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            stats = rollout(episodes)
        held["rollout"] = prof
        return stats

    def profiled_score(episodes):
        out = score(episodes)
        acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        held["update"] = profile(activities=acts)
        held["update"].start()
        return out

    trainer._rollout, trainer._score = profiled_rollout, profiled_score
    try:
        record = trainer.run_step(step)
    finally:
        trainer._rollout, trainer._score = rollout, score
        if "update" in held:
            held["update"].stop()
    tables = ["## rollout (host activity only)", profile_table(held["rollout"], False), "",
              "## rewards, old/reference passes and the update (host and device)",
              profile_table(held["update"], cuda)]
    return record, "\n".join(tables)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", default="usergym")
    parser.add_argument("--preset", default="", help="a config preset (cpu), none by default")
    parser.add_argument("--steps", type=int, default=5)
    parser.add_argument("--profile-step", type=int, default=0,
                        help="the step to run under torch.profiler (0: none)")
    parser.add_argument("--out", default="", help="folder for perf.jsonl, profile.txt")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override, as `orchestrator start --set`")
    args = parser.parse_args()
    from orchestrator.commands.run_cmds import parse_sets
    from orchestrator.errors import UserError
    from training.config import resolve
    from training.trainer import Trainer

    try:
        overrides = parse_sets(args.set)
    except UserError as exc:
        parser.error(str(exc))
    out = Path(args.out) if args.out else None
    if out:
        out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="eau-step-profile-"))
    try:
        ws = seed_workspace(tmp / "ws")
        run = tmp / "run"
        run.mkdir()
        cfg = resolve(args.bench, args.preset or None,
                      {"workspace.repo": str(ws), "trainer.total_steps": args.steps,
                       "trainer.save_freq": 0, **overrides})
        (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
        t0 = time.perf_counter()
        trainer = Trainer(run)
        print(f"loaded in {time.perf_counter() - t0:.1f} s on {trainer.models.device} "
              f"({trainer.models.precision})", flush=True)
        cuda = trainer.models.device.type == "cuda"
        for step in range(1, args.steps + 1):
            if step == args.profile_step:
                record, tables = profiled_step(trainer, step, cuda)
                if out:
                    (out / "profile.txt").write_text(tables)
            else:
                record = trainer.run_step(step)
            trainer.step = step
            if out:
                with open(out / "perf.jsonl", "a") as f:
                    f.write(json.dumps(record) + "\n")
            print(f"step {step}" + "".join(
                f"  {k[5:]} {record[k]:.3g}" for k in PERF_KEYS if k in record)
                + f"  reward {record['reward/mean']:.3f} invalid {record['episode/invalid_rate']:.2f}"
                + f" turns {record['episode/turns']:.1f}", flush=True)
        if out:
            last = sorted((run / "trajectories").glob("step-*.jsonl"))
            if last:
                shutil.copy(last[-1], out / "trajectories.jsonl")
        trainer.live.close()
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
