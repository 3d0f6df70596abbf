"""Generation backends (training/generation.py): what the rollout code relies on.

Greedy output of the fast decode loop equals Hugging Face's plain `generate` token for token (on
the CPU the loop runs eagerly; on CUDA, as graph replays: the gpu-marked test); stop ids cut the
output after the first stop; seeded sampling repeats; top-p keeps only the nucleus. The prompt is
prefilled in chunks, so no tensor of a generate call grows with prompt x context (a dense
(B, 1, P, L) mask asked for 23.32 GiB in an evaluation on the H200).
"""
from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from training.generation import (GenerationConfigError, left_pad, make_generator, sample_next,
                                 trim)


class Tok:
    pad_token_id = 0
    eos_token_id = 1


def _model(device="cpu", dtype=torch.float32):
    """Random Llama whose greedy continuations vary (init 0.3: not a constant echo)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=300, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, initializer_range=0.3,
                      pad_token_id=0, eos_token_id=1)
    return LlamaForCausalLM(cfg).to(device=device, dtype=dtype).eval()


def _prompts(seed=1, lengths=(5, 2, 17, 9, 1)):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(2, 300, (n,), generator=g).tolist() for n in lengths]


@pytest.fixture(scope="module")
def model():
    return _model()


class LargestAllocation(TorchDispatchMode):
    """Records the largest storage (bytes) any tensor op produces while active: the peak single
    allocation of a call, seen the same way on every device."""

    def __init__(self):
        super().__init__()
        self.bytes, self.op = 0, None

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(t, torch.Tensor) and t.untyped_storage().nbytes() > self.bytes:
                self.bytes, self.op = t.untyped_storage().nbytes(), (str(func), tuple(t.shape))
        return out


def test_graph_loop_greedy_equals_plain_generate(model):
    prompts = _prompts()
    plain = make_generator(_model(), Tok, "plain").generate(prompts, 16, greedy=True)  # pure SDPA
    fast = make_generator(model, Tok, "graph").generate(prompts, 16, greedy=True)
    assert model.config._attn_implementation == "eau_gqa_decode"
    assert fast == plain
    assert len({tuple(r) for r in plain}) == len(plain)          # the case is not trivial
    assert all(len(set(r)) > 3 for r in plain)


def test_stop_ids_cut_after_first_stop_like_plain(model):
    prompts = _prompts(seed=2)
    free = make_generator(model, Tok, "plain").generate(prompts, 12, greedy=True)
    stop = [free[0][4], free[2][6]]
    plain = make_generator(model, Tok, "plain").generate(prompts, 12, greedy=True, stop_ids=stop)
    fast = make_generator(model, Tok, "graph", check_every=2).generate(prompts, 12, greedy=True,
                                                                       stop_ids=stop)
    assert fast == plain
    assert plain[0] == trim(free[0], stop) and plain[0][-1] in stop and len(plain[0]) <= 5
    assert all(t not in stop for r in fast for t in r[:-1])


def test_more_prompts_than_batch_and_reuse_across_calls(model):
    prompts = _prompts(seed=3, lengths=(3, 8, 4, 6, 2))
    plain = make_generator(model, Tok, "plain").generate(prompts, 8, greedy=True)
    gen = make_generator(model, Tok, "graph", max_batch=2)
    assert gen.generate(prompts, 8, greedy=True) == plain
    assert gen.generate(prompts[:3], 8, greedy=True) == plain[:3]   # buffers reused


def test_chunked_prefill_greedy_equals_plain_on_short_and_long_prompts(model):
    prompts = _prompts(seed=8, lengths=(5, 300, 37))
    plain = make_generator(_model(), Tok, "plain").generate(prompts, 16, greedy=True)  # one forward
    for chunk in (7, 64):
        gen = make_generator(model, Tok, "graph", prefill_chunk=chunk)
        assert gen.generate(prompts, 16, greedy=True) == plain, chunk
    assert len({tuple(r) for r in plain}) == 3 and all(len(set(r)) > 3 for r in plain)


def test_prefill_memory_grows_with_the_chunk_not_the_prompt(model, monkeypatch):
    """Batch 3 (bucket 4), prompts up to P = 600 tokens, a 640-column cache: one dense mask over
    the prompt would be 4 x 600 x 640 floats (6.1 MB); per 32-query chunk the largest tensor is a
    layer's keys repeated over the query heads, (4, 4, 640, 16) floats (0.66 MB)."""
    prompts = _prompts(seed=9, lengths=(5, 600, 37))
    gen = make_generator(model, Tok, "graph", prefill_chunk=32)
    masks = []
    forward = model.forward

    def spy(*args, **kw):
        masks.append(tuple(kw["attention_mask"].shape))
        return forward(*args, **kw)

    monkeypatch.setattr(model, "forward", spy)
    with LargestAllocation() as seen:
        gen.generate(prompts, 16, greedy=True)
    prefill = [m for m in masks if m[2] > 1]
    assert len(prefill) == 600 // 32 + 1 and max(m[2] for m in prefill) == 32
    assert all(m == (4, 1, 32, 640) for m in prefill[:-1])
    dense = 4 * 600 * 640 * 4                     # (B, 1, P, L) fp32
    assert seen.bytes <= dense / 8, seen.op


def test_rollout_generate_prefills_in_chunks_with_the_same_tokens(monkeypatch):
    """policy.generate's transformers path (EAU_ROLLOUT_BACKEND=plain, and wherever the KV
    engine does not apply) prefills PREFILL_CHUNK positions at a time: same greedy and seeded
    sampled tokens."""
    from training import policy

    monkeypatch.setenv("EAU_ROLLOUT_BACKEND", "plain")

    class ChatTok(Tok):
        unk_token_id = None

        def convert_tokens_to_ids(self, name):
            return None

    m = _model()
    models = policy.Models(policy=m, critic=None, reference=None, tokenizer=ChatTok(),
                           device=torch.device("cpu"), path="")
    contexts = _prompts(seed=10, lengths=(5, 600, 37))

    def run(chunk, temperature, seen=None):
        monkeypatch.setattr(policy, "PREFILL_CHUNK", chunk)
        torch.manual_seed(3)
        with seen or LargestAllocation():
            return policy.generate(models, contexts, max_new_tokens=8, temperature=temperature,
                                   top_p=1.0)

    whole_seen, chunked_seen = LargestAllocation(), LargestAllocation()
    whole = run(10_000, 0.0, whole_seen)
    assert run(32, 0.0, chunked_seen) == whole and len({tuple(r) for r in whole}) == 3
    assert chunked_seen.bytes <= whole_seen.bytes / 4  # whole: a (B, 1, P, P) float mask
    assert run(32, 1.0) == run(10_000, 1.0)


def test_slots_share_one_kv_storage_sized_for_the_largest_call(model):
    """Calls whose contexts grow, as the turns of a rollout do, take a new (batch, length) slot
    each; all their caches view one storage sized for the largest call (one cache per slot held
    2.4x as much here), and a slot kept from an earlier call still decodes correctly after other
    slots have written that storage."""
    plain = make_generator(_model(), Tok, "plain")
    gen = make_generator(model, Tok, "graph", len_bucket=16)
    turns = [_prompts(seed=20 + t, lengths=(4 + 30 * t, 9, 2 + 20 * t)) for t in range(4)]
    for prompts in turns + turns[:2] + turns[:2]:          # the last two: kept slots reused
        assert gen.generate(prompts, 8, greedy=True) == plain.generate(prompts, 8, greedy=True)
    # 2 layers x (K, V) x batch bucket 4 x 2 KV heads x 112 columns (94 + 8 -> 112) x 16 x fp32
    assert gen.kv_bytes == 2 * 2 * 4 * 2 * 112 * 16 * 4


def test_seeded_sampling_repeats_and_differs_by_seed(model):
    gen = make_generator(model, Tok, "graph")
    prompts = _prompts(seed=4)
    a = gen.generate(prompts, 8, temperature=1.0, seed=7)
    assert gen.generate(prompts, 8, temperature=1.0, seed=7) == a
    assert gen.generate(prompts, 8, temperature=1.0, seed=8) != a
    assert all(len(r) == 8 for r in a)


def test_min_new_tokens_bars_stop_ids_until_then(model):
    prompts = _prompts(seed=6)
    free = make_generator(model, Tok, "plain").generate(prompts, 12, greedy=True)
    stop = [free[0][0]]                                 # row 0 would stop at once
    gen = make_generator(model, Tok, "graph")
    early = gen.generate(prompts, 12, greedy=True, stop_ids=stop)
    late = gen.generate(prompts, 12, greedy=True, stop_ids=stop, min_new_tokens=3)
    assert early[0] == [stop[0]]
    assert len(late[0]) >= 3 and stop[0] not in late[0][:3]


def test_unseeded_calls_follow_the_global_generator(model):
    gen = make_generator(model, Tok, "graph")
    prompts = _prompts(seed=7)
    torch.manual_seed(11)
    a = gen.generate(prompts, 8, seed=None)
    b = gen.generate(prompts, 8, seed=None)
    torch.manual_seed(11)
    assert gen.generate(prompts, 8, seed=None) == a and a != b


def test_top_p_samples_only_from_the_nucleus():
    logits = torch.log(torch.tensor([[0.5, 0.3, 0.15, 0.05]])).repeat(4000, 1)  # (B, V)
    g = torch.Generator().manual_seed(0)
    draws = sample_next(logits, torch.tensor(1.0), torch.tensor(0.7), torch.tensor(False), g)
    counts = torch.bincount(draws, minlength=4).float() / len(draws)
    assert counts[2] == 0 and counts[3] == 0                       # outside the 0.8 nucleus
    assert abs(counts[0] - 0.5 / 0.8) < 0.03
    full = sample_next(logits, torch.tensor(1.0), torch.tensor(1.0), torch.tensor(False), g)
    assert abs(torch.bincount(full, minlength=4)[3].item() / 4000 - 0.05) < 0.015
    greedy = sample_next(logits[:3], torch.tensor(1.0), torch.tensor(1.0), torch.tensor(True), g)
    assert greedy.tolist() == [0, 0, 0]


def test_helpers_and_errors(model):
    assert trim([5, 6, 1, 7], [1]) == [5, 6, 1]
    ids, mask = left_pad([[4, 5], [6]], 0, "cpu")
    assert ids.tolist() == [[4, 5], [0, 6]] and mask.tolist() == [[1, 1], [0, 1]]
    with pytest.raises(GenerationConfigError, match="unknown generation backend"):
        make_generator(model, Tok, "fastest")
    with pytest.raises(GenerationConfigError, match="at least one token"):
        make_generator(model, Tok, "graph").generate([[3], []], 4)
    assert make_generator(model, Tok, "auto").__class__.__name__ == "HFGenerator"   # CPU
    with pytest.raises(GenerationConfigError, match="compile must be"):
        make_generator(model, Tok, "graph", compile="fast")
    with pytest.raises(GenerationConfigError, match="prefill_chunk must be"):
        make_generator(model, Tok, "graph", prefill_chunk=0)


def test_rollout_compile_mode_from_environment(monkeypatch):
    from training.generation import rollout_compile_mode

    monkeypatch.delenv("EAU_ROLLOUT_COMPILE", raising=False)
    assert rollout_compile_mode() is False                 # eager kernels in the graph
    for name, mode in (("static", True), ("off", False), ("dynamic", "dynamic")):
        monkeypatch.setenv("EAU_ROLLOUT_COMPILE", name)
        assert rollout_compile_mode() == mode
    monkeypatch.setenv("EAU_ROLLOUT_COMPILE", "turbo")
    with pytest.raises(GenerationConfigError, match="EAU_ROLLOUT_COMPILE='turbo'"):
        rollout_compile_mode()


@pytest.mark.gpu
@pytest.mark.parametrize("batch,compile", [(3, None), (64, None), (64, "dynamic")])
def test_cuda_graph_greedy_equals_plain_on_gpu(batch, compile):
    torch.backends.cuda.matmul.allow_tf32 = False
    m = _model("cuda")
    prompts = _prompts(seed=5, lengths=tuple(1 + (7 * i) % 40 for i in range(batch)))
    plain = make_generator(_model("cuda"), Tok, "plain").generate(prompts, 32, greedy=True)
    gen = make_generator(m, Tok, "auto", **({} if compile is None else {"compile": compile}))
    assert gen.__class__.__name__ == "GraphGenerator" and gen.use_graph
    assert gen.generate(prompts, 32, greedy=True) == plain
    assert gen.generate(prompts, 32, greedy=True, stop_ids=[plain[0][3]]) == \
        make_generator(_model("cuda"), Tok, "plain").generate(prompts, 32, greedy=True, stop_ids=[plain[0][3]])
