"""Decoding with a KV cache that each sequence keeps for its whole life: a turn appends to it.

Why: a multi-turn rollout used to hand `generate` the whole conversation at every turn, which ran
the history through the model again (turn k of an episode re-read turns 0..k-1) and, in the CUDA
path, needed a new (batch, length) cache and graph as contexts grew. vLLM and SGLang keep a
sequence's cache and append to it (their `v1/core` block manager, SGLang's radix cache); so does
this engine, in the plainest form that serves a rollout: one slot per sequence, a cache row of
its own, and the engine remembering which tokens each slot holds.

    engine = KVEngine(model, slots=64, stop_ids=[2], pad_id=0)
    new = engine.generate(contexts, max_new_tokens=128, temperature=0.7)   # like generate()
    # next turn: contexts[i] + new[i] + reply tokens; only the part past the slot's cache is run

Parts:
1. Slots and caches: per layer, keys and values (S, Hkv, L, D). `start[s]` counts the tokens slot
   s holds; `held[s]` is that token list on the host, so a call finds the slot whose tokens are a
   prefix of its context (`generate`) and runs only the rest (`prefill`).
2. Attention (`kv_attention`, registered with transformers' AttentionInterface as "eau_kv"):
   the model runs with no cache object; each layer's new keys and values are written into the
   slot's row at its own columns, and the queries attend to the row's first `width` columns under
   a mask (column j visible to a query at position p iff j <= p). Any call while no engine is
   running (the update's training passes on the same model) goes to SDPA unchanged.
3. Decoding: one step feeds each active slot's last sampled token, samples the next (temperature,
   top-p, stop ids barred before `min_new`), and advances only active slots. On CUDA the step is
   captured in a CUDA graph per cache width (`width_bucket` columns), so a step is one replay; the
   host reads the `active` flags every `check_every` steps.

Every column is written before it is read: a slot's writes past its own length (padding queries of
a prefill, the repeated feed of an ended slot) land where the next real token of that slot is
written first, so nothing stale is ever attended to. Greedy output equals transformers'
`generate` on the same contexts (tests/training/test_kvengine.py).
"""
from __future__ import annotations

import contextlib
import math
from typing import Sequence

import torch

from training.generation import (MAX_STOP_IDS, GenerationConfigError, attention_kernels,
                                 sample_next)

ATTN = "eau_kv"
_RUNNING: list["KVEngine"] = []    # the engine whose forward is under way (one thread at a time)


def kv_attention(module, query, key, value, attention_mask, dropout: float = 0.0,
                 scaling: float | None = None, **kwargs):
    """Attention through the running engine's cache (module docstring, part 2); SDPA otherwise.

    query (b, Hq, n, D), key/value (b, Hkv, n, D) of the n new positions of b rows; returns
    (b, n, Hq, D) as transformers' attention functions do."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    engine = _RUNNING[-1] if _RUNNING else None
    if engine is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                      scaling=scaling, **kwargs)
    return engine.attend(module.layer_idx, query, key, value, attention_mask, scaling)


_EXCLUDED: list = []


def _compile_excluded_attention():
    """kv_attention wrapped by torch.compiler.disable, made once and registered in its place (a
    compiled decoder layer breaks its graph there; KVEngine._layer_fn)."""
    from transformers import AttentionInterface

    if not _EXCLUDED:
        _EXCLUDED.append(torch.compiler.disable(kv_attention))
    AttentionInterface.register(ATTN, _EXCLUDED[0])
    return _EXCLUDED[0]


def use_kv_attention(model) -> None:
    """Route `model`'s attention through kv_attention (its training passes still run SDPA)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface

    impl = model.config._attn_implementation
    if impl not in ("sdpa", "eager", ATTN, "eau_gqa_decode"):
        raise GenerationConfigError(f"the KV engine runs on sdpa or eager attention, not {impl!r}.")
    # once an engine compiled its layers, attention stays excluded from compilation for every
    # engine after it (a later plain registration would let a recompile trace into it)
    AttentionInterface.register(ATTN, _EXCLUDED[0] if _EXCLUDED else kv_attention)
    AttentionMaskInterface.register(ATTN, ALL_MASK_ATTENTION_FUNCTIONS["sdpa"])
    model.config._attn_implementation = ATTN


def _run_layer(layer, h, pe, pos):
    """One decoder layer on hidden states h (S, 1, H), its mask left to kv_attention."""
    out = layer(h, attention_mask=None, position_embeddings=pe, position_ids=pos)
    return out[0] if isinstance(out, tuple) else out


# Decoders whose forward is embed -> rotary -> layers -> norm, which `_decode_hidden` repeats
# (a model of another shape, e.g. Gemma's scaled embeddings, decodes through its own forward).
LAYER_PATH_MODELS = ("llama", "qwen2", "qwen3", "mistral")


def _layer_path_fits(model) -> bool:
    import os

    if os.environ.get("EAU_KV_COMPILE", "layers") == "off":
        return False
    dec = model.get_decoder()
    return model.config.model_type in LAYER_PATH_MODELS and all(
        hasattr(dec, name) for name in ("embed_tokens", "rotary_emb", "layers", "norm"))


def _common_prefix(a: list[int], b: list[int]) -> int:
    """Length of the longest common prefix of two token lists (numpy compares them in C: a
    Python loop over 64 slots x 2k tokens per call cost tens of ms)."""
    import numpy as np

    n = min(len(a), len(b))
    if a[:n] == b[:n]:
        return n
    diff = np.flatnonzero(np.asarray(a[:n]) != np.asarray(b[:n]))
    return int(diff[0])


def _model_shape(model) -> tuple[int, int, int, torch.dtype]:
    """(layers, KV heads, head dim, dtype) of a decoder-only transformers model."""
    cfg = model.config
    heads = getattr(cfg, "num_key_value_heads", None) or cfg.num_attention_heads
    dim = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
    dtype = next(p for p in model.parameters()).dtype
    return cfg.num_hidden_layers, heads, dim, dtype


class KVCacheMemoryError(MemoryError):
    """The KV cache a call needs would not fit in the host's free memory."""


HOST_SHARE = 0.8     # of the free memory a grown cache may take: the copy of the old cache, the
                     # prefill's activations and the logits need the rest


def _free_host_bytes() -> int | None:
    """MemAvailable of /proc/meminfo (Linux), None where there is none."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def _check_host_room(nbytes: int, slots: int, length: int) -> None:
    """Refuse, in one sentence, a CPU cache that would not fit: on a 24 GiB machine an evaluation
    of 105 episodes at once (the GPU runs' --batch-size) was killed by the kernel's OOM killer
    after 4 minutes, with nothing said but "exit -9"."""
    free = _free_host_bytes()
    if free is not None and nbytes > HOST_SHARE * free:
        raise KVCacheMemoryError(
            f"the KV cache for {slots} sequences of {length} tokens needs {nbytes / 2**30:.1f} GiB "
            f"and this machine has {free / 2**30:.1f} GiB free: generate fewer sequences at once "
            f"(a smaller batch size).")


class KVEngine:
    """Slots of per-sequence KV cache over one model (module docstring)."""

    def __init__(self, model, *, slots: int, stop_ids: Sequence[int], pad_id: int,
                 use_graph: bool | None = None, width_bucket: int = 256, grow_by: int = 1024,
                 check_every: int | None = None, prefill_chunk: int = 512,
                 compile_layers: bool | None = None):
        if len(stop_ids) > MAX_STOP_IDS:
            raise GenerationConfigError(f"the KV engine takes at most {MAX_STOP_IDS} stop ids "
                                        f"(got {len(stop_ids)}).")
        use_kv_attention(model)
        self.model = model
        self.decoder, self.head = model.get_decoder(), model.get_output_embeddings()
        self.device = next(model.parameters()).device
        self.layers, self.kv_heads, self.head_dim, self.dtype = _model_shape(model)
        self.stop_ids, self.pad_id = list(stop_ids), int(pad_id)
        self.use_graph = self.device.type == "cuda" if use_graph is None else use_graph
        compile_layers = self.use_graph if compile_layers is None else compile_layers
        self.width_bucket, self.grow_by = width_bucket, grow_by
        # a host check costs a synchronisation on CUDA (every 16 replays), nothing on the CPU
        self.check_every = check_every or (16 if self.use_graph else 1)
        self.prefill_chunk = prefill_chunk
        self.capture_s = 0.0
        self._nucleus = False                    # top_p < 1: sort the vocabulary when sampling
        # repetition penalty over the reply (Keskar et al. 2019, CTRL, as transformers'
        # RepetitionPenaltyLogitsProcessor but on this call's new tokens only): a token the reply
        # has already said has its logit divided by it (multiplied where negative). Not the
        # context: penalising the prompt kept the 135M user from telling any hidden fact, whose
        # words are in its prompt (under transformers' own penalty at 1.2, 0 of 48 recorded
        # states' replies disclosed one, against 6 of 48 without: benchmarks/RESULTS-learning.md,
        # twelfth session), and from ending its turn, whose end token every earlier message
        # has. 1.0, the policy's rollouts, costs nothing: `seen` (S, V) is made only when an LLM
        # user asks for a penalty (user.<gym>.repetition_penalty)
        self._penalty = 1.0
        self.seen: torch.Tensor | None = None
        self._settings = {"greedy": False, "min_new": 0, "temperature": 1.0, "top_p": 1.0}
        self.keys: list[torch.Tensor] = []      # per layer (S, Hkv, L, D)
        self.values: list[torch.Tensor] = []
        self.held: list[list[int]] = []          # per slot: the tokens its cache row holds
        self.used: list[int] = []                # per slot: the call that last used it (LRU)
        self.calls = 0
        self._version = -1                       # the weights' version the caches were made with
        self._graphs: dict[tuple[int, bool, bool], torch.cuda.CUDAGraph] = {}
        self._alloc(slots, 0, 4)
        # what kv_attention reads during a forward: the batch's slots (None: all, in order), the
        # cache column of each new position, and how many columns the queries attend to
        self._rows: torch.Tensor | None = None
        self._cols: torch.Tensor | None = None
        self._width = 0
        self._decode_mask: torch.Tensor | None = None
        self._layer_fn = _run_layer
        self.compiled = False
        if compile_layers and _layer_path_fits(model):
            # regional compilation: one decoder layer's code compiled once and reused by all
            # layers (parameters are inputs), so compile time is a layer's, not the model's;
            # attention stays eager (kv_attention is excluded), so no compiled shape depends
            # on the cache width. Inductor fuses a layer's norms, rotary and residuals.
            for knob in ("recompile_limit", "cache_size_limit"):   # slot counts may grow
                if hasattr(torch._dynamo.config, knob):
                    setattr(torch._dynamo.config, knob, max(getattr(torch._dynamo.config, knob), 64))
            # the compiled layer breaks its graph at attention: kv_attention is registered
            # excluded from compilation here, not by a decorator at import, since
            # torch.compiler.disable imports torch._dynamo (1.2 s of the trainer's 2.9 s import
            # on the CPU, where nothing is compiled; -X importtime, 2026-12-07)
            _compile_excluded_attention()
            self._layer_fn = torch.compile(_run_layer, dynamic=False)
            self.compiled = True

    # ---- storage -----------------------------------------------------------------------------
    @property
    def slots(self) -> int:
        return len(self.held)

    @property
    def length(self) -> int:
        """Columns of cache each slot has room for."""
        return self.keys[0].shape[2] if self.keys else 0

    @property
    def kv_bytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.keys + self.values)

    def _alloc(self, slots: int, length: int, max_new: int) -> None:
        """Storage for `slots` slots of `length` columns and `max_new` new tokens per call, the
        old contents kept; captured graphs hold the old addresses and are dropped."""
        dev = self.device
        old = self.slots
        if self.keys and slots <= old and length <= self.length and max_new <= self.out.shape[1]:
            return
        slots, length = max(slots, old), max(length, self.length)
        self._graphs.clear()
        if length > self.length or slots > old:
            shape = (slots, self.kv_heads, length, self.head_dim)
            if dev.type == "cpu":
                _check_host_room(2 * self.layers * math.prod(shape) * self.dtype.itemsize,
                                 slots, length)
            keys = [torch.zeros(shape, dtype=self.dtype, device=dev) for _ in range(self.layers)]
            values = [torch.zeros(shape, dtype=self.dtype, device=dev) for _ in range(self.layers)]
            for new, cur in zip(keys + values, self.keys + self.values):
                new[:cur.shape[0], :, :cur.shape[2]] = cur
            self.keys, self.values = keys, values

        def grown(t: torch.Tensor | None, fill, *shape, dtype=torch.long) -> torch.Tensor:
            out = torch.full(shape, fill, dtype=dtype, device=dev)
            if t is not None:
                out[tuple(slice(0, n) for n in t.shape)] = t
            return out

        have = self.slots > 0
        self.start = grown(self.start if have else None, 0, slots)          # (S,) tokens held
        self.tok = grown(self.tok if have else None, self.pad_id, slots)    # (S,) next to feed
        self.nstep = grown(self.nstep if have else None, 0, slots)          # (S,) this call's new
        self.active = grown(self.active if have else None, False, slots, dtype=torch.bool)
        width = max(max_new, self.out.shape[1] if have else 0)
        self.out = grown(self.out if have else None, self.pad_id, slots, width)   # (S, N)
        if not have:
            self.max_new = torch.zeros((), dtype=torch.long, device=dev)
            self.min_new = torch.zeros((), dtype=torch.long, device=dev)
            self.temperature = torch.ones((), device=dev)
            self.top_p = torch.ones((), device=dev)
            self.greedy = torch.zeros((), dtype=torch.bool, device=dev)
            self.stop = torch.full((MAX_STOP_IDS,), -1, dtype=torch.long, device=dev)
            self.stop[:len(self.stop_ids)] = torch.tensor(self.stop_ids, dtype=torch.long)
            vocab = self.head.weight.shape[0]
            self.stop_mask = torch.zeros(vocab, dtype=torch.bool, device=dev)
            self.stop_mask[self.stop_ids] = True
        if self.seen is not None:
            self.seen = grown(self.seen, False, slots, self.seen.shape[1], dtype=torch.bool)
        self.held += [[] for _ in range(slots - old)]
        self.used += [-1] * (slots - old)

    def _ensure_length(self, need: int) -> None:
        if need > self.length:
            self._alloc(self.slots, -(-need // self.grow_by) * self.grow_by, self.out.shape[1])

    def _width_for(self, need: int) -> int:
        return min(-(-need // self.width_bucket) * self.width_bucket, self.length)

    # ---- attention (kv_attention lands here) -------------------------------------------------
    def attend(self, layer: int, query, key, value, mask, scaling):
        """Write the new keys/values (b, Hkv, n, D) at their columns, attend over the first
        `_width` columns of the batch's slots; (b, n, Hq, D)."""
        b, hq, n, d = query.shape
        K, V = self.keys[layer], self.values[layer]
        rows = torch.arange(b, device=query.device) if self._rows is None else self._rows
        where = (rows[:, None].expand(b, n), slice(None), self._cols)          # (b, n) indices
        K[where] = key.permute(0, 2, 1, 3).to(K.dtype)                          # (b, n, Hkv, D)
        V[where] = value.permute(0, 2, 1, 3).to(V.dtype)
        w = self._width
        mask = self._decode_mask if mask is None else mask
        if self._rows is None:
            k, v = K[:b, :, :w], V[:b, :, :w]                                  # views
        else:
            k, v = K[self._rows, :, :w], V[self._rows, :, :w]                  # (b, Hkv, w, D)
        scale = d ** -0.5 if scaling is None else scaling
        if n == 1:   # grouped decode: no per-head copy of the cache (generation.gqa_decode_attention)
            q = query.reshape(b, self.kv_heads, hq // self.kv_heads, d)            # (b, Hkv, G, D)
            scores = torch.matmul(q, k.transpose(-1, -2)).float() * scale         # (b, Hkv, G, w)
            probs = torch.softmax(scores + mask.float(), dim=-1).to(v.dtype)      # mask (b,1,1,w)
            return torch.matmul(probs, v).reshape(b, 1, hq, d), None
        # prefill: each KV head's G query heads as one longer query, so the cache is read once
        # per KV head, never copied per query head (repeat_kv copied 3x 2.6 GB per prefill of 64
        # slots at 1,792 columns: 54 ms on the H200 for 61 new tokens a slot)
        g = hq // self.kv_heads
        q = query.reshape(b, self.kv_heads, g * n, d)                            # (b, Hkv, G*n, D)
        out = torch.nn.functional.scaled_dot_product_attention(
            q, k.to(query.dtype), v.to(query.dtype),
            attn_mask=mask.to(query.dtype).repeat(1, 1, g, 1), scale=scale)       # (b, Hkv, G*n, D)
        return out.reshape(b, hq, n, d).transpose(1, 2), None

    def _mask(self, first: torch.Tensor, n: int, width: int) -> torch.Tensor:
        """Additive (b, 1, n, width): query i of row r, at position first[r] + i, sees columns
        up to its own."""
        cols = torch.arange(width, device=first.device)                         # (w,)
        pos = first[:, None] + torch.arange(n, device=first.device)              # (b, n)
        ok = cols[None, None, :] <= pos[:, :, None]                              # (b, n, w)
        neg = torch.finfo(self.dtype).min
        return torch.zeros(ok.shape, dtype=self.dtype, device=first.device).masked_fill_(
            ~ok, neg)[:, None]

    @contextlib.contextmanager
    def _running(self, rows, cols, width):
        self._rows, self._cols, self._width = rows, cols, width
        _RUNNING.append(self)
        try:
            yield
        finally:
            _RUNNING.pop()
            self._rows, self._cols = None, None

    def _hidden(self, ids, pos, mask) -> torch.Tensor:
        return self.decoder(input_ids=ids, position_ids=pos, attention_mask=mask,
                            use_cache=False).last_hidden_state                   # (b, n, H)

    # ---- prefill: run each slot's new tokens into its row, sample its first new token ---------
    @torch.no_grad()
    def prefill(self, slots: list[int], suffixes: list[list[int]]) -> None:
        """Append `suffixes[i]` (non-empty) to slot `slots[i]` and sample that slot's next token
        (becomes active); prompts are run `prefill_chunk` query positions per forward."""
        dev = self.device
        rows = torch.tensor(slots, dtype=torch.long, device=dev)                 # (b,)
        # all slots in order (a rollout's first turn): the cache is read as views, not gathered
        read = None if slots == list(range(len(slots))) else rows
        lens = torch.tensor([len(s) for s in suffixes], dtype=torch.long)        # (b,)
        first = torch.tensor([len(self.held[s]) for s in slots], dtype=torch.long)
        self._ensure_length(int((first + lens).max()) + 1)
        n_max = int(lens.max())
        ids = torch.full((len(slots), n_max), self.pad_id, dtype=torch.long)    # (b, n) right pad
        for i, s in enumerate(suffixes):
            ids[i, :len(s)] = torch.tensor(s, dtype=torch.long)
        ids, first_d, lens_d = ids.to(dev), first.to(dev), lens.to(dev)
        last = torch.zeros(len(slots), self.decoder.config.hidden_size, dtype=self.dtype,
                           device=dev)                                           # (b, H)
        for c0 in range(0, n_max, self.prefill_chunk):
            c1 = min(c0 + self.prefill_chunk, n_max)
            pos = first_d[:, None] + torch.arange(c0, c1, device=dev)            # (b, c)
            width = self._width_for(int((first + c1).max()))
            cols = pos.clamp(max=self.length - 1)   # padding positions past the end: last column
            with self._running(read, cols, width), attention_kernels(self.device):
                hidden = self._hidden(ids[:, c0:c1], pos, self._mask(first_d + c0, c1 - c0, width))
            here = (lens_d - 1 >= c0) & (lens_d - 1 < c1)                        # (b,) ends here
            idx = (lens_d - 1 - c0).clamp(0, c1 - c0 - 1)
            last = torch.where(here[:, None], hidden[torch.arange(len(slots)), idx].to(self.dtype),
                               last)
        logits = self.head(last).float()                                         # (b, V)
        for s, suffix in zip(slots, suffixes):
            self.held[s] = self.held[s] + list(suffix)
        self.start[rows] = first_d + lens_d
        self.nstep[rows] = 0
        nxt = self._pick(logits, self.nstep[rows], torch.ones_like(rows, dtype=torch.bool))
        if self._penalty != 1.0:     # the reply so far: its first token alone
            seen = torch.zeros(len(slots), self.seen.shape[1], dtype=torch.bool, device=dev)
            seen[torch.arange(len(slots), device=dev), nxt] = True
            self.seen[rows] = seen
        self.out[rows, 0] = nxt
        self.tok[rows] = nxt
        self.nstep[rows] = 1
        self.active[rows] = ~(torch.isin(nxt, self.stop) | (self.max_new <= 1))

    def _pick(self, logits, nstep, active, seen=None) -> torch.Tensor:
        """Next token (b,) from logits (b, V): stop ids barred before min_new; pad where not
        active. In a CUDA graph every choice is a tensor op (no host synchronisation: the
        exponential race of generation.sample_next); run eagerly, the Python settings pick the
        cheaper path (on a CPU the race's exponential draw over the vocabulary cost 7 of a
        decode step's 11 ms: an argmax, or one uniform draw against the CDF, instead). `seen`
        (b, V): the tokens each row's reply has said, penalised first, as transformers applies
        its logits processors before temperature and top-p."""
        if seen is not None:
            logits = torch.where(seen, torch.where(logits > 0, logits / self.penalty,
                                                   logits * self.penalty), logits)
        if self.use_graph or self._settings["min_new"] > 0:
            logits = logits.masked_fill(self.stop_mask & (nstep < self.min_new)[:, None],
                                        float("-inf"))
        if self.use_graph:
            nxt = sample_next(logits, self.temperature, self.top_p, self.greedy,
                              nucleus=self._nucleus)
        elif self._settings["greedy"]:
            nxt = logits.argmax(-1)
        else:
            probs = torch.softmax(logits / self._settings["temperature"], dim=-1)   # (b, V)
            if self._nucleus:   # the nucleus as sample_next keeps it
                sp, idx = probs.sort(dim=-1, descending=True)
                sp = sp.masked_fill(sp.cumsum(-1) - sp >= self._settings["top_p"], 0.0)
                probs = torch.zeros_like(probs).scatter_(-1, idx, sp)
            # inverse CDF: one uniform draw per row (torch.multinomial draws an exponential
            # per vocabulary entry, 62% of a CPU rollout's time: 7.6 ms a step at batch 8)
            cdf = probs.cumsum(-1)                                                   # (b, V)
            u = torch.rand(cdf.shape[0], 1, device=cdf.device) * cdf[:, -1:]
            nxt = torch.searchsorted(cdf, u).squeeze(-1).clamp_(max=cdf.shape[1] - 1)
        return torch.where(active, nxt, torch.full_like(nxt, self.pad_id))

    # ---- decode ------------------------------------------------------------------------------
    def _decode_hidden(self, ids: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """The decoder's last hidden states (S, 1, H) for one new token per slot, layer by layer
        through `_layer_fn` (the attention mask is the engine's, read by kv_attention)."""
        if not self.compiled:
            return self._hidden(ids, pos, self._decode_mask)
        dec = self.decoder
        h = dec.embed_tokens(ids)                                                 # (S, 1, H)
        pe = dec.rotary_emb(h, position_ids=pos)
        for layer in dec.layers[:dec.config.num_hidden_layers]:
            h = self._layer_fn(layer, h, pe, pos)
        return dec.norm(h)

    def _step(self, width: int) -> None:
        """Feed every slot's `tok` at column `start`; active slots advance (the graph body)."""
        pos = self.start[:, None]                                                 # (S, 1)
        self._decode_mask = self._mask(self.start, 1, width)                      # (S,1,1,w)
        with self._running(None, pos, width):
            hidden = self._decode_hidden(self.tok[:, None], pos)
        logits = self.head(hidden[:, -1]).float()                                # (S, V)
        act = self.active
        nxt = self._pick(logits, self.nstep, act, self.seen if self._penalty != 1.0 else None)
        at = self.nstep.clamp(max=self.out.shape[1] - 1)                         # (S,)
        rows = torch.arange(self.slots, device=self.device)
        if self._penalty != 1.0:
            self.seen[rows, nxt] = self.seen[rows, nxt] | act
        self.out[rows, at] = torch.where(act, nxt, self.out[rows, at])
        inc = act.long()
        self.start.add_(inc)
        self.nstep.add_(inc)
        self.tok.copy_(torch.where(act, nxt, self.tok))
        ended = act & (torch.isin(nxt, self.stop) | (self.nstep >= self.max_new))
        self.active.copy_(act & ~ended)

    def _graph(self, width: int):
        key = (width, self._nucleus, self._penalty != 1.0)
        g = self._graphs.get(key)
        if g is not None or not self.use_graph:
            return g
        import time

        t0 = time.perf_counter()
        # the warm-up and capture steps run for real: what they change is put back after
        kept = [self.start, self.tok, self.nstep, self.active, self.out] + \
            ([self.seen] if self._penalty != 1.0 else [])
        state = [t.clone() for t in kept]
        rng = torch.cuda.get_rng_state()
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            try:   # lazy allocations, kernel choices and the layer's compile, before capture
                for _ in range(2):
                    self._step(width)
            except Exception as exc:     # noqa: BLE001 - any compiler failure: decode eagerly
                if not self.compiled:
                    raise
                import sys
                print(f"kv engine: compiling the decoder layer failed ({type(exc).__name__}: "
                      f"{str(exc)[:200]}); decoding with eager kernels.", file=sys.stderr)
                self.compiled, self._layer_fn = False, _run_layer
                for t, saved in zip(kept, state):
                    t.copy_(saved)
                for _ in range(2):
                    self._step(width)
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            self._step(width)
        for t, saved in zip(kept, state):
            t.copy_(saved)      # the warm-up and capture steps changed nothing for real
        torch.cuda.set_rng_state(rng)
        self._graphs[key] = g
        self.capture_s += time.perf_counter() - t0
        return g

    @torch.no_grad()
    def decode(self, steps: int, width: int, early_exit: bool = True) -> None:
        """Up to `steps` decode steps over all slots at cache width `width`; with early_exit,
        returns once no slot is active (checked every `check_every` steps on the host)."""
        g = self._graph(width)
        for i in range(steps):
            if g is not None:
                g.replay()
            else:
                self._step(width)
            if early_exit and (i + 1) % self.check_every == 0 and not bool(self.active.any()):
                return

    # ---- a caller that drives the turns itself (training.rollout.continuous) -----------------
    def begin(self, contexts: list[list[int]], *, max_new: int, temperature: float,
              top_p: float, min_new: int = 0, greedy: bool = False,
              repetition_penalty: float = 1.0) -> list[int]:
        """Slots for a set of sequences that will take turns (assign), every slot inactive, the
        sampling set; the caller prefills them (`prefill` with the tokens past `held`)."""
        version = self._weights_version()
        if version != self._version:     # a cache is only valid for the weights that made it
            self.forget()
            self._version = version
        slots, _ = self.assign(contexts)
        self.set_sampling(max_new=max_new, temperature=temperature, top_p=top_p,
                          greedy=greedy or temperature <= 0, min_new=min_new,
                          repetition_penalty=repetition_penalty)
        self.active.zero_()
        return slots

    def width_for_turns(self, slots, max_new: int) -> int:
        """A cache width that holds every one of `slots` to the end of a turn of max_new tokens
        (the storage grown where it is short)."""
        need = max(len(self.held[s]) for s in slots) + max_new + 1
        self._ensure_length(need)
        return self._width_for(need)

    def ended(self, slots) -> list[int]:
        """Which of `slots` finished their turn (one host read of the active flags)."""
        slots = sorted(slots)
        flags = self.active[torch.tensor(slots, device=self.device)].tolist()
        return [s for s, on in zip(slots, flags) if not on]

    def take(self, slots: list[int]) -> list[list[int]]:
        """The tokens each slot generated in its turn (up to and including its stop id); the
        slot then holds its context and those tokens but the last, which was never fed."""
        rows = torch.tensor(slots, dtype=torch.long, device=self.device)
        counts, outs = self.nstep[rows].tolist(), self.out[rows].tolist()
        news = [row[:n] for row, n in zip(outs, counts)]
        for s, new in zip(slots, news):
            self.held[s] = self.held[s] + new[:-1]
        return news

    # ---- the whole call ----------------------------------------------------------------------
    def set_sampling(self, *, max_new: int, temperature: float, top_p: float, greedy: bool,
                     min_new: int = 0, repetition_penalty: float = 1.0) -> None:
        if repetition_penalty <= 0:
            raise GenerationConfigError(f"a repetition penalty must be above 0 (got "
                                        f"{repetition_penalty}); 1.0 is none.")
        self._alloc(self.slots, self.length, max_new)
        self._penalty = float(repetition_penalty)
        if self._penalty != 1.0:
            if self.seen is None:
                self.seen = torch.zeros(self.slots, self.head.weight.shape[0], dtype=torch.bool,
                                        device=self.device)
                self.penalty = torch.ones((), device=self.device)
            self.penalty.fill_(self._penalty)
        self.max_new.fill_(max_new)
        self.min_new.fill_(min_new)
        self.temperature.fill_(max(temperature, 1e-5))
        self.top_p.fill_(top_p)
        self.greedy.fill_(greedy)
        self._nucleus = top_p < 1.0 and not greedy
        self._settings = {"greedy": greedy, "min_new": min_new,
                          "temperature": max(temperature, 1e-5), "top_p": top_p}

    def forget(self) -> None:
        """No slot holds anything any more (their caches were computed with other weights)."""
        self.held = [[] for _ in self.held]
        self.used = [-1] * len(self.used)
        self.calls = 0

    def _weights_version(self) -> int:
        """Changes whenever a parameter is changed in place (an optimiser step, a copy)."""
        return sum(p._version for p in self.model.parameters())

    def assign(self, contexts: list[list[int]]) -> tuple[list[int], list[list[int]]]:
        """A slot for each context: the one whose held tokens share the longest prefix with it
        (never the whole context: its last token is fed again so there are logits to sample
        from; the row's columns past the shared prefix simply stop counting), else the least
        recently used; and each context's tokens past what its slot keeps.

        The prefix is the longest common one, not only a held sequence the context extends: a
        chat template re-rendered from text (an LLM user's conversation) may tokenize the last
        reply differently from how it was sampled, and everything before it is still reused."""
        self.calls += 1
        if len(contexts) > self.slots:
            self._alloc(len(contexts), self.length, self.out.shape[1])
        taken: set[int] = set()
        chosen: list[int] = []
        suffixes: list[list[int]] = []
        for ctx in contexts:
            best, keep = -1, 0
            for s, held in enumerate(self.held):
                if s in taken or not held or held[0] != ctx[0]:
                    continue
                n = min(_common_prefix(held, ctx), len(ctx) - 1)
                if n > keep:
                    best, keep = s, n
            if best < 0:
                best = min((s for s in range(self.slots) if s not in taken),
                           key=lambda s: (self.used[s], s))
                keep = 0
            self.held[best] = self.held[best][:keep]
            taken.add(best)
            chosen.append(best)
            suffixes.append(list(ctx[keep:]))
            self.used[best] = self.calls
        return chosen, suffixes

    @torch.no_grad()
    def generate(self, contexts: list[list[int]], *, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, greedy: bool = False,
                 min_new_tokens: int = 0, repetition_penalty: float = 1.0) -> list[list[int]]:
        """generate()'s contract (training.generation): each context's new tokens up to and
        including the first stop id. Slots whose cache holds a prefix of a context are reused."""
        if not contexts:
            return []
        if any(len(c) == 0 for c in contexts):
            raise GenerationConfigError("every prompt needs at least one token (got an empty prompt).")
        if max_new_tokens <= 0:
            return [[] for _ in contexts]
        slots = self.begin(contexts, max_new=max_new_tokens, temperature=temperature,
                           top_p=top_p, min_new=min_new_tokens, greedy=greedy,
                           repetition_penalty=repetition_penalty)
        self.prefill(slots, [list(c[len(self.held[s]):]) for s, c in zip(slots, contexts)])
        self.decode(max_new_tokens - 1, self.width_for_turns(slots, max_new_tokens))
        result = self.take(slots)
        return result


# ---- the trainer's rollout engine --------------------------------------------------------------
class RolloutEngine:
    """The KV engine the trainer's rollouts decode with, over `model` (the policy).

    On CUDA it runs on a bf16 copy of the fp32 policy whose weights `refresh()` copies in place
    before every call (~1 ms for 135M parameters), so the captured graphs, which hold the copy's
    addresses, stay valid across updates; a LoRA (peft) policy's copy has its adapters merged in
    (training/policy.py MergedLoRA), merged again when they change. On the CPU it runs on the
    policy itself, in fp32: no copy to keep in step, and CPU bf16 decoding is slower where the CPU
    lacks native bf16 (training/policy.py)."""

    def __init__(self, model, tokenizer, stop_ids: Sequence[int], *, copy_weights: bool | None = None, **kw):
        import copy

        self.source, self.merged = model, None
        # the bf16 copy: on CUDA (None), or where asked (a CPU test of the copy's refresh)
        on_gpu = next(model.parameters()).device.type == "cuda" if copy_weights is None else copy_weights
        if on_gpu and hasattr(model, "peft_config"):
            from training.policy import MergedLoRA
            self.merged = MergedLoRA(model, torch.bfloat16)
            self.model, self.pairs = self.merged.model, []
        elif on_gpu:
            self.model = copy.deepcopy(model).to(torch.bfloat16).eval().requires_grad_(False)
            self.pairs = list(zip(self.model.parameters(), model.parameters()))
        else:
            self.model, self.pairs = model, []
        self.source_version = -1
        self.copies = 0         # times the copy took the policy's weights (the first one included)
        pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else stop_ids[0]
        self.engine = KVEngine(self.model, slots=8, stop_ids=stop_ids, pad_id=pad, **kw)

    @torch.no_grad()
    def refresh(self) -> None:
        """Copy the policy's weights into the bf16 copy when they changed since the last copy
        (the copy's own version then changes, and the engine forgets its caches)."""
        if self.merged is not None:
            self.copies += bool(self.merged.refresh())
            return
        version = sum(src._version for _, src in self.pairs)
        if self.pairs and version != self.source_version:
            for dst, src in self.pairs:
                dst.copy_(src)
            self.source_version = version
            self.copies += 1

    @property
    def copying(self) -> bool:
        """Whether it decodes a copy of the policy (which must be refreshed after each update)."""
        return bool(self.pairs) or self.merged is not None


_ENGINES: dict[int, RolloutEngine] = {}


def weight_copies(model) -> int | None:
    """How many times the rollout engine of `model` has taken its weights into its copy; None
    where it decodes the policy itself (the CPU) or has not been made. The trainer logs the
    difference over a step as `rollout/weights_copied`: 0 after an update means the rollouts
    decoded older weights than the ones just trained."""
    entry = _ENGINES.get(id(model))
    if entry is None or entry.source is not model or not entry.copying:
        return None
    return entry.copies


def rollout_engine(model, tokenizer, stop_ids: Sequence[int]) -> RolloutEngine | None:
    """The rollout engine of `model`, made on first use; None where it cannot run (an
    FSDP-sharded model holds no whole weights here; more stop ids than the engine takes)."""
    if any(hasattr(m, "reshard") for m in model.modules()) or len(stop_ids) > MAX_STOP_IDS:
        return None
    entry = _ENGINES.get(id(model))
    if entry is None or entry.source is not model:
        entry = _ENGINES[id(model)] = RolloutEngine(model, tokenizer, stop_ids)
    entry.refresh()
    return entry
