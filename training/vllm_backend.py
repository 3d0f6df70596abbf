"""Rollouts through vLLM, colocated with the trainer on its GPU (`rollout.backend = "vllm"`).

    orchestrator start --bench usergym --set rollout.backend=vllm --set model.lora_rank=16
    python -m pytest -q tests/training/test_vllm_backend.py     # the contract, on a fake vLLM

What happens, and why (the pages named are docs.vllm.ai's; the API as of vLLM 0.22-0.26):
1. One `vllm.LLM` in the trainer's own process (`VLLM_ENABLE_V1_MULTIPROCESSING=0`, as TRL's
   colocate mode runs it), so a weight push hands vLLM the trainer's tensors in place, with no
   copy through another process. It takes `rollout.gpu_memory_utilization` of the GPU.
2. It sleeps during the update ("Sleep Mode": `LLM(enable_sleep_mode=True)`): `sleep(level=1)`
   moves its weights to CPU memory and drops its KV cache (`LLM.sleep` resets the prefix cache
   first). Waking brings the weights back (`wake_up(tags=["weights"])`), takes the new ones, and
   only then allocates the KV cache (`wake_up(tags=["kv_cache"])`), the order verl's sharding
   manager uses so that the cache is not held while weights are written. Level 1, not 2: level 2
   forgets the weights, so every wake would have to push them even when the policy is unchanged.
3. After every update the policy's weights go in (`LLM.apply_model` calling the vLLM model's
   `load_weights`, which takes Hugging Face names and fuses q/k/v and gate/up itself, as TRL's
   colocate mode and verl load them), but only when they changed since the last push: the sum
   of the parameters' in-place version counters (`weights_version`), which the KV engine's
   RolloutEngine reads the same way. `pushes`, `tensors_sent` and `bytes_sent` count what went.
   With LoRA (model.lora_rank > 0) the engine keeps the base weights and the policy is an
   adapter: saved to a folder of the run and loaded as a `LoRARequest` with a new id each
   version ("LoRA Adapters"; `enable_lora`, `max_lora_rank` one of vLLM's `MaxLoRARanks`).
4. The LLM user is served by the same engine where it is the policy's base model: under LoRA a
   request without the adapter is exactly the frozen reference (training/users/llm.py,
   EngineLLMUser), and no second copy of the base is loaded. Under full fine-tuning the engine
   holds the policy's current weights, so the reference user keeps its own KV engine.
5. Prefix caching is on ("Automatic Prefix Caching": `enable_prefix_caching=True`): a turn sends
   the whole episode again, and vLLM finds the earlier turns' blocks in its cache.
6. Sampling means what it means in the graph backend (`sampling_kwargs`, training/generation.py):
   temperature and top-p with no top-k cut, greedy at temperature 0, max new tokens, stop ids
   kept in the output (stop strings too, where given), one seed per request.
7. Each sampled token's log-prob comes back (`SamplingParams(logprobs=0)`: the sampled token's
   alone), after temperature (`LLM(logprobs_mode="processed_logprobs")`), which is the trainer's
   convention (training/policy.py divides the logits by the rollout temperature): the update
   compares them with its own (metric rollout/probs_diff, training/update.py).
8. A failure to start ends in one sentence naming the cause (`start_failure`): vLLM missing, an
   ABI mismatch, CUDA or its driver, too little memory; the raw error goes to stderr first (the
   run's trainer.log).

NOT RUN ON A GPU YET: vLLM is not installed on this project's machines (nor on the lent GPU:
scripts/gpu/carry_vllm.py carries vLLM 0.26.0 there in 10 or 16 device calls, not run yet). The
contract is tested on the CPU against a recording fake of `vllm` (tests/training/
test_vllm_backend.py); one test needs the real vLLM and a GPU and skips without them. Nothing
imports vllm unless this backend is chosen.
"""
from __future__ import annotations

import contextlib
import os
import shutil
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Sequence

import torch

from training.token_ids import trim

# wrappers the trainer may put around the policy, and the prefixes they add to parameter names
_WRAPPER_PREFIXES = ("module.", "_orig_mod.", "_fsdp_wrapped_module.", "_checkpoint_wrapped_module.")
_PEFT_PREFIX = "base_model.model."
# parameters that are not the language model's (a critic's value head) or not weights at all
_SKIP_PARTS = ("lora_A", "lora_B", "lora_embedding", "lora_magnitude", "v_head", "value_head",
               "rotary_emb.inv_freq")
# the LoRA ranks vLLM accepts as max_lora_rank (vllm/config/lora.py, MaxLoRARanks, 0.22-0.26)
VLLM_LORA_RANKS = (1, 8, 16, 32, 64, 128, 256, 320, 512)
SLEEP_LEVEL = 1       # module docstring, 2.


class VLLMStartError(RuntimeError):
    """vLLM did not start; the message is one sentence naming the cause (`start_failure`)."""


def vllm_weight_name(name: str) -> str | None:
    """The Hugging Face name vLLM's `load_weights` expects for a trainer-side parameter name, or
    None for parameters vLLM must not receive (LoRA factors, value heads, buffers).

    'module._orig_mod.model.layers.0.mlp.up_proj.weight' -> 'model.layers.0.mlp.up_proj.weight';
    peft: 'base_model.model.model.layers.0.self_attn.q_proj.base_layer.weight'
          -> 'model.layers.0.self_attn.q_proj.weight'.
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
            tied_embeddings = bool(model_or_state.config.tie_word_embeddings)
    seen = set()
    for raw, tensor in state.items():
        name = vllm_weight_name(raw)
        if name is None or name in seen:
            continue
        if tied_embeddings and name == "lm_head.weight":
            continue
        seen.add(name)
        yield name, tensor.detach()


def to_lora_wrapped(pairs: list[tuple[str, torch.Tensor]], model: torch.nn.Module
                    ) -> list[tuple[str, torch.Tensor]]:
    """The pairs renamed for an engine started with enable_lora: vLLM wraps each LoRA-capable layer
    (embed_tokens, qkv_proj, o_proj, gate_up_proj, down_proj, ...) in a module whose own weight is
    `<layer>.base_layer.weight`, so `load_weights` finds no `<layer>.weight` ("There is no module
    or parameter named 'embed_tokens.weight' in Qwen3Model", the H100 run of 2026-12-06). A
    Hugging Face name of such a layer, or of a layer the model packs into one (q_proj into
    qkv_proj: the model's `packed_modules_mapping`), gets `base_layer.` before its last part;
    vLLM's own q_proj -> qkv_proj mapping then keeps working on the longer name. Unchanged
    where nothing is wrapped."""
    modules = model.named_modules() if hasattr(model, "named_modules") else ()
    wrapped = {name.rsplit(".", 1)[-1] for name, module in modules
               if name and hasattr(module, "base_layer")}
    if not wrapped:
        return pairs
    for packed, parts in (getattr(model, "packed_modules_mapping", None) or {}).items():
        if packed in wrapped:
            wrapped |= set(parts)
    out = []
    for name, tensor in pairs:
        head, _, leaf = name.rpartition(".")
        if head.rsplit(".", 1)[-1] in wrapped:
            name = f"{head}.base_layer.{leaf}"
        out.append((name, tensor))
    return out


def weights_version(model: torch.nn.Module) -> int:
    """A number that grows whenever any parameter is written in place (an optimiser step, a
    `load_state_dict`): the sum of torch's per-tensor version counters (`Tensor._version`)."""
    return sum(p._version for p in model.parameters())


def vllm_lora_rank(rank: int) -> int:
    """vLLM's `max_lora_rank` for an adapter of rank `rank`: the smallest accepted one above it."""
    for allowed in VLLM_LORA_RANKS:
        if allowed >= rank:
            return allowed
    raise VLLMStartError(f"model.lora_rank {rank} is above vLLM's largest LoRA rank "
                         f"{VLLM_LORA_RANKS[-1]}: lower model.lora_rank.")


def sampling_kwargs(max_new_tokens: int, temperature: float = 1.0, top_p: float = 1.0, *,
                    greedy: bool = False, seed: int | None = None, stop_ids: Sequence[int] = (),
                    stop: Sequence[str] = (), logprobs: bool = True) -> dict:
    """Keyword arguments of `vllm.SamplingParams` with the graph backend's semantics: new token
    ids only, nothing detokenised; a stop id ends the turn and stays in it; without stop ids or
    strings exactly max_new_tokens (EOS ignored, as the graph backend has no stop then); no
    top-k cut (-1: all tokens); temperature <= 0 or `greedy` is greedy (vLLM's temperature 0).
    Stop strings are matched on the text, so they make vLLM detokenise; the string is kept, as a
    stop id is. logprobs: the sampled token's log-prob (`logprobs=0` returns it alone). top_k 0
    is vLLM 0.26's "no cut" (vllm/sampling_params.py accepts -1 quietly but prefers 0)."""
    greedy = greedy or temperature <= 0
    kw = dict(max_tokens=int(max_new_tokens), temperature=0.0 if greedy else float(temperature),
              top_p=1.0 if greedy else float(top_p), top_k=0, seed=seed,
              stop_token_ids=[int(t) for t in stop_ids], ignore_eos=not stop_ids and not stop,
              skip_special_tokens=False, detokenize=bool(stop), logprobs=0 if logprobs else None)
    if stop:
        kw.update(stop=[str(s) for s in stop], include_stop_str_in_output=True)
    return kw


def build_requests(prompt_ids: list[list[int]]) -> list[dict]:
    """vLLM token prompts (`TokensPrompt` is a TypedDict of this shape): no re-tokenisation."""
    if any(len(p) == 0 for p in prompt_ids):
        raise ValueError("every prompt needs at least one token (got an empty prompt).")
    return [{"prompt_token_ids": [int(t) for t in p]} for p in prompt_ids]


# ---- why vLLM did not start ------------------------------------------------------------------
MISSING = ("vLLM is not installed in this environment: install the vLLM wheel built for this "
           "PyTorch on a CUDA machine, or set rollout.backend to kv.")
# (phrases of vLLM's, PyTorch's or the loader's messages, lower case; the sentence), first match
# wins: out-of-memory before CUDA ("CUDA error: out of memory"), ABI before CUDA ("libcudart.so.12:
# cannot open shared object file" is a wheel built for another CUDA).
CAUSES: tuple[tuple[tuple[str, ...], str], ...] = (
    (("less than desired gpu memory utilization",),
     "the GPU has less free memory than rollout.gpu_memory_utilization asks of vLLM ({detail}): "
     "lower rollout.gpu_memory_utilization, or let the trainer hold less (model.lora_rank > 0)"),
    (("kv cache is needed", "available kv cache memory", "no available memory for the cache"),
     "vLLM's share of the GPU leaves too little KV cache for one episode ({detail}): raise "
     "rollout.gpu_memory_utilization or lower rollout.max_episode_tokens"),
    (("out of memory", "outofmemoryerror"),
     "the GPU ran out of memory while vLLM started ({detail}): lower "
     "rollout.gpu_memory_utilization, or let the trainer hold less (model.lora_rank > 0)"),
    (("derived max_model_len",),
     "an episode is longer than the model's context ({detail}): lower rollout.max_episode_tokens "
     "(vLLM's max_model_len is rollout.max_episode_tokens + rollout.response_length)"),
    (("undefined symbol", "_c.abi3.so", "cannot open shared object file", "glibcxx",
      "no module named 'vllm._c'"),
     "vLLM's compiled kernels do not load against this PyTorch and CUDA, an ABI mismatch "
     "({detail}): install the vLLM wheel built for torch {torch} and CUDA {cuda}"),
    (("driver", "no kernel image", "no cuda gpus", "cuda error", "cudaerror",
      "failed to infer device type", "cuda initialization"),
     "vLLM could not use the GPU's CUDA ({detail}): check that `nvidia-smi` works here and that "
     "its driver supports CUDA {cuda}"),
)


def _error_text(exc: BaseException) -> str:
    """The exception and the ones it was raised from (vLLM wraps the engine's real error)."""
    parts, seen = [], set()
    while exc is not None and id(exc) not in seen:
        seen.add(id(exc))
        parts.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return "\n".join(parts)


def _detail(text: str, phrase: str) -> str:
    """The line of `text` holding `phrase` (else the first), to its first sentence end, clipped."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()] or [""]
    line = next((ln for ln in lines if phrase and phrase in ln.lower()), lines[0])
    line = line.split(". ")[0].rstrip(".")
    return line if len(line) <= 160 else line[:157] + "..."


def start_failure(exc: BaseException) -> str:
    """One sentence naming why vLLM did not start: not installed, an ABI mismatch, CUDA or its
    driver, too little memory, an episode past the model's context; else the error's first line."""
    if isinstance(exc, ModuleNotFoundError) and exc.name == "vllm":
        return MISSING
    text = _error_text(exc)
    low = text.lower()
    for phrases, sentence in CAUSES:
        hit = next((p for p in phrases if p in low), None)
        if hit is not None:
            return sentence.format(detail=_detail(text, hit), torch=torch.__version__,
                                   cuda=torch.version.cuda or "(none)") + "."
    return f"vLLM failed to start ({_detail(text, '')}); its full error is in the trainer's log."


# ---- the engine ------------------------------------------------------------------------------
@dataclass
class Sample:
    """One request's answer: the new token ids, up to and including the first stop id, and the
    engine's log-prob of each (after temperature, module docstring 7.)."""
    ids: list[int]
    logprobs: list[float]


def _sample(completion, stop_ids: Sequence[int]) -> Sample:
    """A Sample from a vLLM `CompletionOutput`: `logprobs[k]` maps token id -> `Logprob`, the
    sampled token's among them (its `.logprob`)."""
    ids = [int(t) for t in completion.token_ids]
    if stop_ids:
        ids = trim(ids, stop_ids)
    steps = completion.logprobs
    return Sample(ids, [float(steps[k][t].logprob) for k, t in enumerate(ids)])


class VLLMEngine:
    """The colocated engine (module docstring): it generates for the policy and the LLM user,
    sleeps during the update, and wakes with the policy's new weights."""

    def __init__(self, model_path: str | Path, *, gpu_memory_utilization: float,
                 max_model_len: int, seed: int, lora_rank: int = 0,
                 adapter_dir: str | Path | None = None, dtype: str = "bfloat16",
                 load_format: str = "auto"):
        self.lora_rank = lora_rank
        # "dummy" (a model.shape run): vLLM builds the architecture with random weights of its
        # own, so the first push sends the trainer's whole weights, the base included under LoRA
        self.base_pending = load_format == "dummy"
        self.adapter_dir = Path(adapter_dir) if adapter_dir is not None else None
        if lora_rank and self.adapter_dir is None:
            raise ValueError("a LoRA policy needs adapter_dir, where its adapter is saved for vLLM.")
        self.asleep = False
        self.version: int | None = None    # weights_version of the policy held; None: none pushed
        self.pushes = self.tensors_sent = self.bytes_sent = 0
        self.last_sent, self.last_push_s = 0, 0.0   # the latest wake's tensors pushed, seconds
        self.adapter = None                # the policy's LoRARequest (LoRA)
        self._adapter_path: Path | None = None
        kw = dict(model=str(model_path), dtype=dtype, seed=int(seed),
                  gpu_memory_utilization=float(gpu_memory_utilization),
                  max_model_len=int(max_model_len), enable_prefix_caching=True,
                  enable_sleep_mode=True, logprobs_mode="processed_logprobs")
        if load_format != "auto":
            kw["load_format"] = load_format
        if lora_rank:
            kw.update(enable_lora=True, max_lora_rank=vllm_lora_rank(lora_rank), max_loras=1)
        # in this process: apply_model's function then runs on the model here, tensors in place
        os.environ["VLLM_ENABLE_V1_MULTIPROCESSING"] = "0"
        try:
            import vllm

            self.llm = vllm.LLM(**kw)
        except Exception as exc:
            traceback.print_exc(file=sys.stderr)          # the raw error, for the trainer's log
            raise VLLMStartError(start_failure(exc)) from None

    @property
    def serves_base(self) -> bool:
        """Whether a request without the adapter is the base model, not the policy (LoRA)."""
        return self.lora_rank > 0

    def generate(self, prompt_ids: list[list[int]], *, max_new_tokens: int,
                 temperature: float = 1.0, top_p: float = 1.0, stop_ids: Sequence[int] = (),
                 seed: int | None = None, adapter: bool = True) -> list[Sample]:
        """Each prompt's Sample (module docstring, 6. and 7.). adapter False asks the base model
        (LoRA; under full fine-tuning the engine holds the policy either way). Request i is
        seeded seed + i; seed None draws the base seed from torch's global generator, which the
        trainer reseeds every step, so a resumed step samples what it sampled before."""
        if not prompt_ids:
            return []
        if self.asleep:
            raise RuntimeError("the vLLM engine is asleep: wake it (VLLMEngine.wake) first.")
        from vllm import SamplingParams

        base = int(torch.randint(0, 2**31 - 1, ())) if seed is None else int(seed)
        params = [SamplingParams(**sampling_kwargs(max_new_tokens, temperature, top_p,
                                                   seed=base + i, stop_ids=stop_ids))
                  for i in range(len(prompt_ids))]
        outs = self.llm.generate(build_requests(prompt_ids), params, use_tqdm=False,
                                 lora_request=self.adapter if adapter else None)
        return [_sample(o.outputs[0], stop_ids) for o in outs]

    def score(self, sequences: list[list[int]], *, adapter: bool = True) -> list[list[float]]:
        """The engine's log-prob of each token of each sequence given the tokens before it (the
        first token has none), at temperature 1: how the trainer's and the engine's weights are
        compared on a fixed text (scripts/gpu/vllm_check.py). vLLM returns these as prompt
        log-probs (`SamplingParams(prompt_logprobs=0)`: the given token's alone), which skip the
        prefix cache, and which are the same in its raw and processed logprobs modes."""
        if not sequences:
            return []
        if self.asleep:
            raise RuntimeError("the vLLM engine is asleep: wake it (VLLMEngine.wake) first.")
        if any(len(s) < 2 for s in sequences):
            raise ValueError("every sequence to score needs at least two tokens.")
        from vllm import SamplingParams

        params = SamplingParams(max_tokens=1, temperature=1.0, prompt_logprobs=0, detokenize=False)
        outs = self.llm.generate(build_requests(sequences), params, use_tqdm=False,
                                 lora_request=self.adapter if adapter else None)
        return [[float(step[int(t)].logprob) for step, t in zip(o.prompt_logprobs[1:], seq[1:])]
                for o, seq in zip(outs, sequences)]

    def sleep(self) -> None:
        """Free the GPU for the update: weights to CPU memory, KV cache dropped (level 1)."""
        if not self.asleep:
            self.llm.sleep(level=SLEEP_LEVEL)
            self.asleep = True

    def wake(self, policy: torch.nn.Module) -> int:
        """Back on the GPU holding the policy's current weights; returns the tensors pushed."""
        if self.asleep:
            self.llm.wake_up(tags=["weights"])
            sent = self.push(policy)
            self.llm.wake_up(tags=["kv_cache"])
            self.asleep = False
            return sent          # LLM.sleep reset the prefix cache: nothing stale is left
        sent = self.push(policy)
        if sent and not self.lora_rank:  # blocks cached under the old weights must not be reused
            self.llm.reset_prefix_cache()
        return sent

    @contextlib.contextmanager
    def awake(self, policy: torch.nn.Module):
        """The rollout's context: woken with the policy's weights (`last_sent`, `last_push_s`),
        asleep again when it ends, even on an error."""
        t0 = time.perf_counter()
        self.last_sent = self.wake(policy)
        self.last_push_s = time.perf_counter() - t0
        try:
            yield self
        finally:
            self.sleep()

    @torch.no_grad()
    def push(self, policy: torch.nn.Module) -> int:
        """The policy's weights (LoRA: its adapter) into the engine when they changed since the
        last push; returns how many tensors went (0: unchanged, nothing sent)."""
        version = weights_version(policy)
        if version == self.version:
            return 0
        sent = 0
        if self.base_pending and self.lora_rank:       # the trainer's random base, once
            sent += self._push_weights(policy)
        self.base_pending = False
        sent += self._push_adapter(policy) if self.lora_rank else self._push_weights(policy)
        self.version, self.pushes = version, self.pushes + 1
        self.tensors_sent += sent
        return sent

    def _push_weights(self, policy: torch.nn.Module) -> int:
        pairs = list(vllm_weights(policy))
        # load_weights copies each tensor into vLLM's own (bf16) parameter, converting the dtype;
        # under LoRA the engine's layers are wrapped, their weights one level down (base_layer)
        self.llm.apply_model(lambda model: model.load_weights(weights=to_lora_wrapped(pairs, model)))
        self.bytes_sent += sum(t.numel() * t.element_size() for _, t in pairs)
        return len(pairs)

    def _push_adapter(self, policy: torch.nn.Module) -> int:
        """peft's `save_pretrained` writes the adapter alone (adapter_config.json and
        adapter_model.safetensors); a new `lora_int_id` makes vLLM load it, as its LoRA cache
        keys adapters by that id; the previous version's folder is removed."""
        from vllm.lora.request import LoRARequest

        version = self.pushes + 1
        folder = self.adapter_dir / f"v{version:06d}"
        policy.save_pretrained(str(folder))
        lora = [p for name, p in policy.named_parameters() if "lora_" in name]
        self.bytes_sent += sum(p.numel() * p.element_size() for p in lora)
        old, self._adapter_path = self._adapter_path, folder
        self.adapter = LoRARequest(f"policy-v{version}", version, str(folder))
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
        return len(lora)


def start_engine(cfg, models, run_dir: str | Path) -> VLLMEngine:
    """The engine of a training run (Trainer.__init__), from its config: the policy's folder,
    an episode's whole length as vLLM's max_model_len (rollout.max_episode_tokens plus the turn
    that may start just under it), the run's seed; a LoRA policy's adapters go to
    RUN/vllm-adapter/."""
    r = cfg.rollout
    path, load_format = models.path, "auto"
    if cfg.model.shape:      # random weights (training/shapes): vLLM builds the same architecture
        path, load_format = Path(run_dir) / "vllm-shape", "dummy"
        base = models.policy.get_base_model() if hasattr(models.policy, "peft_config") else models.policy
        base.config.save_pretrained(str(path))
        models.tokenizer.save_pretrained(str(path))
    return VLLMEngine(path, gpu_memory_utilization=r.gpu_memory_utilization,
                      max_model_len=r.max_episode_tokens + r.response_length,
                      seed=cfg.trainer.seed, lora_rank=cfg.model.lora_rank,
                      adapter_dir=Path(run_dir) / "vllm-adapter", load_format=load_format)


class VLLMGenerator:
    """The generation API of training/generation.py (`make_generator(..., backend="vllm")`,
    the benchmarks' entry) over a VLLMEngine holding `model`'s weights: token ids only."""

    def __init__(self, model, tokenizer, *, model_path: str | None = None,
                 gpu_memory_utilization: float = 0.3, max_model_len: int = 8192, seed: int = 0):
        path = model_path or model.name_or_path
        if not path:
            raise ValueError("the vllm backend needs model_path: a folder with the model's "
                             "config.json and tokenizer (save_pretrained output).")
        self.model, self.tokenizer = model, tokenizer
        self.engine = VLLMEngine(path, gpu_memory_utilization=gpu_memory_utilization,
                                 max_model_len=max_model_len, seed=seed)
        self.engine.push(model)

    def generate(self, prompt_ids: list[list[int]], max_new_tokens: int, temperature: float = 1.0,
                 top_p: float = 1.0, greedy: bool = False, seed: int = 0,
                 stop_ids: Sequence[int] = ()) -> list[list[int]]:
        samples = self.engine.generate(prompt_ids, max_new_tokens=max_new_tokens,
                                       temperature=0.0 if greedy else temperature, top_p=top_p,
                                       stop_ids=stop_ids, seed=seed)
        return [s.ids for s in samples]
