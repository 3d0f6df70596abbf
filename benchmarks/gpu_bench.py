"""GPU speed benchmark: rollouts, updates, a PPO step split into its parts.

Run on the lent H200 (see benchmarks/RESULTS-gpu.md for the figures and the exact commands):
    python3 benchmarks/gpu_bench.py --sections gen,greedy,update,varlen,ppo --out $OUT/bench.jsonl

Models are randomly initialised with the real shapes (the real SmolLM2 weights cannot travel to the
device machine: 94 MiB GGUF > the 64 MiB carry limit); speed does not depend on the values:
- SmolLM2-135M: Llama, 30 layers, width 576, 9 heads / 3 KV heads, vocab 49152, tied embeddings;
- Qwen2.5-1.5B: 28 layers, width 1536, FFN 8960, 12 heads / 2 KV heads, vocab 151936, tied.

Sections (each writes JSON lines to --out and one table row to stdout; a failing one is recorded
and the others go on):
- gen:    rollout tokens/s of the backends in training/generation.py at batch 8, 64, 256
          (256 prompt tokens, 128 new, sampling at temperature 1);
- greedy: greedy output of "graph" against "plain" (fp32 with TF32 off: must be equal; bf16:
          share of equal rows reported);
- update: update tokens/s and model-FLOPs utilisation (against 790 TFLOP/s bf16) of one optimiser
          step, gradient checkpointing on/off, for 135M and 1.5B;
- varlen: variable-length sequences: random padded micro-batches vs length-sorted ones (packing.py);
- ppo:    one PPO step of the 135M policy with a critic and a reference: seconds for rollout,
          reference/old log-probs and values, update.
Imports only what the device machine has (torch, transformers); nothing from the trainer's
dependencies (gguf, watchdog, gitpython).
"""
from __future__ import annotations

import argparse
import json
import math
import sys
import time
import traceback
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from training import packing  # noqa: E402
from training.generation import make_generator  # noqa: E402

PEAK_BF16 = 790e12
DEV = "cuda"
TINY = {}  # --tiny (CPU smoke test of this script): overrides that shrink every model  # measured on the H200 here (KINDS.md: 769-798 TFLOP/s on random data)


def _v(n: int) -> int:
    """Vocabulary size for random ids (smaller in --tiny mode)."""
    return min(n, TINY.get("vocab_size", n))


def _n(n: int, tiny: int) -> int:
    """A size, or its --tiny stand-in."""
    return tiny if TINY else n


class _Tok:
    pad_token_id = 0
    eos_token_id = 2


def smollm2_135m(dtype=torch.bfloat16, device=None, init=0.02):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                      num_hidden_layers=30, num_attention_heads=9, num_key_value_heads=3,
                      max_position_embeddings=8192, rope_theta=100000.0, rms_norm_eps=1e-5,
                      tie_word_embeddings=True, initializer_range=init, pad_token_id=0,
                      bos_token_id=1, eos_token_id=2, attn_implementation="sdpa")
    for k, v in TINY.items():
        setattr(cfg, k, v)
    with torch.device(device or DEV):
        return LlamaForCausalLM(cfg).to(dtype).eval()


def qwen25_15b(dtype=torch.bfloat16, device=None):
    from transformers import Qwen2Config, Qwen2ForCausalLM

    cfg = Qwen2Config(vocab_size=151936, hidden_size=1536, intermediate_size=8960,
                      num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2,
                      max_position_embeddings=32768, rope_theta=1e6, rms_norm_eps=1e-6,
                      tie_word_embeddings=True, attn_implementation="sdpa")
    for k, v in TINY.items():
        setattr(cfg, k, v)
    with torch.device(device or DEV):
        return Qwen2ForCausalLM(cfg).to(dtype)


def flops_per_token(model, seq: int) -> float:
    """Model FLOPs of forward + backward per token: 6 N (every weight matmul, tied head counted
    once) + 6 L S d (causal attention scores and values: 12 L S d halved by the mask)."""
    c = model.config
    n = sum(p.numel() for p in model.parameters())
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return 6 * n + 6 * c.num_hidden_layers * seq * c.num_attention_heads * head_dim


def _sync():
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def sync_time(fn):
    _sync()
    t0 = time.perf_counter()
    r = fn()
    _sync()
    return r, time.perf_counter() - t0


# backend name -> GraphGenerator options ("graph" itself: compiled per bucket)
GRAPH_VARIANTS = {"graph:eager": {"compile": False}, "graph:dyn": {"compile": "dynamic"}}


def emit(out, rec):
    print(json.dumps(rec), flush=True)
    with open(out, "a") as f:
        f.write(json.dumps(rec) + "\n")


# ---------------------------------------------------------------- generation
def bench_gen(out, backends, batches, prompt_len=256, new=128):
    prompt_len, new = _n(prompt_len, 16), _n(new, 8)
    g = torch.Generator().manual_seed(0)
    for backend in backends:
        torch.manual_seed(0)
        model = smollm2_135m()  # a fresh copy each: "graph" switches its model's decode attention
        gen = make_generator(model, _Tok, backend.split(":")[0], **GRAPH_VARIANTS.get(backend, {}))
        for b in batches:
            prompts = torch.randint(3, _v(49152), (b, prompt_len), generator=g).tolist()
            try:
                _, warm = sync_time(lambda: gen.generate(prompts, new if backend != "plain" else 8,
                                                         temperature=1.0, seed=1))
                times = []
                for rep in range(2):
                    res, dt = sync_time(lambda: gen.generate(prompts, new, temperature=1.0,
                                                             seed=2 + rep))
                    times.append(dt)
                toks = sum(len(r) for r in res)
                emit(out, {"section": "gen", "backend": backend, "batch": b, "tokens": toks,
                           "s": min(times), "tok_per_s": toks / min(times), "warmup_s": warm,
                           "distinct_in_row0": len(set(res[0])),
                           "capture_s": getattr(gen, "capture_s", None)})
            except Exception as e:  # recorded, the others go on
                emit(out, {"section": "gen", "backend": backend, "batch": b, "error": repr(e)[:500],
                           "trace": traceback.format_exc()[-1500:]})
        if backend == "cb" and hasattr(model, "destroy_cached_continuous_batching_manager"):
            model.destroy_cached_continuous_batching_manager()
        del gen, model
        torch.cuda.empty_cache()


def bench_turns(out, backends, rounds=2, new=128):
    """A multi-turn rollout's calls as the trainer makes them: batches shrink as episodes end and
    contexts grow turn by turn, so every call meets a new (batch, length) bucket. Round 1 includes
    every compile / capture; round 2 is the steady state of later PPO steps."""
    shapes = [(64, 256), (48, 512), (32, 768), (16, 1024)]
    new = _n(new, 8)
    g = torch.Generator().manual_seed(3)
    for backend in backends:
        torch.manual_seed(0)
        model = smollm2_135m()
        gen = make_generator(model, _Tok, backend.split(":")[0], **GRAPH_VARIANTS.get(backend, {}))
        try:
            for rnd in range(1, rounds + 1):
                toks, total = 0, 0.0
                for b, p in shapes:
                    prompts = torch.randint(3, _v(49152), (b, _n(p, 16)), generator=g).tolist()
                    res, dt = sync_time(lambda: gen.generate(prompts, new, temperature=1.0, seed=rnd))
                    toks += sum(len(r) for r in res)
                    total += dt
                emit(out, {"section": "turns", "backend": backend, "round": rnd, "calls": len(shapes),
                           "tokens": toks, "s": total, "tok_per_s": toks / total,
                           "capture_s": getattr(gen, "capture_s", None)})
        except Exception as e:
            emit(out, {"section": "turns", "backend": backend, "error": repr(e)[:500],
                       "trace": traceback.format_exc()[-1500:]})
        del gen, model
        torch.cuda.empty_cache()


def bench_greedy(out):
    g = torch.Generator().manual_seed(5)
    for dtype in (torch.float32, torch.bfloat16):
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.manual_seed(0)
        model = smollm2_135m(dtype=dtype, init=0.1)
        torch.manual_seed(0)
        stock = smollm2_135m(dtype=dtype, init=0.1)   # same weights, stock SDPA attention
        prompts = [torch.randint(3, _v(49152), (n,), generator=g).tolist() for n in (17, 64, 100, 5)
                   for _ in range(2)]
        a = make_generator(stock, _Tok, "plain").generate(prompts, 48, greedy=True)
        b = make_generator(model, _Tok, "graph").generate(prompts, 48, greedy=True)
        same = sum(x == y for x, y in zip(a, b))
        emit(out, {"section": "greedy", "dtype": str(dtype), "rows": len(a), "equal_rows": same,
                   "first_diff": next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), None)})
        del model, stock
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- update
def _update_step(model, opt, batches):
    """One optimiser step over micro-batches: mean -log p of the next token (the PPO update's
    forward/backward shape without the scalar bookkeeping)."""
    n = len(batches)
    for ids, mask in batches:
        logits = model(input_ids=ids, attention_mask=mask).logits[:, :-1]       # (B, T-1, V)
        lp = packing.token_logprobs(logits, ids[:, 1:])                         # (B, T-1)
        m = mask[:, 1:].float() if mask is not None else torch.ones_like(lp)
        loss = -(lp * m).sum() / m.sum() / n
        loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)


def bench_update(out, which, variants, seq=2048, rows=8, steps=3):
    seq = _n(seq, 64)
    for name, build in which:
        model = build()
        model.train()
        for gc, micro in variants:
            try:
                packing.set_gradient_checkpointing(model, gc)
                opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
                ids = torch.randint(3, model.config.vocab_size, (rows, seq), device=DEV)
                batches = [(ids[i:i + micro], None) for i in range(0, rows, micro)]
                if DEV == "cuda":
                    torch.cuda.reset_peak_memory_stats()
                for _ in range(2):
                    _update_step(model, opt, batches)
                _, dt = sync_time(lambda: [_update_step(model, opt, batches) for _ in range(steps)])
                tps = rows * seq * steps / dt
                mfu = tps * flops_per_token(model, seq) / PEAK_BF16
                emit(out, {"section": "update", "model": name, "grad_ckpt": gc, "micro": micro,
                           "tokens_per_step": rows * seq, "s_per_step": dt / steps,
                           "tok_per_s": tps, "mfu": mfu,
                           "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if DEV == "cuda" else None})
                del opt
            except Exception as e:
                emit(out, {"section": "update", "model": name, "grad_ckpt": gc, "micro": micro,
                           "error": repr(e)[:500]})
            torch.cuda.empty_cache()
        del model
        torch.cuda.empty_cache()


def bench_varlen(out, n=64, budget=16384, steps=2):
    """Variable-length rollouts: padded random micro-batches of 8 vs length-sorted ones."""
    model = qwen25_15b()
    model.train()
    packing.set_gradient_checkpointing(model, False)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-6, fused=True)
    g = torch.Generator().manual_seed(3)
    lengths = torch.randint(_n(128, 8), _n(2049, 65), (n,), generator=g).tolist()
    budget = _n(budget, 512)
    seqs = [torch.randint(3, _v(151936), (L,), device=DEV) for L in lengths]
    plans = {"random_padded_8": [list(range(i, i + 8)) for i in range(0, n, 8)],
             "length_sorted": packing.length_sorted_micro_batches(lengths, budget)}
    for name, groups in plans.items():
        batches = [packing.pad_right([seqs[i] for i in grp]) for grp in groups]
        _update_step(model, opt, batches)
        _, dt = sync_time(lambda: [_update_step(model, opt, batches) for _ in range(steps)])
        real = sum(lengths) * steps / dt
        emit(out, {"section": "varlen", "plan": name, "micro_batches": len(groups),
                   "padding_frac": packing.padding_fraction(lengths, groups),
                   "s_per_step": dt / steps, "real_tok_per_s": real,
                   "mfu_real": real * flops_per_token(model, int(sum(lengths) / n)) / PEAK_BF16})
    del model, opt
    torch.cuda.empty_cache()


# ---------------------------------------------------------------- PPO step
def bench_ppo(out, backends=("graph", "plain"), episodes=64, prompt_len=256, new=128, micro=16):
    """One PPO step of a 135M policy: rollout, reference/old log-probs + values, update."""
    episodes, prompt_len, new = _n(episodes, 16), _n(prompt_len, 16), _n(new, 8)
    from transformers import LlamaForCausalLM

    policy = smollm2_135m(dtype=torch.float32).train()    # fp32 master weights, bf16 autocast
    ref = smollm2_135m().eval()
    ref.load_state_dict(policy.state_dict())
    rollout_model = smollm2_135m().eval()                 # bf16 copy the generator reads
    critic = smollm2_135m(dtype=torch.float32).train()
    value_head = torch.nn.Linear(576, 1, device=DEV)
    opt = torch.optim.AdamW(list(policy.parameters()) + list(critic.parameters())
                            + list(value_head.parameters()), lr=1e-6, fused=True)
    g = torch.Generator().manual_seed(4)
    prompts = torch.randint(3, _v(49152), (episodes, prompt_len), generator=g).tolist()
    for backend in backends:
        gen = make_generator(rollout_model, _Tok, backend)
        gen.generate(prompts[:episodes], 8 if backend == "plain" else new, seed=0)  # warm/capture
        for step in range(2):  # the second is timed
            times = {}
            with torch.no_grad():
                sync_time(lambda: [p.copy_(q) for p, q in zip(rollout_model.parameters(),
                                                               policy.parameters())])
            res, times["rollout_s"] = sync_time(lambda: gen.generate(prompts, new, seed=step))
            seqs = [torch.tensor(p + r, device=DEV) for p, r in zip(prompts, res)]
            ids, mask = packing.pad_right(seqs)                                   # (E, T)
            act = torch.zeros_like(mask)
            for i, r in enumerate(res):
                act[i, prompt_len:prompt_len + len(r)] = 1                         # response mask

            def score():
                with torch.no_grad(), torch.autocast(DEV, torch.bfloat16):
                    outs = []
                    for i in range(0, episodes, micro):
                        sl = slice(i, i + micro)
                        old = packing.token_logprobs(policy(input_ids=ids[sl], attention_mask=mask[sl]).logits[:, :-1], ids[sl, 1:])
                        rf = packing.token_logprobs(ref(input_ids=ids[sl], attention_mask=mask[sl]).logits[:, :-1], ids[sl, 1:])
                        h = critic.model(input_ids=ids[sl], attention_mask=mask[sl]).last_hidden_state
                        outs.append((old, rf, value_head(h.float())[..., 0][:, :-1]))
                    return [torch.cat(x) for x in zip(*outs)]
            (old, rf, values), times["ref_old_logprobs_s"] = sync_time(score)
            adv = torch.randn_like(old)
            ret = values + adv

            def update():
                for i in range(0, episodes, micro):
                    sl = slice(i, i + micro)
                    m = act[sl, 1:].float()
                    with torch.autocast(DEV, torch.bfloat16):
                        lp = packing.token_logprobs(policy(input_ids=ids[sl], attention_mask=mask[sl]).logits[:, :-1], ids[sl, 1:])
                        h = critic.model(input_ids=ids[sl], attention_mask=mask[sl]).last_hidden_state
                        v = value_head(h.float())[..., 0][:, :-1]
                    ratio = torch.exp(lp - old[sl])
                    pg = torch.max(-adv[sl] * ratio, -adv[sl] * ratio.clamp(0.8, 1.2))
                    kl = torch.exp(rf[sl] - lp) - (rf[sl] - lp) - 1                 # low_var_kl
                    vl = (v - ret[sl]) ** 2
                    loss = ((pg + 0.001 * kl + 0.5 * vl) * m).sum() / m.sum() / (episodes // micro)
                    loss.backward()
                torch.nn.utils.clip_grad_norm_(policy.parameters(), 1.0)
                opt.step()
                opt.zero_grad(set_to_none=True)
            _, times["update_s"] = sync_time(update)
        gen_tokens = sum(len(r) for r in res)
        emit(out, {"section": "ppo", "backend": backend, "episodes": episodes,
                   "gen_tokens": gen_tokens, **times,
                   "step_s": sum(times.values()),
                   "rollout_tok_per_s": gen_tokens / times["rollout_s"],
                   "update_tok_per_s": ids.numel() / times["update_s"]})
        del gen
        torch.cuda.empty_cache()


# ---------------------------------------------------------------- the trainer's own code
def bench_trainer(out, tok_dir, episodes=64, prompt_len=256, new=128, micro=4):
    """GPU figures of the trainer benchmark through its functions (training.policy.generate,
    training.update.score_batch / ppo_update) on a random model of SmolLM2-135M's shape with the
    real tokenizer (carried: the GGUF weights cannot travel). The usergym preset (appendix C), one
    turn of 64 episodes, 256-token contexts, 128 generated tokens each."""
    import os
    from types import SimpleNamespace

    from transformers import AutoTokenizer

    from training.config import ModelConfig, resolve
    from training.policy import generate, load_models
    from training.update import collate, ppo_update, score_batch

    episodes, prompt_len, new = _n(episodes, 4), _n(prompt_len, 16), _n(new, 8)
    folder = Path("/tmp/smollm2-135m-random")
    torch.manual_seed(0)
    smollm2_135m(dtype=torch.float32, device="cpu").save_pretrained(folder)
    AutoTokenizer.from_pretrained(tok_dir).save_pretrained(folder)
    cfg = resolve("usergym", overrides={"actor.ppo_micro_batch_size": micro,
                                        "critic.ppo_micro_batch_size": micro})
    models = load_models(ModelConfig(path=str(folder), device=DEV), seed=0)
    actor_opt = torch.optim.AdamW(models.policy.parameters(), lr=cfg.actor.optim.lr)
    critic_opt = torch.optim.AdamW(models.critic.parameters(), lr=cfg.critic.optim.lr)
    coefs = {"entropy_coeff": 0.001, "kl_loss_coef": 0.001, "lr": cfg.actor.optim.lr}
    g = torch.Generator().manual_seed(6)
    contexts = torch.randint(100, _v(49000), (episodes, prompt_len), generator=g).tolist()
    pad = models.tokenizer.pad_token_id
    for backend in ("graph", "plain"):
        os.environ["EAU_ROLLOUT_BACKEND"] = backend
        kw = dict(max_new_tokens=new, temperature=1.0, top_p=1.0, min_new_tokens=new)
        generate(models, contexts, **dict(kw, max_new_tokens=8 if backend == "plain" else new,
                                          min_new_tokens=0))                     # warm-up
        res, t_roll = sync_time(lambda: generate(models, contexts, **kw))
        eps = [SimpleNamespace(tokens=c + r, mask=[0] * len(c) + [1] * len(r),
                               turn_ids=[-1] * len(c) + [0] * len(r)) for c, r in zip(contexts, res)]
        batch = collate(eps, [[1.0] for _ in eps], pad)
        _, t_score = sync_time(lambda: score_batch(models, batch, cfg))
        _, t_upd = sync_time(lambda: ppo_update(models, actor_opt, critic_opt, batch, cfg, coefs,
                                                seed=0))
        toks = sum(len(r) for r in res)
        emit(out, {"section": "trainer", "rollout_backend": backend, "episodes": episodes,
                   "micro": micro, "gen_tokens": toks, "rollout_s": t_roll,
                   "ref_old_logprobs_s": t_score, "update_s": t_upd,
                   "step_s": t_roll + t_score + t_upd, "rollout_tok_per_s": toks / t_roll,
                   "update_tok_per_s": int(batch.lengths.sum()) / t_upd,
                   "peak_gb": torch.cuda.max_memory_allocated() / 2**30 if DEV == "cuda" else None})


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sections", default="gen,greedy,update,varlen,ppo")
    ap.add_argument("--backends", default="graph,static,cb,plain")
    ap.add_argument("--batches", default="8,64,256")
    ap.add_argument("--out", default="gpu_bench.jsonl")
    ap.add_argument("--skip-15b-gc", action="store_true")
    ap.add_argument("--tiny", action="store_true", help="CPU smoke test with 2-layer models")
    ap.add_argument("--tokenizer", default=".device/tok", help="SmolLM2 tokenizer folder (trainer)")
    ap.add_argument("--micro", type=int, default=4, help="trainer section: PPO micro-batch")
    a = ap.parse_args(argv)
    global DEV
    if a.tiny:
        DEV = "cpu"
        TINY.update(num_hidden_layers=2, vocab_size=512)
    elif not torch.cuda.is_available():
        raise SystemExit("gpu_bench needs a CUDA device (run it through the device tool).")
    sections = a.sections.split(",")
    emit(a.out, {"section": "env", "torch": torch.__version__,
                 "gpu": torch.cuda.get_device_name() if DEV == "cuda" else "cpu",
                 "transformers": __import__("transformers").__version__})
    t0 = time.perf_counter()
    for sec in sections:
        s0 = time.perf_counter()
        try:
            if sec == "gen":
                bench_gen(a.out, a.backends.split(","), [int(b) for b in a.batches.split(",")])
            elif sec == "turns":
                bench_turns(a.out, a.backends.split(","))
            elif sec == "greedy":
                bench_greedy(a.out)
            elif sec == "update":
                bench_update(a.out, [("smollm2-135m", smollm2_135m)],
                             [(False, 8), (True, 8)])
                bench_update(a.out, [("qwen2.5-1.5b", qwen25_15b)],
                             [(False, 8), (False, 4)] + ([] if a.skip_15b_gc else [(True, 8)]))
            elif sec == "varlen":
                bench_varlen(a.out)
            elif sec == "ppo":
                bench_ppo(a.out)
            elif sec == "trainer":
                bench_trainer(a.out, a.tokenizer, micro=a.micro)
        except Exception as e:
            emit(a.out, {"section": sec, "error": repr(e)[:500], "trace": traceback.format_exc()[-2000:]})
        emit(a.out, {"section": sec, "elapsed_s": time.perf_counter() - s0})
    emit(a.out, {"section": "total", "elapsed_s": time.perf_counter() - t0})


if __name__ == "__main__":
    main()
