"""Whole-or-nothing checkpoints (training/checkpoint.py): the newest kept, and a checkpoint that
kept only its policy (its run ended: orchestrator/prune.py) refused for a resume in one sentence."""
from __future__ import annotations

import pytest
import torch

from orchestrator import prune
from training import checkpoint
from training.config import ConfigError


def _save(root, step, keep=0):
    tensors = {"policy": {"w": torch.full((4,), float(step))}, "actor_optim": {"state": {}},
               "critic": {"w": torch.zeros(4)}, "critic_optim": {"state": {}}}
    return checkpoint.save(root, step, tensors, {"commit": "c", "algorithm": "ppo"}, keep=keep)


def test_keep_leaves_the_newest_whole_checkpoints(tmp_path):
    for step in (1, 2, 3):
        _save(tmp_path, step, keep=2)           # trainer.keep_checkpoints, default 2
    assert [p.name for p in checkpoint.list_whole(tmp_path)] == ["step-000002", "step-000003"]


def test_a_policy_only_checkpoint_is_refused_for_resume_in_one_sentence(tmp_path):
    folder = _save(tmp_path, 5)
    tensors, meta, _ = checkpoint.load(folder, ["policy", "actor_optim"])
    assert meta["step"] == 5 and torch.equal(tensors["policy"]["w"], torch.full((4,), 5.0))
    prune.slim(folder)
    assert sorted(p.name for p in folder.iterdir()) == ["policy.pt", "state.json"]
    with pytest.raises(ConfigError) as err:
        checkpoint.load(folder, ["policy", "actor_optim"])
    text = str(err.value)
    assert text.startswith(f"{folder} keeps only the policy (its run ended") and text.count(". ") == 0
    assert text.endswith("evaluate it with `orchestrator eval`, or start a new run.")


def test_an_optimiser_moment_of_mostly_zero_rows_is_stored_small_and_loaded_bit_for_bit(tmp_path):
    """The critic's embedding moments: rows of tokens never read are exactly zero."""
    moment = torch.zeros(1000, 8)                               # (vocab, hidden)
    moment[[3, 500]] = torch.randn(2, 8)
    moment[7, 2] = -0.0                                         # a -0.0 is data, not a zero row
    dense = torch.randn(4, 8)
    optim = {"state": {0: {"step": torch.tensor(3.0), "exp_avg": moment, "exp_avg_sq": dense}},
             "param_groups": [{"lr": 1e-3, "params": [0]}]}
    tensors = {"policy": {"w": torch.ones(2)}, "critic_optim": optim}
    folder = checkpoint.save(tmp_path / "a", 1, tensors, {"commit": "c"})
    assert optim["state"][0]["exp_avg"] is moment               # the live state is left alone
    loaded = checkpoint.load(folder, ["policy", "critic_optim"])[0]["critic_optim"]
    got = loaded["state"][0]
    for key in ("exp_avg", "exp_avg_sq"):
        want = optim["state"][0][key]
        assert got[key].dtype == want.dtype and torch.equal(got[key].view(torch.int32),
                                                            want.view(torch.int32)), key
    assert loaded["param_groups"] == optim["param_groups"]
    packed = checkpoint.save(tmp_path / "b", 1, {"critic_optim": optim}, {})
    plain = tmp_path / "plain.pt"
    torch.save(optim, plain)
    assert (packed / "critic_optim.pt").stat().st_size < plain.stat().st_size / 10
