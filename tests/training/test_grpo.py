"""GRPO, UserRL's turn credits and InfoPO's fusion (training/grpo.py) against plain per-token
loops written the way UserRL's `compute_grpo_multiturn_advantage` and InfoPO's
`compute_info_grpo_advantage` are: a Python list of token advantages per episode, statistics of
Python floats. Random episodes include a turn without tokens, a tied group and negative rewards."""
from __future__ import annotations

import math
import random
import statistics

import pytest
import torch

from training import grpo, ppo

EPS = 1e-6


def episodes(seed: int, groups: int = 3, n: int = 3):
    """Per episode: (group, [(reward, tokens) per turn]); group 0 is tied (equal scores), group
    1's episodes end in a turn worth 0."""
    rng = random.Random(seed)
    out = []
    for g in range(groups):
        for _ in range(n):
            turns = [(round(rng.uniform(-1, 2), 3), rng.choice([0, 1, 3, 5]))
                     for _ in range(rng.randint(1, 4))]
            if g == 0:
                turns = [(0.5, 2), (0.0, 3)]
            if g == 1:        # a last turn worth 0: its r2g credit is 0, outside UserRL's count
                turns.append((0.0, 2))
            out.append((g, turns))
    return out


def tables(eps):
    G, K = len(eps), max(len(t) for _, t in eps)
    rewards, mask, tokens = torch.zeros(G, K, dtype=torch.float64), torch.zeros(G, K), \
        torch.zeros(G, K, dtype=torch.long)
    for g, (_, turns) in enumerate(eps):
        for k, (r, n) in enumerate(turns):
            rewards[g, k], mask[g, k], tokens[g, k] = r, 1.0, n
    return rewards, mask, tokens, torch.tensor([grp for grp, _ in eps])


def loop_credits(rs, method, gamma):
    if method == "equalized":
        return [1.0 for _ in rs]
    if method == "em":
        return [0.5 + 0.5 * (1 - math.exp(-2 * min(max(r, 0), 1))) / (1 - math.exp(-2)) for r in rs]
    out = [0.0] * len(rs)
    for k in reversed(range(len(rs))):
        out[k] = rs[k] + (gamma * out[k + 1] if k + 1 < len(rs) else 0.0)
    return out


def loop_score(rs, method, gamma):
    if method == "sum":                 # InfoPO's compute_turn_credits: round(sum(rewards), 4)
        return sum(rs)
    if method == "mean":
        return sum(rs) / len(rs)
    score = 0.0
    for r in reversed(rs):
        score = r + gamma * score
    return score


def loop_grpo(eps, credit, score, gamma, by_std=True):
    """Token lists of UserRL's multi-turn GRPO advantage, and each episode's group std."""
    toks, scores = [], []
    for _, turns in eps:
        rs = [r for r, _ in turns]
        cs = loop_credits(rs, credit, gamma)
        toks.append([c for c, (_, n) in zip(cs, turns) for _ in range(n)])
        scores.append(loop_score(rs, score, gamma))
    by_group: dict[int, list[float]] = {}
    for (grp, _), s in zip(eps, scores):
        by_group.setdefault(grp, []).append(s)
    out, stds = [], []
    for (grp, _), adv, s in zip(eps, toks, scores):
        mean, std = statistics.fmean(by_group[grp]), statistics.stdev(by_group[grp])
        factor = (s - mean) / (std + EPS) if by_std else s - mean
        total = sum(adv)
        nonzero = sum(1 for a in adv if a != 0)
        out.append([a * factor * nonzero / total if total != 0 else 0.0 for a in adv])
        stds.append(std)
    return out, stds


def to_tokens(per_turn: torch.Tensor, eps) -> list[list[float]]:
    return [[float(per_turn[g, k]) for k, (_, n) in enumerate(turns) for _ in range(n)]
            for g, (_, turns) in enumerate(eps)]


@pytest.mark.parametrize("credit", ["equalized", "r2g", "em"])
@pytest.mark.parametrize("score", ["sum", "mean", "r2g"])
@pytest.mark.parametrize("seed", [0, 1])
def test_grpo_turn_advantages_match_userrl_token_loop(credit, score, seed):
    eps = episodes(seed)
    rewards, mask, tokens, groups = tables(eps)
    adv, std = grpo.grpo_advantages(rewards, mask, tokens, groups, credit=credit, score=score,
                                    gamma=0.8)
    want, want_std = loop_grpo(eps, credit, score, 0.8)
    for got_row, want_row in zip(to_tokens(adv, eps), want):
        assert got_row == pytest.approx(want_row, abs=1e-9)
    assert std.tolist() == pytest.approx(want_std, abs=1e-12)
    assert torch.all(adv[groups == 0] == 0)                   # a tied group: no signal


def test_group_baseline_without_std_and_the_token_mean_of_each_episode():
    eps = episodes(3)
    rewards, mask, tokens, groups = tables(eps)
    adv, _ = grpo.grpo_advantages(rewards, mask, tokens, groups, credit="em", score="mean",
                                  gamma=1.0, by_std=False)
    want, _ = loop_grpo(eps, "em", "mean", 1.0, by_std=False)
    for got_row, want_row in zip(to_tokens(adv, eps), want):
        assert got_row == pytest.approx(want_row, abs=1e-9)
    # UserRL's scaling: the token mean of an episode's credited advantages is its group advantage
    scores = grpo.trajectory_scores(rewards, mask, "mean", 1.0)
    ep_adv, _ = grpo.group_normalize(scores, groups, by_std=False)
    for g, row in enumerate(to_tokens(adv, eps)):
        if row and any(row):
            assert statistics.fmean(row) == pytest.approx(float(ep_adv[g]), abs=1e-9)


def test_by_default_episodes_are_ranked_by_the_sum_of_their_rewards_as_infopo_ships():
    """InfoPO's training scripts set trajectory_score_method="Sum", the plain sum: two turns
    worth 0.8 each outrank one turn worth 1.0 (the mean ranks them the other way round)."""
    from training.config import AlgorithmConfig

    a = AlgorithmConfig()
    rewards = torch.tensor([[1.0, 0.0], [0.8, 0.8]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 0.0], [1.0, 1.0]])
    tokens = torch.tensor([[3, 0], [3, 3]])
    adv, _ = grpo.grpo_advantages(rewards, mask, tokens, torch.tensor([0, 0]),
                                  credit=a.turn_credit, score=a.trajectory_score, gamma=a.gamma)
    assert adv[1, 0] > 0 > adv[0, 0]


def test_a_group_of_one_is_refused():
    with pytest.raises(ValueError, match="at least two episodes"):
        grpo.group_normalize(torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0, 0, 1]))


def loop_infopo(eps, gains, weight, temperature, credit="equalized", score="mean", gamma=0.8):
    """InfoPO's compute_info_grpo_advantage on token lists: outcome + beta * gate * ratio * info."""
    outcome, stds = loop_grpo(eps, credit, score, gamma)
    intrinsic = []                       # a turn's gain spread over its tokens, 0 elsewhere
    for g, (_, turns) in enumerate(eps):
        row: list[float] = []
        for k, (_, n) in enumerate(turns):
            row += [gains[g][k] / n if gains[g][k] is not None and n else 0.0] * n
        intrinsic.append(row)
    values: dict[int, list[float]] = {}
    for (grp, _), row in zip(eps, intrinsic):
        values.setdefault(grp, []).extend(v for v in row if v != 0)
    info = []
    for (grp, _), row in zip(eps, intrinsic):
        vals = values[grp]
        if not vals:
            info.append([0.0] * len(row))
            continue
        mean = statistics.fmean(vals)
        std = statistics.stdev(vals) if len(vals) > 1 else 1.0
        info.append([(v - mean) / (std + EPS) if v != 0 else 0.0 for v in row])
    flat_out = [a for row in outcome for a in row]
    flat_info = [a for row in info for a in row]
    ratio = min(1.0, max(statistics.stdev(flat_out) + EPS, 1.0) / (statistics.stdev(flat_info) + EPS))
    return [[o + weight * (1 / (1 + math.exp(std / temperature))) * ratio * i
             for o, i in zip(orow, irow)] for orow, irow, std in zip(outcome, info, stds)]


@pytest.mark.parametrize("seed", [0, 4])
@pytest.mark.parametrize("weight,temperature", [(0.5, 0.5), (2.0, 0.05)])
def test_infopo_fusion_matches_its_token_loop(seed, weight, temperature):
    eps = episodes(seed)
    rng = random.Random(seed + 100)
    # a gain for every turn but the last of each episode (the reply that ended it has no next
    # turn), never exactly 0 (InfoPO selects gain-carrying tokens by reward != 0)
    gains = [[(rng.uniform(0.05, 3.0) * rng.choice([-1, 1]) if k + 1 < len(turns) else None)
              for k in range(len(turns))] for _, turns in eps]
    rewards, mask, tokens, groups = tables(eps)
    gain = torch.zeros_like(rewards)
    has = torch.zeros_like(rewards)
    for g, row in enumerate(gains):
        for k, v in enumerate(row):
            if v is not None:
                gain[g, k], has[g, k] = v, 1.0
    outcome, group_std = grpo.grpo_advantages(rewards, mask, tokens, groups, credit="equalized",
                                              score="mean", gamma=0.8)
    info = grpo.info_advantages(gain, has, tokens, groups)
    fused, stats = grpo.fuse(outcome, info, tokens, group_std, weight=weight,
                             temperature=temperature)
    want = loop_infopo(eps, gains, weight, temperature)
    for got_row, want_row in zip(to_tokens(fused, eps), want):
        assert got_row == pytest.approx(want_row, abs=1e-9)
    # the tied group has no outcome signal: there the gate is at its widest, 1/2
    assert stats["infopo/gate_mean"] > 0 and 0 < stats["infopo/magnitude_ratio"] <= 1
    tied = fused[groups == 0]
    assert torch.any(tied != 0)                                # information still teaches


def test_info_advantage_of_a_lone_gain_token_is_zero():
    gain = torch.tensor([[2.0, 0.0], [0.0, 0.0]])
    has = torch.tensor([[1.0, 0.0], [0.0, 0.0]])
    tokens = torch.tensor([[1, 4], [2, 2]])
    out = grpo.info_advantages(gain, has, tokens, torch.tensor([0, 0]))
    assert torch.equal(out, torch.zeros_like(out))             # mean = itself, std = 1


def test_turn_tokens_and_spread_agree_with_token_positions():
    from training.update import turn_tokens

    turn_ids = torch.tensor([[-1, 0, 0, -1, 1, -1, 2, 2, 2], [-1, -1, 0, -1, -1, -1, 1, -1, -1]])
    resp = (turn_ids >= 0).long()
    assert turn_tokens(turn_ids, resp, 3).tolist() == [[2, 1, 3], [1, 1, 0]]
    per_turn = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 0.0]])
    spread = ppo.spread_to_tokens(per_turn, turn_ids, resp)
    assert spread[0].tolist() == [0, 1, 1, 0, 2, 0, 3, 3, 3]
    assert spread[1].tolist() == [0, 0, 4, 0, 0, 0, 5, 0, 0]
