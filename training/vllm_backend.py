"""Rollouts through vLLM, with the policy's new weights loaded after every update.

Optional: vLLM is imported only when this backend is built (`rollout.backend = "vllm"` /
`make_generator(..., backend="vllm")`). Two modes:
- "engine": an in-process `vllm.LLM` on the same GPU (colocated with training; give it a share of
  memory with `gpu_memory_utilization`). Weights are pushed with the model's own `load_weights`
  (which takes Hugging Face names and fuses q/k/v and gate/up itself), then the prefix cache is
  reset so no stale KV blocks survive the update.
- "server": TRL's `trl vllm-serve` on other GPUs; `trl.extras.vllm_client.VLLMClient` sends each
  parameter over its NCCL communicator (`update_named_param`) and resets the prefix cache.

NOT RUN HERE: vLLM is not installed on this project's machines (nor on the lent GPU:
scripts/gpu/carry_vllm.py carries vLLM 0.26.0 there in 10 or 16 device calls, not run yet). The
parts that need no vLLM are tested (tests/training/test_vllm_backend.py): the mapping from a
trainer-side parameter name to vLLM's name, which parameters are sent, and the request/sampling
arguments. Written against vLLM's documented API: `LLM(model=..., dtype=...)`,
`LLM.generate(prompts=[{"prompt_token_ids": ids}], sampling_params=SamplingParams(...))`,
`RequestOutput.outputs[0].token_ids`, `LLM.reset_prefix_cache()`.
"""
from __future__ import annotations

import importlib.util
from typing import Iterator, Sequence

import torch

from training.token_ids import trim

# wrappers the trainer may put around the policy, and the prefixes they add to parameter names
_WRAPPER_PREFIXES = ("module.", "_orig_mod.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")
_PEFT_PREFIX = "base_model.model."
# parameters that are not the language model's (a critic's value head) or not weights at all
_SKIP_PARTS = ("lora_A", "lora_B", "lora_embedding", "lora_magnitude", "v_head", "value_head",
               "rotary_emb.inv_freq")


class VLLMUnavailable(RuntimeError):
    """vLLM (or TRL for server mode) is not installed; the message says how to get it."""


def vllm_weight_name(name: str) -> str | None:
    """The Hugging Face name vLLM's `load_weights` expects for a trainer-side parameter name, or
    None for parameters vLLM must not receive (LoRA factors, value heads, buffers).

    'module._orig_mod.model.layers.0.mlp.up_proj.weight' -> 'model.layers.0.mlp.up_proj.weight';
    peft: 'base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight'
          -> 'model.layers.0.self_attn.q_proj.weight' (send it after `merge_adapter()`).
    """
    if any(part in name for part in _SKIP_PARTS):
        return None
    changed = True
    while changed:
        changed = False
        for prefix in _WRAPPER_PREFIXES + (_PEFT_PREFIX,):
            if name.startswith(prefix):
                name, changed = name[len(prefix):], True
        name = name.replace("._fsdp_wrapped_module.", ".").replace("._checkpoint_wrapped_module.", ".")
        name = name.replace("._orig_mod.", ".")
    return name.replace(".base_layer.", ".")


def vllm_weights(model_or_state, *, tied_embeddings: bool | None = None
                 ) -> Iterator[tuple[str, torch.Tensor]]:
    """(vLLM name, tensor) pairs to send after an update; a tied `lm_head.weight` is left out
    (vLLM ties it to the embedding itself)."""
    if isinstance(model_or_state, dict):
        state = model_or_state
    else:
        state = model_or_state.state_dict()
        if tied_embeddings is None:
            cfg = getattr(model_or_state, "config", None)
            tied_embeddings = bool(getattr(cfg, "tie_word_embeddings", False))
    seen = set()
    for raw, tensor in state.items():
        name = vllm_weight_name(raw)
        if name is None or name in seen:
            continue
        if tied_embeddings and name == "lm_head.weight":
            continue
        seen.add(name)
        yield name, tensor.detach()


def sampling_kwargs(max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0,
                    greedy: bool = False, seed: int | None = None,
                    stop_ids: Sequence[int] = ()) -> dict:
    """Keyword arguments of `vllm.SamplingParams` matching the other backends' semantics: new
    token ids only, stop ids kept in the output, no top-k cut, nothing detokenised."""
    kw = dict(max_tokens=int(max_new_tokens), temperature=0.0 if greedy else float(temperature),
              top_p=1.0 if greedy else float(top_p), top_k=-1, seed=seed,
              stop_token_ids=[int(t) for t in stop_ids], ignore_eos=not stop_ids,
              skip_special_tokens=False, detokenize=False)
    return kw


def build_requests(prompt_ids: list[list[int]]) -> list[dict]:
    """vLLM token prompts (`TokensPrompt` is a TypedDict of this shape): no re-tokenisation."""
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token (got an empty prompt).")
    return [{"prompt_token_ids": [int(t) for t in p]} for p in prompt_ids]


def _require(module: str, how: str) -> None:
    if importlib.util.find_spec(module) is None:
        raise VLLMUnavailable(f"the vllm rollout backend needs `{module}`: {how}, or set "
                              "rollout.backend to 'auto'.")


class VLLMGenerator:
    """The generation API of training/generation.py served by vLLM; `sync_weights` after updates."""

    def __init__(self, model, tokenizer, *, model_path: str | None = None, mode: str = "engine",
                 gpu_memory_utilization: float = 0.3, host: str = "127.0.0.1",
                 port: int = 8000, dtype: str = "bfloat16"):
        if mode not in ("engine", "server"):
            raise ValueError(f"unknown vllm mode {mode!r}: choose 'engine' or 'server'.")
        self.mode, self.tokenizer = mode, tokenizer
        if mode == "engine":
            _require("vllm", "`pip install vllm` (CUDA machines only)")
            from vllm import LLM

            path = model_path or getattr(model, "name_or_path", None)
            if not path:
                raise ValueError("the vllm engine needs model_path: a folder with the policy's "
                                 "config.json and tokenizer (save_pretrained output).")
            self.llm = LLM(model=str(path), dtype=dtype, enable_prefix_caching=True,
                           gpu_memory_utilization=gpu_memory_utilization)
        else:
            _require("trl", "`pip install trl vllm` and start `trl vllm-serve --model PATH`")
            from trl.extras.vllm_client import VLLMClient

            self.client = VLLMClient(host=host, server_port=port)
            self.client.init_communicator()
        self.sync_weights(model)

    def generate(self, prompt_ids: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, seed: int = 0,
                 stop_ids: Sequence[int] = ()) -> list[list[int]]:
        if not prompt_ids:
            return []
        kw = sampling_kwargs(max_new_tokens, temperature, top_p, greedy, seed, stop_ids)
        if self.mode == "engine":
            from vllm import SamplingParams

            outs = self.llm.generate(build_requests(prompt_ids), SamplingParams(**kw),
                                     use_tqdm=False)
            return [list(o.outputs[0].token_ids) for o in outs]
        texts = [self.tokenizer.decode(p, skip_special_tokens=False) for p in prompt_ids]
        res = self.client.generate(prompts=texts, n=1, temperature=kw["temperature"],
                                   top_p=kw["top_p"], max_tokens=kw["max_tokens"])
        rows = res["completion_ids"] if isinstance(res, dict) else res
        return [trim(r, stop_ids) if stop_ids else list(r) for r in rows]

    def _engine_model(self):
        """The engine's torch model (vLLM keeps it in its worker; in-process with one GPU)."""
        executor = self.llm.llm_engine.model_executor
        worker = executor.driver_worker
        runner = getattr(worker, "model_runner", None) or worker.worker.model_runner
        return runner.model

    @torch.no_grad()
    def sync_weights(self, model) -> int:
        """Push the policy's current weights (LoRA merged for the push); returns how many."""
        merge = hasattr(model, "merge_adapter")
        if merge:
            model.merge_adapter()
        try:
            pairs = list(vllm_weights(model))
            if self.mode == "engine":
                self._engine_model().load_weights(weights=pairs)
                self.llm.reset_prefix_cache()
            else:
                for name, tensor in pairs:
                    self.client.update_named_param(name, tensor)
                self.client.reset_prefix_cache()
        finally:
            if merge:
                model.unmerge_adapter()
        return len(pairs)
