"""The update's mini-batch plan (training/update.py `plan_minibatches`) against plain PPO's
`torch.randperm(G).split(mini)`, as cleanrl checks its fast GAE against a plain loop: at one
process the plan is exactly that split; at two processes the ranks' rows together make each
global mini-batch, and both ranks agree on its token count and on the number of passes."""
from __future__ import annotations

import pytest
import torch

from training.update import plan_minibatches, rows_of


def _tokens(G: int) -> torch.Tensor:
    return torch.randint(0, 50, (G,), generator=torch.Generator().manual_seed(G))  # (G,)


@pytest.mark.parametrize("G,mini", [(8, 4), (10, 4), (7, 7), (5, 1)])
def test_one_process_plan_is_randperm_split(G, mini):
    tokens = _tokens(G)
    plan = plan_minibatches(tokens, mini, 3, 2, torch.Generator().manual_seed(11))
    expected = torch.randperm(G, generator=torch.Generator().manual_seed(11)).split(mini)
    assert len(plan) == len(expected)
    for mb, ids in zip(plan, expected):
        assert torch.equal(mb.rows, ids)                     # the same rows, in the same order
        assert mb.tokens == int(tokens[ids].sum())
        assert (mb.actor_passes, mb.critic_passes) == (-(-len(ids) // 3), -(-len(ids) // 2))


@pytest.mark.parametrize("G,mini", [(8, 4), (9, 4), (6, 3), (4, 1)])
def test_two_ranks_rows_make_each_global_minibatch(G, mini):
    tokens = _tokens(G)
    plans = [plan_minibatches(tokens, mini, 2, 1, torch.Generator().manual_seed(5),
                              rank=r, world=2) for r in range(2)]
    expected = torch.randperm(G, generator=torch.Generator().manual_seed(5)).split(mini)
    assert len(plans[0]) == len(plans[1]) == len(expected)
    for i, ids in enumerate(expected):
        r0, r1 = plans[0][i], plans[1][i]
        # global episode g is row g // 2 of rank g % 2
        together = torch.cat([r0.rows * 2, r1.rows * 2 + 1])
        assert sorted(together.tolist()) == sorted(ids.tolist())
        for rank, mb in enumerate((r0, r1)):                 # rows the rank holds, each once
            assert len(set(mb.rows.tolist())) == len(mb.rows)
            assert all(0 <= row < rows_of(rank, 2, G) for row in mb.rows.tolist())
        assert r0.tokens == r1.tokens == int(tokens[ids].sum())
        most = max(len(r0.rows), len(r1.rows))
        assert r0.actor_passes == r1.actor_passes == -(-most // 2)
        assert r0.critic_passes == r1.critic_passes == most


# ---- micro-batches by token budget, and the passes they replace ---------------------------------

def test_budget_groups_hold_every_row_once_within_the_budget():
    """micro_groups with a budget: each row once, rows of similar length together, each group's
    padded size (rows x longest) within the budget unless one row alone exceeds it."""
    from training.update import micro_groups

    lengths = torch.tensor([900, 120, 130, 880, 60, 3000, 125, 70])
    groups = micro_groups(torch.arange(8), lengths, 4, 2000)
    assert sorted(torch.cat(groups).tolist()) == list(range(8))
    for g in groups:
        padded = len(g) * int(lengths[g].max())
        assert padded <= 2000 or len(g) == 1
    assert [len(g) for g in micro_groups(torch.arange(8), lengths, 3, 0)] == [3, 3, 2]


@pytest.mark.parametrize("world", [1, 2])
def test_budget_plan_passes_agree_across_ranks(world):
    G = 10
    tokens = _tokens(G)
    lengths = torch.randint(50, 900, (G,), generator=torch.Generator().manual_seed(3))
    plans = [plan_minibatches(tokens, 6, 2, 2, torch.Generator().manual_seed(1), rank=r,
                              world=world, lengths=lengths, actor_budget=1000, critic_budget=600)
             for r in range(world)]
    for i in range(len(plans[0])):
        mbs = [p[i] for p in plans]
        assert len({mb.actor_passes for mb in mbs}) == len({mb.critic_passes for mb in mbs}) == 1
        for mb in mbs:
            assert mb.actor_passes >= len(mb.actor_groups)
            assert sorted(torch.cat(mb.actor_groups).tolist()) == sorted(mb.rows.tolist())
            assert sorted(torch.cat(mb.critic_groups).tolist()) == sorted(mb.rows.tolist())


def _fixed_batch(tmp_path, tiny_model_dir, algorithm="ppo"):
    """A trainer on the toy bench and one rolled-out batch of 8 episodes of 3 turns."""
    from toy_env import write_run, write_workspace
    from training.trainer import Trainer, step_seed
    from training.update import collate

    write_run(tmp_path / "r", workspace_dir=write_workspace(tmp_path / "ws"),
              model_dir=tiny_model_dir,
              overrides={"algorithm.name": algorithm, "data.train_batch_size": 4,
                         "rollout.n": 2, "actor.ppo_mini_batch_size": 4,
                         "rollout.response_length": 12})
    trainer = Trainer(tmp_path / "r")
    torch.manual_seed(step_seed(0, 1))
    episodes = trainer.make_episodes(1)
    trainer._rollout(episodes)
    _, turn_rewards, _ = trainer._score(episodes)
    # rewards that differ between episodes and turns, so advantages are not all zero
    turn_rewards = [[0.1 * (i % 3) + 0.2 * k for k in range(len(r))]
                    for i, r in enumerate(turn_rewards)]
    batch = collate(episodes, turn_rewards, trainer.models.tokenizer.pad_token_id,
                    [ep.observations() for ep in episodes])
    return trainer, batch


def _update_with(trainer, batch, **sizes):
    """score_batch + ppo_update from the same starting weights under other micro-batch sizes;
    returns (metrics, policy weights after)."""
    import copy
    import dataclasses

    from training.update import ppo_update, score_batch

    cfg = trainer.cfg
    cfg = dataclasses.replace(
        cfg, actor=dataclasses.replace(cfg.actor, ppo_micro_batch_size=sizes["micro"],
                                       ppo_max_token_len=sizes["budget"]),
        critic=dataclasses.replace(cfg.critic, ppo_micro_batch_size=sizes["micro"],
                                   ppo_max_token_len=sizes["budget"]))
    models = copy.deepcopy(trainer.models)

    def linear_step(model):
        # AdamW with eps 1: its first step is g / (|g| + 1), close to the gradient itself, so
        # float noise in a near-zero gradient is not blown up to a whole step as at eps 1e-8
        return torch.optim.AdamW(model.parameters(), lr=1.0, eps=1.0, weight_decay=0.0)

    actor = linear_step(models.policy)
    critic = linear_step(models.critic) if models.critic else None
    batch = copy.deepcopy(batch)
    stats = score_batch(models, batch, cfg)
    stats.update(ppo_update(models, actor, critic, batch, cfg, trainer.coefficients(), seed=3))
    return stats, {k: v.detach().clone() for k, v in models.policy.state_dict().items()}


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "infopo"])
def test_losses_and_weights_do_not_depend_on_how_passes_are_cut(tmp_path, tiny_model_dir,
                                                                 algorithm):
    """One pass per episode, four episodes a pass, or passes cut by a token budget: the same
    token-mean losses and the same weights after the step (fp32; float noise of other batch
    shapes only), for each algorithm."""
    trainer, batch = _fixed_batch(tmp_path, tiny_model_dir, algorithm)
    longest = int(batch.lengths.max())
    runs = [_update_with(trainer, batch, micro=1, budget=0),
            _update_with(trainer, batch, micro=4, budget=0),
            _update_with(trainer, batch, micro=1, budget=2 * longest + 1)]
    keys = ["actor/pg_loss", "actor/entropy", "kl/ref", "actor/loss"] + \
        (["critic/value_loss"] if algorithm == "ppo" else [])
    for stats, weights in runs[1:]:
        for k in keys:
            assert stats[k] == pytest.approx(runs[0][0][k], rel=1e-4, abs=1e-6), k
        for name, w in weights.items():   # each weight moved by about its gradient
            torch.testing.assert_close(w, runs[0][1][name], atol=1e-6, rtol=1e-4)
    before = trainer.models.policy.state_dict()
    assert max(float((runs[0][1][k] - before[k]).abs().max()) for k in before) > 1e-4  # it moved


def test_old_and_reference_logprobs_match_a_plain_masked_forward(tmp_path, tiny_model_dir):
    """score_batch's log-probs (no attention mask on right-padded rows, the head run chunk by
    chunk, passes by token budget) equal log_softmax of a plain forward's whole logits with the
    padding mask, at every action token."""
    import dataclasses

    from training.update import score_batch

    trainer, batch = _fixed_batch(tmp_path, tiny_model_dir)
    cfg = dataclasses.replace(trainer.cfg, actor=dataclasses.replace(
        trainer.cfg.actor, ppo_epochs=2, ppo_max_token_len=int(batch.lengths.max()) * 3))
    score_batch(trainer.models, batch, cfg)
    temp = cfg.rollout.temperature
    mask = batch.response_mask.bool()
    for name, model in (("old", trainer.models.policy), ("ref", trainer.models.reference)):
        with torch.no_grad():
            logits = model(input_ids=batch.input_ids,
                           attention_mask=batch.attention_mask).logits.float() / temp  # (B, T, V)
        plain = torch.log_softmax(logits[:, :-1], -1).gather(
            -1, batch.input_ids[:, 1:, None]).squeeze(-1)                            # (B, T-1)
        got = (batch.old_logprobs if name == "old" else batch.ref_logprobs)[:, 1:]
        torch.testing.assert_close(got[mask[:, 1:]], plain[mask[:, 1:]], atol=2e-5, rtol=1e-4)
    assert mask.sum() > 20
