"""The vLLM backend's parts that need no vLLM (training/vllm_backend.py; vLLM itself is not run here).

What a user depends on: after an update, exactly the language model's weights reach vLLM under the
names its `load_weights` expects, whatever wraps the policy (DDP, torch.compile, FSDP, peft), with
no LoRA factors or critic heads; requests carry the prompt token ids unchanged; greedy and stop
ids mean what they mean in the other backends; a missing vLLM ends in one sentence.
"""
from __future__ import annotations

import importlib.util

import pytest
import torch

from training import vllm_backend as V


@pytest.mark.parametrize("raw,expected", [
    ("model.layers.0.self_attn.q_proj.weight", "model.layers.0.self_attn.q_proj.weight"),
    ("module.model.norm.weight", "model.norm.weight"),
    ("_orig_mod.model.embed_tokens.weight", "model.embed_tokens.weight"),
    ("module._orig_mod.model.layers.3.mlp.up_proj.weight", "model.layers.3.mlp.up_proj.weight"),
    ("model.layers.1._fsdp_wrapped_module._checkpoint_wrapped_module.mlp.down_proj.weight",
     "model.layers.1.mlp.down_proj.weight"),
    ("base_model.model.model.layers.0.self_attn.v_proj.base_layer.weight",
     "model.layers.0.self_attn.v_proj.weight"),
    ("base_model.model.model.layers.0.self_attn.v_proj.lora_A.default.weight", None),
    ("v_head.weight", None),
    ("model.rotary_emb.inv_freq", None),
])
def test_weight_names_map_to_hf_names(raw, expected):
    assert V.vllm_weight_name(raw) == expected


def _tiny(tied: bool):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied)
    return LlamaForCausalLM(cfg)


@pytest.mark.parametrize("tied", [True, False])
def test_sent_weights_are_exactly_the_models(tied):
    model = _tiny(tied)
    sent = dict(V.vllm_weights(model))
    expected = {k for k in model.state_dict() if not (tied and k == "lm_head.weight")}
    assert set(sent) == expected
    assert torch.equal(sent["model.norm.weight"], model.model.norm.weight)


def test_peft_and_compiled_policy_send_merged_base_names():
    peft = pytest.importorskip("peft")
    model = _tiny(True)
    lora = peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    names = {n for n, _ in V.vllm_weights(lora.state_dict(), tied_embeddings=True)}
    plain = {k for k in _tiny(True).state_dict() if k != "lm_head.weight"}
    assert names == plain
    wrapped = {f"module._orig_mod.{k}": v for k, v in _tiny(True).state_dict().items()}
    assert {n for n, _ in V.vllm_weights(wrapped, tied_embeddings=True)} == plain


def test_requests_and_sampling_arguments():
    assert V.build_requests([[5, 6], [7]]) == [{"prompt_token_ids": [5, 6]},
                                               {"prompt_token_ids": [7]}]
    with pytest.raises(ValueError, match="at least one token"):
        V.build_requests([[1], []])
    greedy = V.sampling_kwargs(16, temperature=0.7, top_p=0.9, greedy=True, seed=3, stop_ids=[2])
    assert greedy["temperature"] == 0.0 and greedy["top_p"] == 1.0 and greedy["max_tokens"] == 16
    assert greedy["stop_token_ids"] == [2] and greedy["ignore_eos"] is False
    sample = V.sampling_kwargs(8, temperature=0.7, top_p=0.9, seed=4)
    assert (sample["temperature"], sample["top_p"], sample["top_k"], sample["seed"]) == (0.7, 0.9, -1, 4)
    assert sample["ignore_eos"] is True and sample["detokenize"] is False


@pytest.mark.skipif(importlib.util.find_spec("vllm") is not None, reason="vLLM is installed")
def test_missing_vllm_is_one_sentence():
    with pytest.raises(V.VLLMUnavailable, match="pip install vllm"):
        V.VLLMGenerator(_tiny(True), None, model_path="/nowhere")
