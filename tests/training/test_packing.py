"""Update batching helpers (training/packing.py): what the PPO update relies on.

Length-sorted micro-batches cover every sequence exactly once within the token budget and pad
less than random grouping; a packed row gives each sequence the same log-probs as running it
alone (transformers builds the block-diagonal mask from the restarting position ids).
"""
from __future__ import annotations

import random

import pytest
import torch

from training import packing


def test_length_sorted_groups_cover_all_within_budget():
    rng = random.Random(0)
    lengths = [rng.randint(10, 500) for _ in range(200)]
    groups = packing.length_sorted_micro_batches(lengths, max_tokens=2000)
    flat = sorted(i for g in groups for i in g)
    assert flat == list(range(200))
    assert all(len(g) * max(lengths[i] for i in g) <= 2000 for g in groups)
    random_groups = [list(range(i, i + 8)) for i in range(0, 200, 8)]
    assert packing.padding_fraction(lengths, groups) < 0.5 * packing.padding_fraction(
        lengths, random_groups)
    capped = packing.length_sorted_micro_batches(lengths, max_tokens=10**6, max_seqs=16)
    assert max(len(g) for g in capped) == 16
    assert packing.length_sorted_micro_batches([5000], max_tokens=100) == [[0]]
    with pytest.raises(ValueError, match="positive"):
        packing.length_sorted_micro_batches(lengths, max_tokens=0)


def test_packed_row_matches_separate_sequences():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).eval()
    seqs = [torch.randint(0, 64, (n,)) for n in (7, 3, 11)]
    p = packing.pack(seqs)
    assert p.position_ids[0].tolist() == list(range(7)) + list(range(3)) + list(range(11))
    assert p.cu_seqlens.tolist() == [0, 7, 10, 21]
    with torch.no_grad():
        packed = model(input_ids=p.input_ids, position_ids=p.position_ids,
                       use_cache=False).logits                                     # (1, T, V)
        for part, s in zip(packing.unpack(packed, p), seqs):
            alone = model(input_ids=s[None]).logits[0]                              # (n, V)
            assert torch.allclose(part, alone, atol=1e-5)
    ids, mask = packing.pad_right(seqs)
    assert ids.shape == (3, 11) and mask.sum(1).tolist() == [7, 3, 11]
    lp = packing.token_logprobs(torch.zeros(2, 5, 4), torch.tensor([[0, 1, 2, 3, 0]] * 2))
    assert torch.allclose(lp, torch.full((2, 5), -torch.log(torch.tensor(4.0))))


def test_gradient_checkpointing_switch_and_attention_choice():
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2))
    packing.set_gradient_checkpointing(model, True)
    assert model.is_gradient_checkpointing
    packing.set_gradient_checkpointing(model, False)
    assert not model.is_gradient_checkpointing
    assert packing.best_attention("cpu") == "sdpa"
