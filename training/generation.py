"""Generation backends for rollouts, behind one call.

Every backend answers `gen.generate(prompt_ids, max_new_tokens, ...) -> list[list[int]]`: for each
prompt (a list of token ids, no padding) the ids the model generated, up to and including the first
stop id, nothing after it. The rollout code does not care which backend answers.

Backends (chosen by `make_generator(model, tokenizer, backend=...)`):
- "plain":  Hugging Face `model.generate` with left padding and a dynamic KV cache. The reference;
            the only one on the CPU under "auto".
- "static": the same call with `cache_implementation="static"` (transformers then compiles the decode
            step). The floor the fast path must beat (benchmarks/RESULTS-gpu.md).
- "cb":     transformers' continuous batching (`model.generate_batch`, paged attention).
- "graph":  our decode loop over a static KV cache where one whole decode step (model forward,
            temperature / top-p sampling, stop checks, writing the token out) is captured in one CUDA
            graph and replayed; the host looks at the `done` flags only every `check_every` steps.
            On the CPU the same loop runs eagerly (that is how its greedy equality with "plain" is
            tested without a GPU).
- "vllm":   a vLLM engine holding the model's weights (training/vllm_backend.py; optional, needs
            vLLM installed, not yet run on a GPU here).
"auto" is "graph" on CUDA and "plain" elsewhere.

Memory (so that an evaluation fits the GPU): the graph backend's memory grows with batch x context,
never with batch x context^2 nor with the number of calls. The prompt is run into the cache
PREFILL_CHUNK query positions per forward (`prefill_mask`: a (B, 1, C, L) mask per chunk), where one
(B, 1, P, L) mask over a whole 8,192-token context made `python -m training.evaluate` ask for
23.32 GiB at batch 70 on the H200; and the caches of all (batch, length) slots view one storage
sized for the largest call (`SharedKV`), where each slot kept a cache of its own alive.

Sampling inside the graph draws from the default CUDA generator (re-seeded before each call, which a
captured graph honours), with the exponential-race trick `argmax(p / E)`, E ~ Exp(1), which samples
exactly from p without a host synchronisation (torch.multinomial would need one).
"""
from __future__ import annotations

import contextlib
import inspect
import time
from dataclasses import dataclass, field
from typing import Sequence

import torch

from training.token_ids import trim
from training.vllm_backend import VLLMGenerator

BACKENDS = ("auto", "plain", "static", "cb", "graph", "vllm")
MAX_STOP_IDS = 8  # the graph's stop-id tensor has a fixed size; unused slots hold -1
# Query positions per prefill forward (GraphGenerator, and policy.generate's transformers path as
# `prefill_chunk_size`). The prefill's transient memory is B x C x L for the mask plus B x C x width
# for the activations: at batch 128 and a 9,216-column cache, 1.2 GB of bf16 mask at C = 512
# against 19 GB at C = P = 8,192. Shorter prompts run in one chunk, exactly as before.
PREFILL_CHUNK = 512


class GenerationConfigError(ValueError):
    """A generation setting the user chose cannot work (the message says which and why)."""


def attention_kernels(device: torch.device):
    """SDPA without its cuDNN backend on CUDA: on the H200 PyTorch picked cuDNN's attention for
    the update's and the prefill's passes, and each call cost ~0.9 ms of host time (1.2 ms in
    backward) against tens of microseconds of GPU work, 0.9 s of a 3.7 s update
    (benchmarks/RESULTS-gpu.md); flash (causal, no mask) and memory-efficient (masked) attention
    launch in microseconds. A no-op elsewhere."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    from torch.nn.attention import SDPBackend, sdpa_kernel
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION,
                        SDPBackend.MATH])


def left_pad(prompt_ids: list[list[int]], pad_id: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ids (B, P) and attention mask (B, P) of 0/1."""
    width = max(len(p) for p in prompt_ids)
    ids = torch.full((len(prompt_ids), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prompt_ids), width), dtype=torch.long)
    for i, p in enumerate(prompt_ids):
        if p:
            ids[i, width - len(p):] = torch.tensor(p, dtype=torch.long)
            mask[i, width - len(p):] = 1
    return ids.to(device), mask.to(device)


def _check_prompts(prompt_ids: list[list[int]]) -> None:
    if any(len(p) == 0 for p in prompt_ids):
        raise GenerationConfigError("every prompt needs at least one token (got an empty prompt).")


def _pad_id(tokenizer, model) -> int:
    for v in (getattr(tokenizer, "pad_token_id", None), getattr(tokenizer, "eos_token_id", None),
              model.config.pad_token_id, model.config.eos_token_id):
        if isinstance(v, int):
            return v
    return 0


class HFGenerator:
    """Hugging Face `generate` ("plain"), optionally with the static-cache flag ("static")."""

    def __init__(self, model, tokenizer, *, static: bool = False):
        self.model, self.tokenizer, self.static = model, tokenizer, static
        self.pad_id = _pad_id(tokenizer, model)

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, seed: int = 0,
                 stop_ids: Sequence[int] = ()) -> list[list[int]]:
        if not prompt_ids:
            return []
        _check_prompts(prompt_ids)
        ids, mask = left_pad(prompt_ids, self.pad_id, self.model.device)
        torch.manual_seed(seed)
        kw = dict(do_sample=not greedy, max_new_tokens=max_new_tokens, pad_token_id=self.pad_id,
                  eos_token_id=list(stop_ids) or None)
        if not greedy:  # top_k=0: no top-k cut beyond top_p (HF's default would be 50)
            kw.update(temperature=temperature, top_p=top_p, top_k=0)
        if self.static:
            kw["cache_implementation"] = "static"
        out = self.model.generate(input_ids=ids, attention_mask=mask, **kw)  # (B, P + new)
        new = out[:, ids.shape[1]:].tolist()
        return [trim(row, stop_ids) if stop_ids else row for row in new]


class ContinuousBatchingGenerator:
    """transformers' continuous batching (`generate_batch`, paged attention, its own CUDA graphs)."""

    def __init__(self, model, tokenizer):
        self.model, self.tokenizer = model, tokenizer
        self.pad_id = _pad_id(tokenizer, model)

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, seed: int = 0,
                 stop_ids: Sequence[int] = ()) -> list[list[int]]:
        from transformers import GenerationConfig

        if not prompt_ids:
            return []
        _check_prompts(prompt_ids)
        torch.manual_seed(seed)
        cfg = GenerationConfig(do_sample=not greedy, max_new_tokens=max_new_tokens, top_k=0,
                               temperature=temperature if not greedy else None,
                               top_p=top_p if not greedy else None,
                               eos_token_id=list(stop_ids) or -1, pad_token_id=self.pad_id)
        res = self.model.generate_batch(inputs=prompt_ids, generation_config=cfg,
                                        max_new_tokens=max_new_tokens)
        rows = [list(r.generated_tokens) for r in res.values()]  # in the inputs' order
        return [trim(r, stop_ids) if stop_ids else r for r in rows]


@dataclass
class _Slots:
    """The fixed buffers one captured decode step reads and writes (a graph needs fixed addresses)."""
    tok: torch.Tensor        # (B, 1) long: the token fed at this step
    pos: torch.Tensor        # (B, 1) long: its position id (rotary)
    col: torch.Tensor        # (1,) long: its column in the static cache (same for all rows)
    mask: torch.Tensor       # (B, 1, 1, L) model dtype: 0 where attended, dtype-min elsewhere
    out: torch.Tensor        # (B, N) long: generated ids
    step: torch.Tensor       # (1,) long: index into out
    done: torch.Tensor       # (B,) bool
    stop: torch.Tensor       # (MAX_STOP_IDS,) long, -1 unused
    temperature: torch.Tensor  # () float
    top_p: torch.Tensor      # () float
    greedy: torch.Tensor     # () bool
    min_new: torch.Tensor    # () long: stop ids are masked out while step < min_new
    stop_mask: torch.Tensor  # (V,) bool: the stop ids
    nucleus: bool = True     # top_p < 1: sort the vocabulary (fixed per captured graph)
    cache: object = None
    graph: object = None
    gen: object = field(default=None)  # CPU generator (CUDA uses the default one, graph-safe)


GQA_DECODE = "eau_gqa_decode"


def gqa_decode_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                         scaling: float | None = None, **kwargs):
    """Attention for one new token per row against a static cache, without copying K/V per head.

    SDPA with a padding mask falls back to `repeat_kv`, which rewrites the whole cache once per
    query-head group at every step (at batch 64, 30 layers, 512 columns: ~4 GB of traffic per
    token step). Here the query heads are grouped onto their shared KV head instead:
    q (B, Hkv, G, D) @ K^T (B, Hkv, D, L) -> (B, Hkv, G, L), masked softmax, @ V (B, Hkv, L, D).
    Any other call (prefill, training, dropout) goes to transformers' SDPA unchanged.
    """
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if query.shape[2] != 1 or attention_mask is None or dropout or attention_mask.dtype == torch.bool:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    b, hq, _, d = query.shape
    hkv = key.shape[1]
    scale = d ** -0.5 if scaling is None else scaling
    q = query.reshape(b, hkv, hq // hkv, d)                                  # (B, Hkv, G, D)
    scores = torch.matmul(q, key.transpose(-1, -2)).float() * scale          # (B, Hkv, G, L)
    scores = scores + attention_mask[:, :, :, :key.shape[2]].float()         # mask (B, 1, 1, L)
    probs = torch.softmax(scores, dim=-1).to(value.dtype)
    out = torch.matmul(probs, value)                                          # (B, Hkv, G, D)
    return out.reshape(b, 1, hq, d), None                                     # (B, 1, Hq, D)


def use_gqa_decode(model) -> bool:
    """Switch an SDPA model to `gqa_decode_attention` (same results; prefill and training still
    run SDPA). Returns whether it was switched (models on other attention keep theirs)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    if model.config._attn_implementation not in ("sdpa", GQA_DECODE):
        return False
    AttentionInterface.register(GQA_DECODE, gqa_decode_attention)
    AttentionMaskInterface.register(GQA_DECODE, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.config._attn_implementation = GQA_DECODE
    return True


def sample_next(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor,
                greedy: torch.Tensor, generator=None, nucleus: bool = True) -> torch.Tensor:
    """One token per row from logits (B, V) with temperature and nucleus (top-p); no host sync.

    Top-p keeps the smallest prefix of the sorted distribution whose mass reaches top_p (HF's
    TopPLogitsWarper), always at least the most likely token. Greedy rows take the argmax.
    `nucleus=False` skips the vocabulary sort (exact when top_p >= 1; the sort is the costliest
    part of a decode step at large batch).
    """
    kept = torch.softmax(logits / temperature.clamp_min(1e-5), dim=-1)   # (B, V)
    if nucleus:
        sp, idx = kept.sort(dim=-1, descending=True)                      # (B, V)
        before = sp.cumsum(-1) - sp                                       # mass before each token
        sp = sp.masked_fill(before >= top_p, 0.0)
        kept = torch.zeros_like(kept).scatter_(-1, idx, sp)               # (B, V)
    race = torch.empty_like(kept).exponential_(generator=generator)
    sampled = (kept / race).argmax(-1)                                    # (B,)
    return torch.where(greedy, logits.argmax(-1), sampled)


class ReplyRepetitionPenalty:
    """A transformers logits processor (for `generate(logits_processor=...)`): the repetition
    penalty of transformers' RepetitionPenaltyLogitsProcessor (a token's logit divided by
    `penalty`, multiplied where negative) on the tokens generated after the first `prompt_len`
    columns only, as the KV engine applies an LLM user's `user.<gym>.repetition_penalty`
    (training/kvengine.py says why not the prompt)."""

    def __init__(self, penalty: float, prompt_len: int):
        self.penalty, self.prompt_len = float(penalty), int(prompt_len)

    def __call__(self, input_ids: torch.Tensor, scores: torch.Tensor) -> torch.Tensor:
        new = input_ids[:, self.prompt_len:]                                    # (B, n)
        if new.shape[1] == 0 or self.penalty == 1.0:
            return scores
        got = scores.gather(1, new)
        got = torch.where(got > 0, got / self.penalty, got * self.penalty)
        return scores.scatter(1, new, got)


class SharedKV:
    """Flat key and value buffers, one pair per layer, that the StaticCache of every slot views as
    its (B, H, L, D) keys and values.

    Why: slots and their CUDA graphs are kept per (batch, length) bucket for reuse, and a
    multi-turn rollout asks for a new length bucket at nearly every turn (contexts grow). With a
    cache of its own per slot, every turn's cache stayed allocated: SmolLM2-135M keeps 23 KB of
    keys and values per token (30 layers x 2 x 3 heads x 64 x bf16), so 16 turns at batch 32
    whose cache lengths grow to 9,216 keep about the sum of all turns' lengths x 32 x 23 KB, tens
    of GiB (an evaluation at batch 28 held 72.9 GiB on the H200). Sharing changes no result: one
    slot runs at a time and each call's prefill zeroes its view first (`cache.reset()`).
    """

    def __init__(self):
        self.keys: list[torch.Tensor] = []      # per layer, 1-D
        self.values: list[torch.Tensor] = []

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def holds(self, cache) -> bool:
        """Whether every layer of `cache` (shapes set, no storage yet) fits in the buffers."""
        return bool(self.keys) and all(
            layer.keys.numel() <= k.numel() and layer.values.numel() <= v.numel()
            for layer, k, v in zip(cache.layers, self.keys, self.values))

    def grow(self, cache, device) -> None:
        """Buffers sized for `cache`; the caller has dropped every view of the old ones, which are
        released before the new ones are allocated."""
        self.keys, self.values = [], []
        self.keys = [torch.zeros(layer.keys.numel(), dtype=layer.keys.dtype, device=device)
                     for layer in cache.layers]
        self.values = [torch.zeros(layer.values.numel(), dtype=layer.values.dtype, device=device)
                       for layer in cache.layers]

    def attach(self, cache, device) -> None:
        """Point each layer of a meta-initialised StaticCache at views of the buffers (the fields
        StaticLayer.lazy_initialization would set: keys, values, device, cumulative_length)."""
        for layer, k, v in zip(cache.layers, self.keys, self.values):
            layer.keys = k[:layer.keys.numel()].view(layer.keys.shape)              # (B, H, L, D)
            layer.values = v[:layer.values.numel()].view(layer.values.shape)
            layer.device = device
            layer.cumulative_length = torch.zeros((), dtype=torch.long, device=device)
            for t in (layer.keys, layer.values, layer.cumulative_length):
                torch._dynamo.mark_static_address(t)   # fixed addresses for torch.compile


def prefill_mask(amask: torch.Tensor, start: int, stop: int, length: int,
                 dtype: torch.dtype) -> torch.Tensor:
    """Additive mask (B, 1, stop - start, length) for query positions [start, stop) of left-padded
    prompts whose 0/1 mask is amask (B, P), against a static cache of `length` columns.

    0 where the query may attend (a real token at or before it), dtype-min elsewhere; a padding
    query sees itself, so no softmax row is empty (NaN). Built in `dtype` directly: a float32
    intermediate would double the largest tensor of the prefill.
    """
    b, p = amask.shape
    q = torch.arange(start, stop, device=amask.device)[:, None]               # (C, 1)
    k = torch.arange(length, device=amask.device)[None, :]                    # (1, L)
    real = torch.zeros(b, length, dtype=torch.bool, device=amask.device)      # (B, L)
    real[:, :p] = amask.bool()
    allowed = (k <= q)[None] & real[:, None, :]                               # (B, C, L)
    allowed |= (k == q)[None]
    mask = torch.full((b, 1, stop - start, length), torch.finfo(dtype).min, dtype=dtype,
                      device=amask.device)                                    # (B, 1, C, L)
    return mask.masked_fill_(allowed[:, None], 0.0)


def cache_keyword(model) -> str:
    """The forward's name for the KV cache argument: transformers 5.24 names it `cache` (the old
    `past_key_values` warns that it goes in 5.40), a release whose forward has no `cache` gets
    the old name. Read from the unwrapped model class's signature."""
    base = model.get_base_model() if hasattr(model, "get_base_model") else model   # peft
    base = getattr(base, "_orig_mod", base)                                          # compiled
    params = inspect.signature(type(base).forward).parameters
    return "cache" if "cache" in params else "past_key_values"


class GraphGenerator:
    """Static KV cache decode loop; on CUDA each decode step is one CUDA graph replay.

    Buffers and graphs are kept per (batch bucket, cache-length bucket) and reused across calls,
    their KV caches all views of one storage (SharedKV); batches are padded up to a bucket (the
    padding rows are done from the start), more prompts than `max_batch` are run in chunks.
    """

    def __init__(self, model, tokenizer, *, use_graph: bool | None = None, max_batch: int = 256,
                 len_bucket: int = 128, check_every: int = 16, compile: bool | None = None,
                 gqa_decode: bool = True, prefill_chunk: int = PREFILL_CHUNK):
        self.model, self.tokenizer = model, tokenizer
        self._cache_kw = cache_keyword(model)
        if gqa_decode:  # note: switches `model`'s attention for every later caller (same results)
            use_gqa_decode(model)
        self.pad_id = _pad_id(tokenizer, model)
        self.device = model.device
        self.use_graph = (self.device.type == "cuda") if use_graph is None else use_graph
        # compile=True: the forward goes through torch.compile (Inductor fuses the norms, rotary
        # and activations into far fewer kernels; shapes are static per bucket) and the compiled
        # step is what the CUDA graph captures: ~25-40 s once per (batch, length) bucket.
        # compile="dynamic": one compile with symbolic batch and cache length serves every
        # bucket, so a multi-turn rollout (batches shrink, contexts grow) pays it once; each new
        # bucket then costs only a graph capture.
        if compile not in (None, True, False, "dynamic"):
            raise GenerationConfigError(f"compile must be True, False or 'dynamic' (got {compile!r}).")
        self.compile = self.use_graph if compile is None else compile
        # Only the forward is compiled: the random draw stays an eager op on the default
        # generator, whose graph-safe state makes every replay draw fresh numbers.
        self._forward = model
        if self.compile:
            for knob in ("recompile_limit", "cache_size_limit"):
                if hasattr(torch._dynamo.config, knob):
                    setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), 64))
            self._forward = torch.compile(model, dynamic=self.compile == "dynamic")
        self.max_batch, self.len_bucket, self.check_every = max_batch, len_bucket, check_every
        if prefill_chunk < 1:
            raise GenerationConfigError(f"prefill_chunk must be at least 1 (got {prefill_chunk}).")
        self.prefill_chunk = prefill_chunk
        self._slots: dict[tuple[int, int], _Slots] = {}
        self._kv = SharedKV()
        self.capture_s = 0.0  # time spent building graphs (reported by the benchmark)

    def _bucket_batch(self, n: int) -> int:
        b = 1
        while b < n:
            b *= 2
        return min(max(b, 1), self.max_batch) if n <= self.max_batch else self.max_batch

    @property
    def kv_bytes(self) -> int:
        """Bytes of key/value cache this generator holds between calls."""
        return self._kv.nbytes

    def _cache(self, batch: int, length: int):
        """A StaticCache (batch, length) viewing the shared storage, grown (and every slot dropped:
        their views and captured graphs hold the old addresses) when it does not fit."""
        from transformers import StaticCache

        cfg = self.model.config
        heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
        dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        cache = StaticCache(config=cfg, max_cache_len=length)
        cache.early_initialization(batch, heads, dim, self.model.dtype, torch.device("meta"))
        if not self._kv.holds(cache):
            self._slots.clear()
            self._kv.grow(cache, self.device)
        self._kv.attach(cache, self.device)
        return cache

    def _slots_for(self, batch: int, length: int, max_new: int, nucleus: bool) -> _Slots:
        key = (batch, length, nucleus)
        if key in self._slots and self._slots[key].out.shape[1] >= max_new:
            return self._slots[key]
        cache = self._cache(batch, length)
        dev, dt = self.device, self.model.dtype
        s = _Slots(tok=torch.zeros(batch, 1, dtype=torch.long, device=dev),
                   pos=torch.zeros(batch, 1, dtype=torch.long, device=dev),
                   col=torch.zeros(1, dtype=torch.long, device=dev),
                   mask=torch.full((batch, 1, 1, length), torch.finfo(dt).min, dtype=dt, device=dev),
                   out=torch.zeros(batch, max(max_new, 4), dtype=torch.long, device=dev),
                   step=torch.zeros(1, dtype=torch.long, device=dev),
                   done=torch.zeros(batch, dtype=torch.bool, device=dev),
                   stop=torch.full((MAX_STOP_IDS,), -1, dtype=torch.long, device=dev),
                   temperature=torch.ones((), device=dev), top_p=torch.ones((), device=dev),
                   greedy=torch.zeros((), dtype=torch.bool, device=dev),
                   min_new=torch.zeros((), dtype=torch.long, device=dev),
                   stop_mask=torch.zeros(self.model.config.vocab_size, dtype=torch.bool, device=dev),
                   nucleus=nucleus)
        s.cache = cache
        if dev.type != "cuda":
            s.gen = torch.Generator(device=dev)
        self._slots[key] = s
        return s

    def _pick(self, s: _Slots, logits: torch.Tensor) -> torch.Tensor:
        """Next token (B,) from last-position logits (B, V): stop ids barred before min_new."""
        logits = logits.masked_fill(s.stop_mask & (s.step < s.min_new), float("-inf"))
        nxt = sample_next(logits, s.temperature, s.top_p, s.greedy, s.gen, s.nucleus)
        return torch.where(s.done, torch.full_like(nxt, self.pad_id), nxt)

    def _decode_step(self, s: _Slots) -> None:
        """One decode step on the fixed buffers: the body of the CUDA graph."""
        s.mask.index_fill_(3, s.col, 0.0)  # the fed token's own column becomes visible
        logits = self._forward(input_ids=s.tok, position_ids=s.pos, attention_mask=s.mask,
                               use_cache=True, logits_to_keep=1, **{self._cache_kw: s.cache}).logits
        nxt = self._pick(s, logits[:, -1].float())                                      # (B,)
        s.out.index_copy_(1, s.step, nxt[:, None])
        s.done |= torch.isin(nxt, s.stop)
        s.tok.copy_(nxt[:, None])
        s.pos.add_(1)
        s.col.add_(1)
        s.step.add_(1)

    def _capture(self, s: _Slots) -> None:
        """Warm the step up on a side stream (lazy allocations, kernel choices), then capture it."""
        t0 = time.perf_counter()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):  # the first compiles when compile=True
                self._decode_step(s)
        torch.cuda.current_stream().wait_stream(side)
        s.graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(s.graph):
            self._decode_step(s)
        torch.cuda.synchronize()
        self.capture_s += time.perf_counter() - t0

    def _prefill(self, s: _Slots, ids: torch.Tensor, amask: torch.Tensor) -> torch.Tensor:
        """Run the prompts (B, P) into the cache, `prefill_chunk` query positions per forward
        (each chunk's keys and values land in the static cache, which the next chunk attends
        to); returns last-position logits (B, V)."""
        p = ids.shape[1]
        length = s.mask.shape[-1]
        neg = torch.finfo(s.mask.dtype).min
        pos = (amask.cumsum(-1) - 1).clamp_min(0)                          # (B, P)
        s.cache.reset()
        for start in range(0, p, self.prefill_chunk):
            stop = min(start + self.prefill_chunk, p)
            mask4 = prefill_mask(amask, start, stop, length, s.mask.dtype)  # (B, 1, C, L)
            logits = self.model(input_ids=ids[:, start:stop], position_ids=pos[:, start:stop],
                                attention_mask=mask4, use_cache=True, logits_to_keep=1,
                                **{self._cache_kw: s.cache}).logits
            del mask4                    # freed before the next chunk builds its own
        s.mask.fill_(neg)
        s.mask[:, 0, 0, :p] = torch.where(amask.bool(), 0.0, neg).to(s.mask.dtype)
        s.pos.copy_(pos[:, -1:] + 1)
        return logits[:, -1].float()

    @torch.no_grad()
    def generate(self, prompt_ids: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, seed: int | None = 0,
                 stop_ids: Sequence[int] = (), min_new_tokens: int = 0) -> list[list[int]]:
        """seed=None draws from the current global generator state (no re-seeding), as a
        trainer that seeds its steps itself expects; min_new_tokens bars stop ids before then."""
        if not prompt_ids:
            return []
        _check_prompts(prompt_ids)
        if len(stop_ids) > MAX_STOP_IDS:
            raise GenerationConfigError(f"the graph backend takes at most {MAX_STOP_IDS} stop ids "
                                        f"(got {len(stop_ids)}).")
        if max_new_tokens <= 0:
            return [[] for _ in prompt_ids]
        results: list[list[int]] = []
        for start in range(0, len(prompt_ids), self.max_batch):
            chunk = prompt_ids[start:start + self.max_batch]
            results += self._generate_chunk(chunk, max_new_tokens, temperature, top_p, greedy,
                                            None if seed is None else seed + start, stop_ids,
                                            min_new_tokens)
        return results

    def _generate_chunk(self, prompts, max_new, temperature, top_p, greedy, seed, stop_ids,
                        min_new):
        n = len(prompts)
        batch = self._bucket_batch(n)
        width = max(len(p) for p in prompts)
        need = width + max_new
        length = -(-need // self.len_bucket) * self.len_bucket
        s = self._slots_for(batch, length, max_new, nucleus=top_p < 1.0)
        padded = prompts + [[self.pad_id]] * (batch - n)
        ids, amask = left_pad(padded, self.pad_id, self.device)
        s.temperature.fill_(temperature)
        s.top_p.fill_(top_p)
        s.greedy.fill_(greedy)
        s.stop.fill_(-1)
        s.stop_mask.zero_()
        s.min_new.fill_(min_new)
        if stop_ids:
            s.stop[:len(stop_ids)] = torch.tensor(list(stop_ids), device=self.device)
            s.stop_mask[list(stop_ids)] = True
        if s.gen is not None:
            s.gen.manual_seed(int(torch.randint(0, 2**62, ())) if seed is None else seed)
        if self.use_graph and s.graph is None:
            # The cache's tensors exist already (SharedKV), so no prefill is needed before the
            # capture; the warm-up steps read zeros, not what another slot left in the storage.
            s.cache.reset()
            s.col.fill_(ids.shape[1])
            s.step.fill_(0)
            self._capture(s)
        if self.device.type == "cuda" and seed is not None:
            torch.cuda.manual_seed(seed)
        logits = self._prefill(s, ids, amask)
        s.done.zero_()
        s.step.fill_(0)
        first = self._pick(s, logits)                                                    # (B,)
        s.done[n:] = True
        s.out.fill_(self.pad_id)
        s.out[:, 0] = torch.where(s.done, self.pad_id, first)
        s.done |= torch.isin(first, s.stop)
        s.tok.copy_(s.out[:, :1])
        s.col.fill_(ids.shape[1])
        s.step.fill_(1)
        for i in range(1, max_new):
            if s.graph is not None:
                s.graph.replay()
            else:
                self._decode_step(s)
            if i % self.check_every == 0 and bool(s.done.all()):
                break
        rows = s.out[:n, :max_new].tolist()
        return [trim(r, stop_ids) if stop_ids else r for r in rows]


class RolloutCopy:
    """A bf16 inference copy of a training model (fp32 master weights) for the graph backend.

    `refresh()` copies the current weights in place (~1 ms for 135M parameters on a GPU), so the
    captured graphs, which hold the copy's addresses, stay valid across updates.
    """

    def __init__(self, model, tokenizer, **kw):
        import copy

        self.source = model
        self.copy = copy.deepcopy(model).to(torch.bfloat16).eval().requires_grad_(False)
        self.copy.config.use_cache = True
        self.pairs = list(zip(self.copy.parameters(), model.parameters()))
        self.gen = GraphGenerator(self.copy, tokenizer, **kw)

    @torch.no_grad()
    def refresh(self) -> None:
        for dst, src in self.pairs:
            dst.copy_(src)


_ROLLOUT_COPIES: dict[int, RolloutCopy] = {}
COMPILE_MODES = {"dynamic": "dynamic", "static": True, "off": False}


def rollout_compile_mode():
    """How the trainer's graph rollouts compile (EAU_ROLLOUT_COMPILE: off | dynamic | static).

    Measured on the H200 (benchmarks/RESULTS-gpu.md, "turns": four calls whose batch shrinks and
    context grows, as in a multi-turn rollout): "off" (the default) runs eager kernels inside the
    CUDA graph, 0.6 s of captures and 8,763 tokens/s from the first step; "dynamic" compiles once
    for symbolic shapes, 194 s before the first rollout ends, then 16,598 tokens/s, which pays
    back only after a few hundred rollout calls; "static" compiles per (batch, length) bucket,
    ~35 s each, fastest per token at a fixed shape (29,353 tokens/s at batch 64)."""
    import os

    name = os.environ.get("EAU_ROLLOUT_COMPILE", "off")
    if name not in COMPILE_MODES:
        raise GenerationConfigError(f"EAU_ROLLOUT_COMPILE={name!r} is not one of "
                                    f"{', '.join(COMPILE_MODES)}.")
    return COMPILE_MODES[name]


def fast_generate(model, tokenizer, contexts: list[list[int]], *, max_new_tokens: int,
                  temperature: float, top_p: float, stop_ids: Sequence[int],
                  min_new_tokens: int = 0) -> list[list[int]] | None:
    """The trainer's rollout call on CUDA through the graph backend, or None where it does not
    apply (not CUDA, a peft model, an FSDP-sharded model, too many stop ids): the caller then
    runs its plain path.

    Draws from the global CUDA generator without re-seeding it (the trainer seeds each step).
    """
    if model.device.type != "cuda" or hasattr(model, "peft_config") or len(stop_ids) > MAX_STOP_IDS:
        return None
    if any(hasattr(m, "reshard") for m in model.modules()):  # FSDP-sharded: no whole copy here
        return None
    entry = _ROLLOUT_COPIES.get(id(model))
    if entry is None or entry.source is not model:
        entry = _ROLLOUT_COPIES[id(model)] = RolloutCopy(model, tokenizer,
                                                         compile=rollout_compile_mode())
    entry.refresh()
    return entry.gen.generate(contexts, max_new_tokens, temperature=max(temperature, 1e-5),
                              top_p=top_p, greedy=temperature <= 0, seed=None,
                              stop_ids=list(stop_ids), min_new_tokens=min_new_tokens)


def make_generator(model, tokenizer, backend: str = "auto", **kw):
    """The generation backend named `backend` (module docstring); "auto" picks by device."""
    if backend not in BACKENDS:
        raise GenerationConfigError(f"unknown generation backend {backend!r}: choose one of "
                                    f"{', '.join(BACKENDS)}.")
    if backend == "auto":
        backend = "graph" if model.device.type == "cuda" else "plain"
    if backend == "plain":
        return HFGenerator(model, tokenizer)
    if backend == "static":
        return HFGenerator(model, tokenizer, static=True)
    if backend == "cb":
        return ContinuousBatchingGenerator(model, tokenizer)
    if backend == "graph":
        return GraphGenerator(model, tokenizer, **kw)
    return VLLMGenerator(model, tokenizer, **kw)
