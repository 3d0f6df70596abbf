"""PPO's math as pure functions: turn-level GAE over action tokens, the clipped losses, KL, entropy.

Paper section 4.4: a learned critic; critic and advantages only on the tokens the policy generated
(response mask 1; user, tool and template tokens 0); GAE computed across agent turns, each turn's
advantage shared by its tokens. Formulas follow verl's `core_algos.py` (clipped policy loss,
clipped value loss, `low_var_kl`), written out beside the code.

Conventions (B = episodes, T = tokens of the whole episode, K = agent turns):
  values[b, t]     critic's V(s_t) for the state before token t (read only where mask is 1)
  logprobs[b, t]   log pi(token t | tokens < t)
  response_mask    (B, T) 1 on tokens the policy generated
  turn_ids         (B, T) index of the agent turn a token belongs to, -1 elsewhere
  turn_rewards     (B, K) reward of each agent turn (env reward + reward modules), 0 past the end
  turn_mask        (B, K) 1 for turns that happened
Nothing here reads config or globals; every function is tested against a plain loop.
"""
from __future__ import annotations

import torch


def masked_mean(x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Mean of x where mask is 1; 0 when the mask is empty. x, mask: same shape.
    `where`, not `x * mask`, so an inf/nan at a masked position cannot leak in (inf * 0 = nan)."""
    picked = torch.where(mask.bool(), x, torch.zeros_like(x))
    return picked.sum() / mask.to(x.dtype).sum().clamp(min=1.0)


def masked_whiten(x: torch.Tensor, mask: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """(x - mean) / std over the masked entries; masked-out entries come back as 0."""
    mask = mask.to(x.dtype)
    mean = masked_mean(x, mask)
    var = masked_mean((x - mean) ** 2, mask)
    n = mask.sum()
    if n > 1:                                   # unbiased variance, as verl's masked_var
        var = var * n / (n - 1)
    return torch.where(mask.bool(), (x - mean) * torch.rsqrt(var + eps), torch.zeros_like(x))


def turn_first_index(turn_ids: torch.Tensor, num_turns: int) -> torch.Tensor:
    """(B, K) position of each turn's first action token; -1 where the turn has no token.

    turn_ids: (B, T) long, -1 off the action tokens.
    """
    B, T = turn_ids.shape
    pos = torch.arange(T, device=turn_ids.device).expand(B, T)               # (B, T)
    big = torch.full((B, num_turns), T, dtype=torch.long, device=turn_ids.device)
    onehot = turn_ids.unsqueeze(-1) == torch.arange(num_turns, device=turn_ids.device)  # (B, T, K)
    first = torch.where(onehot, pos.unsqueeze(-1), T).amin(dim=1)             # (B, K)
    first = torch.minimum(first, big)
    return torch.where(first == T, torch.full_like(first, -1), first)


def turn_values(values: torch.Tensor, turn_ids: torch.Tensor, num_turns: int) -> torch.Tensor:
    """(B, K) the critic's value of each turn: V at the turn's first action token, i.e. the state
    the turn's action was taken in; 0 for turns without tokens. values: (B, T)."""
    first = turn_first_index(turn_ids, num_turns)                           # (B, K)
    got = values.gather(1, first.clamp(min=0))                              # (B, K)
    return torch.where(first >= 0, got, torch.zeros_like(got))


@torch.no_grad()
def turn_level_gae(turn_rewards: torch.Tensor, turn_vals: torch.Tensor, turn_mask: torch.Tensor,
                   gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE across agent turns. All (B, K); returns (advantages, returns), 0 where turn_mask is 0.

    delta_k = r_k + gamma * V_{k+1} - V_k   (V_{K_b} = 0 after an episode's last turn)
    A_k     = delta_k + gamma * lam * A_{k+1};   R_k = A_k + V_k
    """
    B, K = turn_rewards.shape
    mask = turn_mask.to(turn_rewards.dtype)
    adv = torch.zeros_like(turn_rewards)                                    # (B, K)
    next_value = torch.zeros(B, dtype=turn_rewards.dtype, device=turn_rewards.device)
    next_adv = torch.zeros_like(next_value)
    for k in reversed(range(K)):
        delta = turn_rewards[:, k] + gamma * next_value - turn_vals[:, k]
        a = delta + gamma * lam * next_adv
        a = a * mask[:, k]
        adv[:, k] = a
        # a missing turn passes nothing back: the next real turn sees V=0, A=0 beyond the end
        next_value = turn_vals[:, k] * mask[:, k]
        next_adv = a
    returns = (adv + turn_vals) * mask
    return adv, returns


def spread_to_tokens(per_turn: torch.Tensor, turn_ids: torch.Tensor,
                     response_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) each action token gets its turn's value; 0 off the action tokens. per_turn: (B, K)."""
    got = per_turn.gather(1, turn_ids.clamp(min=0))                          # (B, T)
    return got * response_mask.to(got.dtype)


@torch.no_grad()
def token_level_gae(token_rewards: torch.Tensor, values: torch.Tensor, response_mask: torch.Tensor,
                    gamma: float, lam: float) -> tuple[torch.Tensor, torch.Tensor]:
    """GAE across action tokens only: masked tokens (user, tool, template) are skipped, so the
    recursion links each action token to the next action token. All (B, T).

    token_rewards: each turn's reward placed on the turn's last action token.
    """
    B, T = values.shape
    mask = response_mask.to(values.dtype)
    adv = torch.zeros_like(values)
    next_value = torch.zeros(B, dtype=values.dtype, device=values.device)
    next_adv = torch.zeros_like(next_value)
    for t in reversed(range(T)):
        m = mask[:, t]
        delta = token_rewards[:, t] + gamma * next_value - values[:, t]
        a = delta + gamma * lam * next_adv
        adv[:, t] = a * m
        next_value = torch.where(m > 0, values[:, t], next_value)
        next_adv = torch.where(m > 0, a, next_adv)
    returns = (adv + values) * mask
    return adv, returns


def policy_loss(logprobs: torch.Tensor, old_logprobs: torch.Tensor, advantages: torch.Tensor,
                mask: torch.Tensor, clip_ratio: float, clip_ratio_c: float = 3.0) -> dict[str, torch.Tensor]:
    """Clipped surrogate (Schulman et al. 2017) with verl's guards. All (B, T).

    log_ratio = clamp(logp - old_logp, -20, 20);  ratio = exp(log_ratio)
    L1 = max(-A * ratio, -A * clip(ratio, 1 - eps, 1 + eps))
    L  = min(L1, -A * c) where A < 0 (dual clip, Ye et al. 2020), else L1;  mean over the mask
    Why: without the clamp a log-ratio of 100 overflows exp in float32 and, with A = -1, the
    max keeps the inf; without the dual clip a negative-advantage token whose ratio exploded
    contributes without bound (-A * ratio), so one stale token can dominate a mini-batch.
    """
    log_ratio = torch.clamp(logprobs - old_logprobs, -20.0, 20.0)
    ratio = torch.exp(log_ratio)
    loss1 = -advantages * ratio
    loss2 = -advantages * torch.clamp(ratio, 1.0 - clip_ratio, 1.0 + clip_ratio)
    clipped = torch.maximum(loss1, loss2)
    dual = torch.minimum(clipped, -advantages * clip_ratio_c)
    losses = torch.where(advantages < 0, dual, clipped)
    return {"pg_loss": masked_mean(losses, mask),
            "clipfrac": masked_mean((loss2 > loss1).to(logprobs.dtype), mask),
            "dual_clipfrac": masked_mean(((advantages < 0) & (dual < clipped)).to(logprobs.dtype), mask),
            "approx_kl": masked_mean(-log_ratio, mask)}


def value_loss(values: torch.Tensor, old_values: torch.Tensor, returns: torch.Tensor,
               mask: torch.Tensor, cliprange_value: float) -> dict[str, torch.Tensor]:
    """Clipped value loss, as verl. All (B, T).

    V_clip = V_old + clip(V - V_old, -c, c)
    L = 0.5 * mean_mask( max((V - R)^2, (V_clip - R)^2) )
    """
    clipped = old_values + torch.clamp(values - old_values, -cliprange_value, cliprange_value)
    l1 = (values - returns) ** 2
    l2 = (clipped - returns) ** 2
    return {"value_loss": 0.5 * masked_mean(torch.maximum(l1, l2), mask),
            "vf_clipfrac": masked_mean((l2 > l1).to(values.dtype), mask)}


def low_var_kl(logprobs: torch.Tensor, ref_logprobs: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(pi || ref), per token, clamped to [-10, 10] as verl:
    kl = ref - logp;  k3 = exp(kl) - kl - 1 (>= 0). Shapes (B, T)."""
    kl = torch.clamp(ref_logprobs - logprobs, -20.0, 20.0)
    return torch.clamp(torch.exp(kl) - kl - 1.0, -10.0, 10.0)


def entropy_from_logits(logits: torch.Tensor) -> torch.Tensor:
    """(B, T) entropy of the categorical given logits (B, T, V): logsumexp(z) - sum softmax(z) z."""
    logits = logits.float()
    pd = torch.softmax(logits, dim=-1)
    return torch.logsumexp(logits, dim=-1) - (pd * logits).sum(dim=-1)


def logprobs_from_logits(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """(B, T) log-probability of labels (B, T) under logits (B, T, V)."""
    logits = logits.float()
    return torch.gather(logits, -1, labels.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, -1)


def explained_variance(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor) -> float:
    """1 - Var[R - V] / Var[R] over masked entries (1 = perfect critic, 0 = constant guess)."""
    var_r = masked_mean((returns - masked_mean(returns, mask)) ** 2, mask)
    diff = returns - values
    var_d = masked_mean((diff - masked_mean(diff, mask)) ** 2, mask)
    if var_r <= 1e-12:
        return float("nan")
    return float(1.0 - var_d / var_r)


def compute_advantages(values: torch.Tensor, response_mask: torch.Tensor, turn_ids: torch.Tensor,
                       turn_rewards: torch.Tensor, turn_mask: torch.Tensor, *, gamma: float,
                       lam: float, estimator: str = "turn_gae",
                       whiten: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """(advantages, returns), both (B, T) and 0 off the action tokens.

    turn_gae: the paper's estimator; returns of a turn are the value targets of all its tokens.
    token_gae: each turn's reward on its last action token, GAE over action tokens.
    """
    K = turn_rewards.shape[1]
    if estimator == "turn_gae":
        tv = turn_values(values, turn_ids, K)                                # (B, K)
        adv_k, ret_k = turn_level_gae(turn_rewards, tv, turn_mask, gamma, lam)
        adv = spread_to_tokens(adv_k, turn_ids, response_mask)
        ret = spread_to_tokens(ret_k, turn_ids, response_mask)
    elif estimator == "token_gae":
        token_rewards = rewards_on_last_tokens(turn_rewards, turn_ids, response_mask)
        adv, ret = token_level_gae(token_rewards, values, response_mask, gamma, lam)
    else:
        raise ValueError(f"unknown advantage estimator {estimator!r}: use turn_gae or token_gae.")
    if whiten:
        adv = masked_whiten(adv, response_mask)
    return adv, ret


def rewards_on_last_tokens(turn_rewards: torch.Tensor, turn_ids: torch.Tensor,
                           response_mask: torch.Tensor) -> torch.Tensor:
    """(B, T) each turn's reward (B, K) on the last action token of that turn, 0 elsewhere."""
    B, T = turn_ids.shape
    nxt = torch.cat([turn_ids[:, 1:], torch.full((B, 1), -1, dtype=turn_ids.dtype,
                                                 device=turn_ids.device)], dim=1)
    last = (turn_ids >= 0) & (nxt != turn_ids) & (response_mask > 0)         # (B, T)
    got = turn_rewards.gather(1, turn_ids.clamp(min=0))
    return torch.where(last, got, torch.zeros_like(got))
