"""A recording stand-in for the parts of `vllm` that training/vllm_backend.py calls: `LLM`,
`SamplingParams` and `vllm.lora.request.LoRARequest`. Written for these tests from vLLM's
documented signatures; it runs no model.

    fake = install(monkeypatch, reply=lambda prompt, params: [5, 6, 2])
    ...                                  # code under test builds vllm.LLM and calls it
    fake.names()                         # ["init", "apply_model", "generate", "sleep", ...]

Every call is appended to `fake.calls` as (name, details). `generate` answers each request with
`reply(prompt_token_ids, params_kwargs)`, cut to max_tokens and at the first stop id as vLLM
does, and gives the k-th token the log-prob -0.1 * (k + 1) (a `Logprob` under the token's id,
the shape `SamplingParams(logprobs=0)` returns); with `prompt_logprobs` set, each prompt token
after the first gets -0.01 * its id (`RequestOutput.prompt_logprobs`, None first). Set `fake.fail` to an exception for `LLM(...)`
to raise it.
"""
from __future__ import annotations

import os
import sys
import types
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


class SamplingParams:
    def __init__(self, **kw):
        self.kw = kw


class LoRARequest:
    def __init__(self, lora_name: str, lora_int_id: int, lora_path: str = ""):
        self.lora_name, self.lora_int_id, self.lora_path = lora_name, lora_int_id, lora_path


@dataclass
class Completion:
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]]


@dataclass
class Output:
    outputs: list[Completion]
    prompt_logprobs: list[dict[int, Logprob] | None] | None = None


class Model:
    """The engine's model as `LLM.apply_model` hands it over: `load_weights` records names."""

    def __init__(self, fake: "FakeVLLM"):
        self.fake = fake

    def load_weights(self, weights):
        names = [name for name, _ in weights]
        self.fake.calls.append(("load_weights", {"names": names}))
        return set(names)


@dataclass
class FakeVLLM:
    reply: Callable[[list[int], dict], list[int]]
    calls: list[tuple[str, Any]] = field(default_factory=list)
    fail: BaseException | None = None
    asleep: bool = False

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]

    def of(self, name: str) -> list[Any]:
        return [detail for n, detail in self.calls if n == name]

    def module(self) -> types.ModuleType:
        fake = self

        class LLM:
            def __init__(self, model: str, **kw):
                fake.calls.append(("init", {"model": model, **kw, "env_multiprocessing":
                                            os.environ.get("VLLM_ENABLE_V1_MULTIPROCESSING")}))
                if fake.fail is not None:
                    raise fake.fail
                self.model = Model(fake)

            def generate(self, prompts, sampling_params, *, use_tqdm=True, lora_request=None):
                if fake.asleep:
                    raise RuntimeError("fake vLLM: generate while asleep")
                params = sampling_params if isinstance(sampling_params, list) \
                    else [sampling_params] * len(prompts)
                fake.calls.append(("generate", {"prompts": [p["prompt_token_ids"] for p in prompts],
                                                "params": [p.kw for p in params],
                                                "lora": lora_request}))
                outs = []
                for prompt, p in zip(prompts, params):
                    ids = list(fake.reply(prompt["prompt_token_ids"], p.kw))[:p.kw["max_tokens"]]
                    stops = set(p.kw.get("stop_token_ids") or ())
                    cut = next((k + 1 for k, t in enumerate(ids) if t in stops), len(ids))
                    ids = ids[:cut]
                    lps = [{t: Logprob(-0.1 * (k + 1), rank=1)} for k, t in enumerate(ids)]
                    prompt_lps = None
                    if p.kw.get("prompt_logprobs") is not None:   # the first token has none
                        given = prompt["prompt_token_ids"]
                        prompt_lps = [None] + [{t: Logprob(-0.01 * t, rank=1)} for t in given[1:]]
                    outs.append(Output([Completion(ids, lps)], prompt_lps))
                return outs

            def sleep(self, level: int = 1):
                fake.calls.append(("sleep", {"level": level}))
                fake.asleep = True

            def wake_up(self, tags=None):
                fake.calls.append(("wake_up", {"tags": tags}))
                if tags is None or "kv_cache" in tags:
                    fake.asleep = False

            def reset_prefix_cache(self):
                fake.calls.append(("reset_prefix_cache", {}))
                return True

            def apply_model(self, func):
                fake.calls.append(("apply_model", {}))
                return [func(self.model)]

        vllm = types.ModuleType("vllm")
        vllm.LLM, vllm.SamplingParams = LLM, SamplingParams
        return vllm


def install(monkeypatch, reply: Callable[[list[int], dict], list[int]] | None = None) -> FakeVLLM:
    """The fake `vllm` (and `vllm.lora.request`) in sys.modules for this test."""
    fake = FakeVLLM(reply=reply or (lambda prompt, params: [5, 6, 7, 8]))
    lora = types.ModuleType("vllm.lora")
    request = types.ModuleType("vllm.lora.request")
    request.LoRARequest = LoRARequest
    monkeypatch.setitem(sys.modules, "vllm", fake.module())
    monkeypatch.setitem(sys.modules, "vllm.lora", lora)
    monkeypatch.setitem(sys.modules, "vllm.lora.request", request)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    return fake
