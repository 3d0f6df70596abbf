"""The vLLM backend's contract (training/vllm_backend.py), on the CPU against a recording fake of
`vllm` (tests/fakes/fake_vllm.py); vLLM itself runs only in the last test, where it is installed.

What a user depends on: exactly the language model's weights reach vLLM under the names its
`load_weights` expects, whatever wraps the policy, once per version of the weights and not
otherwise; the engine sleeps before the update and wakes after it with the new weights; the
sampling parameters mean what they mean in the other backends; the sampled tokens' log-probs
reach the update; the LLM user's requests go through the same engine without the policy's
adapter; a failure to start is one sentence naming its cause.
"""
from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch

from tests.fakes.fake_vllm import install
from training import vllm_backend as V


# ---- names and weights (no engine) -----------------------------------------------------------
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


def _tiny(tied: bool = True):
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                      num_attention_heads=2, num_key_value_heads=1, tie_word_embeddings=tied)
    torch.manual_seed(0)
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
    lora = peft.get_peft_model(_tiny(), peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))
    names = {n for n, _ in V.vllm_weights(lora.state_dict(), tied_embeddings=True)}
    plain = {k for k in _tiny().state_dict() if k != "lm_head.weight"}
    assert names == plain
    wrapped = {f"module._orig_mod.{k}": v for k, v in _tiny().state_dict().items()}
    assert {n for n, _ in V.vllm_weights(wrapped, tied_embeddings=True)} == plain


# ---- sampling parameters ---------------------------------------------------------------------
def test_sampling_parameters_follow_the_graph_backend():
    sample = V.sampling_kwargs(8, temperature=0.7, top_p=0.9, seed=4, stop_ids=[2, 3])
    assert (sample["max_tokens"], sample["temperature"], sample["top_p"], sample["top_k"],
            sample["seed"]) == (8, 0.7, 0.9, 0, 4)   # top_k 0: no cut
    assert sample["stop_token_ids"] == [2, 3] and sample["ignore_eos"] is False
    assert sample["logprobs"] == 0 and sample["detokenize"] is False and "stop" not in sample
    for greedy in (V.sampling_kwargs(16, temperature=0.0, top_p=0.9),
                   V.sampling_kwargs(16, temperature=0.7, top_p=0.9, greedy=True)):
        assert greedy["temperature"] == 0.0 and greedy["top_p"] == 1.0
    no_stop = V.sampling_kwargs(5)
    assert no_stop["ignore_eos"] is True and no_stop["stop_token_ids"] == []
    strings = V.sampling_kwargs(5, stop=["\nUser:"], logprobs=False)
    assert strings["stop"] == ["\nUser:"] and strings["include_stop_str_in_output"] is True
    assert strings["detokenize"] is True and strings["ignore_eos"] is False
    assert strings["logprobs"] is None
    assert V.build_requests([[5, 6], [7]]) == [{"prompt_token_ids": [5, 6]},
                                               {"prompt_token_ids": [7]}]
    with pytest.raises(ValueError, match="at least one token"):
        V.build_requests([[1], []])


# ---- the engine on the fake ------------------------------------------------------------------
def _engine(tmp_path, lora_rank: int = 0, **kw) -> V.VLLMEngine:
    return V.VLLMEngine("/models/policy", gpu_memory_utilization=0.4, max_model_len=1024, seed=3,
                        lora_rank=lora_rank, adapter_dir=tmp_path / "adapters", **kw)


def test_engine_starts_colocated_with_sleep_mode_and_prefix_caching(monkeypatch, tmp_path):
    fake = install(monkeypatch)
    _engine(tmp_path)
    (init,) = fake.of("init")
    assert init["env_multiprocessing"] == "0"               # in this process: apply_model in place
    assert init["model"] == "/models/policy" and init["seed"] == 3
    assert init["enable_sleep_mode"] is True and init["enable_prefix_caching"] is True
    assert init["gpu_memory_utilization"] == 0.4 and init["max_model_len"] == 1024
    assert init["logprobs_mode"] == "processed_logprobs" and init["dtype"] == "bfloat16"
    assert "enable_lora" not in init
    _engine(tmp_path, lora_rank=4)
    lora = fake.of("init")[1]
    assert lora["enable_lora"] is True and lora["max_lora_rank"] == 8 and lora["max_loras"] == 1
    assert V.vllm_lora_rank(16) == 16 and V.vllm_lora_rank(17) == 32
    with pytest.raises(V.VLLMStartError, match="largest LoRA rank 512"):
        V.vllm_lora_rank(600)


def test_generate_maps_sampling_and_returns_the_sampled_logprobs(monkeypatch, tmp_path):
    fake = install(monkeypatch, reply=lambda prompt, params: [prompt[-1] + 1, 9, 2, 11])
    engine = _engine(tmp_path)
    out = engine.generate([[4, 5], [6]], max_new_tokens=3, temperature=0.7, top_p=0.9,
                          stop_ids=[2], seed=100)
    assert [s.ids for s in out] == [[6, 9, 2], [7, 9, 2]]         # cut after the stop id
    assert [s.logprobs for s in out] == [pytest.approx([-0.1, -0.2, -0.3])] * 2
    (call,) = fake.of("generate")
    assert call["prompts"] == [[4, 5], [6]] and call["lora"] is None
    assert [p["seed"] for p in call["params"]] == [100, 101]       # one seed per request
    p = call["params"][0]
    assert (p["max_tokens"], p["temperature"], p["top_p"], p["stop_token_ids"],
            p["logprobs"]) == (3, 0.7, 0.9, [2], 0)
    greedy = engine.generate([[4]], max_new_tokens=2, temperature=0.0)
    assert fake.of("generate")[1]["params"][0]["temperature"] == 0.0 and greedy[0].ids == [5, 9]
    torch.manual_seed(7)
    engine.generate([[4], [4]], max_new_tokens=1)                  # seed None: from torch's RNG
    torch.manual_seed(7)
    engine.generate([[4], [4]], max_new_tokens=1)
    drawn = [[p["seed"] for p in c["params"]] for c in fake.of("generate")[2:]]
    assert drawn[0] == drawn[1] and drawn[0][1] == drawn[0][0] + 1


def test_score_returns_each_given_tokens_logprob_after_the_first(monkeypatch, tmp_path):
    fake = install(monkeypatch)
    engine = _engine(tmp_path)
    scores = engine.score([[3, 10, 20], [4, 50]])
    assert scores == [pytest.approx([-0.10, -0.20]), pytest.approx([-0.50])]
    (call,) = fake.of("generate")
    p = call["params"][0]
    assert (p["prompt_logprobs"], p["temperature"], p["max_tokens"]) == (0, 1.0, 1)
    with pytest.raises(ValueError, match="at least two tokens"):
        engine.score([[1]])
    engine.sleep()
    with pytest.raises(RuntimeError, match="asleep"):
        engine.score([[1, 2]])


def test_weights_are_pushed_once_per_version_and_sleep_frames_the_update(monkeypatch, tmp_path):
    fake = install(monkeypatch)
    engine, policy = _engine(tmp_path), _tiny()
    names = [n for n, _ in V.vllm_weights(policy)]
    with engine.awake(policy):                    # step 1: nothing pushed yet, so the weights go
        engine.generate([[1]], max_new_tokens=2)
    assert engine.last_sent == len(names) and engine.pushes == 1
    assert fake.names()[1:] == ["apply_model", "load_weights", "reset_prefix_cache", "generate",
                                "sleep"]
    assert fake.of("load_weights")[0]["names"] == names and fake.of("sleep")[0]["level"] == 1
    with pytest.raises(RuntimeError, match="asleep"):
        engine.generate([[1]], max_new_tokens=2)
    fake.calls.clear()
    with torch.no_grad():                         # the update: an in-place step
        policy.model.norm.weight.add_(0.5)
    with engine.awake(policy):
        engine.generate([[1]], max_new_tokens=2)
    assert fake.names() == ["wake_up", "apply_model", "load_weights", "wake_up", "generate",
                            "sleep"]
    assert [c["tags"] for c in fake.of("wake_up")] == [["weights"], ["kv_cache"]]
    assert engine.pushes == 2 and engine.tensors_sent == 2 * len(names)
    fake.calls.clear()
    with engine.awake(policy):                    # no update in between: nothing is sent
        pass
    assert fake.names() == ["wake_up", "wake_up", "sleep"] and engine.last_sent == 0
    assert engine.pushes == 2
    assert engine.bytes_sent == 2 * sum(t.numel() * 4 for _, t in V.vllm_weights(policy))


def test_a_lora_policy_goes_in_as_an_adapter_and_the_user_asks_the_base(monkeypatch, tmp_path,
                                                                         tiny_model_dir):
    from peft import LoraConfig, get_peft_model

    from training.benches.base import Fact, Task, UserState
    from training.policy import load_tokenizer
    from training.users.llm import EngineLLMUser

    tok = load_tokenizer(str(tiny_model_dir))
    reply = tok.encode("It is 42.", add_special_tokens=False) + [tok.convert_tokens_to_ids("<|im_end|>")]
    fake = install(monkeypatch, reply=lambda prompt, params: reply)
    engine = _engine(tmp_path, lora_rank=4)
    policy = get_peft_model(_tiny(), LoraConfig(r=4, target_modules="all-linear"))
    engine.wake(policy)
    first = engine.adapter
    assert (first.lora_int_id, first.lora_name) == (1, "policy-v1")
    assert (tmp_path / "adapters" / "v000001" / "adapter_config.json").exists()
    assert "apply_model" not in fake.names()                 # the base weights stay in vLLM
    engine.generate([[1]], max_new_tokens=2)
    assert fake.of("generate")[-1]["lora"] is first            # the policy: base + adapter
    engine.sleep()
    with torch.no_grad():
        next(p for n, p in policy.named_parameters() if "lora_B" in n).add_(1.0)
    engine.wake(policy)
    assert engine.adapter.lora_int_id == 2 and engine.pushes == 2
    assert not (tmp_path / "adapters" / "v000001").exists()
    assert engine.tensors_sent == 2 * sum("lora_" in n for n, _ in policy.named_parameters())

    user = EngineLLMUser(engine, tok, max_new_tokens=12, seed=11)
    task = Task(id="t", gym="toy", split="train", prompt="Find my number.",
                facts=(Fact("n", "number", "The number is 42.", ("number",)),))
    states = [UserState("toy", task, 1, "What is the number?", [], {}, knobs={"temperature": t})
              for t in (0.0, 0.7, 0.7)]
    replies = user.respond_batch(states)
    assert [r.text for r in replies] == ["It is 42."] * 3 and {r.arm for r in replies} == {"llm"}
    calls = fake.of("generate")[-2:]                           # one call per temperature
    assert [c["lora"] for c in calls] == [None, None]          # the base: the frozen reference
    assert [len(c["prompts"]) for c in calls] == [1, 2]
    assert [c["params"][0]["temperature"] for c in calls] == [0.0, 0.7]
    assert calls[0]["params"][0]["max_tokens"] == 12 and calls[1]["params"][0]["seed"] == 1011
    assert tok.decode(calls[0]["prompts"][0]).endswith("<|im_start|>assistant\n")
    # vLLM's repetition_penalty acts on the prompt's hidden facts too: a penalty fails those
    # replies saying why, and the others are answered
    penalised = UserState("toy", task, 1, "What is the number?", [], {},
                          knobs={"temperature": 0.7, "repetition_penalty": 1.3})
    kept, refused = user.respond_batch([states[1], penalised])
    assert kept.text == "It is 42." and refused.failed
    assert "the vLLM user has no repetition penalty on the reply alone" in refused.error
    engine.sleep()                                             # a failed call fails the replies
    assert all(r.failed and "vLLM user" in r.error for r in user.respond_batch(states[:1]))


def test_the_reference_user_is_served_by_the_engine_only_when_it_holds_the_base(
        monkeypatch, tmp_path, tiny_model_dir):
    from training.config import resolve
    from training.users.llm import EngineLLMUser, LocalLLMUser, run_users

    install(monkeypatch)
    cfg = resolve("usergym", "cpu", {"rollout.user_llm": "reference"})
    ref = SimpleNamespace(training=False)
    for rank, kind in ((4, EngineLLMUser), (0, LocalLLMUser)):
        models = SimpleNamespace(vllm=_engine(tmp_path, lora_rank=rank), path=str(tiny_model_dir),
                                 reference=ref, device=torch.device("cpu"))
        router = run_users(cfg, models)
        assert isinstance(router.backends["default"], kind)


def _compressed(names: list[str]) -> list[str]:
    return [n for i, n in enumerate(names) if n != "generate" or names[i - 1] != "generate"]


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_a_run_sleeps_vllm_through_each_update_and_wakes_it_with_the_new_weights(
        monkeypatch, tmp_path, tiny_model_dir, lora_rank):
    """Two PPO steps on the toy bench with rollout.backend vllm: each rollout decodes through
    the engine, which sleeps before the update and wakes after it holding the updated policy
    (full weights, or LoRA's adapter under a new id); the engine's log-probs reach the update."""
    import math

    from toy_env import write_run, write_workspace
    from training import metrics, trainer as trainer_mod
    from training.policy import load_tokenizer

    tok = load_tokenizer(str(tiny_model_dir))
    end = tok.convert_tokens_to_ids("<|im_end|>")
    ask, answer = (tok.encode(t, add_special_tokens=False) + [end]
                   for t in ("What is the number?", "[answer] 42"))
    # the system and task messages end in <|im_end|>: the first turn asks, the next answers
    fake = install(monkeypatch, reply=lambda prompt, params: ask if prompt.count(end) <= 2
                   else answer)
    real_update = trainer_mod.ppo_update

    def update(*args, **kw):
        fake.calls.append(("update", {"asleep": fake.asleep}))
        return real_update(*args, **kw)

    monkeypatch.setattr(trainer_mod, "ppo_update", update)
    run = tmp_path / "run"
    write_run(run, workspace_dir=write_workspace(tmp_path / "ws"), model_dir=tiny_model_dir,
              overrides={"rollout.backend": "vllm", "model.lora_rank": lora_rank,
                         "rollout.response_length": 12, "rollout.gpu_memory_utilization": 0.3})
    trainer = trainer_mod.Trainer(run)
    assert trainer.run() == 0
    (init,) = fake.of("init")
    assert init["model"] == trainer.models.path and init["gpu_memory_utilization"] == 0.3
    assert init["max_model_len"] == trainer.cfg.rollout.max_episode_tokens + 12
    push = ["apply_model", "load_weights"] if not lora_rank else []
    assert _compressed(fake.names()) == (
        ["init"] + push + (["reset_prefix_cache"] if push else []) + ["generate", "sleep", "update"]
        + ["wake_up"] + push + ["wake_up", "generate", "sleep", "update"])
    assert all(u["asleep"] for u in fake.of("update"))
    assert trainer.models.vllm.pushes == 2
    if lora_rank:
        policy_calls = [c["lora"] for c in fake.of("generate")]
        assert {c.lora_int_id for c in policy_calls} == {1, 2}
    rows = list(metrics.read_lines(run / "metrics.jsonl"))
    assert [r["rollout/weights_sent"] > 0 for r in rows] == [True, True]
    assert all(math.isfinite(r["rollout/probs_diff"]) and r["perf/weight_sync_s"] >= 0
               for r in rows)
    # the fake's log-probs (-0.1, -0.2, ...) are not the tiny model's: a visible gap
    assert rows[0]["rollout/probs_diff"] > 0.01


# ---- a failure to start ----------------------------------------------------------------------
# Messages as vLLM, PyTorch and the dynamic loader word them (vLLM 0.8-0.26: the KV-cache and
# free-memory checks in vllm/v1/core/kv_cache_utils.py and vllm/v1/worker/gpu_worker.py).
FAILURES = [
    (ValueError("Free memory on device (30.1/139.8 GiB) on startup is less than desired GPU "
                "memory utilization (0.5, 69.9 GiB). Decrease GPU memory utilization or reduce "
                "GPU memory used by other processes."), "less free memory than"),
    (ValueError("To serve at least one request with the models's max seq len (9216), (1.27 GiB "
                "KV cache is needed, which is larger than the available KV cache memory (0.61 "
                "GiB). Based on the available memory, the estimated maximum model length is "
                "4400. Try increasing `gpu_memory_utilization` or decreasing `max_model_len` "
                "when initializing the engine."), "too little KV cache"),
    (ValueError("No available memory for the cache blocks. Try increasing "
                "`gpu_memory_utilization` when initializing the engine."), "too little KV cache"),
    (torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total "
                            "capacity of 139.81 GiB of which 1.02 GiB is free."), "ran out of memory"),
    (ImportError("/venv/lib/python3.11/site-packages/vllm/_C.abi3.so: undefined symbol: "
                 "_ZN3c104cuda9SetDeviceEab"), "ABI mismatch"),
    (ImportError("libcudart.so.13: cannot open shared object file: No such file or directory"),
     "ABI mismatch"),
    (RuntimeError("The NVIDIA driver on your system is too old (found version 12020). Please "
                  "update your GPU driver."), "could not use the GPU's CUDA"),
    (RuntimeError("CUDA error: no kernel image is available for execution on the device"),
     "could not use the GPU's CUDA"),
    (RuntimeError("Failed to infer device type"), "could not use the GPU's CUDA"),
    (ValueError("User-specified max_model_len (9216) is greater than the derived max_model_len "
                "(max_position_embeddings=8192 in model's config.json)."), "model's context"),
    (ModuleNotFoundError("No module named 'vllm'", name="vllm"), "vLLM is not installed"),
    (KeyError("architectures"), "vLLM failed to start (KeyError: 'architectures')"),
]


@pytest.mark.parametrize("exc,cause", FAILURES, ids=[c for _, c in FAILURES])
def test_a_failure_to_start_is_one_sentence_naming_its_cause(exc, cause):
    sentence = V.start_failure(exc)
    assert cause in sentence
    assert sentence.endswith(".") and "\n" not in sentence and sentence.count(". ") == 0
    assert len(sentence) < 400


def test_the_engine_raises_the_sentence_and_logs_the_raw_error(monkeypatch, tmp_path, capsys):
    fake = install(monkeypatch)
    fake.fail = RuntimeError("Engine core initialization failed. See root cause above.")
    fake.fail.__cause__ = torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 9 GiB.")
    with pytest.raises(V.VLLMStartError, match="ran out of memory.*CUDA out of memory"):
        _engine(tmp_path)
    assert "Engine core initialization failed" in capsys.readouterr().err   # the raw traceback
    monkeypatch.setitem(__import__("sys").modules, "vllm", None)            # vLLM absent
    with pytest.raises(V.VLLMStartError, match="vLLM is not installed"):
        _engine(tmp_path)


# ---- the real vLLM ---------------------------------------------------------------------------
@pytest.mark.skipif(importlib.util.find_spec("vllm") is None, reason="vLLM is not installed")
@pytest.mark.skipif(not torch.cuda.is_available(), reason="no CUDA GPU")
def test_real_vllm_engine_pushes_sleeps_and_wakes(tiny_model_dir):
    """On a GPU with vLLM: greedy tokens with their log-probs, a weight push that changes them,
    and a sleep/wake cycle that keeps the pushed weights."""
    from transformers import AutoModelForCausalLM

    policy = AutoModelForCausalLM.from_pretrained(tiny_model_dir).cuda()
    engine = V.VLLMEngine(str(tiny_model_dir), gpu_memory_utilization=0.2, max_model_len=256,
                          seed=0)
    prompt = [[1, 2, 3, 4]]
    engine.wake(policy)
    before = engine.generate(prompt, max_new_tokens=8, temperature=0.0)
    assert len(before[0].ids) == len(before[0].logprobs) == 8
    assert all(lp <= 0.0 for lp in before[0].logprobs)
    engine.sleep()
    with torch.no_grad():
        policy.lm_head.weight.mul_(-1.0)
    assert engine.wake(policy) > 0
    after = engine.generate(prompt, max_new_tokens=8, temperature=0.0)
    assert after[0].ids != before[0].ids
    engine.sleep()
    assert engine.wake(policy) == 0
    assert engine.generate(prompt, max_new_tokens=8, temperature=0.0)[0].ids == after[0].ids


@pytest.mark.parametrize("lora_rank", [0, 4])
def test_a_shaped_policy_starts_vllm_on_dummy_weights_and_sends_its_own_first(
        monkeypatch, tmp_path, tiny_model_dir, lora_rank):
    """model.shape (random weights): vLLM builds the architecture from the run's copy of its
    config with dummy weights, so the first wake sends the trainer's whole weights, under LoRA
    the base too, and later wakes send only what an update changed (LoRA: the adapter)."""
    import json

    from training.config import resolve
    from training.policy import SHAPES_DIR, load_models

    shape = json.loads((SHAPES_DIR / "qwen3-4b.json").read_text())
    shape.update(vocab_size=49152, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                 num_attention_heads=4, num_key_value_heads=2, head_dim=16)
    (tmp_path / "tiny.json").write_text(json.dumps(shape))
    fake = install(monkeypatch)
    cfg = resolve("usergym", "cpu", {"model.path": str(tiny_model_dir), "model.device": "cpu",
                                     "model.shape": str(tmp_path / "tiny.json"),
                                     "model.lora_rank": lora_rank, "rollout.backend": "vllm"})
    models = load_models(cfg.model, seed=0, critic=False)
    engine = V.start_engine(cfg, models, tmp_path / "run")
    (init,) = fake.of("init")
    assert init["model"] == str(tmp_path / "run" / "vllm-shape") and init["load_format"] == "dummy"
    assert json.loads((tmp_path / "run" / "vllm-shape" / "config.json").read_text())["model_type"] == "qwen3"
    engine.wake(models.policy)
    base = [n for n in fake.of("load_weights")[0]["names"]]
    assert "model.layers.0.self_attn.q_norm.weight" in base and not any("lora" in n for n in base)
    fake.calls.clear()
    with torch.no_grad():
        next(p for n, p in models.policy.named_parameters() if p.requires_grad).add_(0.1)
    engine.wake(models.policy)
    assert ("load_weights" in fake.names()) == (lora_rank == 0)     # LoRA: the adapter alone
    assert engine.pushes == 2


def test_base_weights_go_one_level_down_into_an_engine_with_lora_wrapped_layers():
    """vLLM started with enable_lora wraps its layers (their weight is `<layer>.base_layer.weight`)
    and its load_weights finds no `embed_tokens.weight`: the push that failed on the H100
    (2026-12-06, the LoRA 4B shape) names each wrapped layer's base, q_proj/k_proj/v_proj
    included where the model packs them into a wrapped qkv_proj; other names stay."""

    class Wrapped(torch.nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.base_layer = inner

    class Attn(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv_proj = Wrapped(torch.nn.Linear(2, 6, bias=False))
            self.o_proj = Wrapped(torch.nn.Linear(2, 2, bias=False))

    class Engine(torch.nn.Module):
        packed_modules_mapping = {"qkv_proj": ["q_proj", "k_proj", "v_proj"]}

        def __init__(self):
            super().__init__()
            self.model = torch.nn.Module()
            self.model.embed_tokens = Wrapped(torch.nn.Embedding(4, 2))
            self.model.norm = torch.nn.LayerNorm(2)
            self.model.self_attn = Attn()

    t = torch.zeros(1)
    pairs = [("model.embed_tokens.weight", t), ("model.self_attn.q_proj.weight", t),
             ("model.self_attn.o_proj.weight", t), ("model.norm.weight", t)]
    names = [n for n, _ in V.to_lora_wrapped(pairs, Engine())]
    assert names == ["model.embed_tokens.base_layer.weight", "model.self_attn.q_proj.base_layer.weight",
                     "model.self_attn.o_proj.base_layer.weight", "model.norm.weight"]
    # an engine without LoRA (no wrapped layer) gets the names as they are
    plain = torch.nn.Module()
    plain.embed_tokens = torch.nn.Embedding(4, 2)
    assert V.to_lora_wrapped(pairs, plain) == pairs
