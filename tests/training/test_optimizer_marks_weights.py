"""The rollout engine's bf16 copy (training/kvengine.py RolloutEngine.refresh), the merged LoRA
copy and the vLLM push (training/vllm_backend.py) take new weights only when the parameters'
version counters moved. The fused AdamW the trainer uses on CUDA writes the parameters without
moving them, so GPU rollouts kept decoding the initial policy; the CPU (foreach) step moves them."""
from types import SimpleNamespace

import pytest
import torch

from training.trainer import Trainer
from training.vllm_backend import weights_version


@pytest.mark.parametrize("fused", [False, True])
def test_an_optimiser_step_is_seen_by_whatever_copies_the_policy(fused):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 2))
    opt = Trainer._optimizer(model, SimpleNamespace(lr=1e-3, betas=(0.9, 0.999), weight_decay=0.0),
                             fused=fused)
    assert opt.defaults.get("fused") == (fused or None)
    seen = weights_version(model)
    before = [p.detach().clone() for p in model.parameters()]
    model(torch.ones(3, 4)).pow(2).sum().backward()
    opt.step()
    assert any(not torch.equal(a, p) for a, p in zip(before, model.parameters()))   # it trained
    assert weights_version(model) != seen
    seen = weights_version(model)
    opt.zero_grad()
    assert weights_version(model) == seen          # nothing written, nothing to copy
