"""The trainer's configuration: one frozen dataclass per section, names after verl.

`config.json` in a run folder is the resolved, frozen form of `Config` (DESIGN.md, "The trainer
subprocess"); the orchestrator writes it with `resolve(bench, preset, overrides).to_dict()` and the
trainer reads it back with `Config.from_dict`. Keys follow verl's (`data.train_batch_size`,
`actor.optim.lr`, `rollout.n`, ...) so that a verl user can read a run at a glance.

Presets carry ten of the sixteen rows of the paper's appendix C (Table 9) per bench
(`TABLE9_CARRIED`: batch sizes, learning rate, KL and entropy coefficients, rollouts per prompt,
turns, per-turn and per-episode token budgets). Six are left out, each with its reason in
`TABLE9_LEFT_OUT`: prompt length, rollout engine, log-prob micro-batch size, GPU memory
utilisation, GPUs per node and total epochs. The `cpu` preset scales them down so the README demo
(SmolLM2-135M, UserGym, ~10 PPO steps) fits a 2-core CPU in a few minutes, with turn and episode
budgets per bench (`CPU_BY_BENCH`) that a solved episode fits.

Batch units, as in verl: `data.train_batch_size` and `actor.ppo_mini_batch_size` count prompts
(tasks); every prompt is rolled out `rollout.n` times, so a step trains on
`train_batch_size * rollout.n` episodes. Micro-batch sizes count episodes (sequences).
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    """A config a user wrote is wrong (unknown key, bad value); the message says which and why."""


@dataclass(frozen=True)
class DataConfig:
    train_batch_size: int = 64
    """Prompts (tasks) per PPO step; each is rolled out `rollout.n` times."""
    split: str = "train"
    """Task split the trainer samples from (evaluation is walled off, DESIGN.md)."""
    data_dir: str = ""
    """A folder of the bench's original files (UserRL's repository, ColBench's JSONL, tau2-bench's
    repository or its data/tau2/domains); "" = the tasks shipped in the project."""


@dataclass(frozen=True)
class OptimConfig:
    lr: float = 3e-7
    """Learning rate before the live knob `agent.lr_multiplier` is applied (actor only)."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.999)
    """AdamW betas."""
    grad_clip: float = 1.0
    """Largest global gradient norm; larger gradients are scaled down."""


@dataclass(frozen=True)
class ActorConfig:
    optim: OptimConfig = field(default_factory=OptimConfig)
    """Optimiser of the policy."""
    ppo_mini_batch_size: int = 16
    """Prompts per optimiser step (times rollout.n episodes), as in verl."""
    ppo_micro_batch_size: int = 4
    """Episodes per forward/backward pass; gradients accumulate over a mini-batch."""
    ppo_max_token_len: int = 0
    """> 0: forward/backward passes hold episodes of similar length up to this many tokens
    (episodes x the longest, padding counted), in place of ppo_micro_batch_size episodes (verl's
    use_dynamic_bsz with ppo_max_token_len_per_gpu); also sizes the no-grad passes of old and
    reference log-probs. 0 = ppo_micro_batch_size episodes a pass."""
    ppo_epochs: int = 1
    """Passes over the step's episodes."""
    clip_ratio: float = 0.2
    """PPO's epsilon: the probability ratio is clipped to [1 - eps, 1 + eps]."""
    clip_ratio_c: float = 3.0
    """Dual clip (verl's clip_ratio_c): a token with negative advantage loses at most -A * c,
    however far its ratio grew; must be above 1."""
    kl_loss_coef: float = 0.001
    """Weight of low_var_kl to the reference; the live knob agent.kl_loss_coef overrides it."""
    entropy_coeff: float = 0.001
    """Weight of the entropy bonus; the live knob agent.entropy_coeff overrides it."""
    use_kl_loss: bool = True
    """Add the KL-to-reference term to the policy loss (verl's use_kl_loss)."""


@dataclass(frozen=True)
class CriticConfig:
    optim: OptimConfig = field(default_factory=lambda: OptimConfig(lr=1e-6))
    """Optimiser of the critic (its lr is not scaled by agent.lr_multiplier)."""
    ppo_micro_batch_size: int = 4
    """Episodes per critic forward/backward pass."""
    ppo_max_token_len: int = 0
    """> 0: critic passes by this token budget, as actor.ppo_max_token_len."""
    cliprange_value: float = 0.5
    """Value clipping: new values are kept within this distance of the rollout's values."""
    lora_rank: int = 0
    """0 = the critic's backbone is trained whole (the default); > 0 = its backbone is frozen and
    trains LoRA adapters of this rank (peft), the value head whole. A 4B critic trained whole
    holds ~64 GB of fp32 weights, gradients and AdamW moments (training/shapes/README.md)."""


ALGORITHMS = ("ppo", "grpo", "infopo")
ROLLOUT_BACKENDS = ("kv", "vllm")


@dataclass(frozen=True)
class AlgorithmConfig:
    name: str = "ppo"
    """"ppo": a learned critic and GAE (paper 4.4); "grpo": no critic, each episode's baseline is
    the other rollout.n episodes of its task, shared among its turns by `turn_credit` (UserRL);
    "infopo": grpo plus InfoPO's information-gain advantage per turn (training/grpo.py,
    training/infogain.py). Under grpo and infopo no critic is built, stepped or checkpointed."""
    gamma: float = 1.0
    """Discount across agent turns (turn-level GAE) or action tokens (token-level); under grpo and
    infopo the discount of turn_credit r2g and trajectory_score r2g (UserRL and InfoPO use 0.8)."""
    lam: float = 1.0
    """GAE lambda (ppo only)."""
    adv_estimator: str = "turn_gae"
    """ppo only. "turn_gae": GAE across agent turns, each turn's advantage shared by its tokens
    (paper 4.4); "token_gae": GAE across action tokens, skipping user/tool/template tokens."""
    whiten_advantages: bool = True
    """ppo only: normalise advantages over the step's action tokens to mean 0, std 1 (grpo and
    infopo normalise within each task's group instead)."""
    turn_credit: str = "equalized"
    """grpo/infopo: how an episode's advantage is shared among its turns (UserRL's
    turn_level_method): "equalized" (every turn alike), "r2g" (by reward to go) or "em" (by an
    exponential map of the turn's reward onto [0.5, 1])."""
    trajectory_score: str = "sum"
    """grpo/infopo: what episodes are ranked by within their group (UserRL's
    trajectory_score_method): "sum" of the turn rewards (UserRL's and InfoPO's "Sum", InfoPO's
    shipped setting), "mean" turn reward, or "r2g" (discounted return, UserRL's "R2G")."""
    norm_adv_by_std: bool = True
    """grpo/infopo: divide by the group's std of scores (GRPO); False only centres (Dr. GRPO)."""
    info_weight: float = 0.5
    """infopo: beta_0, the weight of the information advantage (InfoPO's shipped config)."""
    info_gate_temperature: float = 0.5
    """infopo: T of the gate sigmoid(-std_group / T) (InfoPO's shipped config: 0.5)."""
    info_placeholder: str = "No information found."
    """infopo: the reply the counterfactual puts in place of the real one (InfoPO's default)."""


@dataclass(frozen=True)
class RolloutConfig:
    n: int = 5
    """Episodes rolled out per prompt (appendix C: 5)."""
    max_turns: int = 16
    """Agent turns per episode at most (the env's max_steps knob may end it sooner)."""
    response_length: int = 1024
    """New tokens per agent turn at most."""
    max_episode_tokens: int = 8192
    """Whole-episode token budget (prompt, turns, observations); an episode past it is truncated."""
    temperature: float = 0.7
    """Sampling temperature of the policy. 0.7, measured (benchmarks/starting_point.py, H200,
    untrained SmolLM2-135M-Instruct, 16 held-out tasks per UserGym gym, 6 turns x 128 tokens, one
    worked example): valid actions 0.51-1.00 per gym at 0.7 against 0.17-0.84 at 1.0, whose
    text mostly drifts off the format after the first turn."""
    top_p: float = 1.0
    """Nucleus sampling of the policy (1.0: the whole distribution; at 0.7 the tail is already
    small, and PPO's ratios assume the policy it samples from)."""
    user_llm: str = "none"
    """LLM user backend for the llm arm: "none" (symbolic arm only) or "reference" (the frozen
    reference model answers as the user, batched)."""
    user_response_length: int = 96
    """New tokens per LLM-user reply (user_llm = "reference")."""
    user_llms: dict = field(default_factory=dict)
    """LLM users the workspace's `user.<gym>.llm` may name besides "default", {name: spec}:
    {"kind": "reference"} (the frozen reference policy), {"kind": "local", "model": FOLDER}, or
    {"kind": "http", "base_url": URL, "model": NAME, "api_key_env": VAR, "timeout_s": 30,
    "retries": 2} (an OpenAI-compatible server; the key is read from the variable named, never
    stored). Any entry makes the LLM arm live, as user_llm "reference" does."""
    backend: str = "kv"
    """Who decodes the policy's turns: "kv", the project's KV engine (training/kvengine.py; the
    environment variable EAU_ROLLOUT_BACKEND=graph|plain swaps in its older decoders, for
    benchmarks), or "vllm", a vLLM engine colocated with the trainer on its GPU, asleep during
    the update and given the policy's weights after it (training/vllm_backend.py; needs vLLM,
    not yet run on a GPU by this project)."""
    gpu_memory_utilization: float = 0.5
    """backend "vllm" only: the share of the GPU's memory vLLM may take for its copy of the
    weights and its KV cache (vLLM's own `gpu_memory_utilization`; appendix C, Table 9: 0.5)."""


@dataclass(frozen=True)
class ModelConfig:
    path: str = ""
    """A local Hugging Face folder or a hub id ("Qwen/Qwen3-4B", fetched at start when online,
    else from the hub's cache); "" = the packaged SmolLM2-135M-Instruct."""
    lora_rank: int = 0
    """0 = full fine-tuning (the default, DESIGN.md); > 0 = LoRA adapters of this rank (peft)."""
    lora_alpha: int = 16
    """LoRA scaling numerator (the policy's, and the critic's under critic.lora_rank)."""
    shape: str = ""
    """"" = `path`'s weights. Else a packaged architecture (training/shapes/: "qwen3-4b", the
    paper's policy) or a config.json file: the model is built from it with random weights, as
    vLLM's dummy load format does, to measure the paper's size where its weights cannot be had;
    the tokenizer stays `path`'s (the packaged SmolLM2's by default)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward pass (policy and critic):
    less memory for the update's long episodes, one more forward's time."""
    device: str = "auto"
    """"auto" (cuda when present), "cpu" or "cuda"."""
    precision: str = "auto"
    """Training passes: "auto" (bf16 autocast over fp32 weights on GPU and on CPUs with native
    bf16; plain fp32 on other CPUs, where emulated bf16 is many times slower), "bf16" or "fp32"."""


@dataclass(frozen=True)
class TrainerConfig:
    total_steps: int = 100
    """PPO steps to run."""
    save_freq: int = 10
    """Checkpoint every this many steps (and on SIGTERM); 0 = only on SIGTERM and at the end."""
    keep_checkpoints: int = 2
    """Newest checkpoints kept; older ones are deleted (0 = keep all)."""
    seed: int = 0
    """Seed of everything; each step reseeds from (seed, step) so a resume repeats it exactly."""
    trajectories_per_step: int = 64
    """Whole episodes written to trajectories/step-NNNNNN.jsonl per step."""
    heartbeat_s: float = 2.0
    """Seconds between touches of the heartbeat file."""
    threads: int = 0
    """torch CPU threads (0 = torch's default)."""
    parallel: str = "none"
    """Training across several processes (training.distributed): "none" (one process, as
    always), "ddp" (replicated model, gradients averaged) or "fsdp" (FSDP2: parameters,
    gradients and optimiser state sharded). Rollouts are data parallel under both."""
    nproc_per_node: int = 1
    """Processes (one per GPU) the orchestrator starts the trainer with through torchrun; 1 =
    plain `python -m training.trainer`."""


@dataclass(frozen=True)
class WorkspaceConfig:
    repo: str = ""
    """Workspace git repository; when set the trainer follows its live ref."""
    live_ref: str = "refs/eau/live"
    """Ref naming the commit the gate last accepted."""
    dir: str = ""
    """A plain workspace folder, used when `repo` is empty (copied once, never watched)."""
    poll_s: float = 0.5
    """Polling interval of the live-ref fallback watcher."""


@dataclass(frozen=True)
class Config:
    bench: str = "usergym"
    """Bench name (usergym, colbench, tau2) or "module:ATTR" of an object with the BENCH API."""
    gyms: tuple[str, ...] = ()
    """Gyms to train on; () = all of the bench's gyms."""
    data: DataConfig = field(default_factory=DataConfig)
    actor: ActorConfig = field(default_factory=ActorConfig)
    critic: CriticConfig = field(default_factory=CriticConfig)
    algorithm: AlgorithmConfig = field(default_factory=AlgorithmConfig)
    rollout: RolloutConfig = field(default_factory=RolloutConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    trainer: TrainerConfig = field(default_factory=TrainerConfig)
    workspace: WorkspaceConfig = field(default_factory=WorkspaceConfig)

    def to_dict(self) -> dict[str, Any]:
        return json.loads(json.dumps(dataclasses.asdict(self)))

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "Config":
        return _build(cls, data, "")

    @classmethod
    def load(cls, path: Path | str) -> "Config":
        try:
            data = json.loads(Path(path).read_text())
        except FileNotFoundError:
            raise ConfigError(f"{path} does not exist: write the run's config.json first.") from None
        except json.JSONDecodeError as exc:
            raise ConfigError(f"{path} is not valid JSON ({exc.msg} at line {exc.lineno}).") from None
        return cls.from_dict(data)

    def validate(self) -> "Config":
        checks = [
            (self.data.train_batch_size >= 1, "data.train_batch_size must be at least 1"),
            (self.rollout.n >= 1, "rollout.n must be at least 1"),
            (self.rollout.max_turns >= 1, "rollout.max_turns must be at least 1"),
            (self.rollout.response_length >= 1, "rollout.response_length must be at least 1"),
            (self.actor.ppo_mini_batch_size >= 1, "actor.ppo_mini_batch_size must be at least 1"),
            (self.actor.ppo_micro_batch_size >= 1, "actor.ppo_micro_batch_size must be >= 1"),
            (self.critic.ppo_micro_batch_size >= 1, "critic.ppo_micro_batch_size must be >= 1"),
            (self.actor.ppo_max_token_len >= 0 and self.critic.ppo_max_token_len >= 0,
             "actor.ppo_max_token_len and critic.ppo_max_token_len must not be negative (0 = "
             "micro-batches by count)"),
            (0.0 <= self.algorithm.gamma <= 1.0, "algorithm.gamma must lie in [0, 1]"),
            (0.0 <= self.algorithm.lam <= 1.0, "algorithm.lam must lie in [0, 1]"),
            (self.algorithm.adv_estimator in ("turn_gae", "token_gae"),
             "algorithm.adv_estimator must be turn_gae or token_gae"),
            (self.algorithm.name in ALGORITHMS,
             f"algorithm.name must be one of {', '.join(ALGORITHMS)}"),
            (self.algorithm.name == "ppo" or self.rollout.n >= 2,
             f"algorithm.name {self.algorithm.name} needs rollout.n of at least 2 (an episode's "
             "baseline is the other episodes of its task)"),
            (self.algorithm.turn_credit in ("equalized", "r2g", "em"),
             "algorithm.turn_credit must be equalized, r2g or em"),
            (self.algorithm.trajectory_score in ("sum", "mean", "r2g"),
             "algorithm.trajectory_score must be sum, mean or r2g"),
            (self.algorithm.info_gate_temperature > 0,
             "algorithm.info_gate_temperature must be above 0"),
            (self.rollout.user_llm in ("none", "reference"), "rollout.user_llm must be none or reference"),
            (self.rollout.backend in ROLLOUT_BACKENDS,
             f"rollout.backend must be one of {', '.join(ROLLOUT_BACKENDS)} (EAU_ROLLOUT_BACKEND="
             "graph|plain picks the KV engine's older decoders, for benchmarks)"),
            (0.0 < self.rollout.gpu_memory_utilization < 1.0,
             "rollout.gpu_memory_utilization must lie between 0 and 1 (a share of the GPU)"),
            (self.rollout.backend != "vllm" or self.trainer.parallel == "none",
             "rollout.backend vllm runs in one process: set trainer.parallel to none (each "
             "process of a ddp/fsdp run would start an engine of its own on its GPU)"),
            (_user_llms_problem(self.rollout.user_llms) is None,
             _user_llms_problem(self.rollout.user_llms) or ""),
            (self.model.device in ("auto", "cpu", "cuda"), "model.device must be auto, cpu or cuda"),
            (self.model.precision in ("auto", "bf16", "fp32"), "model.precision must be auto, bf16 or fp32"),
            (self.actor.clip_ratio_c > 1.0, "actor.clip_ratio_c must be above 1 (the dual clip's bound "
             "on a negative-advantage token's ratio; verl's default is 3)"),
            (self.trainer.total_steps >= 0, "trainer.total_steps must not be negative"),
            (self.trainer.parallel in ("none", "ddp", "fsdp"),
             "trainer.parallel must be none, ddp or fsdp"),
            (type(self.trainer.nproc_per_node) is int and self.trainer.nproc_per_node >= 1,
             "trainer.nproc_per_node must be a whole number of at least 1"),
            (self.trainer.nproc_per_node == 1 or self.trainer.parallel != "none",
             "trainer.nproc_per_node > 1 needs trainer.parallel ddp or fsdp (with none the "
             "processes would not share gradients)"),
            (not isinstance(self.trainer.nproc_per_node, int)
             or self.episodes_per_step >= self.trainer.nproc_per_node,
             "data.train_batch_size * rollout.n must be at least trainer.nproc_per_node, so every "
             "process has an episode"),
            (self.model.lora_rank >= 0 and self.critic.lora_rank >= 0,
             "model.lora_rank and critic.lora_rank must not be negative"),
            (self.trainer.parallel == "none" or (self.model.lora_rank == 0 and self.critic.lora_rank == 0),
             "trainer.parallel ddp/fsdp does not support LoRA yet: set model.lora_rank and "
             "critic.lora_rank to 0 or trainer.parallel to none"),
        ]
        for ok, message in checks:
            if not ok:
                raise ConfigError(message + ".")
        return self

    @property
    def episodes_per_step(self) -> int:
        return self.data.train_batch_size * self.rollout.n


_USER_LLM_KEYS = {"reference": set(), "local": {"model", "device"},
                  "http": {"base_url", "model", "api_key_env", "timeout_s", "retries"}}


def _user_llms_problem(specs: Any) -> str | None:
    """What is wrong with rollout.user_llms, in words, or None (RolloutConfig.user_llms)."""
    if not isinstance(specs, dict):
        return "rollout.user_llms must be an object {name: spec}"
    for name, spec in specs.items():
        where = f"rollout.user_llms.{name}"
        if name == "default":
            return f"{where}: 'default' is rollout.user_llm's backend; give yours another name"
        if not isinstance(spec, dict) or spec.get("kind") not in _USER_LLM_KEYS:
            return f"{where} must have kind reference, local or http"
        if "api_key" in spec:
            return f"{where}: never store a key in the config; name its variable in api_key_env"
        extra = set(spec) - {"kind"} - _USER_LLM_KEYS[spec["kind"]]
        if extra:
            return f"{where}: unknown key(s) {', '.join(sorted(extra))} for kind {spec['kind']}"
        if spec["kind"] == "local" and not spec.get("model"):
            return f"{where}: a local LLM user needs model (a model folder)"
        if spec["kind"] == "http" and not (spec.get("base_url") and spec.get("model")):
            return f"{where}: an http LLM user needs base_url and model"
    return None


def _build(cls, data: Any, prefix: str):
    """Build a (nested) frozen dataclass from a dict, refusing unknown keys by their dotted name."""
    if not isinstance(data, dict):
        raise ConfigError(f"config section {prefix or '(top)'} must be an object, got {data!r}.")
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if key not in fields:
            raise ConfigError(f"unknown config key {name!r}: known keys of this section are "
                              f"{', '.join(sorted(fields))}.")
        ftype = fields[key].type
        sub = _SECTIONS.get(ftype)
        if sub is not None:
            kwargs[key] = _build(sub, value, name + ".")
        elif isinstance(value, list):
            kwargs[key] = tuple(value)
        else:
            kwargs[key] = value
    return cls(**kwargs)


_SECTIONS = {"DataConfig": DataConfig, "OptimConfig": OptimConfig, "ActorConfig": ActorConfig,
             "CriticConfig": CriticConfig, "AlgorithmConfig": AlgorithmConfig,
             "RolloutConfig": RolloutConfig, "ModelConfig": ModelConfig,
             "TrainerConfig": TrainerConfig, "WorkspaceConfig": WorkspaceConfig}

# Tokens per forward/backward pass of the bench presets (actor/critic.ppo_max_token_len): passes
# of similar-length episodes up to this budget, where 4 episodes a pass left the H200 idle (a
# 135M pass over ~3k tokens is launch-bound); 16,384 tokens of SmolLM2-135M hold ~12 GB of
# activations. The CPU preset counts episodes (0): a CPU is compute-bound at any pass size.
TOKEN_BUDGET = 16384

# The bench presets train against the paper's epsilon mixture (section 4.1: the symbolic user with
# probability user.<gym>.strategy_mix, 0.5 in the shipped knobs, else an LLM user), the LLM arm
# being the frozen reference policy. Measured on the H200 (benchmarks/RESULTS-gpu.md, 64 UserGym
# episodes x 10 turns x 128 tokens): a step of 12.9-16.4 s with it against 8.5-9.2 s symbolic
# alone, since the LLM user decodes through its own KV engine, batched with the others. The CPU
# preset stays symbolic: there an LLM reply costs seconds. `--set rollout.user_llm=none` drops it.
GPU_USER_LLM = "reference"

# Appendix C, Table 9 (UserGym | ColBench | tau2-bench); turns from section 5's episode limits.
PRESETS: dict[str, dict[str, Any]] = {
    "usergym": {"bench": "usergym", "data": {"train_batch_size": 64},
                "actor": {"optim": {"lr": 3e-7}, "ppo_mini_batch_size": 16,
                          "ppo_micro_batch_size": 4, "ppo_max_token_len": TOKEN_BUDGET,
                          "kl_loss_coef": 0.001, "entropy_coeff": 0.001},
                "critic": {"ppo_micro_batch_size": 4, "ppo_max_token_len": TOKEN_BUDGET},
                "rollout": {"n": 5, "max_turns": 16, "response_length": 1024,
                            "max_episode_tokens": 8192, "user_llm": GPU_USER_LLM}},
    "colbench": {"bench": "colbench", "data": {"train_batch_size": 64},
                 "actor": {"optim": {"lr": 3e-7}, "ppo_mini_batch_size": 16,
                           "ppo_micro_batch_size": 4, "ppo_max_token_len": TOKEN_BUDGET,
                           "kl_loss_coef": 0.001, "entropy_coeff": 0.001},
                 "critic": {"ppo_micro_batch_size": 4, "ppo_max_token_len": TOKEN_BUDGET},
                 "rollout": {"n": 5, "max_turns": 10, "response_length": 1024,
                             "max_episode_tokens": 8192, "user_llm": GPU_USER_LLM}},
    "tau2": {"bench": "tau2", "data": {"train_batch_size": 32},
             "actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 16,
                       "ppo_micro_batch_size": 2, "ppo_max_token_len": TOKEN_BUDGET,
                       "kl_loss_coef": 0.001, "entropy_coeff": 0.001},
             "critic": {"ppo_micro_batch_size": 2, "ppo_max_token_len": TOKEN_BUDGET},
             "rollout": {"n": 5, "max_turns": 50, "response_length": 1024,
                         "max_episode_tokens": 16384, "user_llm": GPU_USER_LLM}},
    # Fits a 2-core CPU: 4 episodes of at most 3 turns x 32 tokens (on the shared machine a
    # SmolLM2-135M step took minutes: benchmarks/trainer_bench.py); a larger lr so 8 steps move
    # the policy visibly (the paper's 3e-7 is tuned for 64 x 5 episodes on 4 GPUs).
    "cpu": {"data": {"train_batch_size": 2},
            "actor": {"optim": {"lr": 1e-6}, "ppo_mini_batch_size": 2, "ppo_micro_batch_size": 4,
                      "ppo_max_token_len": 0},
            "critic": {"optim": {"lr": 1e-5}, "ppo_micro_batch_size": 4, "ppo_max_token_len": 0},
            # 48-token turns hold every UserGym answer, the tau gym's write call included (39 / 45 /
            # 75 tokens; benchmarks/bench_budgets.py), which 32 never did
            "rollout": {"n": 2, "max_turns": 3, "response_length": 48, "max_episode_tokens": 1024,
                        "user_llm": "none"},
            # 8 steps of ~90 s each on an idle 2-core machine: the README demo ends within 15 min
            "trainer": {"total_steps": 8, "save_freq": 4, "threads": 2}},
    # The paper's policy size (Qwen3-4B, section 5) on one GPU, merged over the bench's preset:
    # the architecture with random weights (no hub here; `--model Qwen/Qwen3-4B --set
    # model.shape=` trains the real weights where the hub can be reached). Trained whole, policy
    # and critic hold ~64 GB each in fp32 weights, gradients and AdamW moments, which with the
    # reference, the rollout's copy and its KV cache is more than an H200's 139 GB (the arithmetic
    # in training/shapes/README.md); LoRA on both frozen backbones (bf16 on GPU) and recomputed
    # activations leave the update's passes room. NOT MEASURED YET: scripts/gpu/h200_4b.sh
    # measures this plan beside the others on the H200.
    "qwen3-4b": {"model": {"shape": "qwen3-4b", "lora_rank": 64, "lora_alpha": 128,
                           "gradient_checkpointing": True},
                 "critic": {"lora_rank": 64}},
}

# The `cpu` preset's changes per bench, merged over PRESETS["cpu"]; training.budget refuses at
# start a config under which a gym cannot succeed. Figures from benchmarks/bench_budgets.py
# (SmolLM2 tokenizer, train split; min / median / max) and 1-step runs of
# `orchestrator start --agent none --bench B --preset cpu --steps 1` on the shared 2-core CPU.
# UserGym keeps PRESETS["cpu"] (the README demo): prompts 120-178 tokens; 48-token turns hold the
# answers of every gym (4-27 tokens; the tau gym's write call 39 / 45 / 75: ten-digit ids are ten
# tokens, so its longest calls need a turn of their own length).
CPU_BY_BENCH: dict[str, dict[str, Any]] = {
    # ColBench: prompt 148-162 tokens; an answer ("I WANT TO ANSWER:" + reference) 54 / 110 / 153,
    # so 128 tokens hold the median and 133 of 160 answers (32 held none); asking about each
    # hidden fact (3-5) then answering takes 4-6 turns, 407 / 524 tokens with short questions;
    # 6 turns of 128 tokens and replies stay under 1,600, and 2,048 leaves room for
    # demonstrations in the prompt. Step: 154 s (rollout 106 s, update 48 s; 496 s while other
    # tests ran), the untrained policy filling 18 of 24 turns to the 128-token cap.
    "colbench": {"rollout": {"max_turns": 6, "response_length": 128, "max_episode_tokens": 2048}},
    # tau2: the policy and tool list make the prompt 1,347 (telecom) to 1,933 (retail) tokens,
    # over the old 1,024 budget; the oracle's solved episodes take 2-7 turns and 1,454 / 3,908
    # tokens (telecom median / retail max); its longest gold call is 104 tokens in retail, 211
    # in airline (51 of 60 airline tasks' calls fit 128). Two episodes a step, since every turn
    # re-reads the 2-4k-token episode: step 197 s (rollout 76 s, update 121 s) on a quiet
    # machine, 1,071-1,486 s beside another trainer.
    "tau2": {"data": {"train_batch_size": 1}, "actor": {"ppo_mini_batch_size": 1},
             "rollout": {"max_turns": 8, "response_length": 128, "max_episode_tokens": 4608}},
}


# Appendix C, Table 9, row by row (UserGym | ColBench | tau2-bench): the config key each carried
# row sets in PRESETS, with the paper's values, which tests/training/test_config.py checks.
TABLE9_CARRIED: dict[str, tuple[str, dict[str, Any]]] = {
    "Train batch size": ("data.train_batch_size", {"usergym": 64, "colbench": 64, "tau2": 32}),
    "response length": ("rollout.max_episode_tokens",
                        {"usergym": 8192, "colbench": 8192, "tau2": 16384}),
    "learning rate": ("actor.optim.lr", {"usergym": 3e-7, "colbench": 3e-7, "tau2": 1e-6}),
    "minibatch size": ("actor.ppo_mini_batch_size", {"usergym": 16, "colbench": 16, "tau2": 16}),
    "microbatch size per GPU": ("actor.ppo_micro_batch_size",
                                {"usergym": 4, "colbench": 4, "tau2": 2}),
    "KL loss coef": ("actor.kl_loss_coef", {"usergym": 0.001, "colbench": 0.001, "tau2": 0.001}),
    "entropy coefficient": ("actor.entropy_coeff",
                            {"usergym": 0.001, "colbench": 0.001, "tau2": 0.001}),
    "Parallel (n)": ("rollout.n", {"usergym": 5, "colbench": 5, "tau2": 5}),
    "turns": ("rollout.max_turns", {"usergym": 16, "colbench": 10, "tau2": 50}),
    "Response length (per turn)": ("rollout.response_length",
                                   {"usergym": 1024, "colbench": 1024, "tau2": 1024}),
}
# The rows the presets leave out, and why.
TABLE9_LEFT_OUT: dict[str, str] = {
    "prompt length": "1152 | 2048 | 8192: no prompt is cut; the episode budget "
                     "(rollout.max_episode_tokens) counts the prompt with the turns, and "
                     "training/budget.py refuses at start a prompt that would spend it",
    "rollout engine": "vLLM: the trainer generates with its own KV engine (training/kvengine.py) "
                      "by default; rollout.backend vllm is the optional vLLM engine, not yet run "
                      "on a GPU here",
    "Log prob micro batch size per GPU": "4 | 4 | 2: log-prob passes are cut by the token budget "
                                         "actor.ppo_max_token_len (TOKEN_BUDGET) instead",
    "GPU utilization": "0.5: the share of GPU memory vLLM takes, a setting of vLLM alone; "
                       "rollout.gpu_memory_utilization (default 0.5) under rollout.backend vllm",
    "GPUs per node": "4: a preset assumes no machine; trainer.nproc_per_node stays 1, and "
                     "trainer.parallel with trainer.nproc_per_node spreads a run over several GPUs",
    "Total epochs": "2: the trainer counts PPO steps (trainer.total_steps), not passes over the "
                    "task set; two epochs are 2 x training tasks / data.train_batch_size steps",
}


def _merge(base: dict, over: dict) -> dict:
    out = dict(base)
    for key, value in over.items():
        out[key] = _merge(out[key], value) if isinstance(value, dict) and isinstance(
            out.get(key), dict) else value
    return out


def dotted_to_nested(overrides: dict[str, Any]) -> dict[str, Any]:
    """{"actor.optim.lr": 1e-6} -> {"actor": {"optim": {"lr": 1e-6}}}."""
    nested: dict[str, Any] = {}
    for key, value in overrides.items():
        node = nested
        *parents, leaf = key.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return nested


def resolve(bench: str, preset: str | None = None, overrides: dict[str, Any] | None = None) -> Config:
    """The config of a run: the bench's appendix C preset, then `preset` ("cpu"), then overrides
    (dotted keys, e.g. {"trainer.total_steps": 10})."""
    from training.benches import canonical_bench

    name = canonical_bench(bench) if ":" not in bench else bench
    data: dict[str, Any] = {"bench": name}
    if name in PRESETS:
        data = _merge(data, PRESETS[name])
    if preset:
        if preset not in PRESETS:
            raise ConfigError(f"unknown preset {preset!r}: choose one of {', '.join(PRESETS)}.")
        data = _merge(data, PRESETS[preset])
        if preset == "cpu" and name in CPU_BY_BENCH:
            data = _merge(data, CPU_BY_BENCH[name])
    data = _merge(data, dotted_to_nested(overrides or {}))
    return Config.from_dict(data).validate()
