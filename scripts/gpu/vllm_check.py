"""Does the colocated vLLM engine hold the trainer's weights? A check on the GPU, with SmolLM2-135M's
real weights, of what training/vllm_backend.py promises (its docstring, 2., 3. and 7.):

1. The engine's log-probs of a fixed episode text match the trainer's (fp32 policy, the same
   tokens): `VLLMEngine.score` against the policy's own forward pass.
2. The sampled tokens' log-probs the engine returns at the rollout temperature match the trainer's
   convention (logits divided by the temperature), on tokens the engine sampled itself.
3. After an update (a few AdamW steps raising the fixed text's likelihood), sleep and wake push
   the new weights: the engine's log-probs of the fixed text change by what the trainer's
   changed, and match the trainer's again.
4. What sleeping frees (torch.cuda.mem_get_info before and after) and how long sleep, wake and
   the push take.

    python3 scripts/gpu/vllm_check.py [--out FOLDER]    # on the device, with vLLM importable

It prints one line per check and writes vllm_check.json to --out (else $OUT). The engine runs bf16
(the trainer's fp32 weights are cast when pushed), so the two sides differ by bf16 rounding:
TOLERANCE is the mean absolute per-token difference accepted, and an update must move the
engine's log-probs by more than that for check 3 to mean anything (UPDATE_STEPS is chosen so).
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

TOLERANCE = 0.05          # mean |engine - trainer| per token, nats (bf16 engine, fp32 trainer)
UPDATE_STEPS, LR = 8, 1e-4
TEMPERATURE = 0.7         # the rollout temperature of check 2 (not 1, so the convention shows)


def trainer_logprobs(policy, seq: list[int], temperature: float = 1.0) -> list[float]:
    """log softmax(logits / T) of each token given those before it, by the update's own
    function (training/ppo.py, logprobs_from_logits)."""
    from training.ppo import logprobs_from_logits

    ids = torch.tensor([seq], device=next(policy.parameters()).device)
    with torch.no_grad():
        logits = policy(ids).logits[:, :-1].float() / temperature
    return logprobs_from_logits(logits, ids[:, 1:])[0].tolist()


def compare(a: list[float], b: list[float]) -> dict:
    d = [abs(x - y) for x, y in zip(a, b)]
    return {"tokens": len(d), "mean_abs": sum(d) / len(d), "max_abs": max(d),
            "sum_a": sum(a), "sum_b": sum(b)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT", ""))
    parser.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    args = parser.parse_args()
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from training.smollm2 import model_dir
    from training.vllm_backend import VLLMEngine

    path = str(model_dir())
    tok = AutoTokenizer.from_pretrained(path)
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32).cuda()
    text = tok.apply_chat_template(
        [{"role": "system", "content": "You plan a trip for the user. Ask before you answer."},
         {"role": "user", "content": "I need a hotel in Lisbon for three nights."},
         {"role": "assistant", "content": "[action] What is your budget per night?"},
         {"role": "user", "content": "Under 120 euros, near the river if possible."}],
        tokenize=False)
    fixed = tok(text, add_special_tokens=False)["input_ids"]
    report: dict = {"model": path, "fixed_tokens": len(fixed), "tolerance": TOLERANCE}

    t0 = time.perf_counter()
    engine = VLLMEngine(path, gpu_memory_utilization=args.gpu_memory_utilization,
                        max_model_len=2048, seed=0)
    report["start_s"] = time.perf_counter() - t0
    report["first_push_tensors"] = engine.push(policy)

    # 1. the fixed text, before any update
    before_engine = engine.score([fixed])[0]
    before_trainer = trainer_logprobs(policy, fixed)
    report["before"] = compare(before_engine, before_trainer)

    # 2. sampled tokens at the rollout temperature, the trainer's convention
    prompt = fixed[: len(fixed) // 2]
    sample = engine.generate([prompt], max_new_tokens=48, temperature=TEMPERATURE, seed=11)[0]
    mine = trainer_logprobs(policy, prompt + sample.ids, TEMPERATURE)[len(prompt) - 1:]
    report["sampled"] = compare(sample.logprobs, mine)

    # 3. an update, sleep, wake with the new weights
    free0 = torch.cuda.mem_get_info()[0]
    t0 = time.perf_counter()
    engine.sleep()
    report["sleep_s"] = time.perf_counter() - t0
    report["freed_by_sleep_gib"] = (torch.cuda.mem_get_info()[0] - free0) / 2**30
    # the trainer's own optimiser (fused on CUDA): a plain AdamW bumps the version counters the
    # push reads and hid that the fused one does not (every GPU rollout up to 2026-12-06)
    from types import SimpleNamespace

    from training.trainer import Trainer
    opt = Trainer._optimizer(policy, SimpleNamespace(lr=LR, betas=(0.9, 0.999), weight_decay=0.0))
    ids = torch.tensor([fixed], device="cuda")
    for _ in range(UPDATE_STEPS):
        loss = policy(ids, labels=ids).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
    del opt
    torch.cuda.empty_cache()
    t0 = time.perf_counter()
    report["wake_tensors"] = engine.wake(policy)
    report["wake_s"] = time.perf_counter() - t0
    after_engine = engine.score([fixed])[0]
    after_trainer = trainer_logprobs(policy, fixed)
    report["after"] = compare(after_engine, after_trainer)
    report["engine_moved"] = compare(after_engine, before_engine)
    report["trainer_moved"] = compare(after_trainer, before_trainer)
    report["unchanged_wake_tensors"] = (engine.sleep(), engine.wake(policy))[1]   # nothing new

    ok = {
        "1 engine = trainer before the update": report["before"]["mean_abs"] < TOLERANCE,
        "2 sampled log-probs follow logits / T": report["sampled"]["mean_abs"] < TOLERANCE,
        "3a the update moved the engine's log-probs": report["engine_moved"]["mean_abs"] > 2 * TOLERANCE,
        "3b engine = trainer after the update": report["after"]["mean_abs"] < TOLERANCE,
        "3c an unchanged policy pushes nothing": report["unchanged_wake_tensors"] == 0,
    }
    report["checks"] = ok
    for name, passed in ok.items():
        print(f"{'PASS' if passed else 'FAIL'}  {name}")
    for key in ("before", "sampled", "after", "engine_moved", "trainer_moved"):
        r = report[key]
        print(f"  {key:14s} tokens {r['tokens']:4d}  mean |d| {r['mean_abs']:.4f}  max |d| "
              f"{r['max_abs']:.4f}  sums {r['sum_a']:.2f} / {r['sum_b']:.2f}")
    print(f"  start {report['start_s']:.1f} s, sleep {report['sleep_s']:.2f} s frees "
          f"{report['freed_by_sleep_gib']:.2f} GiB, wake+push {report['wake_s']:.2f} s "
          f"({report['wake_tensors']} tensors)")
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "vllm_check.json").write_text(json.dumps(report, indent=1))
    return 0 if all(ok.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
