"""Evaluation memory benchmark: peak memory and episodes/s of the evaluation's
episodes at two or more batch sizes.

Runs what `python -m training.evaluate` runs (`run_episodes`: the bench's test split, its protocol,
the pristine workspace, the policy's rollout generation: the CUDA-graph backend on a GPU, the
transformers path on a CPU), once per batch size, and prints one row each:
  peak GiB      torch.cuda.max_memory_allocated on a GPU (weights included, reset before each
                batch size); on a CPU, the peak resident set size of this process sampled every
                20 ms (an RSS rarely falls, so a later size's peak includes an earlier one's)
  episodes/s    episodes over wall-clock seconds (model loading excluded)
  tokens/s      policy tokens generated per second
The target: peak memory grows with the tokens present (batch x context), not batch x context^2:
at a fixed context at most linear in the batch, while episodes/s rises with it.

On the H200 (the full UserGym test split, 210 episodes, at the protocol's 16 turns x 1,024 tokens,
8,192 tokens an episode):
    python benchmarks/eval_memory.py --device cuda --batch-sizes 16,64
Where the packaged weights are missing, `--model random` runs SmolLM2-135M's shapes with random
weights (the real tokenizer): such a model almost never ends a turn early, so every turn runs to
--tokens and each episode to --budget, the most memory the protocol allows.
Measured there (2026-12-03, `--model random --episodes 9`: 63 episodes, every one run to 8,192
tokens, 516,082 policy tokens), before (main at a25042b) and after the chunked prefill and the
shared KV storage:
    batch 16: 32.04 GiB, 0.361 episodes/s  ->  5.01 GiB, 0.358 episodes/s
    batch 64: 85.32 GiB, 0.779 episodes/s  -> 15.89 GiB, 0.744 episodes/s (before the capture
                                                 change; batch 16 was then 0.338 episodes/s)
On a CPU, a smoke run in seconds with the tests' tiny model:
    python benchmarks/eval_memory.py --device cpu --model ~/.cache/eau/tiny-llama-l2-h64-s0 \
        --batch-sizes 2,4 --episodes 1 --turns 2 --tokens 16 --budget 2048
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training import evaluate as ev                                     # noqa: E402
from training import generation                                         # noqa: E402
from training.smollm2 import ModelNotFound                              # noqa: E402


def random_smollm2(device: str):
    """`Models` with SmolLM2-135M-Instruct's shapes and random weights (no weights needed)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    from training.policy import Models, load_tokenizer, pick_device, pick_precision
    from training.smollm2 import tokenizer_dir

    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                      num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                      head_dim=64, max_position_embeddings=8192, rope_theta=100000.0,
                      rms_norm_eps=1e-5, tie_word_embeddings=True, bos_token_id=1,
                      eos_token_id=2, pad_token_id=2)
    dev = pick_device(device)
    torch.manual_seed(0)
    policy = LlamaForCausalLM(cfg).to(dev).eval().requires_grad_(False)
    return Models(policy=policy, critic=None, reference=None,
                  tokenizer=load_tokenizer(str(tokenizer_dir())), device=dev, path="random",
                  autocast_dtype=pick_precision("auto", dev))


class PeakRSS:
    """The largest resident set size of this process while active (sampled every 20 ms)."""

    def __init__(self):
        self.peak = self._rss()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    @staticmethod
    def _rss() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")

    def _watch(self) -> None:
        while not self._stop.wait(0.02):
            self.peak = max(self.peak, self._rss())

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, self._rss())


class TokenCount(ev.ProgressLines):
    """The evaluation's progress lines, keeping the last count of policy tokens."""

    tokens = 0

    def update(self, done: int, tokens: int, force: bool = False) -> None:
        self.tokens = tokens
        super().update(done, tokens, force)


def run_one(models, bench, tasks, snapshot, used, spec: ev.EvalSpec, work: ev.Work) -> dict:
    """run_episodes at spec.batch_size: peak memory, episodes/s, tokens/s (or the OOM message)."""
    cuda = models.device.type == "cuda"
    generation._ROLLOUT_COPIES.clear()   # each batch size starts without the last one's buffers
    if cuda:
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
    progress = TokenCount(len(tasks), work.tokens, f"batch {spec.batch_size}", every_s=30.0)
    error = None
    t0 = time.perf_counter()
    with PeakRSS() as rss:
        try:
            ev.run_episodes(models, bench, tasks, snapshot, used, spec, progress)
        except torch.OutOfMemoryError as exc:      # reported in the row; the next size still runs
            error = "out of memory: " + str(exc).split("\n")[0][:160]
    seconds = time.perf_counter() - t0
    peak = torch.cuda.max_memory_allocated() if cuda else rss.peak
    row = {"batch": spec.batch_size, "episodes": len(tasks), "s": round(seconds, 1),
           "peak_gib": round(peak / 2**30, 2)}
    if cuda:
        row["reserved_gib"] = round(torch.cuda.max_memory_reserved() / 2**30, 2)
    if error:
        return {**row, "error": error}
    return {**row, "episodes_per_s": round(len(tasks) / seconds, 3),
            "tokens_per_s": round(progress.tokens / seconds, 1), "tokens": progress.tokens}


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--device", default="auto", help="cuda, cpu or auto (default auto)")
    p.add_argument("--batch-sizes", default="16,64",
                   help="comma-separated episodes advanced together (default 16,64)")
    p.add_argument("--bench", default="usergym")
    p.add_argument("--split", default="test")
    p.add_argument("--episodes", type=int, default=None,
                   help="the first N tasks of each gym of the split (default: all of them)")
    p.add_argument("--turns", type=int, default=None, help="turn limit (default: the protocol's)")
    p.add_argument("--tokens", type=int, default=None,
                   help="new tokens a turn (default: the protocol's, 1,024)")
    p.add_argument("--budget", type=int, default=None,
                   help="tokens an episode, prompt included (default: the protocol's, 8,192)")
    p.add_argument("--model", default="default",
                   help="default (packaged SmolLM2-135M-Instruct), a model folder, or random")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", default=None, help="also write the rows as JSON lines here")
    a = p.parse_args(argv)
    try:
        sizes = [int(x) for x in a.batch_sizes.split(",") if x.strip()]
    except ValueError:
        p.error(f"--batch-sizes takes whole numbers separated by commas (got {a.batch_sizes!r})")
    if not sizes or min(sizes) < 1:
        p.error("--batch-sizes needs at least one size of 1 or more")

    try:
        return run(a, sizes)
    except (ev.EvalError, ValueError, FileNotFoundError, ModelNotFound) as exc:  # ModelLoadError too
        print(f"eval_memory: {exc}", file=sys.stderr)
        return 2


def run(a: argparse.Namespace, sizes: list[int]) -> int:
    """Load the bench, its protocol and the model once; one run_one per batch size; the table."""
    bench = ev.load_bench(a.bench)
    protocol = dict(bench.eval_protocol)
    gyms = protocol.get("gyms")
    tasks = list(bench.load_tasks(a.split, gyms=list(gyms)) if gyms else bench.load_tasks(a.split))
    if a.episodes:
        tasks = ev.first_per_gym(tasks, a.episodes)
    spec = ev.EvalSpec(bench=a.bench, split=a.split, seed=a.seed, episodes=a.episodes,
                       device=a.device, user_llm="none", max_turns=a.turns,
                       max_new_tokens=a.tokens)
    used = ev.apply_overrides(protocol, spec)
    if a.budget is not None:
        used["max_episode_tokens"] = a.budget
    snapshot = ev.pristine_snapshot(used, tuple(sorted({t.gym for t in tasks})),
                                    str(getattr(bench, "name", "")))
    work = ev.work_of(tasks, snapshot.knobs, used)
    models = (random_smollm2(a.device) if a.model == "random"
              else ev.load_policy(None, a.model, a.device))
    print(f"{a.bench}/{a.split}: {work.episodes} episodes x up to {work.max_turns} turns x "
          f"{work.new_tokens} tokens (at most {work.episode_budget} an episode), model "
          f"{a.model}, {models.device}", flush=True)
    if models.device.type == "cuda":
        print(f"weights: {torch.cuda.memory_allocated() / 2**30:.2f} GiB on the GPU", flush=True)
    rows = []
    for size in sizes:
        spec = ev.EvalSpec(**{**spec.__dict__, "batch_size": size})
        rows.append(run_one(models, bench, tasks, snapshot, used, spec, work))
    memory = "peak GiB (max allocated)" if models.device.type == "cuda" else "peak RSS GiB"
    print(f"\n| batch | episodes | seconds | episodes/s | tokens/s | {memory} |")
    print("| ---: | ---: | ---: | ---: | ---: | ---: |")
    for r in rows:
        if "error" in r:
            print(f"| {r['batch']} | {r['episodes']} | {r['s']} | {r['error']} | | "
                  f"{r['peak_gib']} |")
        else:
            print(f"| {r['batch']} | {r['episodes']} | {r['s']} | {r['episodes_per_s']} | "
                  f"{r['tokens_per_s']} | {r['peak_gib']} |")
    if a.out:
        with open(a.out, "w") as f:
            for r in rows:
                f.write(json.dumps({**r, "bench": a.bench, "model": a.model,
                                    "device": str(models.device)}) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
