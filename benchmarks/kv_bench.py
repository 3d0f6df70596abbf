"""The KV engine's parts on the GPU: one decode step (a CUDA-graph replay) and one prefill of
appended turns, with the decoder layer compiled or eager (training/kvengine.py).

    python3 benchmarks/kv_bench.py --out $OUT/kv.jsonl [--slots 64] [--context 1500]

A SmolLM2-135M-shaped model with random weights in bf16 (speed does not depend on the values):
`--slots` sequences of `--context` tokens are prefilled, then 128 decode steps are timed at the
cache width that holds them (every slot active: nothing stops early), then a prefill of
`--append` new tokens on every slot (a user's reply and the next turn's template). Prints one
JSON line per setting: ms per decode step, tokens/s at that batch, compile and capture seconds,
ms per prefill.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from training.kvengine import KVEngine  # noqa: E402


DEVICE = "cuda"
SHAPE = dict(vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
             num_attention_heads=9, num_key_value_heads=3, head_dim=64)
TINY = dict(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16)   # --tiny: a CPU smoke run


def smollm2_shape():
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**SHAPE, max_position_embeddings=8192, tie_word_embeddings=True,
                      rope_theta=100000.0)
    torch.manual_seed(0)
    dtype = torch.bfloat16 if DEVICE == "cuda" else torch.float32
    return LlamaForCausalLM(cfg).to(device=DEVICE, dtype=dtype).eval()


def sync() -> None:
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def one(compiled: bool, slots: int, context: int, append: int, steps: int) -> dict:
    model = smollm2_shape()
    engine = KVEngine(model, slots=slots, stop_ids=[0], pad_id=1, compile_layers=compiled)
    g = torch.Generator().manual_seed(1)
    ctx = [torch.randint(2, SHAPE['vocab_size'], (context,), generator=g).tolist() for _ in range(slots)]
    rows = engine.begin(ctx, max_new=steps + 1, temperature=1.0, top_p=1.0, min_new=steps + 1)
    sync()
    t0 = time.perf_counter()
    engine.prefill(rows, ctx)
    sync()
    first_prefill = time.perf_counter() - t0
    width = engine.width_for_turns(rows, steps + 1)
    t0 = time.perf_counter()
    engine.decode(2, width, early_exit=False)           # compile (if any) and capture
    sync()
    setup = time.perf_counter() - t0
    t0 = time.perf_counter()
    engine.decode(steps, width, early_exit=False)
    sync()
    step_ms = (time.perf_counter() - t0) / steps * 1e3
    news = engine.take(rows)
    extra = [torch.randint(2, SHAPE['vocab_size'], (append,), generator=g).tolist() for _ in range(slots)]
    suffixes = [[n[-1]] + e for n, e in zip(news, extra)]
    times = []
    for _ in range(3):
        sync()
        t0 = time.perf_counter()
        engine.prefill(rows, suffixes)
        sync()
        times.append(time.perf_counter() - t0)
        engine.take(rows)
        for s in rows:       # undo: the same append again at the same place
            engine.held[s] = engine.held[s][:-len(suffixes[0])]
    return {"compiled": engine.compiled, "slots": slots, "context": context, "width": width,
            "decode_ms_per_step": round(step_ms, 3),
            "decode_tokens_per_s": round(slots / step_ms * 1e3),
            "compile_and_capture_s": round(setup, 2), "first_prefill_s": round(first_prefill, 3),
            "append_prefill_ms": round(min(times) * 1e3, 2), "append_tokens": append + 1,
            "kv_gib": round(engine.kv_bytes / 2**30, 2),
            "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)
            if DEVICE == "cuda" else None}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="")
    ap.add_argument("--slots", type=int, default=64)
    ap.add_argument("--context", type=int, default=1500)
    ap.add_argument("--append", type=int, default=60)
    ap.add_argument("--steps", type=int, default=128)
    ap.add_argument("--modes", default="compiled,eager")
    ap.add_argument("--tiny", action="store_true", help="a tiny model on the CPU (smoke test)")
    args = ap.parse_args()
    global DEVICE
    if args.tiny:
        DEVICE = "cpu"
        SHAPE.update(TINY)
    for mode in args.modes.split(","):
        row = one(mode == "compiled", args.slots, args.context, args.append, args.steps)
        print(json.dumps(row), flush=True)
        if args.out:
            with open(args.out, "a") as f:
                f.write(json.dumps(row) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
