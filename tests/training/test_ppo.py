"""PPO math against plain loops and hand-computed values (training.ppo)."""
from __future__ import annotations

import math
import random

import pytest
import torch

from training import ppo


def random_episode_batch(seed: int, B: int = 3, T: int = 40, K: int = 4):
    """Random multi-turn layout: prompt, then turns of action tokens separated by observations."""
    rng = random.Random(seed)
    mask = torch.zeros(B, T, dtype=torch.long)
    tids = torch.full((B, T), -1, dtype=torch.long)
    rewards = torch.zeros(B, K)
    tmask = torch.zeros(B, K)
    for b in range(B):
        pos = rng.randint(2, 5)
        n_turns = rng.randint(1, K)
        for k in range(n_turns):
            length = rng.randint(1, 4)
            if pos + length >= T:
                break
            mask[b, pos:pos + length] = 1
            tids[b, pos:pos + length] = k
            rewards[b, k] = rng.uniform(-1, 1)
            tmask[b, k] = 1
            pos += length + rng.randint(1, 4)
    values = torch.randn(B, T, generator=torch.Generator().manual_seed(seed))
    return values, mask, tids, rewards, tmask


def loop_turn_gae(values, mask, tids, rewards, tmask, gamma, lam):
    """Plain-Python turn-level GAE: V of a turn = value at its first action token."""
    B, T = values.shape
    adv = torch.zeros(B, T)
    ret = torch.zeros(B, T)
    for b in range(B):
        turns = [k for k in range(rewards.shape[1]) if tmask[b, k] > 0]
        v = []
        for k in turns:
            first = min(t for t in range(T) if tids[b, t] == k)
            v.append(float(values[b, first]))
        a_next, out = 0.0, {}
        for i in reversed(range(len(turns))):
            v_next = v[i + 1] if i + 1 < len(turns) else 0.0
            delta = float(rewards[b, turns[i]]) + gamma * v_next - v[i]
            a_next = delta + gamma * lam * a_next
            out[turns[i]] = (a_next, a_next + v[i])
        for t in range(T):
            if mask[b, t]:
                adv[b, t], ret[b, t] = out[int(tids[b, t])]
    return adv, ret


def loop_token_gae(token_rewards, values, mask, gamma, lam):
    B, T = values.shape
    adv = torch.zeros(B, T)
    for b in range(B):
        idx = [t for t in range(T) if mask[b, t]]
        a_next = 0.0
        for i in reversed(range(len(idx))):
            t = idx[i]
            v_next = float(values[b, idx[i + 1]]) if i + 1 < len(idx) else 0.0
            delta = float(token_rewards[b, t]) + gamma * v_next - float(values[b, t])
            a_next = delta + gamma * lam * a_next
            adv[b, t] = a_next
    return adv, (adv + values) * mask


@pytest.mark.parametrize("seed", range(8))
@pytest.mark.parametrize("gamma,lam", [(1.0, 1.0), (0.9, 0.95), (0.99, 0.0)])
def test_turn_gae_matches_loop(seed, gamma, lam):
    values, mask, tids, rewards, tmask = random_episode_batch(seed)
    adv, ret = ppo.compute_advantages(values, mask, tids, rewards, tmask, gamma=gamma, lam=lam,
                                      whiten=False)
    ref_adv, ref_ret = loop_turn_gae(values, mask, tids, rewards, tmask, gamma, lam)
    torch.testing.assert_close(adv, ref_adv, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ret, ref_ret, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("seed", range(6))
def test_token_gae_matches_loop(seed):
    values, mask, tids, rewards, tmask = random_episode_batch(seed)
    token_r = ppo.rewards_on_last_tokens(rewards, tids, mask)
    # each turn's reward lands once, on its last action token
    assert torch.allclose(token_r.sum(1), (rewards * tmask).sum(1))
    adv, ret = ppo.compute_advantages(values, mask, tids, rewards, tmask, gamma=0.95, lam=0.9,
                                      estimator="token_gae", whiten=False)
    ref_adv, ref_ret = loop_token_gae(token_r, values, mask, 0.95, 0.9)
    torch.testing.assert_close(adv, ref_adv, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(ret, ref_ret, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("estimator", ["turn_gae", "token_gae"])
def test_masked_positions_do_not_matter(estimator):
    """Random values at user/tool/template positions leave advantages and losses unchanged."""
    values, mask, tids, rewards, tmask = random_episode_batch(3)
    noisy = torch.where(mask.bool(), values, torch.randn_like(values) * 100)
    a1, r1 = ppo.compute_advantages(values, mask, tids, rewards, tmask, gamma=0.9, lam=0.8,
                                    estimator=estimator)
    a2, r2 = ppo.compute_advantages(noisy, mask, tids, rewards, tmask, gamma=0.9, lam=0.8,
                                    estimator=estimator)
    torch.testing.assert_close(a1, a2)
    torch.testing.assert_close(r1, r2)
    logp = torch.randn_like(values) * 0.1 - 2
    old = logp + torch.randn_like(values) * 0.1
    garbage = torch.randn_like(values) * 50
    l1 = ppo.policy_loss(logp, old, a1, mask, 0.2)["pg_loss"]
    l2 = ppo.policy_loss(torch.where(mask.bool(), logp, garbage), old, a1, mask, 0.2)["pg_loss"]
    torch.testing.assert_close(l1, l2)
    v1 = ppo.value_loss(values, values * 0.9, r1, mask, 0.5)["value_loss"]
    v2 = ppo.value_loss(noisy, torch.where(mask.bool(), values * 0.9, garbage), r1, mask, 0.5)
    torch.testing.assert_close(v1, v2["value_loss"])


def test_turn_advantage_shared_by_tokens_of_a_turn():
    values, mask, tids, rewards, tmask = random_episode_batch(5)
    adv, _ = ppo.compute_advantages(values, mask, tids, rewards, tmask, gamma=1.0, lam=1.0,
                                    whiten=False)
    for b in range(mask.shape[0]):
        for k in range(rewards.shape[1]):
            sel = adv[b][tids[b] == k]
            if len(sel):
                assert torch.allclose(sel, sel[0].expand_as(sel))


def test_clipped_policy_loss_hand_computed():
    # ratio = exp(logp - old): 1.5 (A=+1, clipped to 1.2), 0.5 (A=+1, unclipped), 0.5 (A=-1, clip)
    old = torch.zeros(1, 4)
    logp = torch.log(torch.tensor([[1.5, 0.5, 0.5, 9.0]]))
    adv = torch.tensor([[1.0, 1.0, -1.0, 5.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    out = ppo.policy_loss(logp, old, adv, mask, clip_ratio=0.2)
    # per token: max(-A r, -A clip(r)) = max(-1.5, -1.2) = -1.2; max(-0.5, -0.8) = -0.5;
    #            max(0.5, 0.8) = 0.8  -> mean = (-1.2 - 0.5 + 0.8) / 3 = -0.3
    assert out["pg_loss"].item() == pytest.approx(-0.3, abs=1e-6)
    assert out["clipfrac"].item() == pytest.approx(2 / 3, abs=1e-6)   # tokens 1 and 3
    assert out["approx_kl"].item() == pytest.approx(-(math.log(1.5) + 2 * math.log(0.5)) / 3)


def test_clipped_value_loss_hand_computed():
    old = torch.tensor([[0.0, 0.0, 1.0]])
    new = torch.tensor([[1.0, 0.2, 1.0]])
    ret = torch.tensor([[2.0, 1.0, 0.0]])
    mask = torch.ones(1, 3)
    out = ppo.value_loss(new, old, ret, mask, cliprange_value=0.5)
    # token 0: clipped 0.5 -> max((1-2)^2, (0.5-2)^2) = 2.25; token 1: max(0.64, 0.64) = 0.64;
    # token 2: max(1, 1) = 1 -> 0.5 * mean = 0.5 * 3.89 / 3
    assert out["value_loss"].item() == pytest.approx(0.5 * (2.25 + 0.64 + 1.0) / 3, abs=1e-6)
    assert out["vf_clipfrac"].item() == pytest.approx(1 / 3, abs=1e-6)


def test_low_var_kl_and_entropy():
    logp = torch.tensor([[math.log(0.5), math.log(0.25)]])
    ref = torch.tensor([[math.log(0.25), math.log(0.25)]])
    kl = ppo.low_var_kl(logp, ref)
    # k3 = r - log r - 1 with r = ref/p: 0.5 - log 0.5 - 1; zero where equal
    assert kl[0, 0].item() == pytest.approx(0.5 - math.log(0.5) - 1)
    assert kl[0, 1].item() == pytest.approx(0.0, abs=1e-7)
    uniform = torch.zeros(1, 1, 8)
    assert ppo.entropy_from_logits(uniform).item() == pytest.approx(math.log(8), abs=1e-6)


def test_whitening_ignores_masked_entries():
    x = torch.tensor([[1.0, 2.0, 3.0, 100.0]])
    mask = torch.tensor([[1, 1, 1, 0]])
    w = ppo.masked_whiten(x, mask)
    assert w[0, 3] == 0
    assert ppo.masked_mean(w, mask).item() == pytest.approx(0.0, abs=1e-6)
    assert w[0, 0].item() == pytest.approx(-1.0, abs=1e-4)     # unbiased std of (1,2,3) is 1


def test_policy_loss_stays_finite_for_an_exploded_ratio_and_dual_clips():
    """A log-ratio of 100 with A = -1 overflowed exp in float32 and the max kept inf. Now the
    log-ratio is clamped to 20 and the dual clip bounds a negative-advantage token at -A * c:
    per token, A=-1, r=e^20: min(max(e^20, 1.2), 3) = 3; A=+1, r=e^20: max(-e^20, -1.2) = -1.2;
    A=-2, r=1: min(max(2, 2), 6) = 2 (untouched) -> mean (3 - 1.2 + 2) / 3."""
    old = torch.zeros(1, 3)
    logp = torch.tensor([[100.0, 100.0, 0.0]])
    adv = torch.tensor([[-1.0, 1.0, -2.0]])
    mask = torch.ones(1, 3)
    out = ppo.policy_loss(logp, old, adv, mask, clip_ratio=0.2, clip_ratio_c=3.0)
    assert math.isfinite(out["pg_loss"].item())
    assert out["pg_loss"].item() == pytest.approx((3.0 - 1.2 + 2.0) / 3, rel=1e-6)
    assert out["dual_clipfrac"].item() == pytest.approx(1 / 3)
    assert out["approx_kl"].item() == pytest.approx(-40 / 3)           # clamped log-ratios
    # gradients are finite too (the clamp stops them at the bound, as verl's)
    logp = logp.clone().requires_grad_(True)
    ppo.policy_loss(logp, old, adv, mask, 0.2, 3.0)["pg_loss"].backward()
    assert torch.isfinite(logp.grad).all()


def test_dual_clip_bound_is_validated():
    from training.config import Config, ConfigError

    with pytest.raises(ConfigError, match="actor.clip_ratio_c must be above 1"):
        Config.from_dict({"bench": "colbench", "actor": {"clip_ratio_c": 1.0}}).validate()
