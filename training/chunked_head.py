"""Log-probabilities and entropies of the action tokens through the LM head, chunk by chunk.

The update needs, for the N action positions of a micro-batch, log pi(label) and the entropy of
pi: both functions of the logits z = (h W^T) / T over the whole vocabulary V. Materialising z in
fp32 for backward costs N x V x 4 bytes (and as much again for softmax's saved output): at
N = 16,384 action tokens and SmolLM2's V = 49,152 that is 3.2 GB per tensor, at Qwen3's 151,936
10 GB. Here the forward keeps only h and W and runs `chunk` rows at a time; the backward computes
each chunk's logits again and turns them straight into gradients (the approach of Liger's fused
linear cross-entropy), so the largest transient tensor is chunk x V.

The gradients, for softmax p of z, label y, log-prob l = z_y - logsumexp(z) and entropy
H = -sum_j p_j log p_j (upstream gradients g_l, g_H per row):
    dl/dz = onehot(y) - p
    dH/dz = -p * (log p + H)
    dz    = g_l * (onehot(y) - p) + g_H * dH/dz,   dh = (dz / T) W,   dW = (dz / T)^T h
The matmuls run in h's dtype (bf16 under autocast, as the plain head would), softmax in fp32.
"""
from __future__ import annotations

import torch


def _chunk_stats(h: torch.Tensor, w: torch.Tensor, labels: torch.Tensor, temperature: float):
    """For rows h (c, H) and the head w (V, H), both in the matmul's dtype: log-softmax (c, V)
    of the fp32 logits, label log-probs (c,), entropies (c,)."""
    z = (h @ w.t()).float() / temperature                                    # (c, V)
    logp_all = torch.log_softmax(z, dim=-1)                                  # (c, V)
    logp = logp_all.gather(-1, labels[:, None]).squeeze(-1)                  # (c,)
    ent = -(logp_all.exp() * logp_all).sum(-1)                               # (c,)
    return logp_all, logp, ent


class _HeadLogprobs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, labels, temperature, chunk, with_entropy):
        # the matmuls' dtype: autocast's where it is on (bf16 on GPU), else the hidden states'
        kind = h.device.type
        cdt = torch.get_autocast_dtype(kind) if torch.is_autocast_enabled(kind) else h.dtype
        wc = w.to(cdt)
        n = h.shape[0]
        logp = torch.empty(n, dtype=torch.float32, device=h.device)          # (N,)
        ent = torch.zeros(n, dtype=torch.float32, device=h.device)           # (N,)
        for i in range(0, n, chunk):
            _, lp, en = _chunk_stats(h[i:i + chunk].to(cdt), wc, labels[i:i + chunk],
                                     temperature)
            logp[i:i + chunk] = lp
            if with_entropy:
                ent[i:i + chunk] = en
        ctx.save_for_backward(h, w, labels, ent)
        ctx.temperature, ctx.chunk, ctx.cdt = temperature, chunk, cdt
        return logp, ent

    @staticmethod
    def backward(ctx, g_logp, g_ent):
        h, w, labels, ent = ctx.saved_tensors
        t, chunk = ctx.temperature, ctx.chunk
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        gh = torch.empty_like(h) if need_h else None
        gw = torch.zeros(w.shape, dtype=torch.float32, device=w.device) if need_w else None
        cdt = ctx.cdt
        wc = w.to(cdt)
        for i in range(0, h.shape[0], chunk):
            hc = h[i:i + chunk].to(cdt)
            logp_all, _, _ = _chunk_stats(hc, wc, labels[i:i + chunk], t)
            p = logp_all.exp()                                               # (c, V)
            dz = -p * g_logp[i:i + chunk, None]                              # (c, V)
            dz.scatter_add_(-1, labels[i:i + chunk, None], g_logp[i:i + chunk, None])
            if g_ent is not None:
                dz -= p * (logp_all + ent[i:i + chunk, None]) * g_ent[i:i + chunk, None]
            dz = (dz / t).to(cdt)
            if need_h:
                gh[i:i + chunk] = (dz @ wc).to(h.dtype)                      # (c, H)
            if need_w:
                gw += (dz.t() @ hc).float()                                  # (V, H)
        return gh, (gw.to(w.dtype) if need_w else None), None, None, None, None


def head_logprobs(hidden: torch.Tensor, weight: torch.Tensor, labels: torch.Tensor, *,
                  temperature: float = 1.0, chunk: int = 2048, with_entropy: bool = True
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(log-probs (N,), entropies (N,)) of `labels` (N,) under softmax((hidden W^T) / T), for
    hidden (N, H) and the head's weight W (V, H); never more than `chunk` rows of logits at a
    time, in the forward or the backward. Entropies are 0 when with_entropy is False."""
    return _HeadLogprobs.apply(hidden, weight, labels, float(temperature), int(chunk),
                               bool(with_entropy))
