"""Trainer benchmark: SmolLM2-135M by default, on whatever device `auto` picks.

Reports, as one JSON object (and a readable table):
  rollout tokens/s   one batched, KV-cached generate call over 8 and 32 UserGym prompts, against
                     generating the same 8 prompts one at a time (target: batched >= 3x)
  update tokens/s    score (old/ref log-probs, values) + one PPO update over those episodes
  s per PPO step     the CPU preset's full step (rollout, rewards, update), median of steps 2..N
  peak memory        max RSS (CPU) or max allocated (GPU)
  hot-reload latency promotion of a commit to refs/eau/live -> detected (watcher) -> applied
                     (export + build + env check), excluding the wait for the step boundary
  restart time       a new process that loads the model and resumes from the checkpoint

Run: `.venv/bin/python benchmarks/trainer_bench.py [--model PATH] [--new-tokens 32] [--steps 3]`.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import live, metrics                                      # noqa: E402
from training.benches import get_bench                                  # noqa: E402
from training.config import resolve                                     # noqa: E402
from training.policy import generate                                    # noqa: E402
from training.rollout import Episode, start_episode                     # noqa: E402
from training.snapshot import Snapshot                                  # noqa: E402
from training.trainer import Trainer, peak_memory_mb                    # noqa: E402
from training.update import collate, ppo_update, score_batch            # noqa: E402


def prompts(trainer: Trainer, n: int) -> list[Episode]:
    """n UserGym first turns (system prompt + task), as the rollout builds them."""
    tasks = (trainer.tasks * (n // len(trainer.tasks) + 1))[:n]
    return [start_episode(trainer.models, trainer.bench.make_env(t, trainer.live.snapshot, seed=i),
                          trainer.bench.system_prompt(t), seed=i) for i, t in enumerate(tasks)]


def gen_rate(trainer: Trainer, eps: list[Episode], new_tokens: int, batched: bool) -> float:
    ctx = [ep.tokens for ep in eps]
    kw = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, temperature=1.0, top_p=1.0)
    t0 = time.perf_counter()
    outs = generate(trainer.models, ctx, **kw) if batched else [
        generate(trainer.models, [c], **kw)[0] for c in ctx]
    dt = time.perf_counter() - t0
    for ep, o in zip(eps, outs):
        ep.tokens, ep.mask = ep.tokens + o, ep.mask + [1] * len(o)
        ep.turn_ids = ep.turn_ids + [0] * len(o)
    return sum(len(o) for o in outs) / dt


def bench_rollout_update(trainer: Trainer, new_tokens: int, batches=(8, 32)) -> dict:
    out = {}
    generate(trainer.models, [prompts(trainer, 1)[0].tokens], max_new_tokens=4, temperature=1.0,
             top_p=1.0)                                                   # warm-up
    one = prompts(trainer, 8)
    out["rollout_tokens_per_s_sequential"] = gen_rate(trainer, one, new_tokens, batched=False)
    for n in batches:
        eps = prompts(trainer, n)
        out[f"rollout_tokens_per_s_batch{n}"] = gen_rate(trainer, eps, new_tokens, batched=True)
        if n == batches[0]:
            batch = collate(eps, [[1.0] for _ in eps], trainer.models.tokenizer.pad_token_id)
            t0 = time.perf_counter()
            score_batch(trainer.models, batch, trainer.cfg)
            ppo_update(trainer.models, trainer.actor_opt, trainer.critic_opt, batch, trainer.cfg,
                       trainer.coefficients(), seed=0)
            dt = time.perf_counter() - t0
            out["update_tokens_per_s"] = int(batch.lengths.sum()) / dt
            out["update_action_tokens_per_s"] = batch.num_tokens / dt
            out["update_episode_tokens_mean"] = float(batch.lengths.float().mean())
    for n in batches:
        out[f"batched{n}_speedup"] = (out[f"rollout_tokens_per_s_batch{n}"]
                                      / out["rollout_tokens_per_s_sequential"])
    return out


def bench_hot_reload(trainer: Trainer, repo_dir: Path) -> dict:
    import git

    repo = git.Repo(repo_dir)
    watcher = trainer.watcher
    watcher.start()
    knobs = json.loads((repo_dir / "knobs.json").read_text())
    knobs["agent"]["entropy_coeff"] = 0.002
    (repo_dir / "knobs.json").write_text(json.dumps(knobs, indent=1))
    repo.index.add(["knobs.json"])
    c = repo.index.commit("bench: entropy")
    t0 = time.monotonic()
    repo.git.update_ref("refs/eau/live", c.hexsha)
    while watcher.latest()[0] != c.hexsha:
        time.sleep(0.005)
    detect = watcher.latest()[1] - t0
    t1 = time.monotonic()
    trainer.maybe_reload()
    load = time.monotonic() - t1
    assert trainer.live.commit == c.hexsha
    return {"reload_detect_s": detect, "reload_apply_s": load, "reload_total_s": detect + load}


def bench_steps(run: Path, steps: int) -> dict:
    trainer = Trainer(run)
    assert trainer.run() == 0
    rows = list(metrics.read_lines(run / "metrics.jsonl"))
    step_s = [r["perf/step_s"] for r in rows[1:]] or [rows[0]["perf/step_s"]]
    return {"ppo_step_s": statistics.median(step_s), "ppo_steps": len(rows),
            "step_rollout_tokens_per_s": statistics.median(
                r["perf/rollout_tokens_per_s"] for r in rows),
            "step_update_tokens_per_s": statistics.median(
                r["perf/update_tokens_per_s"] for r in rows)}


def bench_restart(run: Path) -> float:
    code = ("import sys; from training.trainer import Trainer; "
            "t = Trainer(sys.argv[1], resume=True); assert t.step > 0")
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", code, str(run)], cwd=ROOT, check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def progress(result: dict) -> None:
    """Partial results as they come (a slow, shared CPU may not reach the end)."""
    print("partial " + json.dumps(result), file=sys.stderr, flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="", help="model folder (default: packaged SmolLM2)")
    parser.add_argument("--new-tokens", type=int, default=32)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--preset", default="cpu")
    parser.add_argument("--out", default="", help="also write the JSON here")
    parser.add_argument("--batches", default="8,32",
                        help="episode counts of the batched rollout figures (first one: update)")
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                        help="config override for the step figures, e.g. data.train_batch_size=16 "
                             "(VALUE parsed as JSON where it can be)")
    args = parser.parse_args()
    batches = [int(b) for b in args.batches.split(",")]
    from orchestrator.commands.run_cmds import parse_sets   # the same --set as `orchestrator start`
    from orchestrator.errors import UserError
    try:
        overrides = parse_sets(args.set)
    except UserError as exc:
        parser.error(str(exc))
    tmp = Path(tempfile.mkdtemp(prefix="eau-trainer-bench-"))
    try:
        import git

        repo_dir = tmp / "ws"
        shutil.copytree(ROOT / "workspace", repo_dir)
        repo = git.Repo.init(repo_dir)
        repo.git.add("-A")
        first = repo.index.commit("seed")
        repo.git.update_ref("refs/eau/live", first.hexsha)
        run = tmp / "run"
        run.mkdir()
        cfg = resolve("usergym", args.preset, {"model.path": args.model,
                                               "workspace.repo": str(repo_dir),
                                               "trainer.total_steps": args.steps,
                                               "trainer.save_freq": 0, **overrides})
        (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
        t0 = time.perf_counter()
        trainer = Trainer(run)
        result = {"model": trainer.models.path, "device": str(trainer.models.device),
                  "threads": torch.get_num_threads(), "load_s": time.perf_counter() - t0,
                  "new_tokens": args.new_tokens, "loadavg_1m": os.getloadavg()[0],
                  "overrides": overrides}
        progress(result)
        result.update(bench_rollout_update(trainer, args.new_tokens, batches))
        progress(result)
        result.update(bench_hot_reload(trainer, repo_dir))
        progress(result)
        trainer.watcher.stop()
        trainer.live.close()
        del trainer
        result.update(bench_steps(run, args.steps))
        progress(result)
        result["restart_to_same_state_s"] = bench_restart(run)
        result["peak_mem_mb"] = peak_memory_mb()
        result["loadavg_1m_end"] = os.getloadavg()[0]
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for k, v in result.items():
        print(f"{k:40s} {v:.3f}" if isinstance(v, float) else f"{k:40s} {v}")
    print(json.dumps(result))
    if args.out:
        Path(args.out).write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
