"""The LM head run chunk by chunk (training/chunked_head.py): the same log-probs, entropies and
gradients as softmax over whole logits, whatever the chunk, and never a whole (N, V) tensor."""
from __future__ import annotations

import pytest
import torch

from training import ppo
from training.chunked_head import head_logprobs


def _plain(h, w, y, temperature):
    z = (h @ w.t()).float() / temperature                                       # (N, V)
    return ppo.logprobs_from_logits(z[None], y[None])[0], ppo.entropy_from_logits(z[None])[0]


@pytest.mark.parametrize("chunk", [1, 7, 64, 1000])
def test_values_and_gradients_match_whole_logits(chunk):
    torch.manual_seed(0)
    N, H, V, T = 37, 16, 101, 0.7
    h = torch.randn(N, H, requires_grad=True)
    w = torch.randn(V, H, requires_grad=True)
    y = torch.randint(0, V, (N,))
    g_lp, g_ent = torch.randn(N), torch.randn(N)
    lp, ent = head_logprobs(h, w, y, temperature=T, chunk=chunk)
    (lp * g_lp + ent * g_ent).sum().backward()
    mine = (lp.detach(), ent.detach(), h.grad.clone(), w.grad.clone())
    h.grad, w.grad = None, None
    lp2, ent2 = _plain(h, w, y, T)
    (lp2 * g_lp + ent2 * g_ent).sum().backward()
    for a, b in zip(mine, (lp2.detach(), ent2.detach(), h.grad, w.grad)):
        torch.testing.assert_close(a, b, atol=2e-5, rtol=1e-4)


def test_without_entropy_the_log_prob_gradient_alone():
    torch.manual_seed(1)
    h = torch.randn(9, 8, requires_grad=True)
    w = torch.randn(30, 8)
    y = torch.randint(0, 30, (9,))
    lp, ent = head_logprobs(h, w, y, chunk=4, with_entropy=False)
    assert torch.equal(ent, torch.zeros(9))
    lp.sum().backward()
    mine = h.grad.clone()
    h.grad = None
    _plain(h, w, y, 1.0)[0].sum().backward()
    torch.testing.assert_close(mine, h.grad, atol=2e-5, rtol=1e-4)


def test_no_tensor_holds_all_rows_of_logits():
    """The largest tensor of forward and backward together is chunk x V (fp32), not N x V."""
    from tests.training.test_generation import LargestAllocation

    torch.manual_seed(2)
    N, H, V, chunk = 256, 8, 500, 16
    h = torch.randn(N, H, requires_grad=True)
    w = torch.randn(V, H, requires_grad=True)
    y = torch.randint(0, V, (N,))
    with LargestAllocation() as seen:
        lp, ent = head_logprobs(h, w, y, chunk=chunk)
        (lp.sum() + ent.sum()).backward()
    assert seen.bytes <= chunk * V * 4, seen.op
    assert N * V * 4 > 8 * seen.bytes
