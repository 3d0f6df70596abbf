"""GRPO's math as pure functions: UserRL's turn credits, the group baseline, InfoPO's fusion.

`algorithm.name` grpo and infopo train without a critic: the baseline of an episode is the other
episodes of its task (the `rollout.n` samples of one prompt, "a group"), as in GRPO (Shao et al.
2024, arXiv 2402.03300). Within an episode, UserRL (Qian et al. 2025, arXiv 2509.19736; its
`verl/trainer/ppo/core_algos.py`, `compute_turn_credits` and `compute_grpo_multiturn_advantage`)
shares the group-normalised episode advantage among the agent's turns by a per-turn credit.
InfoPO (Kong et al. 2026, arXiv 2603.00656; github.com/kfq20/InfoPO, `compute_info_grpo_advantage`)
adds an information-gain advantage per turn (training/infogain.py measures the gain), gated by
how little the group's outcomes differ.

Conventions (G = episodes of the step over all processes, K = agent turns):
  rewards[g, k]   final reward of turn k (env reward + reward modules), 0 past the end
  mask[g, k]      1 for turns that happened (a prefix of each row)
  tokens[g, k]    action tokens of turn k (0 for a turn whose generation was cut to nothing)
  groups[g]       the task (prompt) episode g was sampled for; rollout.n episodes share one
Everything is per turn: every action token of turn k gets the turn's value (`ppo.spread_to_tokens`),
so token-level statistics are turn values weighted by `tokens`. Nothing here reads config or
globals; tests/training/test_grpo.py checks each function against a plain per-token loop.
"""
from __future__ import annotations

import math

import torch

EPS = 1e-6          # verl's and UserRL's epsilon in (s - mean) / (std + eps)


def turn_credits(rewards: torch.Tensor, mask: torch.Tensor, method: str,
                 gamma: float) -> torch.Tensor:
    """(G, K) UserRL's credit of each turn, 0 past the end.

    equalized: c_k = 1
    r2g:       c_k = r_k + gamma * c_{k+1}   (reward to go)
    em:        c_k = 0.5 + 0.5 (1 - exp(-2 r_k)) / (1 - exp(-2))   (exponential map of [0, 1]
               onto [0.5, 1]); r_k is clamped to [0, 1] first: the map is UserRL's for rewards in
               [0, 1], and our turn rewards may reach turn_reward_clip's [-1, 2], where r = -1
               would give a credit of -3.2
    """
    m = mask.to(rewards.dtype)
    if method == "equalized":
        return m.clone()
    if method == "em":
        r = rewards.clamp(0.0, 1.0)
        return (0.5 + 0.5 * (1.0 - torch.exp(-2.0 * r)) / (1.0 - math.exp(-2.0))) * m
    if method == "r2g":
        out = torch.zeros_like(rewards)
        nxt = torch.zeros_like(rewards[:, 0])
        for k in reversed(range(rewards.shape[1])):
            nxt = (rewards[:, k] + gamma * nxt) * m[:, k]
            out[:, k] = nxt
        return out
    raise ValueError(f"unknown turn credit {method!r}: use equalized, r2g or em.")


def trajectory_scores(rewards: torch.Tensor, mask: torch.Tensor, method: str,
                      gamma: float) -> torch.Tensor:
    """(G,) the score an episode is ranked by within its group.

    sum:  sum_k r_k             (UserRL's and InfoPO's "Sum"; InfoPO ships it, with equalized
                                 credits, in every training script)
    mean: sum_k r_k / (turns)   (a line UserRL's code carries commented out: it ranks a short
                                 episode above a longer one that earned more)
    r2g:  sum_k gamma^k r_k     (the discounted return from the first turn, "R2G")
    """
    m = mask.to(rewards.dtype)
    if method == "sum":
        return (rewards * m).sum(1)
    if method == "mean":
        return (rewards * m).sum(1) / m.sum(1).clamp(min=1.0)
    if method == "r2g":
        powers = gamma ** torch.arange(rewards.shape[1], dtype=rewards.dtype)       # (K,)
        return (rewards * m * powers).sum(1)
    raise ValueError(f"unknown trajectory score {method!r}: use sum, mean or r2g.")


def group_normalize(scores: torch.Tensor, groups: torch.Tensor, *, by_std: bool = True
                    ) -> tuple[torch.Tensor, torch.Tensor]:
    """((G,) advantage, (G,) the std of each episode's group) with the group baseline:

    A_g = (s_g - mean_group(s)) / (std_group(s) + eps)   (std unbiased, as torch.std and verl)
    by_std False: A_g = s_g - mean_group(s) (Dr. GRPO's variant, no division).
    A group of equal scores gives A = 0: no signal from that task this step.
    """
    adv = torch.zeros_like(scores)
    std = torch.zeros_like(scores)
    for gid in torch.unique(groups):
        rows = groups == gid
        if int(rows.sum()) < 2:
            raise ValueError("every group needs at least two episodes (rollout.n >= 2).")
        s = scores[rows]
        centred = s - s.mean()
        adv[rows] = centred / (s.std() + EPS) if by_std else centred
        std[rows] = s.std()
    return adv, std


def spread_credits(credits: torch.Tensor, tokens: torch.Tensor,
                   episode_adv: torch.Tensor) -> torch.Tensor:
    """(G, K) per-token advantage of each turn: the episode's advantage shared by credit.

    A_{g,k} = c_k * A_g * N_g / sum_j c_j n_j,   N_g = sum_j n_j [c_j != 0]
    so the token-mean of the turn advantages over the episode's credited tokens is A_g (UserRL's
    scaling); an episode whose credits sum to 0 over its tokens gets 0.
    """
    n = tokens.to(credits.dtype)
    total = (credits * n).sum(1)                                                  # (G,)
    nonzero = (n * (credits != 0).to(n.dtype)).sum(1)                             # (G,)
    ok = total != 0
    scale = torch.where(ok, episode_adv * nonzero / torch.where(ok, total, torch.ones_like(total)),
                        torch.zeros_like(total))
    return credits * scale.unsqueeze(1)


def grpo_advantages(rewards: torch.Tensor, mask: torch.Tensor, tokens: torch.Tensor,
                    groups: torch.Tensor, *, credit: str, score: str, gamma: float,
                    by_std: bool = True) -> tuple[torch.Tensor, torch.Tensor]:
    """((G, K) turn advantages, (G,) group std): UserRL's multi-turn GRPO."""
    scores = trajectory_scores(rewards, mask, score, gamma)
    episode_adv, group_std = group_normalize(scores, groups, by_std=by_std)
    credits = turn_credits(rewards, mask, credit, gamma)
    return spread_credits(credits, tokens, episode_adv), group_std


def weighted_std(values: torch.Tensor, weights: torch.Tensor) -> float:
    """Unbiased std of `values` repeated `weights` times (the token-level std of turn values);
    0 for fewer than two tokens."""
    w = weights.to(torch.float64)
    n = float(w.sum())
    if n < 2:
        return 0.0
    v = values.to(torch.float64)
    mean = float((w * v).sum()) / n
    return math.sqrt(float((w * (v - mean) ** 2).sum()) / (n - 1))


def info_advantages(gain: torch.Tensor, has_gain: torch.Tensor, tokens: torch.Tensor,
                    groups: torch.Tensor) -> torch.Tensor:
    """(G, K) InfoPO's normalised information advantage per token of each turn.

    InfoPO spreads a turn's gain I_k over its n_k tokens (u_k = I_k / n_k per token) and
    normalises the tokens of a group together: (u_k - mean) / (std + eps), with mean and
    unbiased std over the group's gain-carrying tokens (one token alone: mean = u, std = 1, so
    0). Turns without a gain (`has_gain` 0: an episode's last turn, one whose observation was
    empty) stay 0. InfoPO selects the carrying tokens by `reward != 0`; `has_gain` is the same
    set except for a gain of exactly 0.0, which it drops and we keep.
    """
    n = tokens.to(gain.dtype)
    carry = (has_gain > 0) & (n > 0)                                              # (G, K)
    per_token = torch.where(carry, gain / n.clamp(min=1.0), torch.zeros_like(gain))
    out = torch.zeros_like(gain)
    for gid in torch.unique(groups):
        rows = (groups == gid).unsqueeze(1) & carry                               # (G, K)
        w = torch.where(rows, n, torch.zeros_like(n))
        count = float(w.sum())
        if count == 0:
            continue
        mean = float((w * per_token).sum()) / count
        std = weighted_std(per_token, w) if count >= 2 else 1.0
        out = torch.where(rows, (per_token - mean) / (std + EPS), out)
    return out


def fuse(outcome: torch.Tensor, info: torch.Tensor, tokens: torch.Tensor,
         group_std: torch.Tensor, *, weight: float, temperature: float
         ) -> tuple[torch.Tensor, dict[str, float]]:
    """((G, K) InfoPO's advantage, its statistics): outcome plus the gated information term.

    ratio = min(1, max(std_tok(outcome), 1) / std_tok(info))   only ever scales info DOWN
    gate_g = sigmoid(-std_group(s) / T)                          1/2 for a tied group, -> 0 as
                                                                 the group's outcomes spread
    A = A_outcome + weight * gate_g * ratio * A_info
    std_tok: over every action token of the step (+ eps), as InfoPO's `adv[mask].std()`.
    """
    out_std = weighted_std(outcome, tokens) + EPS
    info_std = weighted_std(info, tokens) + EPS
    ratio = min(1.0, max(out_std, 1.0) / info_std)
    gate = torch.sigmoid(-group_std / temperature)                                # (G,)
    fused = outcome + weight * gate.unsqueeze(1) * ratio * info
    return fused, {"infopo/gate_mean": float(gate.mean()), "infopo/magnitude_ratio": ratio}
