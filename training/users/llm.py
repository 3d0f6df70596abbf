"""LLM users: a local transformers backend batched across the episodes of a rollout, the policy's
vLLM engine where it holds the user's model (rollout.backend vllm with LoRA: the base is the
reference), and a router that picks the backend named by `user.<gym>.llm` (the prompt they get:
training.users.prompt).

Why batched: in a rollout every active episode may wait on its user at the same turn; one padded
`generate` call for all of them costs about as much as one call for a single episode (DESIGN.md,
"rollout.py"). `respond_batch(states) -> list[UserReply]` is what training.rollout calls.

The prompt (`user_messages`, training.users.prompt) keeps hidden facts hidden unless asked (paper
section 4.2). Replies carry arm="llm" and no revealed ids; the environment detects disclosures
with training.users.leak.

A backend failure never stops training: it gives UserReply(failed=True, error=...) and the
environment ends that episode marked failed.

Config of the LLM users (the experiment's config, `users.llm`): {name: spec}, spec one of
  {"kind": "local", "model": PATH, "max_new_tokens": 96, "device": "cpu"}
  {"kind": "http", "base_url": URL, "model": NAME, "api_key_env": VAR, "timeout_s": 30, "retries": 2}
`build_llm_users(config)` returns an `LLMRouter` over them; `user.<gym>.llm` names one ("default").
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

from training.benches.base import UserReply, UserState
from training.users.http import HTTPLLMUser
# the prompt's names stay importable from here, where callers and tests have always found them
from training.users.prompt import (DISCLOSURE_RULE, NO_REPLY_PENALTY, REPLY_STYLE,  # noqa: F401
                                   LLMUserConfigError, failed, system_prompt, user_messages)


class LocalLLMUser:
    """A local transformers chat model as the user; `respond_batch` runs one padded generate call
    per temperature among the states (temperature 0: greedy)."""

    arm = "llm"

    def __init__(self, model: Any, tokenizer: Any, *, max_new_tokens: int = 96, seed: int = 0):
        self.model, self.tokenizer = model, tokenizer
        self.max_new_tokens = max_new_tokens
        self.seed = seed
        self.calls = 0
        self._engine = None
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token

    @classmethod
    def from_dir(cls, path: str | Path, *, device: str = "cpu", **kw) -> "LocalLLMUser":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        if not (Path(path) / "config.json").exists():
            raise LLMUserConfigError(f"no model at {path}: give a Hugging Face model folder for the LLM user.")
        tok = AutoTokenizer.from_pretrained(str(path))
        model = AutoModelForCausalLM.from_pretrained(str(path)).to(device).eval()
        return cls(model, tok, **kw)

    def engine(self):
        """This user's KV engine over its model, made on first use."""
        if self._engine is None:
            from training.kvengine import KVEngine
            from training.policy import end_of_turn_ids

            tok = self.tokenizer
            self._engine = KVEngine(self.model, slots=8, stop_ids=end_of_turn_ids(tok),
                                    pad_id=tok.pad_token_id)
        return self._engine

    def respond(self, state: UserState) -> UserReply:
        return self.respond_batch([state])[0]

    def respond_batch(self, states: list[UserState]) -> list[UserReply]:
        return replies_by_temperature(states, self._generate, "local LLM user")

    def _generate(self, conversations: list[list[dict[str, str]]], temperature: float,
                  repetition_penalty: float = 1.0) -> list[str]:
        import os

        import torch

        tok = self.tokenizer
        if os.environ.get("EAU_ROLLOUT_BACKEND", "kv") == "kv":
            # the policy's fast path (training/kvengine.py): each conversation keeps its cache in
            # a slot of this user's engine, so a turn runs only the new exchange, and decoding is
            # a CUDA-graph replay per token on GPU
            ids = chat_prompt_ids(tok, conversations)
            torch.manual_seed(self.seed + self.calls)
            self.calls += 1
            was_training = self.model.training
            self.model.eval()
            try:
                new = self.engine().generate(ids, max_new_tokens=self.max_new_tokens,
                                             temperature=temperature, greedy=temperature <= 0,
                                             repetition_penalty=repetition_penalty)
            finally:
                self.model.train(was_training)
            return tok.batch_decode(new, skip_special_tokens=True)
        prompts = [tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True) for c in conversations]
        tok.padding_side = "left"
        batch = tok(prompts, return_tensors="pt", padding=True, add_special_tokens=False)
        batch = {k: v.to(self.model.device) for k, v in batch.items()}     # input_ids (B, P)
        torch.manual_seed(self.seed + self.calls)
        self.calls += 1
        sample = temperature > 0
        from transformers import LogitsProcessorList

        from training.generation import ReplyRepetitionPenalty
        penalty = LogitsProcessorList([ReplyRepetitionPenalty(repetition_penalty,
                                                              batch["input_ids"].shape[1])])
        with torch.no_grad():
            out = self.model.generate(**batch, max_new_tokens=self.max_new_tokens, do_sample=sample,
                                      temperature=temperature if sample else None, top_p=None, top_k=None,
                                      logits_processor=penalty,
                                      pad_token_id=tok.pad_token_id)              # (B, P + N)
        new = out[:, batch["input_ids"].shape[1]:]                                 # (B, N)
        return tok.batch_decode(new, skip_special_tokens=True)


def chat_prompt_ids(tok, conversations: list[list[dict[str, str]]]) -> list[list[int]]:
    """Each conversation as the user model's chat prompt, token ids ready to generate from."""
    return [tok.encode(tok.apply_chat_template(c, tokenize=False, add_generation_prompt=True),
                       add_special_tokens=False) for c in conversations]


def replies_by_temperature(states: list[UserState], generate, who: str) -> list[UserReply]:
    """One `generate(conversations, temperature, repetition_penalty) -> texts` call per setting
    among the states (the knobs user.<gym>.temperature, 0.7 unset, and
    user.<gym>.repetition_penalty, 1.0 unset: none); a call that raises fails its episodes'
    replies (`who: error`), not the run."""
    replies: list[UserReply | None] = [None] * len(states)
    groups: dict[tuple[float, float], list[int]] = {}
    for i, s in enumerate(states):
        key = (float(s.knobs.get("temperature", 0.7)), float(s.knobs.get("repetition_penalty", 1.0)))
        groups.setdefault(key, []).append(i)
    for (temperature, penalty), idx in sorted(groups.items()):
        try:
            texts = generate([user_messages(states[i]) for i in idx], temperature, penalty)
        except Exception as exc:   # a broken model call fails these episodes, not the run
            texts = [exc] * len(idx)
        for i, t in zip(idx, texts):
            replies[i] = failed(f"{who}: {type(t).__name__}: {t}") if isinstance(t, Exception) \
                else UserReply(text=t.strip(), arm="llm")
    return replies  # type: ignore[return-value]


class EngineLLMUser:
    """The LLM user answered by the policy's vLLM engine without the policy's adapter: the base
    model, which under LoRA is the frozen reference (training/vllm_backend.py, 4.), so the user
    needs no weights of its own. Replies are batched per temperature as LocalLLMUser's; request
    seeds follow `seed` and the call count, as LocalLLMUser seeds its calls."""

    arm = "llm"

    def __init__(self, engine: Any, tokenizer: Any, *, max_new_tokens: int = 96, seed: int = 0):
        if not engine.serves_base:
            raise ValueError("this vLLM engine holds the policy's weights (full fine-tuning), "
                             "not the user's base model.")
        self.engine, self.tokenizer = engine, tokenizer
        self.max_new_tokens, self.seed, self.calls = max_new_tokens, seed, 0

    def respond(self, state: UserState) -> UserReply:
        return self.respond_batch([state])[0]

    def respond_batch(self, states: list[UserState]) -> list[UserReply]:
        return replies_by_temperature(states, self._generate, "vLLM user")

    def _generate(self, conversations: list[list[dict[str, str]]], temperature: float,
                  repetition_penalty: float = 1.0) -> list[str]:
        from training.policy import end_of_turn_ids

        if repetition_penalty != 1.0:
            raise ValueError(NO_REPLY_PENALTY.format(who="the vLLM user", value=repetition_penalty))
        tok = self.tokenizer
        stop = end_of_turn_ids(tok)
        ids = chat_prompt_ids(tok, conversations)
        samples = self.engine.generate(ids, max_new_tokens=self.max_new_tokens,
                                       temperature=temperature, stop_ids=stop,
                                       seed=self.seed + 1000 * self.calls, adapter=False)
        self.calls += 1
        return [tok.decode([t for t in s.ids if t not in stop], skip_special_tokens=True)
                for s in samples]


class LLMRouter:
    """Several named LLM users; each state goes to the one `state.knobs["llm"]` names."""

    arm = "llm"

    def __init__(self, backends: dict[str, Any], default: str = "default"):
        if not backends:
            raise LLMUserConfigError("no LLM user configured: add at least one entry under users.llm.")
        self.backends = backends
        self.default = default if default in backends else next(iter(backends))

    def _name(self, state: UserState) -> str:
        name = str(state.knobs.get("llm", "default") or "default")
        return self.default if name == "default" and "default" not in self.backends else name

    def respond(self, state: UserState) -> UserReply:
        return self.respond_batch([state])[0]

    def respond_batch(self, states: list[UserState]) -> list[UserReply]:
        replies: list[UserReply | None] = [None] * len(states)
        groups: dict[str, list[int]] = {}
        for i, s in enumerate(states):
            groups.setdefault(self._name(s), []).append(i)
        for name, idx in groups.items():
            backend = self.backends.get(name)
            if backend is None:
                for i in idx:
                    replies[i] = failed(f"user.{states[i].gym}.llm names {name!r}, which is not configured "
                                        f"(configured: {', '.join(self.backends)})")
                continue
            batch = getattr(backend, "respond_batch", None)
            out = batch([states[i] for i in idx]) if batch else [backend.respond(states[i]) for i in idx]
            for i, r in zip(idx, out):
                replies[i] = r
        return replies  # type: ignore[return-value]


def build_llm_users(config: dict[str, dict[str, Any]]) -> LLMRouter:
    """An LLMRouter from the experiment config's `users.llm` entries (module docstring)."""
    backends = {}
    for name, spec in config.items():
        kind = spec.get("kind")
        opts = {k: v for k, v in spec.items() if k != "kind"}
        if kind == "local":
            model = opts.pop("model", None)
            if not model:
                raise LLMUserConfigError(f"users.llm.{name}: a local LLM user needs \"model\" (a model folder).")
            backends[name] = LocalLLMUser.from_dir(model, **opts)
        elif kind == "http":
            backends[name] = HTTPLLMUser(**opts)
        else:
            raise LLMUserConfigError(f"users.llm.{name}: kind {kind!r} is not one of local, http.")
    return LLMRouter(backends)


def training_users(default: Any | None, specs: dict[str, dict[str, Any]], *, reference: Any,
                   device: str = "cpu", max_new_tokens: int = 96, seed: int = 0) -> LLMRouter | None:
    """The LLM arm of a training run: `default` (rollout.user_llm "reference": the frozen
    reference, already built) and the named backends of rollout.user_llms. `reference()` builds
    the reference user for a {"kind": "reference"} entry (shared with `default`). None when the
    run has no LLM user (the symbolic arm answers every episode)."""
    backends: dict[str, Any] = {"default": default} if default is not None else {}
    for name, spec in specs.items():
        kind = spec.get("kind")
        if kind == "reference":
            backends[name] = backends.get("default") or reference()
        elif kind == "local":
            backends[name] = LocalLLMUser.from_dir(spec["model"], device=spec.get("device", device),
                                                   max_new_tokens=max_new_tokens, seed=seed)
        elif kind == "http":
            backends[name] = HTTPLLMUser(**{k: v for k, v in spec.items() if k != "kind"},
                                         max_tokens=max_new_tokens)
        else:
            raise LLMUserConfigError(f"rollout.user_llms.{name}: kind {kind!r} is not one of "
                                     f"reference, local, http.")
    return LLMRouter(backends) if backends else None


def run_users(cfg, models) -> LLMRouter | None:
    """The LLM arm of a training run, from its config: None (symbolic arm only), the frozen
    reference model answering as the user (rollout.user_llm "reference": batched across
    episodes through its KV engine; sharing the reference spares the CPU demo a third model in
    memory; under rollout.backend vllm with LoRA, the vLLM engine's base model, EngineLLMUser)
    and the named users of rollout.user_llms (another local model, an OpenAI-compatible
    server), routed by the workspace's user.<gym>.llm."""
    specs = dict(cfg.rollout.user_llms)
    if cfg.rollout.user_llm == "none" and not specs:
        return None
    built: list = []

    def reference():
        if built:
            return built[0]
        from training.policy import load_tokenizer

        if models.vllm is not None and models.vllm.serves_base:
            built.append(EngineLLMUser(models.vllm, load_tokenizer(models.path),
                                       max_new_tokens=cfg.rollout.user_response_length,
                                       seed=cfg.trainer.seed))
            return built[0]
        model = models.reference
        if model is None:        # LoRA: the policy's base is not frozen on its own; load one
            from transformers import AutoModelForCausalLM
            model = AutoModelForCausalLM.from_pretrained(models.path).eval()
            model.requires_grad_(False).to(models.device)
        built.append(LocalLLMUser(model, load_tokenizer(models.path),
                                  max_new_tokens=cfg.rollout.user_response_length,
                                  seed=cfg.trainer.seed))
        return built[0]

    return training_users(reference() if cfg.rollout.user_llm == "reference" else None,
                          specs, reference=reference, device=str(models.device),
                          max_new_tokens=cfg.rollout.user_response_length,
                          seed=cfg.trainer.seed)
