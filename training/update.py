"""From finished episodes to one PPO update: collate, score (old/ref log-probs, values,
advantages), then actor and critic epochs over mini-batches with gradient accumulation. Under
`algorithm.name` grpo / infopo there are no values and no critic epochs: the advantages are the
group baseline's (`group_advantages`, training/grpo.py) and the actor's loss is the same.

Paper section 4.4 and appendix C; the math is training.ppo's. Batches are right padded (so the
model's position ids start at 0 for every episode, as in generation with left padding) and each
micro-batch is cut to its own longest episode. Loss scaling: every micro-batch's token-mean loss
is multiplied by its share of the mini-batch's action tokens, so the accumulated gradient is the
token-mean over the whole mini-batch whatever the micro-batch size.

Several processes (training.distributed; `trainer.parallel` ddp or fsdp): each holds the rows of
the step's episodes it rolled out (global episode g lives on rank g % world, local row g // world).
`plan_minibatches` is the whole of the difference from one-process PPO: every process draws the
same permutation of the GLOBAL batch, so mini-batches are the same global sets, and each process
trains on its rows of each; a micro-batch's share is its action tokens over the GLOBAL
mini-batch's (every episode's count is gathered once, `episode_tokens`), times the world size
because DDP and FSDP average gradients over processes: the summed gradient is exactly the
one-process token mean. Every process runs the same number of forward/backward passes (a process
short of rows runs a zero-weight pass on one of its rows), since each pass of a wrapped model is
collective. Advantages are whitened with global sums, and metrics are summed over processes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from training import distributed as D
from training import grpo, packing, ppo
from training.config import Config
from training.infogain import information_gain
from training.policy import Models, action_logprobs, arm_checkpointing

SINGLE = D.DistInfo()


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
    observations: list[list[str]] | None = None   # [b][k] the reply after turn k (infopo)
    rollout_logprobs: torch.Tensor | None = None  # (B, T) the sampling engine's (vLLM), 0 off
                                                  # the action tokens

    @property
    def num_tokens(self) -> int:
        return int(self.response_mask.sum())

    @property
    def size(self) -> int:
        return self.input_ids.shape[0]


def collate(episodes, turn_rewards: list[list[float]], pad_id: int,
            observations: list[list[str]] | None = None,
            rollout_logprobs: list[list[float]] | None = None) -> Batch:
    """Tensors of a step's episodes; turn_rewards[b][k] is the final reward of turn k;
    observations[b][k] the user/tool reply to turn k (needed by infopo only);
    rollout_logprobs[b][t] the engine's log-prob of token t (training.rollout.engine_logprobs)."""
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
    engine = None
    if rollout_logprobs is not None:
        engine = torch.zeros((B, T), dtype=torch.float32)
        for b, lp in enumerate(rollout_logprobs):
            engine[b, :len(lp)] = torch.tensor(lp, dtype=torch.float32)
    return Batch(ids, attn, resp, tids, rew, tmask, attn.sum(1), observations=observations,
                 rollout_logprobs=engine)


def _micro(batch: Batch, index: torch.Tensor, device: torch.device) -> dict[str, torch.Tensor]:
    """Rows `index` of the batch, cut to their longest episode, on `device`.

    No attention mask goes with them: rows are right padded, so under causal attention a real
    token never sees a padding token (padding only follows it), and the padded positions' own
    outputs are masked out of every loss by response_mask. Without a mask SDPA runs its fused
    causal kernels instead of a masked (B, 1, T, T) path."""
    T = int(batch.lengths[index].max())
    out = {}
    for name in ("input_ids", "response_mask", "turn_ids", "old_logprobs",
                 "ref_logprobs", "old_values", "advantages", "returns", "rollout_logprobs"):
        value = getattr(batch, name)
        if value is not None:
            out[name] = value[index, :T].to(device)
    return out


def single_update(batch: Batch, cfg: Config, global_size: int | None = None) -> bool:
    """One epoch and one mini-batch: the policy is still the rollout's when the loss is taken,
    so the old log-probs are the current ones, detached, and their own pass is skipped (as
    verl does); this saves one of the step's forward passes."""
    size = batch.size if global_size is None else global_size
    return cfg.actor.ppo_epochs == 1 and cfg.actor.ppo_mini_batch_size * cfg.rollout.n >= size


def rows_of(rank: int, world: int, global_size: int) -> int:
    """How many of the step's episodes process `rank` holds (round-robin, training.distributed)."""
    return len(range(rank, global_size, world))


@torch.no_grad()
def score_batch(models: Models, batch: Batch, cfg: Config, info: D.DistInfo = SINGLE,
                global_size: int | None = None) -> dict[str, float]:
    """Fill old_logprobs (unless `single_update`), ref_logprobs, old_values (ppo), advantages
    and returns of the batch (this process's rows; `global_size` episodes over all processes);
    returns the advantage's own metrics (grpo/*, infopo/*; none for ppo)."""
    B, T = batch.input_ids.shape
    G = B if global_size is None else global_size
    a = cfg.algorithm
    critic = a.name == "ppo"
    temp = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0
    old, ref, vals = (torch.zeros(B, T) for _ in range(3))
    step = cfg.actor.ppo_micro_batch_size
    # infopo's gain reads the old log-probs (training/infogain.py): never skip them there
    skip_old = single_update(batch, cfg, G) and a.name != "infopo"
    # micro-batches by count or by token budget (micro_groups); wrapped models are collective per
    # forward, so every process runs as many passes as the process with the most groups
    budget = cfg.actor.ppo_max_token_len
    _, lengths = episode_sizes(batch, info, G)                                   # (G,)
    W = info.world_size
    groups = micro_groups(torch.arange(B), batch.lengths, step, budget)
    passes = max(len(micro_groups(torch.arange(rows_of(r, W, G)), lengths[r::W], step, budget))
                 for r in range(W))
    models.policy.eval()
    if critic:
        models.critic.eval()
    for i in range(passes):
        dummy = i >= len(groups)
        index = torch.arange(0, 1) if dummy else groups[i]
        mb = _micro(batch, index, models.device)
        t = mb["input_ids"].shape[1]
        with models.autocast():
            if not skip_old:
                lp, _ = models.logprobs(mb["input_ids"], None,
                                        mb["response_mask"], temperature=temp)
            if not dummy:
                with models.reference_model() as reference:
                    rp, _ = action_logprobs(reference, mb["input_ids"], None,
                                            mb["response_mask"], temperature=temp)
            if critic:
                v = models.values(mb["input_ids"], None)
        if dummy:
            continue
        if not skip_old:
            old[index, :t] = lp.float().cpu()
        ref[index, :t] = rp.float().cpu()
        if critic:
            vals[index, :t] = v.float().cpu() * mb["response_mask"].cpu()
    gain = None
    if a.name == "infopo":
        if batch.observations is None:
            raise ValueError("infopo needs the episodes' replies: pass observations to collate.")
        gain = information_gain(models, batch.input_ids, batch.turn_ids, batch.lengths, old,
                                batch.observations, batch.turn_rewards.shape[1],
                                placeholder=a.info_placeholder, temperature=temp, micro=step)
    models.policy.train()
    batch.old_logprobs = None if skip_old else old
    batch.ref_logprobs = ref
    if not critic:
        return group_advantages(batch, cfg, info, G, gain)
    models.critic.train()
    batch.old_values = vals
    if not info.active:
        batch.advantages, batch.returns = ppo.compute_advantages(
            vals, batch.response_mask, batch.turn_ids, batch.turn_rewards, batch.turn_mask,
            gamma=a.gamma, lam=a.lam, estimator=a.adv_estimator, whiten=a.whiten_advantages)
        return {}
    adv, batch.returns = ppo.compute_advantages(
        vals, batch.response_mask, batch.turn_ids, batch.turn_rewards, batch.turn_mask,
        gamma=a.gamma, lam=a.lam, estimator=a.adv_estimator, whiten=False)
    batch.advantages = global_whiten(adv, batch.response_mask, info) \
        if a.whiten_advantages else adv
    return {}


def turn_tokens(turn_ids: torch.Tensor, response_mask: torch.Tensor, num_turns: int
                ) -> torch.Tensor:
    """(B, K) action tokens of each turn. turn_ids, response_mask: (B, T)."""
    hot = turn_ids.unsqueeze(-1) == torch.arange(num_turns)                       # (B, T, K)
    return (hot & (response_mask > 0).unsqueeze(-1)).sum(1)


def _global_rows(local: list[torch.Tensor], info: D.DistInfo, global_size: int
                 ) -> list[torch.Tensor]:
    """Each (B, K_rank) per-turn tensor of every process, as one (G, K_max) tensor in global
    episode order (global episode g is row g // W of rank g % W), the same on every process."""
    if not info.active:
        return local
    parts = D.gather_objects(local, info)
    W, K = info.world_size, max(p[0].shape[1] for p in parts)
    out = []
    for i in range(len(local)):
        full = torch.zeros(global_size, K, dtype=local[i].dtype)
        for rank, p in enumerate(parts):
            full[rank::W, :p[i].shape[1]] = p[i]
        out.append(full)
    return out


def group_advantages(batch: Batch, cfg: Config, info: D.DistInfo, global_size: int,
                     gain: tuple[torch.Tensor, torch.Tensor, int] | None = None
                     ) -> dict[str, float]:
    """grpo / infopo (training/grpo.py): per-turn advantages over the GLOBAL batch, since a
    task's rollout.n episodes are spread over processes; global episode g belongs to task
    g // rollout.n (the trainer lays out each task's samples together). Every process computes
    the same (G, K) table from gathered per-turn values (G * K numbers, never tokens) and keeps
    its rows. Returns the step's metrics of the advantage."""
    a = cfg.algorithm
    K = batch.turn_rewards.shape[1]
    tokens = turn_tokens(batch.turn_ids, batch.response_mask, K)                  # (B, K)
    local = [batch.turn_rewards, batch.turn_mask, tokens]
    if gain is not None:
        local += [gain[0], gain[1]]
    full = _global_rows(local, info, global_size)
    rewards, mask, ntok = full[0], full[1], full[2]
    groups = torch.arange(global_size) // cfg.rollout.n                          # (G,)
    adv, group_std = grpo.grpo_advantages(rewards, mask, ntok, groups, credit=a.turn_credit,
                                          score=a.trajectory_score, gamma=a.gamma,
                                          by_std=a.norm_adv_by_std)
    per_group = group_std[::cfg.rollout.n]
    stats = {"grpo/group_std_mean": float(per_group.mean()),
             # tasks whose episodes all scored alike teach nothing this step (A = 0)
             "grpo/tied_frac": float((per_group == 0).to(torch.float32).mean())}
    if gain is not None:
        value, has = full[3], full[4]
        info_adv = grpo.info_advantages(value, has, ntok, groups)
        adv, fused = grpo.fuse(adv, info_adv, ntok, group_std, weight=a.info_weight,
                               temperature=a.info_gate_temperature)
        stats.update(fused)
        measured = has > 0
        stats["infopo/gain_mean"] = float(value[measured].mean()) if measured.any() else 0.0
        stats["infopo/gain_turns"] = float(measured.sum())
        stats["infopo/skipped_turns"] = D.all_reduce_sum({"n": float(gain[2])}, info)["n"]
    rows = torch.arange(batch.size) * info.world_size + info.rank                 # (B,) global ids
    batch.advantages = ppo.spread_to_tokens(adv[rows, :K], batch.turn_ids, batch.response_mask)
    batch.returns = batch.advantages          # no value targets without a critic (as verl's GRPO)
    return stats


def global_whiten(x: torch.Tensor, mask: torch.Tensor, info: D.DistInfo,
                  eps: float = 1e-8) -> torch.Tensor:
    """ppo.masked_whiten over the action tokens of ALL processes (sums all-reduced in float64)."""
    m = mask.to(torch.float64)
    xd = x.to(torch.float64)
    s = D.all_reduce_sum({"n": float(m.sum()), "sum": float((xd * m).sum())}, info)
    n = s["n"]
    mean = s["sum"] / max(n, 1.0)
    sq = D.all_reduce_sum({"sq": float((((xd - mean) ** 2) * m).sum())}, info)["sq"]
    var = sq / max(n, 1.0)
    if n > 1:
        var = var * n / (n - 1)
    out = (x - mean) * torch.rsqrt(torch.tensor(var + eps, dtype=x.dtype))
    return torch.where(mask.bool(), out, torch.zeros_like(x))


def global_stats(values: torch.Tensor, returns: torch.Tensor, mask: torch.Tensor,
                 info: D.DistInfo) -> dict[str, float]:
    """critic/explained_var, values_mean and returns_mean over all processes' action tokens."""
    if not info.active:
        return {"critic/explained_var": ppo.explained_variance(values, returns, mask),
                "critic/values_mean": float(ppo.masked_mean(values, mask)),
                "critic/returns_mean": float(ppo.masked_mean(returns, mask))}
    m = mask.to(torch.float64)
    v, r = values.to(torch.float64) * m, returns.to(torch.float64) * m
    d = r - v
    s = D.all_reduce_sum({"n": float(m.sum()), "v": float(v.sum()), "r": float(r.sum()),
                          "r2": float((r * r).sum()), "d": float(d.sum()),
                          "d2": float((d * d).sum())}, info)
    n = max(s["n"], 1.0)
    var_r = s["r2"] / n - (s["r"] / n) ** 2
    var_d = s["d2"] / n - (s["d"] / n) ** 2
    return {"critic/explained_var": float("nan") if var_r <= 1e-12 else 1.0 - var_d / var_r,
            "critic/values_mean": s["v"] / n, "critic/returns_mean": s["r"] / n}


@dataclass(frozen=True)
class MiniBatch:
    """One mini-batch as this process trains on it."""
    rows: torch.Tensor    # (n,) this process's rows of it: indices into its Batch (n may be 0)
    tokens: int           # action tokens of the whole mini-batch, over all processes
    actor_passes: int     # forward/backward passes per process: the same on every process,
    critic_passes: int    # enough for the process holding the most micro-batches
    actor_groups: tuple[torch.Tensor, ...] = ()    # this process's rows, one tensor a pass
    critic_groups: tuple[torch.Tensor, ...] = ()


def episode_sizes(batch: Batch, info: D.DistInfo = SINGLE, global_size: int | None = None
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """(G,) action tokens and (G,) lengths of every episode of the step, in global order, on
    every process (one gather of this process's counts; global episode g is row g // W of rank
    g % W)."""
    local = torch.stack([batch.response_mask.sum(1), batch.lengths])            # (2, B)
    if not info.active:
        return local[0], local[1]
    parts = D.gather_objects(local.tolist(), info)
    W = info.world_size
    G = global_size or batch.size
    both = torch.tensor([[parts[g % W][i][g // W] for g in range(G)] for i in range(2)])
    return both[0], both[1]


def episode_tokens(batch: Batch, info: D.DistInfo = SINGLE,
                   global_size: int | None = None) -> torch.Tensor:
    """(G,) action tokens of every episode of the step, in global order (episode_sizes)."""
    return episode_sizes(batch, info, global_size)[0]


def micro_groups(rows: torch.Tensor, lengths: torch.Tensor, count: int, budget: int
                 ) -> list[torch.Tensor]:
    """`rows` (n,) as the micro-batches of one pass each: `count` rows at a time in their order
    (budget 0), or, with a token budget, rows of similar length together so that each group's
    padded size (rows x its longest) stays within `budget` (verl's dynamic batch size:
    `ppo_max_token_len_per_gpu`); a row longer than the budget goes alone. `lengths` (n,) are
    the rows' token counts."""
    if len(rows) == 0:
        return []
    if budget <= 0:
        return list(rows.split(count))
    groups = packing.length_sorted_micro_batches(lengths.tolist(), budget)
    return [rows[torch.tensor(g, dtype=torch.long)] for g in groups]


def plan_minibatches(tokens: torch.Tensor, mini: int, actor_micro: int, critic_micro: int,
                     generator: torch.Generator, *, rank: int = 0, world: int = 1,
                     lengths: torch.Tensor | None = None, actor_budget: int = 0,
                     critic_budget: int = 0) -> list[MiniBatch]:
    """One epoch's mini-batches, as process `rank` of `world` sees them.

    `tokens` (G,) holds every episode's action-token count. A permutation of the G global episode
    ids (drawn from `generator`, the same on every process) is split into mini-batches of `mini`
    ids; global id g is row g // world of process g % world. Pure: at world 1 the rows are
    `torch.randperm(G, generator=generator).split(mini)` themselves. Each process's rows of a
    mini-batch go into micro-batches (`micro_groups`): `actor_micro` / `critic_micro` rows, or
    by `actor_budget` / `critic_budget` tokens of `lengths` (G,) where a budget is set; every
    process runs as many passes as the process with the most micro-batches."""
    lengths = tokens if lengths is None else lengths
    out = []
    for ids in torch.randperm(len(tokens), generator=generator).split(mini):
        plans = []
        for r in range(world):
            mine = ids[ids % world == r]
            plans.append((micro_groups(mine // world, lengths[mine], actor_micro, actor_budget),
                          micro_groups(mine // world, lengths[mine], critic_micro, critic_budget)))
        out.append(MiniBatch(rows=ids[ids % world == rank] // world,
                             tokens=int(tokens[ids].sum()),
                             actor_passes=max(len(a) for a, _ in plans),
                             critic_passes=max(len(c) for _, c in plans),
                             actor_groups=tuple(plans[rank][0]),
                             critic_groups=tuple(plans[rank][1])))
    return out


def _actor_micro(models: Models, mb: dict[str, torch.Tensor], cfg: Config,
                 coefs: dict[str, float], share: float, sums: dict[str, float],
                 scale: int = 1) -> None:
    temp = cfg.rollout.temperature if cfg.rollout.temperature > 0 else 1.0
    mask = mb["response_mask"]
    with models.autocast():
        logp, ent = models.logprobs(mb["input_ids"], None, mask,
                                    temperature=temp, with_entropy=True)
    old = mb["old_logprobs"] if "old_logprobs" in mb else logp.detach()    # single_update
    pg = ppo.policy_loss(logp, old, mb["advantages"], mask, cfg.actor.clip_ratio,
                         cfg.actor.clip_ratio_c)
    entropy = ppo.masked_mean(ent, mask)
    kl = ppo.masked_mean(ppo.low_var_kl(logp, mb["ref_logprobs"]), mask)
    loss = pg["pg_loss"] - coefs["entropy_coeff"] * entropy
    if cfg.actor.use_kl_loss:
        loss = loss + coefs["kl_loss_coef"] * kl
    (loss * (share * scale)).backward()
    terms = [("actor/pg_loss", pg["pg_loss"]), ("actor/clipfrac", pg["clipfrac"]),
             ("actor/dual_clipfrac", pg["dual_clipfrac"]), ("actor/approx_kl", pg["approx_kl"]),
             ("actor/entropy", entropy), ("kl/ref", kl), ("actor/loss", loss)]
    if "rollout_logprobs" in mb:
        # |p_trainer - p_engine| of the sampled tokens under the same weights (`old` is the
        # rollout-time policy's), as verl's training/rollout_probs_diff_mean: near 0 while the
        # engine decodes with the trainer's weights (bf16 rounding only), far from it when a
        # weight push failed
        diff = (old.exp() - mb["rollout_logprobs"].exp()).abs()
        terms.append(("rollout/probs_diff", ppo.masked_mean(diff, mask)))
    for name, value in terms:
        # kept on the device: one transfer per step (ppo_update), not one per pass and metric
        sums[name] = sums.get(name, 0.0) + value.detach().float() * share


def _critic_micro(models: Models, mb: dict[str, torch.Tensor], cfg: Config, share: float,
                  sums: dict[str, float], scale: int = 1) -> None:
    mask = mb["response_mask"]
    with models.autocast():
        values = models.values(mb["input_ids"], None)               # (b, t)
    vl = ppo.value_loss(values.float(), mb["old_values"], mb["returns"], mask,
                        cfg.critic.cliprange_value)
    (vl["value_loss"] * (share * scale)).backward()
    for name, value in (("critic/value_loss", vl["value_loss"]),
                        ("critic/vf_clipfrac", vl["vf_clipfrac"])):
        # kept on the device: one transfer per step (ppo_update), not one per pass and metric
        sums[name] = sums.get(name, 0.0) + value.detach().float() * share


def _accumulate(models: Models, batch: Batch, groups: tuple[torch.Tensor, ...], passes: int,
                total: int, fn) -> None:
    """Run fn(mb, share) over `passes` micro-batches: this process's `groups` of rows of a
    mini-batch with `total` action tokens over all processes; passes past this process's groups
    are zero-weight passes on row 0 (the collective count must match, module docstring)."""
    total = max(total, 1)
    for i in range(passes):
        if i >= len(groups):
            fn(_micro(batch, torch.arange(0, 1), models.device), 0.0)
            continue
        mb = _micro(batch, groups[i], models.device)
        fn(mb, int(mb["response_mask"].sum()) / total)


def _grad_norm(params, max_norm: float) -> float:
    norm = torch.nn.utils.clip_grad_norm_(params, max_norm)
    return float(norm.full_tensor() if hasattr(norm, "full_tensor") else norm)


def ppo_update(models: Models, actor_opt: torch.optim.Optimizer,
               critic_opt: torch.optim.Optimizer | None, batch: Batch, cfg: Config,
               coefs: dict[str, float], *, seed: int, info: D.DistInfo = SINGLE,
               global_size: int | None = None) -> dict[str, Any]:
    """ppo_epochs passes of actor and critic updates; returns the step's training metrics
    (over all processes; `global_size` episodes in all, this process holding its rows).
    critic_opt None (grpo, infopo): the actor alone, the same clipped loss on their advantages."""
    gen = torch.Generator().manual_seed(seed)
    arm_checkpointing(models.policy)            # model.gradient_checkpointing: recompute in backward
    arm_checkpointing(models.critic if critic_opt is not None else None)
    tokens, lengths = episode_sizes(batch, info, global_size)                      # (G,), (G,)
    mini = cfg.actor.ppo_mini_batch_size * cfg.rollout.n
    amicro, cmicro = cfg.actor.ppo_micro_batch_size, cfg.critic.ppo_micro_batch_size
    W = info.world_size         # DDP and FSDP average gradients over processes: scale back to a sum
    sums: dict[str, float] = {}
    critic = critic_opt is not None
    grad_norms = {"actor/grad_norm": 0.0, **({"critic/grad_norm": 0.0} if critic else {})}
    n_updates = 0
    for _ in range(cfg.actor.ppo_epochs):
        for mb in plan_minibatches(tokens, mini, amicro, cmicro, gen, rank=info.rank, world=W,
                                   lengths=lengths, actor_budget=cfg.actor.ppo_max_token_len,
                                   critic_budget=cfg.critic.ppo_max_token_len):
            if mb.tokens == 0:
                continue
            actor_opt.zero_grad(set_to_none=True)
            _accumulate(models, batch, mb.actor_groups, mb.actor_passes, mb.tokens,
                        lambda m, share: _actor_micro(models, m, cfg, coefs, share, sums, W))
            grad_norms["actor/grad_norm"] += _grad_norm(
                [p for p in models.policy.parameters() if p.requires_grad],
                cfg.actor.optim.grad_clip)
            actor_opt.step()
            if critic:       # its own backbone: independent of the actor's step just taken
                critic_opt.zero_grad(set_to_none=True)
                _accumulate(models, batch, mb.critic_groups, mb.critic_passes, mb.tokens,
                            lambda m, share: _critic_micro(models, m, cfg, share, sums, W))
                grad_norms["critic/grad_norm"] += _grad_norm(models.critic.parameters(),
                                                             cfg.critic.optim.grad_clip)
                critic_opt.step()
            n_updates += 1
    sums = D.all_reduce_sum({k: float(v) for k, v in sums.items()}, info)
    out = {k: v / max(n_updates, 1) for k, v in {**sums, **grad_norms}.items()}
    if critic:
        out.update(global_stats(batch.old_values, batch.returns, batch.response_mask, info))
    out["actor/updates"] = n_updates
    out["perf/action_tokens"] = int(tokens.sum())
    return out
