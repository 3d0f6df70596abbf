"""The paper's policy size on one GPU, as far as the CPU can check it: the Qwen3-4B shape built
with random weights (model.shape), LoRA critics (critic.lora_rank), gradient checkpointing, and the
merged copy a LoRA policy's rollouts decode with. The memory and step figures are the H200's
(training/shapes/README.md); here a tiny Qwen3 of the same code path stands in."""
from __future__ import annotations

import json

import pytest
import torch

from toy_env import write_run, write_workspace
from training.config import ConfigError, ModelConfig, resolve
from training.policy import SHAPES_DIR, MergedLoRA, arm_checkpointing, ModelLoadError, load_models, load_tokenizer, shape_config
from training.trainer import Trainer


def tiny_qwen3(tmp_path, vocab: int = 49152) -> str:
    """A Qwen3 config of the 4B's code path (q/k norms, head_dim set apart, tied embeddings)."""
    shape = json.loads((SHAPES_DIR / "qwen3-4b.json").read_text())
    shape.update(vocab_size=vocab, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    path = tmp_path / "tiny-qwen3.json"
    path.write_text(json.dumps(shape))
    return str(path)


def test_the_packaged_4b_shape_is_qwen3_4b_with_the_tokenizers_special_ids(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    tok = load_tokenizer(str(tiny_model_dir))
    conf = shape_config("qwen3-4b", tok)
    assert (conf.model_type, conf.num_hidden_layers, conf.hidden_size, conf.vocab_size) == \
        ("qwen3", 36, 2560, 151936)
    assert conf.eos_token_id == tok.eos_token_id and conf.pad_token_id == tok.pad_token_id
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(conf)
    assert 4.0e9 < sum(p.numel() for p in model.parameters()) < 4.05e9     # Qwen3-4B: 4.02B


def test_a_shape_that_cannot_be_built_is_one_sentence(tmp_path, tiny_model_dir):
    tok = load_tokenizer(str(tiny_model_dir))
    with pytest.raises(ModelLoadError, match=r"^model.shape 'qwen9' is neither a packaged "
                       r"architecture \(qwen3-4b\) nor a config.json file\.$"):
        shape_config("qwen9", tok)
    with pytest.raises(ModelLoadError, match="has 1000 token embeddings, fewer than the "
                       "tokenizer's 49152 tokens"):
        shape_config(tiny_qwen3(tmp_path, vocab=1000), tok)


def test_a_shaped_model_has_random_weights_of_that_shape_and_a_lora_critic(tmp_path, tiny_model_dir):
    cfg = ModelConfig(path=str(tiny_model_dir), device="cpu", shape=tiny_qwen3(tmp_path),
                      gradient_checkpointing=True)
    m = load_models(cfg, seed=0, critic_lora=4)
    assert type(m.policy).__name__ == "Qwen3ForCausalLM" and m.policy.config.num_hidden_layers == 2
    trainable = {n for n, p in m.critic.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n or n.startswith("value_head.") for n in trainable)
    assert {"value_head.weight", "value_head.bias"} <= trainable
    assert arm_checkpointing(m.policy) == 2 and arm_checkpointing(m.critic) == 2     # 2 layers each
    # the same seed builds the same random weights (a resumed or repeated shape run starts alike)
    again = load_models(cfg, seed=0, critic=False)
    assert all(torch.equal(a, b) for a, b in zip(m.policy.parameters(), again.policy.parameters()))


def test_critic_lora_is_refused_under_ddp_and_fsdp(tmp_path):
    with pytest.raises(ConfigError, match="does not support LoRA yet: set model.lora_rank and "
                       "critic.lora_rank to 0"):
        resolve("usergym", overrides={"critic.lora_rank": 8, "trainer.parallel": "ddp"})


def test_a_lora_policys_merged_copy_decodes_as_the_adapters_do(tiny_model_dir):
    """The rollout's copy (base + B A scale in every linear) gives the peft model's logits, and
    is merged again exactly when the adapters change (an update step)."""
    m = load_models(ModelConfig(path=str(tiny_model_dir), device="cpu", lora_rank=4), seed=0,
                    critic=False)
    ids = torch.tensor([[1, 50, 300, 7000, 12, 9]])

    def logits(model):
        with torch.no_grad():
            return model(input_ids=ids).logits

    with torch.no_grad():       # adapters start as the identity (B = 0): give them a value
        for n, p in m.policy.named_parameters():
            if "lora_B" in n:
                p.normal_(0, 0.05)
    merged = MergedLoRA(m.policy, torch.float32)
    assert merged.refresh() and not merged.refresh()
    torch.testing.assert_close(logits(merged.model), logits(m.policy), atol=1e-4, rtol=1e-4)
    with m.policy.disable_adapter():
        base = logits(m.policy)
    assert (logits(merged.model) - base).abs().max() > 1e-3            # the adapters count
    with torch.no_grad():
        next(p for n, p in m.policy.named_parameters() if "lora_A" in n).add_(0.5)
    assert merged.refresh()
    torch.testing.assert_close(logits(merged.model), logits(m.policy), atol=1e-4, rtol=1e-4)


def test_gradient_checkpointing_trains_to_the_same_weights(tmp_path, tiny_model_dir):
    """One PPO step with and without recomputed activations ends at the same policy and critic
    (no dropout: the recomputed forward is the stored one), and with it the update does run each
    layer again in the backward pass (its attention is called more often)."""
    ws = write_workspace(tmp_path / "ws")
    states, calls = [], []
    for gc in (False, True):
        run = tmp_path / f"r{int(gc)}"
        write_run(run, workspace_dir=ws, model_dir=tiny_model_dir,
                  overrides={"trainer.total_steps": 1, "model.gradient_checkpointing": gc,
                             "model.precision": "fp32"})
        trainer = Trainer(run)
        n = [0]
        for model in (trainer.models.policy.model, trainer.models.critic.backbone):
            model.layers[0].self_attn.register_forward_hook(lambda *a: n.__setitem__(0, n[0] + 1))
        assert trainer.run() == 0
        calls.append(n[0])
        states.append({k: v.clone() for k, v in trainer.models.policy.state_dict().items()} |
                      {f"critic.{k}": v.clone() for k, v in trainer.models.critic.state_dict().items()})
    assert calls[1] > calls[0], calls
    assert states[0].keys() == states[1].keys()
    for k in states[0]:
        torch.testing.assert_close(states[1][k], states[0][k], atol=1e-6, rtol=1e-5, msg=k)


def test_a_shaped_lora_run_trains_adapters_and_value_head_only(tmp_path, tiny_model_dir):
    """The paper-size preset's plan on the tiny shape: one PPO step with LoRA policy and critic
    and checkpointing changes adapters and the value head, and no base weight."""
    ws = write_workspace(tmp_path / "ws")
    run = tmp_path / "r"
    write_run(run, workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={"trainer.total_steps": 1, "model.shape": tiny_qwen3(tmp_path),
                         "model.lora_rank": 4, "critic.lora_rank": 4,
                         "model.gradient_checkpointing": True, "model.precision": "fp32"})
    trainer = Trainer(run)
    before = {f"p.{k}": v.clone() for k, v in trainer.models.policy.state_dict().items()} | \
        {f"c.{k}": v.clone() for k, v in trainer.models.critic.state_dict().items()}
    assert trainer.run() == 0
    after = {f"p.{k}": v for k, v in trainer.models.policy.state_dict().items()} | \
        {f"c.{k}": v for k, v in trainer.models.critic.state_dict().items()}
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert any(k.startswith("p.") and "lora_" in k for k in changed)
    assert any(k.startswith("c.") and "lora_" in k for k in changed) and "c.value_head.weight" in changed
    assert all("lora_" in k or k.startswith("c.value_head.") for k in changed), sorted(changed)


def test_the_qwen3_4b_preset_adds_the_memory_plan_to_the_benchs_own():
    cfg = resolve("usergym", "qwen3-4b")
    assert (cfg.model.shape, cfg.model.lora_rank, cfg.critic.lora_rank, cfg.model.gradient_checkpointing) == \
        ("qwen3-4b", 64, 64, True)
    assert cfg.data.train_batch_size == 64 and cfg.rollout.max_turns == 16     # UserGym's Table 9 rows stay


def test_a_shaped_lora_run_resumes_exactly(tmp_path, tiny_model_dir):
    """Stop after step 1 and resume to 2 == run straight to 2: the random shape, the policy's and
    the critic's adapters and both optimisers come back from the checkpoint."""
    from training import checkpoint

    ws = write_workspace(tmp_path / "ws")
    over = {"trainer.total_steps": 2, "trainer.save_freq": 0, "model.shape": tiny_qwen3(tmp_path),
            "model.lora_rank": 4, "critic.lora_rank": 4, "model.gradient_checkpointing": True,
            "model.precision": "fp32"}
    for name in ("a", "b"):
        write_run(tmp_path / name, workspace_dir=ws, model_dir=tiny_model_dir, overrides=over)
    assert Trainer(tmp_path / "a").run() == 0
    assert Trainer(tmp_path / "b").run(stop_at=1) == 0
    assert Trainer(tmp_path / "b", resume=True).run() == 0
    for part in ("policy.pt", "critic.pt"):
        a = torch.load(checkpoint.latest(tmp_path / "a" / "checkpoints") / part)
        b = torch.load(checkpoint.latest(tmp_path / "b" / "checkpoints") / part)
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a), part


def test_the_recompute_runs_under_the_forwards_attention_kernels(monkeypatch, tiny_model_dir):
    """On the H200 the backward's recompute, outside the update's SDPA kernel choice, took
    another attention kernel and torch refused its saved tensors; both now run under it."""
    import contextlib

    import training.policy as P

    entered = []

    @contextlib.contextmanager
    def recording(device):
        entered.append(device.type)
        yield

    monkeypatch.setattr(P, "attention_kernels", recording)
    m = load_models(ModelConfig(path=str(tiny_model_dir), device="cpu", gradient_checkpointing=True),
                    seed=0, critic=False)
    assert arm_checkpointing(m.policy) == 2
    ids = torch.tensor([[1, 50, 300, 7000, 12]])
    logp, _ = P.action_logprobs(m.policy, ids, None, torch.tensor([[0, 0, 1, 1, 1]]))
    assert len(entered) == 2                        # the forward of each of the 2 layers
    logp.sum().backward()
    assert len(entered) == 4                        # and each layer's recompute
