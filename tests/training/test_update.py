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
