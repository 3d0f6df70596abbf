"""Each algorithm's update step, and TRL's GRPOTrainer, measured on the same batch.

    python benchmarks/trl_grpo_bench.py --out /tmp/trlbench            # CPU, SmolLM2-135M
    python benchmarks/trl_grpo_bench.py --out /tmp/trlbench --device cuda --episodes 16

What runs, and why each in its own process (the peak resident memory of a process only grows):
1. prepare: our trainer (UserGym intention, the cpu preset, 2 episodes per task) rolls out one
   step's episodes with the policy; their tokens, action masks, turn ids, turn rewards and
   replies are saved, so every variant trains on the very same batch.
2. ppo, grpo, infopo: our `training.update.score_batch` + `ppo_update` under that
   `algorithm.name` (ppo: critic values and its update too; infopo: the counterfactual passes).
3. grpo+trl-ops: grpo with TRL's `selective_log_softmax` and `entropy_from_logits` in place of
   training.ppo's (what "TRL's loss functions inside our trainer" can mean: TRL exposes no
   multi-turn advantage, only these per-token utilities; on CUDA with triton they are fused).
4. trl: `trl.GRPOTrainer` (1.16) with a `rollout_func` replaying the same episodes (prompt, then
   the multi-turn completion with `env_mask` 0 on user and template tokens) and a reward function
   returning each episode's score; one optimiser step per repeat, timed between the Trainer's
   on_step_begin and on_step_end (reference log-probs, loss, backward, step), with the same
   learning rate (constant), clip 0.2, KL weight 0.001, temperature, and token-mean loss ("bnpo":
   the local batch's action tokens, ours at one process). Like our grpo at one epoch and one
   mini-batch it takes the old log-probs from the loss pass itself. `trl` without gradient
   checkpointing, as our trainer runs by default; `trl+ckpt` with it, TRL's default (less
   activation memory, each layer's forward run again in the backward).
Each prints one JSON line: median and least step seconds over --repeats (after one warm-up step),
the median CPU seconds of the process over a step (user + system, all threads: on a shared
machine other processes stretch the wall time, far less the CPU time), and peak RSS after
loading and after the steps (MiB; CPU; safetensors weights are mapped, so "loaded" counts only
what was touched) or peak CUDA memory.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def peak_mb(device: str) -> float:
    import torch

    if device == "cuda":
        return torch.cuda.max_memory_allocated() / 2**20
    return rss_mb()


def config(args, run: Path, algorithm: str = "grpo"):
    from training.config import resolve

    overrides = {"model.path": args.model, "model.device": args.device, "algorithm.name": algorithm,
                 "data.train_batch_size": args.episodes // 2, "rollout.n": 2,
                 "actor.ppo_mini_batch_size": args.episodes // 2,
                 "actor.ppo_micro_batch_size": args.episodes, "gyms": ["intention"],
                 "workspace.dir": str(ROOT / "workspace"), "trainer.threads": args.threads,
                 "model.precision": "fp32" if args.device == "cpu" else "auto"}
    cfg = resolve("usergym", "cpu", overrides)
    run.mkdir(parents=True, exist_ok=True)
    (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    return cfg


def prepare(args) -> None:
    from training.trainer import Trainer

    run = Path(args.out) / "run"
    config(args, run)
    trainer = Trainer(run)
    episodes = trainer.make_episodes(1)
    trainer._rollout(episodes)
    _, turn_rewards, _ = trainer._score(episodes)
    saved = [{"tokens": ep.tokens, "mask": ep.mask, "turn_ids": ep.turn_ids, "rewards": r,
              "observations": ep.observations()} for ep, r in zip(episodes, turn_rewards)]
    (Path(args.out) / "batch.json").write_text(json.dumps(saved))
    trainer.live.close()
    lens = [len(e["tokens"]) for e in saved]
    print(json.dumps({"variant": "prepare", "episodes": len(saved), "tokens": sum(lens),
                      "action_tokens": sum(sum(e["mask"]) for e in saved),
                      "longest": max(lens)}), flush=True)


def load_batch(args) -> list[dict]:
    return json.loads((Path(args.out) / "batch.json").read_text())


def cpu_s() -> float:
    t = os.times()
    return t.user + t.system


def ours(args, algorithm: str, trl_ops: bool) -> None:
    import torch

    from training import policy, ppo
    from training.policy import load_models
    from training.update import collate, ppo_update, score_batch

    if trl_ops:
        from trl.trainer.utils import entropy_from_logits, selective_log_softmax

        # action_logprobs calls these on (1, N, V) logits of the N action tokens
        ppo.logprobs_from_logits = lambda logits, labels: selective_log_softmax(logits.float(), labels)
        ppo.entropy_from_logits = lambda logits: entropy_from_logits(logits.float())
        assert policy.ppo is ppo
    torch.set_num_threads(args.threads)
    cfg = config(args, Path(args.out) / "run", algorithm)
    models = load_models(cfg.model, seed=0, critic=algorithm == "ppo")
    opt = torch.optim.AdamW([p for p in models.policy.parameters() if p.requires_grad],
                            lr=cfg.actor.optim.lr)
    critic_opt = torch.optim.AdamW(models.critic.parameters(), lr=cfg.critic.optim.lr) \
        if models.critic is not None else None
    coefs = {"entropy_coeff": cfg.actor.entropy_coeff, "kl_loss_coef": cfg.actor.kl_loss_coef,
             "lr": cfg.actor.optim.lr}
    saved = load_batch(args)
    eps = [SimpleNamespace(tokens=e["tokens"], mask=e["mask"], turn_ids=e["turn_ids"]) for e in saved]
    loaded = peak_mb(args.device)
    times, cpu = [], []
    for i in range(args.repeats + 1):
        batch = collate(eps, [e["rewards"] for e in saved], models.tokenizer.pad_token_id,
                        [e["observations"] for e in saved])
        if args.device == "cuda":
            torch.cuda.synchronize()
        t0, c0 = time.perf_counter(), cpu_s()
        score_batch(models, batch, cfg)
        ppo_update(models, opt, critic_opt, batch, cfg, coefs, seed=i)
        if args.device == "cuda":
            torch.cuda.synchronize()
        if i:                                             # the first step warms up
            times.append(time.perf_counter() - t0)
            cpu.append(cpu_s() - c0)
    report(algorithm + ("+trl-ops" if trl_ops else ""), times, cpu, loaded, args.device)


def report(variant: str, times: list[float], cpu: list[float], loaded: float, device: str) -> None:
    print(json.dumps({"variant": variant, "step_s": round(statistics.median(times), 3),
                      "min_s": round(min(times), 3), "cpu_s": round(statistics.median(cpu), 3),
                      "steps_s": [round(t, 3) for t in times], "peak_mb_loaded": round(loaded),
                      "peak_mb": round(peak_mb(device))}), flush=True)


def trl_variant(args, checkpointing: bool) -> None:
    import torch
    from datasets import Dataset
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    from training.grpo import trajectory_scores
    from training.policy import resolve_model_path

    os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
    torch.set_num_threads(args.threads)
    cfg = config(args, Path(args.out) / "run")
    saved = load_batch(args)
    n = cfg.rollout.n
    by_prompt = {f"task-{i}": saved[i * n:(i + 1) * n] for i in range(len(saved) // n)}
    starts = [e["mask"].index(1) for e in saved]

    def rollout_func(prompts, trainer):
        # TRL's sampler repeats each prompt num_generations times: the k-th copy of a prompt
        # gets that task's k-th saved episode
        out = {"prompt_ids": [], "completion_ids": [], "logprobs": [], "env_mask": [],
               "score": []}
        seen: dict[str, int] = {}
        for p in prompts:
            k = seen.get(p, 0)
            seen[p] = k + 1
            for e in by_prompt[p][k:k + 1]:
                s = e["mask"].index(1)
                out["prompt_ids"].append(e["tokens"][:s])
                out["completion_ids"].append(e["tokens"][s:])
                out["env_mask"].append(e["mask"][s:])
                out["logprobs"].append([0.0] * (len(e["tokens"]) - s))
                r = torch.tensor([e["rewards"]], dtype=torch.float64)
                out["score"].append(float(trajectory_scores(r, torch.ones_like(r), "mean", 1.0)[0]))
        return out

    def reward(prompts, completions, score, **kwargs):
        return score

    times: list[float] = []
    cpu: list[float] = []

    class Clock(TrainerCallback):
        def on_step_begin(self, a, state, control, **kw):
            if args.device == "cuda":
                torch.cuda.synchronize()
            self.t0, self.c0 = time.perf_counter(), cpu_s()

        def on_step_end(self, a, state, control, **kw):
            if args.device == "cuda":
                torch.cuda.synchronize()
            times.append(time.perf_counter() - self.t0)
            cpu.append(cpu_s() - self.c0)

    with tempfile.TemporaryDirectory() as tmp:
        conf = GRPOConfig(output_dir=tmp, per_device_train_batch_size=len(saved),
                          num_generations=n, gradient_accumulation_steps=1,
                          max_steps=args.repeats + 1, learning_rate=cfg.actor.optim.lr,
                          beta=cfg.actor.kl_loss_coef, epsilon=cfg.actor.clip_ratio,
                          temperature=cfg.rollout.temperature, loss_type="bnpo",
                          max_completion_length=max(len(e["tokens"]) - s
                                                    for e, s in zip(saved, starts)),
                          use_cpu=args.device == "cpu", bf16=args.device == "cuda",
                          report_to=[], save_strategy="no", logging_steps=1,
                          gradient_checkpointing=checkpointing,
                          lr_scheduler_type="constant", shuffle_dataset=False, seed=0,
                          disable_tqdm=True)
        data = Dataset.from_dict({"prompt": list(by_prompt) * (args.repeats + 1)})
        trainer = GRPOTrainer(model=resolve_model_path(args.model), reward_funcs=reward,
                              args=conf, train_dataset=data, rollout_func=rollout_func,
                              callbacks=[Clock()])
        loaded = peak_mb(args.device)
        trainer.train()
    report("trl+ckpt" if checkpointing else "trl", times[1:], cpu[1:], loaded, args.device)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="folder for the batch and the run config")
    parser.add_argument("--model", default="", help="policy (default: the packaged SmolLM2-135M)")
    parser.add_argument("--device", default="cpu", choices=("cpu", "cuda"))
    parser.add_argument("--episodes", type=int, default=4, help="episodes (2 per task)")
    parser.add_argument("--repeats", type=int, default=3, help="timed steps after one warm-up")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--variant", default=None, help="one variant (the script runs each)")
    parser.add_argument("--variants", default="ppo,grpo,infopo,grpo+trl-ops,trl,trl+ckpt",
                        help="which to measure after prepare (comma-separated)")
    args = parser.parse_args()
    if args.variant == "prepare":
        prepare(args)
    elif args.variant in ("trl", "trl+ckpt"):
        trl_variant(args, checkpointing=args.variant == "trl+ckpt")
    elif args.variant is not None:
        algorithm, _, ops = args.variant.partition("+")
        ours(args, algorithm, ops == "trl-ops")
    else:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        for variant in ("prepare", *args.variants.split(",")):
            argv = [sys.executable, __file__, *sys.argv[1:], "--variant", variant]
            # keep a PYTHONPATH the caller set (the device machine's carried wheels live there)
            path = os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p)
            subprocess.run(argv, check=True, env={**os.environ, "PYTHONPATH": path})
    return 0


if __name__ == "__main__":
    sys.exit(main())
