"""From finished episodes to one PPO update: collate, score (old/ref log-probs, values,
advantages), then actor and critic epochs over mini-batches with gradient accumulation.

Paper section 4.4 and appendix C; the math is training.ppo's. Batches are right padded (so the
model's position ids start at 0 for every episode, as in generation with left padding) and each
micro-batch is cut to its own longest episode. Loss scaling: every micro-batch's token-mean loss
is multiplied by its share of the mini-batch's action tokens, so the accumulated gradient is the
token-mean over the whole mini-batch whatever the micro-batch size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from training import ppo
from training.config import Config
from training.policy import Models, action_logprobs


@dataclass
class Batch:
    input_ids: torch.Tensor        # (B, T) right padded
    attention_mask: torch.Tensor   # (B, T)
    response_mask: torch.Tensor    # (B, T) 1 on policy-generated tokens
    turn_ids: torch.Tensor         # (B, T) agent turn of each action token, -1 elsewhere
    turn_rewards: torch.Tensor     # (B, K)
    turn_mask: torch.Tensor        # (B, K)
    lengths: torch.Tensor          # (B,)
    old_logprobs: torch.Tensor | None = None   # (B, T)
    ref_logprobs: torch.Tensor | None = None   # (B, T)
    old_values: torch.Tensor | None = None     # (B, T)
    advantages: torch.Tensor | None = None     # (B, T)
    returns: torch.Tensor | None = None        # (B, T)

    @property
    def num_tokens(self) -> int:
        return int(self.response_mask.sum())

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]


def collate(episodes, turn_rewards: list[list[float]], pad_id: int) -> Batch:
    """Tensors of a step's episodes; turn_rewards[b][k] is the final reward of turn k."""
    B = len(episodes)
    T = max(len(ep.tokens) for ep in episodes)
    K = max(max((len(r) for r in turn_rewards), default=1), 1)
    ids = torch.full((B, T), pad_id, dtype=torch.long)
    attn = torch.zeros((B, T), dtype=torch.long)
    resp = torch.zeros((B, T), dtype=torch.long)
    tids = torch.full((B, T), -1, dtype=torch.long)
    rew = torch.zeros((B, K), dtype=torch.float32)
    tmask = torch.zeros((B, K), dtype=torch.float32)
    for b, ep in enumerate(episodes):
        n = len(ep.tokens)
        ids[b, :n] = torch.tensor(ep.tokens)
        attn[b, :n] = 1
        resp[b, :n] = torch.tensor(ep.mask)
        tids[b, :n] = torch.tensor(ep.turn_ids)
        # a turn whose generated tokens were all cut away has no action tokens: no reward slot
        rew[b, :len(turn_rewards[b])] = torch.tensor(turn_rewards[b], dtype=torch.float32)
        tmask[b, :len(turn_rewards[b])] = 1.0
    return Batch(ids, attn, resp, tids, rew, tmask, attn.sum(1))


def _micro(batch: Batch, index: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
    """Rows `index` of the batch, cut to their longest episode, on `device`."""
    T = int(batch.lengths[index].max())
    out = {}
    for name in ("input_ids", "attention_mask", "response_mask", "turn_ids", "old_logprobs",
                 "ref_logprobs", "old_values", "advantages", "returns"):
        value = getattr(batch, name)
        if value is not None:
            out[name] = value[index, :T].to(device)
    return out


def single_update(batch: Batch, cfg: Config) -> bool:
    """One epoch and one mini-batch: the policy is still the rollout's when the loss is taken,
    so the old log-probs are the current ones, detached, and their own pass is skipped (as
    verl does); this saves one of the step's forward passes."""
    return cfg.actor.ppo_epochs == 1 and cfg.actor.ppo_mini_batch_size * cfg.rollout.n >= batch.size


@torch.no_grad()
def score_batch(models: Models, batch: Batch, cfg: Config) -> None:
    """Fill old_logprobs (unless `single_update`), ref_logprobs, old_values, advantages and
    returns of the batch."""
    B, T = batch.input_ids.shape
    temp = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0
    old, ref, vals = (torch.zeros(B, T) for _ in range(3))
    step = cfg.actor.ppo_micro_batch_size
    skip_old = single_update(batch, cfg)
    models.policy.eval()
    models.critic.eval()
    for start in range(0, B, step):
        index = torch.arange(start, min(start + step, B))
        mb = _micro(batch, index, models.device)
        t = mb["input_ids"].shape[1]
        with models.autocast():
            if not skip_old:
                lp, _ = action_logprobs(models.policy, mb["input_ids"], mb["attention_mask"],
                                        mb["response_mask"], temperature=temp)
                old[index, :t] = lp.float().cpu()
            with models.reference_model() as reference:
                rp, _ = action_logprobs(reference, mb["input_ids"], mb["attention_mask"],
                                        mb["response_mask"], temperature=temp)
            v = models.critic(mb["input_ids"], mb["attention_mask"])
        ref[index, :t] = rp.float().cpu()
        vals[index, :t] = v.float().cpu() * mb["response_mask"].cpu()
    models.policy.train()
    models.critic.train()
    batch.old_logprobs = None if skip_old else old
    batch.ref_logprobs, batch.old_values = ref, vals
    a = cfg.algorithm
    batch.advantages, batch.returns = ppo.compute_advantages(
        vals, batch.response_mask, batch.turn_ids, batch.turn_rewards, batch.turn_mask,
        gamma=a.gamma, lam=a.lam, estimator=a.adv_estimator, whiten=a.whiten_advantages)


def _mini_batches(batch: Batch, mini: int, generator: torch.Generator) -> list[torch.Tensor]:
    order = torch.randperm(batch.size, generator=generator)
    return [order[i:i + mini] for i in range(0, batch.size, mini)]


def _actor_micro(models: Models, mb: dict[str, torch.Tensor], cfg: Config,
                 coefs: dict[str, float], share: float, sums: dict[str, float]) -> None:
    temp = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0
    mask = mb["response_mask"]
    with models.autocast():
        logp, ent = action_logprobs(models.policy, mb["input_ids"], mb["attention_mask"], mask,
                                    temperature=temp, with_entropy=True)
    old = mb["old_logprobs"] if "old_logprobs" in mb else logp.detach()    # single_update
    pg = ppo.policy_loss(logp, old, mb["advantages"], mask, cfg.actor.clip_ratio)
    entropy = ppo.masked_mean(ent, mask)
    kl = ppo.masked_mean(ppo.low_var_kl(logp, mb["ref_logprobs"]), mask)
    loss = pg["pg_loss"] - coefs["entropy_coeff"] * entropy
    if cfg.actor.use_kl_loss:
        loss = loss + coefs["kl_loss_coef"] * kl
    (loss * share).backward()
    for name, value in (("actor/pg_loss", pg["pg_loss"]), ("actor/clipfrac", pg["clipfrac"]),
                        ("actor/approx_kl", pg["approx_kl"]), ("actor/entropy", entropy),
                        ("kl/ref", kl), ("actor/loss", loss)):
        sums[name] = sums.get(name, 0.0) + float(value.detach()) * share


def _critic_micro(models: Models, mb: dict[str, torch.Tensor], cfg: Config, share: float,
                  sums: dict[str, float]) -> None:
    mask = mb["response_mask"]
    with models.autocast():
        values = models.critic(mb["input_ids"], mb["attention_mask"])               # (b, t)
    vl = ppo.value_loss(values.float(), mb["old_values"], mb["returns"], mask,
                        cfg.critic.cliprange_value)
    (vl["value_loss"] * share).backward()
    for name, value in (("critic/value_loss", vl["value_loss"]),
                        ("critic/vf_clipfrac", vl["vf_clipfrac"])):
        sums[name] = sums.get(name, 0.0) + float(value.detach()) * share


def _accumulate(models: Models, batch: Batch, index: torch.Tensor, micro: int, fn) -> None:
    """Run fn(mb, share) over micro-batches of the mini-batch `index`."""
    total = max(int(batch.response_mask[index].sum()), 1)
    for start in range(0, len(index), micro):
        sub = index[start:start + micro]
        mb = _micro(batch, sub, models.device)
        fn(mb, int(mb["response_mask"].sum()) / total)


def ppo_update(models: Models, actor_opt: torch.optim.Optimizer,
               critic_opt: torch.optim.Optimizer, batch: Batch, cfg: Config,
               coefs: dict[str, float], *, seed: int) -> dict[str, Any]:
    """ppo_epochs passes of actor and critic updates; returns the step's training metrics."""
    gen = torch.Generator().manual_seed(seed)
    mini = cfg.actor.ppo_mini_batch_size * cfg.rollout.n
    sums: dict[str, float] = {}
    n_updates = 0
    grad_norms = {"actor/grad_norm": 0.0, "critic/grad_norm": 0.0}
    for _ in range(cfg.actor.ppo_epochs):
        for index in _mini_batches(batch, mini, gen):
            if int(batch.response_mask[index].sum()) == 0:
                continue
            actor_opt.zero_grad(set_to_none=True)
            critic_opt.zero_grad(set_to_none=True)
            _accumulate(models, batch, index, cfg.actor.ppo_micro_batch_size,
                        lambda mb, share: _actor_micro(models, mb, cfg, coefs, share, sums))
            _accumulate(models, batch, index, cfg.critic.ppo_micro_batch_size,
                        lambda mb, share: _critic_micro(models, mb, cfg, share, sums))
            grad_norms["actor/grad_norm"] += float(torch.nn.utils.clip_grad_norm_(
                [p for p in models.policy.parameters() if p.requires_grad],
                cfg.actor.optim.grad_clip))
            grad_norms["critic/grad_norm"] += float(torch.nn.utils.clip_grad_norm_(
                models.critic.parameters(), cfg.critic.optim.grad_clip))
            actor_opt.step()
            critic_opt.step()
            n_updates += 1
    out = {k: v / max(n_updates, 1) for k, v in {**sums, **grad_norms}.items()}
    mask = batch.response_mask
    out["critic/explained_var"] = ppo.explained_variance(batch.old_values, batch.returns, mask)
    out["critic/values_mean"] = float(ppo.masked_mean(batch.old_values, mask))
    out["critic/returns_mean"] = float(ppo.masked_mean(batch.returns, mask))
    out["actor/updates"] = n_updates
    out["perf/action_tokens"] = batch.num_tokens
    return out
