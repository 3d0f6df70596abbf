"""Update efficiency: how the PPO update, critic and reference passes batch their sequences.

Rollout sequences have very different lengths (a 2-turn episode next to a 16-turn one). Padding a
random mini-batch to its longest member wastes most of the update's FLOPs; two cures, both here:
- length-sorted micro-batches (`length_sorted_micro_batches`): sequences of similar length go
  together, each micro-batch capped by a token budget (padded tokens counted), so padding shrinks to
  a few percent. Works with every attention implementation and keeps fused SDPA kernels (causal,
  no mask when a micro-batch has no padding... or a 2D padding mask otherwise).
- packing (`pack`): sequences laid end to end in one row, position ids restarting at 0 for each;
  transformers recognises this layout and builds a block-diagonal causal mask (exact, no padding
  at all). Best with attention that skips masked blocks (flash-attention varlen, flex attention);
  with plain SDPA it still computes the masked blocks.
Plus gradient checkpointing as an option (`set_gradient_checkpointing`) and the fastest attention
implementation the machine has (`best_attention`).

The result of a packed or sorted pass is returned in the caller's original order (`unpack`,
`micro_batch` indices), so the PPO math in training/ppo.py never sees the reordering.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass

import torch


def length_sorted_micro_batches(lengths: list[int], max_tokens: int,
                                max_seqs: int | None = None) -> list[list[int]]:
    """Indices of sequences grouped into micro-batches of similar length.

    Each group's padded size (len(group) * longest member) stays within `max_tokens` (a single
    sequence longer than the budget gets a group of its own); every index appears exactly once.
    Sorting is longest first, so the first micro-batch shows the peak memory at once.
    """
    if max_tokens <= 0:
        raise ValueError(f"max_tokens must be positive (got {max_tokens}).")
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    groups: list[list[int]] = []
    cur: list[int] = []
    for i in order:
        longest = lengths[cur[0]] if cur else lengths[i]
        full = max_seqs is not None and len(cur) >= max_seqs
        if cur and ((len(cur) + 1) * longest > max_tokens or full):
            groups.append(cur)
            cur = []
        cur.append(i)
    if cur:
        groups.append(cur)
    return groups


def padding_fraction(lengths: list[int], groups: list[list[int]]) -> float:
    """Share of padded tokens when each group is padded to its longest member."""
    padded = sum(len(g) * max(lengths[i] for i in g) for g in groups)
    return 1.0 - sum(lengths) / padded if padded else 0.0


def pad_right(seqs: list[torch.Tensor], value: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Right-padded (B, T) batch and its 0/1 attention mask (B, T) from 1-D tensors."""
    width = max(int(s.shape[0]) for s in seqs)
    out = torch.full((len(seqs), width), value, dtype=seqs[0].dtype, device=seqs[0].device)
    mask = torch.zeros((len(seqs), width), dtype=torch.long, device=seqs[0].device)
    for i, s in enumerate(seqs):
        out[i, :s.shape[0]] = s
        mask[i, :s.shape[0]] = 1
    return out, mask


@dataclass(frozen=True)
class Packed:
    """Sequences laid end to end in one row."""
    input_ids: torch.Tensor     # (1, T) all sequences concatenated
    position_ids: torch.Tensor  # (1, T) restarting at 0 at each sequence start
    cu_seqlens: torch.Tensor    # (n + 1,) int32 offsets, flash-attention varlen layout
    lengths: tuple[int, ...]


def pack(seqs: list[torch.Tensor]) -> Packed:
    """Pack 1-D token tensors into one row; transformers derives the block-diagonal mask from
    the restarting position ids only when the model is called with NO attention mask and NO
    cache: `model(input_ids=p.input_ids, position_ids=p.position_ids, use_cache=False)` (an
    eval-mode call otherwise makes a cache and silently attends across sequences)."""
    lengths = tuple(int(s.shape[0]) for s in seqs)
    if not lengths or min(lengths) == 0:
        raise ValueError("pack needs at least one sequence and no empty ones.")
    ids = torch.cat(seqs)[None]                                                   # (1, T)
    pos = torch.cat([torch.arange(n, device=ids.device) for n in lengths])[None]  # (1, T)
    cu = torch.zeros(len(lengths) + 1, dtype=torch.int32, device=ids.device)
    cu[1:] = torch.tensor(lengths, device=ids.device).cumsum(0)
    return Packed(ids, pos, cu, lengths)


def unpack(values: torch.Tensor, packed: Packed) -> list[torch.Tensor]:
    """Split a per-token tensor (1, T, ...) of a packed pass back into one tensor per sequence."""
    return list(values[0].split(list(packed.lengths), dim=0))


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """log p(labels) from logits (..., V) and labels (...), computed in fp32 -> (...)."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    return logp.gather(-1, labels.unsqueeze(-1)).squeeze(-1)


def set_gradient_checkpointing(model, enabled: bool) -> None:
    """Recompute each layer's activations in the backward pass (memory for ~1/3 more FLOPs)."""
    if enabled:
        model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        model.config.use_cache = False
    else:
        model.gradient_checkpointing_disable()


def best_attention(device: torch.device | str, packed: bool = False) -> str:
    """The attention implementation to load a model with on this machine.

    flash_attention_2 when the package is installed on CUDA (fused, skips masked blocks, varlen for
    packed rows); otherwise SDPA (PyTorch's fused kernels: flash or memory-efficient on CUDA, a
    fused CPU kernel elsewhere), and for packed rows without flash-attn, flex attention on CUDA.
    """
    dev = torch.device(device)
    if dev.type == "cuda" and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    if dev.type == "cuda" and packed:
        return "flex_attention"
    return "sdpa"
