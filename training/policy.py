"""The models of a run: policy, critic (own backbone + scalar value head), frozen reference.

Precision (`model.precision`): fp32 master weights with bf16 autocast on GPU, and on a CPU
with native bf16 arithmetic (AVX512-BF16 or AMX: about 1.7x faster than fp32 there); on a CPU
without it bf16 is emulated and autocast made a training pass 16x slower than fp32 (an AVX2 AMD
EPYC), so "auto" trains in fp32 there. Pure bf16 weights do not learn at these learning rates.
The frozen reference is kept in bf16 on GPU. LoRA through peft is an option (`model.lora_rank > 0`): then the reference is the
policy with its adapters switched off, so no third copy is held.

Alignment used everywhere (training.ppo): for token t of an episode, `logprobs[:, t]` is
log pi(token t | tokens < t) and `values[:, t]` is V(state before token t), both computed from the
hidden state at position t - 1; position 0 is never an action. The LM head runs only on action
positions, so a long prompt costs no (T, vocab) logits.
"""
from __future__ import annotations

import contextlib
import copy
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn

from training.config import ModelConfig
from training import ppo
from training.chunked_head import head_logprobs
from training.generation import PREFILL_CHUNK, attention_kernels


class ModelLoadError(ValueError):
    """The model asked for is not on this machine; the message says how to get it."""


# what a model folder needs from the hub: config, tokenizer files, chat template, safetensors
# weights (not .bin/.pth/.gguf copies some repositories also hold)
HUB_PATTERNS = ["*.json", "*.safetensors", "*.txt", "*.model", "*.tiktoken", "*.jinja"]
FOLDER_HINT = ("give a local folder holding its config.json and weights, or leave the model "
               "unset for the embedded SmolLM2-135M-Instruct")


def resolve_model_path(path: str) -> str:
    """A loadable model folder: "" is the packaged SmolLM2-135M-Instruct; a folder must hold
    config.json; anything else is a Hugging Face hub id ("Qwen/Qwen3-4B"), fetched into the
    hub's cache as transformers would fetch it (`hub_folder`). Everything after loads from the
    folder returned, so nothing is downloaded later in a run."""
    if not path:
        from training.smollm2 import ModelNotFound, model_dir
        try:
            return str(model_dir())
        except ModelNotFound as exc:
            raise ModelLoadError(str(exc)) from None
    if Path(path).is_dir():
        if not (Path(path) / "config.json").exists():
            raise ModelLoadError(f"{path} holds no config.json: point model.path at a Hugging Face "
                                 "model folder (save_pretrained output).")
        return path
    if path.startswith(("/", "./", "../", "~")) or Path(path).exists():
        raise ModelLoadError(f"there is no model folder at {path}: {FOLDER_HINT}.")
    return hub_folder(path)


def hub_offline() -> bool:
    """HF_HUB_OFFLINE as huggingface_hub reads it (1/ON/YES/TRUE), at call time: the hub reads
    it once at import, which a test or a caller setting it later would miss."""
    from huggingface_hub import constants

    env = os.environ.get("HF_HUB_OFFLINE", "").upper() in {"1", "ON", "YES", "TRUE"}
    return env or bool(constants.HF_HUB_OFFLINE)


def hub_folder(repo_id: str) -> str:
    """The local snapshot folder of hub model `repo_id`: downloaded when online (HUB_PATTERNS
    only), the cached copy offline; a model that cannot be had is one sentence naming why."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import (GatedRepoError, HFValidationError, LocalEntryNotFoundError,
                                        RepositoryNotFoundError, RevisionNotFoundError)

    offline = hub_offline()
    try:
        folder = snapshot_download(repo_id, allow_patterns=HUB_PATTERNS, local_files_only=offline)
    except HFValidationError:
        raise ModelLoadError(f"{repo_id!r} is neither a model folder here nor a Hugging Face hub "
                             f"id (owner/name): {FOLDER_HINT}.") from None
    except (GatedRepoError, RepositoryNotFoundError, RevisionNotFoundError):
        raise ModelLoadError(f"the Hugging Face hub has no model {repo_id!r} this machine may "
                             "read (not found, private or gated): check the id or log in with "
                             f"`hf auth login`, or {FOLDER_HINT}.") from None
    except (LocalEntryNotFoundError, OSError) as exc:
        first = (str(exc).splitlines() or [""])[0].removeprefix("Got: ")[:120].rstrip(".")
        why = "HF_HUB_OFFLINE is set and it is not in the hub's cache" if offline else \
            f"no connection to the hub: {first}"
        raise ModelLoadError(f"model {repo_id!r} could not be fetched from the Hugging Face hub "
                             f"({why}): {FOLDER_HINT}.") from None
    if not any(Path(folder).glob("*.safetensors")):
        raise ModelLoadError(f"hub model {repo_id!r} has no safetensors weights (only .bin or "
                             f"other formats, which are not fetched): {FOLDER_HINT}.")
    return folder


def cpu_has_native_bf16() -> bool:
    """Whether this CPU computes bf16 natively (Linux's flags avx512_bf16 or amx_bf16)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool(flags & {"avx512_bf16", "amx_bf16"})
    except OSError:
        pass
    return False


def pick_precision(name: str, device: torch.device) -> torch.dtype | None:
    """The autocast dtype of training passes for `model.precision` (None: plain fp32)."""
    if name == "fp32":
        return None
    if name == "bf16" or device.type == "cuda" or cpu_has_native_bf16():
        return torch.bfloat16
    return None


def pick_device(name: str) -> torch.device:
    if name == "cuda" or (name == "auto" and torch.cuda.is_available()):
        if not torch.cuda.is_available():
            raise ModelLoadError("model.device is cuda but no GPU is visible: set model.device "
                                 "to cpu or auto.")
        return torch.device("cuda")
    return torch.device("cpu")


class ValueModel(nn.Module):
    """The critic: a copy of the policy's backbone and a scalar head on every position."""

    def __init__(self, backbone: nn.Module, hidden_size: int):
        super().__init__()
        self.backbone = backbone
        self.value_head = nn.Linear(hidden_size, 1)
        nn.init.normal_(self.value_head.weight, std=1.0 / (hidden_size + 1))
        nn.init.zeros_(self.value_head.bias)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """(B, T) V(state before token t); column 0 is 0. input_ids, attention_mask: (B, T)."""
        hidden = self.backbone(input_ids=input_ids, attention_mask=attention_mask,
                               use_cache=False).last_hidden_state                 # (B, T, H)
        v = self.value_head(hidden).squeeze(-1).float()                           # (B, T)
        return torch.cat([torch.zeros_like(v[:, :1]), v[:, :-1]], dim=1)


class PolicyLogprobs(nn.Module):
    """`action_logprobs` of the policy as a module's forward: DDP and FSDP act in their wrapper's
    forward (FSDP gathers the root's embedding, norm and head there), so the update must enter
    through one; the bare policy's decoder would bypass them."""

    def __init__(self, policy: nn.Module):
        super().__init__()
        self.policy = policy

    def forward(self, input_ids, attention_mask, response_mask, temperature: float = 1.0,
                with_entropy: bool = False):
        return action_logprobs(self.policy, input_ids, attention_mask, response_mask,
                               temperature=temperature, with_entropy=with_entropy)


@dataclass
class Models:
    policy: nn.Module
    critic: ValueModel | None          # None under grpo / infopo (and in evaluation)
    reference: nn.Module | None        # None with LoRA: the policy with adapters disabled
    tokenizer: Any
    device: torch.device
    path: str
    # several processes (training.distributed; None = one process, the plain modules):
    actor: nn.Module | None = None            # PolicyLogprobs(policy) wrapped by DDP / FSDP
    critic_train: nn.Module | None = None     # the critic wrapped by DDP / FSDP
    rollout_policy: nn.Module | None = None   # plain whole-weight policy that generates
    autocast_dtype: torch.dtype | None = torch.bfloat16   # training passes (None: plain fp32)
    vllm: Any = None       # rollout.backend vllm: the colocated VLLMEngine (training/vllm_backend.py)

    def logprobs(self, input_ids, attention_mask, response_mask, *, temperature: float = 1.0,
                 with_entropy: bool = False):
        """The policy's action log-probs (and entropy) through the update's wrapper if any."""
        if self.actor is None:
            return action_logprobs(self.policy, input_ids, attention_mask, response_mask,
                                   temperature=temperature, with_entropy=with_entropy)
        return self.actor(input_ids, attention_mask, response_mask, temperature, with_entropy)

    def values(self, input_ids, attention_mask):
        return (self.critic_train or self.critic)(input_ids, attention_mask)

    @contextlib.contextmanager
    def autocast(self):
        """The training passes' context: autocast to `autocast_dtype` (or none), and attention
        kernels other than cuDNN's (`attention_kernels`)."""
        if self.autocast_dtype is None:
            cast = torch.autocast(device_type=self.device.type, enabled=False)
        else:
            cast = torch.autocast(device_type=self.device.type, dtype=self.autocast_dtype)
        with cast, attention_kernels(self.device):
            yield

    @property
    def precision(self) -> str:
        return "fp32" if self.autocast_dtype is None else "bf16-autocast"


    @contextlib.contextmanager
    def reference_model(self):
        """The frozen reference for the KL term, as a context (LoRA switches adapters off)."""
        if self.reference is not None:
            yield self.reference
        else:
            with self.policy.disable_adapter():
                yield self.policy


def load_tokenizer(path: str):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(path)
    tok.padding_side = "left"                      # generation appends on the right
    tok.clean_up_tokenization_spaces = False       # BPE: cleanup would alter the decoded text
    if tok.pad_token_id is None:
        tok.pad_token = tok.eos_token
    return tok


SHAPES_DIR = Path(__file__).resolve().parent / "shapes"


def shape_config(shape: str, tokenizer):
    """The transformers config of `model.shape`: a packaged architecture (training/shapes/NAME.json)
    or a config.json file; its special token ids are the tokenizer's, since the tokenizer is not
    the architecture's own. Ids above the tokenizer's vocabulary decode to nothing."""
    from transformers import AutoConfig

    file = SHAPES_DIR / f"{shape}.json" if (SHAPES_DIR / f"{shape}.json").exists() else Path(shape)
    if not file.is_file():
        known = ", ".join(sorted(f.stem for f in SHAPES_DIR.glob("*.json")))
        raise ModelLoadError(f"model.shape {shape!r} is neither a packaged architecture ({known}) "
                             f"nor a config.json file.")
    try:
        data = json.loads(file.read_text())
        conf = AutoConfig.for_model(data.pop("model_type"), **data)
    except (ValueError, KeyError, TypeError) as exc:
        raise ModelLoadError(f"model.shape {shape!r} is not a transformers config ({exc}).") from None
    if conf.vocab_size < len(tokenizer):
        raise ModelLoadError(f"model.shape {shape!r} has {conf.vocab_size} token embeddings, fewer "
                             f"than the tokenizer's {len(tokenizer)} tokens.")
    conf.bos_token_id, conf.eos_token_id = tokenizer.bos_token_id, tokenizer.eos_token_id
    conf.pad_token_id = tokenizer.pad_token_id
    return conf


def lora_wrap(model: nn.Module, rank: int, alpha: int, causal_lm: bool) -> nn.Module:
    """peft LoRA adapters of `rank` on every linear layer; the base weights are frozen."""
    from peft import LoraConfig, get_peft_model

    return get_peft_model(model, LoraConfig(r=rank, lora_alpha=alpha, target_modules="all-linear",
                                            **({"task_type": "CAUSAL_LM"} if causal_lm else {})))


def freeze_to_bf16(model: nn.Module) -> None:
    """The frozen weights of a LoRA model in bf16 (the adapters stay fp32): nothing updates
    them, so an fp32 master copy would only double their memory (8 of 16 GB for a 4B base); on
    GPU, where training passes run under bf16 autocast anyway and the reference is bf16 too."""
    for p in model.parameters():
        if not p.requires_grad and p.dtype == torch.float32:
            p.data = p.data.to(torch.bfloat16)


class MergedLoRA:
    """A plain copy of a peft LoRA model with its adapters merged into its linear weights, in
    `dtype`, which `refresh()` keeps in step with the adapters: decoding it costs what the base
    model costs (no adapter matmuls per layer) and it is a plain model, so the KV engine's CUDA
    graphs apply (training/kvengine.py RolloutEngine). For a 4B base in bf16 it holds 8 GB."""

    def __init__(self, model: nn.Module, dtype: torch.dtype):
        from peft.tuners.lora import LoraLayer

        self.model = copy.deepcopy(model).merge_and_unload().to(dtype).eval().requires_grad_(False)
        plain = dict(self.model.named_modules())
        self.pairs = [(plain[name].weight, layer) for name, layer in model.get_base_model().named_modules()
                      if isinstance(layer, LoraLayer)]
        self.version = -1

    @torch.no_grad()
    def refresh(self) -> bool:
        """Merge the adapters again when they changed since the last merge (their parameters'
        in-place version counters, as the full model's copy checks); True when it merged."""
        version = sum(p._version for _, layer in self.pairs for p in layer.parameters() if p.requires_grad)
        if version == self.version:
            return False
        for weight, layer in self.pairs:
            merged = layer.base_layer.weight.float()
            for name in layer.active_adapters:
                if name in layer.lora_A:
                    merged = merged + layer.get_delta_weight(name).float()
            weight.copy_(merged)
        self.version = version
        return True


def arm_checkpointing(model: nn.Module | None) -> int:
    """Put the decoder layers that checkpoint (model.gradient_checkpointing) in training mode,
    alone; returns how many. transformers recomputes a layer only in training mode, and the update
    runs the models in eval mode (training/update.py score_batch), so without this nothing is
    recomputed. Only the layer objects change mode: their attention and MLP modules, where any
    dropout sits, stay in eval."""
    from transformers.modeling_layers import GradientCheckpointingLayer

    n = 0
    for m in (model.modules() if model is not None else ()):
        if isinstance(m, GradientCheckpointingLayer) and m.gradient_checkpointing:
            m.training = True
            n += 1
    return n


def load_models(cfg: ModelConfig, *, seed: int, device: torch.device | None = None,
                critic: bool = True, critic_lora: int = 0) -> Models:
    """Policy, critic and reference from `cfg.path` (see resolve_model_path), fp32 on `cfg.device`
    (or `device`: a process's own GPU under torchrun). critic False (grpo, infopo): none is built,
    which spares a whole backbone of weights and its optimiser state. `cfg.shape`: the
    architecture named, with random weights (`shape_config`). `critic_lora` > 0: the critic's
    backbone trains LoRA adapters only. On GPU, weights LoRA freezes are kept in bf16."""
    from transformers import AutoModelForCausalLM

    path = resolve_model_path(cfg.path)
    device = device if device is not None else pick_device(cfg.device)
    tok = load_tokenizer(path)
    torch.manual_seed(seed)
    if cfg.shape:
        conf = shape_config(cfg.shape, tok)
        with torch.device(device):          # random init where it runs: 4B on a CPU takes minutes
            policy = AutoModelForCausalLM.from_config(conf, dtype=torch.float32)
    else:
        policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    policy.config.use_cache = True
    value = None
    if critic:
        backbone = copy.deepcopy(policy.get_decoder())
        if critic_lora > 0:
            backbone = lora_wrap(backbone, critic_lora, cfg.lora_alpha, causal_lm=False)
        value = ValueModel(backbone, policy.config.hidden_size)
    reference = None
    if cfg.lora_rank > 0:
        policy = lora_wrap(policy, cfg.lora_rank, cfg.lora_alpha, causal_lm=True)
    else:
        reference = copy.deepcopy(policy)
        if device.type == "cuda":
            reference = reference.to(torch.bfloat16)
        reference.eval().requires_grad_(False)
        reference.to(device)
    policy.to(device)
    if value is not None:
        value.to(device)
    if device.type == "cuda":
        for m, rank in ((policy, cfg.lora_rank), (value, critic_lora)):
            if m is not None and rank > 0:
                freeze_to_bf16(m)
    if cfg.gradient_checkpointing:
        # the recompute in backward must pick the attention kernel the forward picked: on the
        # H200 the forward ran under attention_kernels (no cuDNN) and the recompute, outside
        # it, took another kernel whose saved tensors differ ("Recomputed values ... have
        # different metadata": (8, 32, 1865) against (8, 32, 1865, 1)), so both run under it
        def kernels_twice():
            return attention_kernels(device), attention_kernels(device)

        kw = {"use_reentrant": False, "context_fn": kernels_twice}
        for m in (policy, value.backbone if value is not None else None):
            if m is None:
                continue
            if hasattr(m, "activation_checkpointing_enable"):     # transformers 5.25's name
                m.activation_checkpointing_enable(activation_checkpointing_kwargs=kw)
            else:                                                 # the H200's 5.17
                m.gradient_checkpointing_enable(gradient_checkpointing_kwargs=kw)
    return Models(policy=policy, critic=value, reference=reference, tokenizer=tok,
                  device=device, path=path, autocast_dtype=pick_precision(cfg.precision, device))


def action_logprobs(model: nn.Module, input_ids: torch.Tensor, attention_mask: torch.Tensor | None,
                    response_mask: torch.Tensor, *, temperature: float = 1.0,
                    with_entropy: bool = False) -> tuple[torch.Tensor, torch.Tensor | None]:
    """(logprobs (B, T), entropy (B, T) or None), both 0 off the action tokens.

    The decoder runs on the whole sequence; the LM head only on the N action positions, chunk by
    chunk (training/chunked_head.py: never a whole (N, V) fp32 tensor kept for backward):
    hidden (B, T, H) -> picked (N, H) -> log-probs and entropies (N,). attention_mask None:
    right-padded rows under causal attention (training/update.py `_micro`).
    """
    hidden = model.get_decoder()(input_ids=input_ids, attention_mask=attention_mask,
                                 use_cache=False).last_hidden_state                 # (B, T, H)
    b_idx, t_idx = response_mask.nonzero(as_tuple=True)                             # (N,), (N,)
    picked = hidden[b_idx, t_idx - 1]                                               # (N, H)
    labels = input_ids[b_idx, t_idx]                                                # (N,)
    head = model.get_output_embeddings()
    if getattr(head, "bias", None) is None and isinstance(head, nn.Linear):
        logp_n, ent_n = head_logprobs(picked, head.weight, labels, temperature=temperature,
                                      with_entropy=with_entropy)                   # (N,), (N,)
    else:        # a head with a bias or of another kind: its logits whole
        logits = head(picked).float() / temperature                                 # (N, V)
        logp_n = ppo.logprobs_from_logits(logits.unsqueeze(0), labels.unsqueeze(0))[0]
        ent_n = ppo.entropy_from_logits(logits.unsqueeze(0))[0] if with_entropy else None
    logp = torch.zeros(input_ids.shape, dtype=torch.float32, device=input_ids.device)
    logp = logp.index_put((b_idx, t_idx), logp_n)
    entropy = None
    if with_entropy:
        entropy = torch.zeros_like(logp).index_put((b_idx, t_idx), ent_n)
    return logp, entropy


@torch.no_grad()
def generate(models: Models, contexts: list[list[int]], *, max_new_tokens: int,
             temperature: float, top_p: float, model: nn.Module | None = None,
             min_new_tokens: int = 0) -> list[list[int]]:
    """One batched, KV-cached sampling call for all contexts (left padded).

    Returns each context's new tokens, cut after the first end-of-turn token (kept).
    """
    model = model or models.rollout_policy or models.policy
    tok = models.tokenizer
    backend = os.environ.get("EAU_ROLLOUT_BACKEND", "kv")
    if backend == "kv":
        # each episode keeps its KV cache across turns (training/kvengine.py): a turn runs only
        # the tokens appended since the last one; CUDA-graph decode on GPU
        from training.kvengine import rollout_engine
        entry = rollout_engine(model, tok, end_of_turn_ids(tok))
        if entry is not None:
            was_training = entry.model.training
            entry.model.eval()
            try:
                return entry.engine.generate(contexts, max_new_tokens=max_new_tokens,
                                             temperature=temperature, top_p=top_p,
                                             min_new_tokens=min_new_tokens)
            finally:
                entry.model.train(was_training)
    if models.device.type == "cuda" and backend == "graph":
        # CUDA-graph decode on a bf16 copy (training/generation.py); None = not applicable
        from training.generation import fast_generate
        fast = fast_generate(model, tok, contexts, max_new_tokens=max_new_tokens,
                             temperature=temperature, top_p=top_p, stop_ids=end_of_turn_ids(tok),
                             min_new_tokens=min_new_tokens)
        if fast is not None:
            return fast
    pad = tok.pad_token_id
    width = max(len(c) for c in contexts)
    ids = torch.full((len(contexts), width), pad, dtype=torch.long)                 # (B, L)
    attn = torch.zeros((len(contexts), width), dtype=torch.long)                    # (B, L)
    for i, c in enumerate(contexts):
        ids[i, width - len(c):] = torch.tensor(c, dtype=torch.long)
        attn[i, width - len(c):] = 1
    ids, attn = ids.to(models.device), attn.to(models.device)
    stop = end_of_turn_ids(tok)
    was_training = model.training
    model.eval()
    # Decoding is bound by reading weights: on CPU, autocast re-casts every fp32 weight to bf16
    # at each new token, which measured slower than plain fp32 (benchmarks/trainer_bench.py);
    # prefill-heavy training passes keep autocast. On GPU bf16 autocast is used throughout.
    # prefill_chunk_size: transformers runs the prompt PREFILL_CHUNK positions at a time, so its
    # mask is (B, 1, C, L) per chunk, never (B, 1, L, L) (memory linear in the context).
    rollout_ctx = models.autocast() if models.device.type == "cuda" else contextlib.nullcontext()
    with rollout_ctx:
        out = model.generate(input_ids=ids, attention_mask=attn, do_sample=temperature > 0,
                             temperature=temperature if temperature > 0 else None,
                             top_p=top_p, top_k=0, max_new_tokens=max_new_tokens,
                             min_new_tokens=min_new_tokens or None,
                             pad_token_id=pad, eos_token_id=stop,
                             prefill_chunk_size=PREFILL_CHUNK)                      # (B, L + n)
    model.train(was_training)
    new = out[:, width:].tolist()
    result = []
    for row in new:
        cut = next((i + 1 for i, t in enumerate(row) if t in stop), len(row))
        result.append(row[:cut])
    return result


def end_of_turn_ids(tok) -> list[int]:
    """Token ids that end an assistant turn: eos, and <|im_end|> / <|eot_id|> where they exist."""
    ids = {tok.eos_token_id}
    for name in ("<|im_end|>", "<|eot_id|>", "<|end|>"):
        tid = tok.convert_tokens_to_ids(name)
        if isinstance(tid, int) and tid != tok.unk_token_id and tid is not None and tid >= 0:
            ids.add(tid)
    return sorted(i for i in ids if i is not None)
