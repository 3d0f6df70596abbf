"""The evaluation process: `python -m training.evaluate` (started by `orchestrator eval`).

    orchestrator eval demo                              # the usual way: demo's final checkpoint
    orchestrator eval --model default --bench usergym   # the untrained packaged SmolLM2's row
    python -m training.evaluate --bench usergym --model default --out-root /tmp/eval \
        --episodes 1 --max-turns 4 --max-new-tokens 64 --user-llm none   # by hand, quick

Paper section 5.1: evaluation uses the bench's fixed protocol (test split, evaluation user,
interaction limits, scorer), which training-side changes cannot alter, on the final checkpoint of
the final run, and its results are never used to propose or accept interventions. What happens:
1. `install_wall` (an audit hook) refuses, inside this process, to open or list anything under the
   paths the orchestrator walls off (`--wall`: the experiment's workspace, ledger, agent sessions,
   other runs); the checkpoint evaluated and its run's config.json are the only exceptions.
2. The settings come from the bench's code (`BENCH.eval_protocol`, `BENCH.load_tasks(split)`) on
   top of the project's pristine `workspace/` folder shipped in the repository, never from an
   experiment's workspace or ledger. A quicker setting (`--episodes` per gym, `--max-turns`,
   `--max-new-tokens`) is not the protocol: the summary lists each one under "deviations" and the
   result folder's name carries it. So are worked examples: the paper's protocol shows none, we
   show the shipped one per task (the untrained 135M policy writes no valid action without it);
   `--demonstrations 0` is the paper's setting, and the summary records the count per gym.
   `--prompting react|reflexion` prompts the same policy as Table 1's ReAct or Reflexion rows
   (training/prompting.py) under the same protocol; the summary records which.
3. Before the model loads, one line says how much work that is (episodes x turns x new tokens)
   and, on the CPU, how long it can take and a quicker setting, so an hours-long run is stopped
   before it starts.
4. The checkpoint's policy (on the base model its run's config.json names) or the untrained model
   loads, and a local LLM user where the protocol has an LLM arm (below).
5. The episodes run in batches; task i's environment is seeded with (seed, i) and the sampler is
   reseeded with (seed, batch) before each batch, so the same checkpoint, protocol and seed give
   the same numbers. Progress goes to stderr as plain lines (a terminal, a pipe or a log file
   alike): episodes done, tokens/s, time left.
6. One JSON line per episode and summary.json go to `runs/NAME/eval/<id>/` (`--out-root`), which no
   meta-agent session is given (orchestrator/agents); SIGTERM or Ctrl-C writes nothing.

`eval_protocol` keys read here (all optional; DESIGN.md "Evaluation is walled off"):
  split               the split to evaluate (default "test")
  max_steps           int or {gym: int}: env.<gym>.max_steps and the rollout's turn cap
  gyms                the gyms evaluated (default: all of the split's tasks)
  user                "symbolic" | "llm" (one arm only), {knob: value} for every gym, or
                      {gym: {knob: value}}: user.<gym> overrides
  user_temperature    user.<gym>.temperature of every gym
  rules               a rules.json of the bench's own for the symbolic user (else the pristine one)
  knobs               a partial knobs.json deep-merged last (any other fixed setting)
  temperature, top_p  the policy's decoding (default 0.7 and 1.0: sampled, so repeated
                      evaluations with different seeds give the spread the paper reports)
  response_length, max_episode_tokens   per-turn and per-episode token budgets (1024 / 8192)
Where the protocol has an LLM arm (strategy_mix < 1), a local model answers (`--user-llm`: the
packaged SmolLM2 by default; the paper used GPT-4o-mini); `--user-llm none` leaves the symbolic
arm only, and the summary says which.
"""
from __future__ import annotations

import argparse
import copy
import hashlib
import json
import os
import shutil
import signal
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from training.benches import TaskDataError, load_bench_tasks, unrunnable
from training.demonstrations import MAX_PER_GYM as MAX_DEMONSTRATIONS

PROJECT_WORKSPACE = Path(__file__).resolve().parents[1] / "workspace"
DEFAULTS = {"temperature": 0.7, "top_p": 1.0, "response_length": 1024,
            "max_episode_tokens": 8192}
# SmolLM2-135M generating on a 2-core CPU: 14.7 tokens/s batched by 8 (24.0 by 32; 6.8 one at a
# time), benchmarks/RESULTS-trainer.md. Only for the estimate printed before the model loads.
CPU_TOKENS_PER_S = 15.0
QUICK_CPU = {"episodes": 1, "max_turns": 4, "max_new_tokens": 64}   # minutes, not hours
# Worked examples before each task under the paper's protocol (a bench's eval_protocol may say
# otherwise with "demonstrations"): none. Ours shows the shipped count, 1, unless --demonstrations.
PAPER_DEMONSTRATIONS = 0


class EvalError(ValueError):
    """A bad evaluation request (no checkpoint, unknown split); the message says what to do."""


# ---- the wall --------------------------------------------------------------------------------

_WALL_EVENTS = {"open", "os.listdir", "os.scandir", "os.chdir", "os.walk", "glob.glob",
                "shutil.copyfile", "shutil.copytree", "os.rename", "os.remove"}


def _under(path: str, roots: list[str]) -> bool:
    return any(path == r or path.startswith(r.rstrip(os.sep) + os.sep) for r in roots)


def install_wall(walls: list[Path], allowed: list[Path], refused: list[str]) -> None:
    """Refuse (PermissionError) every open/list of a path under `walls` and not under `allowed`;
    each refused path is appended to `refused`. Also refuses starting a process whose arguments or
    working folder name a walled path (`git -C workspace show ...`). An audit hook cannot be
    removed: the wall holds for the rest of this process, which is what we want."""
    wall_roots = [os.path.realpath(str(w)) for w in walls]
    allowed_roots = [os.path.realpath(str(a)) for a in allowed]

    def check(candidate: Any) -> None:
        if isinstance(candidate, int) or candidate is None:
            return
        try:
            path = os.path.realpath(os.fsdecode(candidate))
        except (TypeError, ValueError):
            return
        if _under(path, wall_roots) and not _under(path, allowed_roots):
            refused.append(path)
            raise PermissionError(f"evaluation is walled off from {path}: it reads only the "
                                  "bench's protocol and the checkpoint (DESIGN.md)")

    def hook(event: str, args: tuple) -> None:
        if event in _WALL_EVENTS and args:
            check(args[0])
        elif event == "subprocess.Popen" and len(args) >= 3:
            for a in list(args[1] or []) + [args[2]]:
                if isinstance(a, (str, bytes, os.PathLike)):
                    check(a)

    sys.addaudithook(hook)


# ---- the protocol ----------------------------------------------------------------------------

def _deep_merge(base: dict, over: dict) -> dict:
    out = copy.deepcopy(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def protocol_knobs(knobs: dict[str, Any], protocol: dict[str, Any],
                   gyms: tuple[str, ...]) -> dict[str, Any]:
    """The pristine knobs with the bench's evaluation overrides (turn limits, user) applied."""
    knobs = copy.deepcopy(knobs)
    max_steps = protocol.get("max_steps")
    for gym in gyms:
        if isinstance(max_steps, dict) and gym in max_steps:
            knobs.setdefault("env", {}).setdefault(gym, {})["max_steps"] = int(max_steps[gym])
        elif isinstance(max_steps, int):
            knobs.setdefault("env", {}).setdefault(gym, {})["max_steps"] = max_steps
    user = protocol.get("user") or {}
    for gym in gyms:
        if isinstance(user, str):          # "symbolic" | "llm": one arm only
            over: dict[str, Any] = {"strategy_mix": 1.0 if user == "symbolic" else 0.0}
        elif isinstance(user.get(gym), dict):
            over = user[gym]
        else:
            over = {k: v for k, v in user.items() if not isinstance(v, dict)}
        if "user_temperature" in protocol:
            over = {**over, "temperature": protocol["user_temperature"]}
        knobs.setdefault("user", {}).setdefault(gym, {}).update(copy.deepcopy(over))
    return _deep_merge(knobs, protocol.get("knobs") or {})


def needs_llm_user(knobs: dict[str, Any], gyms: tuple[str, ...]) -> bool:
    """Whether some gym's evaluation user has an LLM arm (strategy_mix below 1)."""
    return any(float(knobs.get("user", {}).get(g, {}).get("strategy_mix", 1.0)) < 1.0
               for g in gyms)


def llm_user(spec: str, knobs: dict[str, Any], gyms: tuple[str, ...], seed: int, device: str):
    """The LLM user of the evaluation: None when the protocol has no LLM arm or spec is "none"
    (the symbolic arm answers everything, recorded in the summary); else a local model ("default"
    = the packaged SmolLM2-135M-Instruct, or a model folder). The paper's evaluation user is
    GPT-4o-mini (section 5.1); offline, a local model stands in."""
    if spec == "none" or not needs_llm_user(knobs, gyms):
        return None
    from training.policy import pick_device, resolve_model_path
    from training.users.llm import LocalLLMUser

    path = resolve_model_path("" if spec == "default" else spec)
    return LocalLLMUser.from_dir(path, device=str(pick_device(device)), seed=seed)


def endpoint_user(spec: "EvalSpec"):
    """The evaluation's LLM user behind an OpenAI-compatible endpoint (the paper's protocol uses
    GPT-4o-mini there), greedy as a fixed protocol must be; its key from spec.user_key_env."""
    from training.users.http import HTTPLLMUser
    from training.users.llm import LLMRouter, LLMUserConfigError

    if not spec.user_model:
        raise EvalError("--user-url needs --user-model (the endpoint's model name).")
    try:
        return LLMRouter({"default": HTTPLLMUser(spec.user_url, spec.user_model,
                                                 api_key_env=spec.user_key_env)})
    except LLMUserConfigError as exc:
        raise EvalError(str(exc)) from None


def pristine_snapshot(protocol: dict[str, Any], gyms: tuple[str, ...], bench_name: str = ""):
    """The project's shipped workspace/ as a Snapshot, with the evaluation overrides."""
    from training.snapshot import Snapshot

    if not (PROJECT_WORKSPACE / "knobs.json").exists():
        raise EvalError(f"the project's default workspace is missing ({PROJECT_WORKSPACE}): "
                        "restore it with `git checkout workspace/` in the project.")
    snap = Snapshot.from_dir(PROJECT_WORKSPACE, commit="pristine")
    rules = dict(snap.rules)
    if protocol.get("rules") and bench_name:     # the bench's own evaluation rules file
        rules[bench_name] = json.loads(Path(protocol["rules"]).read_text())
    # the shipped demonstrations at the shipped count (env.<gym>.demonstrations): the worked
    # examples are part of the environment the policy was trained in, fixed here like the rest
    return Snapshot(commit=snap.commit, root=snap.root,
                    knobs=protocol_knobs(snap.knobs, protocol, gyms), rules=rules,
                    personas=snap.personas, reward_files=snap.reward_files,
                    demonstrations=snap.demonstrations)


def load_bench(name: str):
    """A bench by name, or "module:ATTR" of an object with the BENCH API (as training.config)."""
    if ":" in name:
        import importlib

        module, attr = name.split(":", 1)
        return getattr(importlib.import_module(module), attr)
    from training.benches import get_bench

    return get_bench(name)


# ---- the policy ------------------------------------------------------------------------------

def load_policy(checkpoint: Path | None, model: str | None, device: str):
    """`Models` with only the policy: a checkpoint's weights on the base model named by its run's
    config.json (model.path, LoRA rank), or an untrained model ("default" = packaged SmolLM2)."""
    import torch
    from transformers import AutoModelForCausalLM

    from training.policy import Models, load_tokenizer, pick_device, pick_precision, resolve_model_path

    cfg: dict[str, Any] = {}
    if checkpoint is not None:
        config_file = checkpoint.parent.parent / "config.json"
        if config_file.exists():
            cfg = json.loads(config_file.read_text()).get("model") or {}
        if (checkpoint / "policy" / "config.json").exists():     # a save_pretrained folder
            cfg = {**cfg, "path": str(checkpoint / "policy"), "lora_rank": 0}
    else:
        cfg = {"path": "" if model in (None, "", "default") else model}
    path = resolve_model_path(str(cfg.get("path") or ""))
    dev = pick_device(device)
    tok = load_tokenizer(path)
    policy = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    if checkpoint is not None and (checkpoint / "policy.pt").exists():
        if int(cfg.get("lora_rank") or 0) > 0:
            from peft import LoraConfig, get_peft_model

            policy = get_peft_model(policy, LoraConfig(
                r=int(cfg["lora_rank"]), lora_alpha=int(cfg.get("lora_alpha") or 16),
                target_modules="all-linear", task_type="CAUSAL_LM"))
        state = torch.load(checkpoint / "policy.pt", map_location="cpu", weights_only=False)
        policy.load_state_dict(state, strict=True)
    elif checkpoint is not None and not (checkpoint / "policy" / "config.json").exists():
        raise EvalError(f"{checkpoint} holds no policy weights (policy.pt or policy/): "
                        "is it a whole checkpoint?")
    policy.config.use_cache = True
    policy.to(dev).eval().requires_grad_(False)
    return Models(policy=policy, critic=None, reference=None, tokenizer=tok, device=dev,
                  path=path, autocast_dtype=pick_precision("auto", dev))


# ---- running episodes ------------------------------------------------------------------------

@dataclass(frozen=True)
class EvalSpec:
    bench: str
    split: str = "test"
    seed: int = 0
    episodes: int | None = None      # the first N tasks of each gym of the split; None = all
    batch_size: int = 16             # episodes advanced together (one generate call per turn)
    device: str = "auto"
    user_llm: str = "default"        # the LLM user where the protocol has an LLM arm: "default"
                                     # (packaged SmolLM2), a model folder, or "none" (symbolic only)
    max_turns: int | None = None     # overrides the protocol's turn limit (a deviation)
    max_new_tokens: int | None = None  # overrides its tokens per turn, response_length (a deviation)
    data_dir: str | None = None      # the bench's original files (UserRL, ColBench, tau2-bench)
                                     # instead of the tasks shipped in the project
    user_url: str | None = None      # an OpenAI-compatible endpoint answering as the user in every
    user_model: str | None = None    # gym (the paper's protocol: one fixed LLM user, GPT-4o-mini),
    user_key_env: str | None = None  # its model name and the variable holding its key
    demonstrations: int | None = None  # worked examples shown before each task; None: the shipped
                                       # env.<gym>.demonstrations (1); 0: the paper's protocol
    prompting: str = "plain"         # plain | react | reflexion (training/prompting.py: Table 1's
                                     # prompting baselines)
    attempts: int = 3                # reflexion: tries per task, stopping at the first success
    gyms: tuple[str, ...] | None = None  # evaluate only these of the bench's gyms (a deviation)


def apply_overrides(protocol: dict[str, Any], spec: EvalSpec) -> dict[str, Any]:
    """The protocol with the spec's turn and token overrides (the summary keeps the original)."""
    used = copy.deepcopy(protocol)
    if spec.max_turns is not None:
        used["max_steps"] = spec.max_turns
    if spec.max_new_tokens is not None:
        used["response_length"] = spec.max_new_tokens
    return used


def with_demonstrations(snapshot, gyms: tuple[str, ...], count: int | None) -> None:
    """Set env.<gym>.demonstrations of every evaluated gym to `count` (None: leave the shipped
    count): `orchestrator eval --demonstrations N`."""
    if count is None:
        return
    for gym in gyms:
        snapshot.knobs.setdefault("env", {}).setdefault(gym, {})["demonstrations"] = int(count)


def demonstrations_shown(snapshot, bench_name: str, gyms: tuple[str, ...]) -> dict[str, int]:
    """gym -> worked examples the policy sees before each task (the knob, capped by the examples
    the bench's file holds for the gym)."""
    return {gym: snapshot.demos_for(bench_name, gym)[1] for gym in gyms}


def demonstration_deviation(protocol: dict[str, Any],
                            shown: dict[str, int]) -> list[dict[str, Any]]:
    """The worked examples as a deviation: the paper's protocol shows none (section 5.1 follows
    Kong et al.'s evaluation, which prompts without in-context examples); we show one by default
    because the untrained 135M policy writes no valid UserGym action without it
    (benchmarks/RESULTS-starting-point.md). `eval --demonstrations 0` is the paper's setting."""
    want = int(protocol.get("demonstrations", PAPER_DEMONSTRATIONS))
    used = sorted(set(shown.values()))
    if not used or used == [want]:
        return []
    return [{"setting": "demonstrations", "protocol": want,
             "used": used[0] if len(used) == 1 else dict(sorted(shown.items()))}]


def deviations(protocol: dict[str, Any], spec: EvalSpec, all_tasks: int,
               tasks: int) -> list[dict[str, Any]]:
    """Each way this evaluation differs from the bench's protocol: {setting, protocol, used}."""
    out = []
    if tasks != all_tasks:
        out.append({"setting": "episodes", "protocol": f"all {all_tasks} tasks of the split",
                    "used": f"the first {spec.episodes} of each gym ({tasks} tasks)"})
    turns = protocol.get("max_steps")
    if isinstance(turns, dict) and len(set(turns.values())) == 1:     # UserGym: 16 in every gym
        turns = next(iter(turns.values()))
    if spec.max_turns is not None and spec.max_turns != turns:
        out.append({"setting": "max_turns", "protocol": turns, "used": spec.max_turns})
    resp = protocol.get("response_length", DEFAULTS["response_length"])
    if spec.max_new_tokens is not None and spec.max_new_tokens != resp:
        out.append({"setting": "max_new_tokens", "protocol": resp, "used": spec.max_new_tokens})
    return out


def first_per_gym(tasks: list, n: int) -> list:
    """The first n tasks of each gym, in the split's order."""
    counts: dict[str, int] = {}
    out = []
    for t in tasks:
        if counts.get(t.gym, 0) < n:
            counts[t.gym] = counts.get(t.gym, 0) + 1
            out.append(t)
    return out


def task_seed(seed: int, index: int) -> int:
    return (seed * 1_000_003 + index) % (2 ** 31)


def run_episodes(models, bench, tasks, snapshot, protocol: dict[str, Any], spec: EvalSpec,
                 progress: "ProgressLines | None" = None, llm=None, *,
                 indices: list[int] | None = None, reflections: dict[int, list[str]] | None = None,
                 attempt: int = 0) -> list[dict[str, Any]]:
    """All tasks' episodes, in batches; returns one record per task (rollout.Episode.record plus
    the index and seed), in task order. `protocol` is the one in use (overrides applied).
    `spec.prompting` shapes the prompt (training/prompting.py); Reflexion's later attempts pass
    the tasks' `indices` in the split (their seeds), their `reflections` and the `attempt`."""
    import torch

    from training import prompting
    from training.rollout import rollout, start_episode

    opts = {**DEFAULTS, **{k: protocol[k] for k in DEFAULTS if k in protocol}}
    records: list[dict[str, Any]] = []
    tokens_before = 0                  # policy tokens of the batches already done
    for start in range(0, len(tasks), spec.batch_size):
        chunk = tasks[start:start + spec.batch_size]
        episodes = []
        for pos, task in enumerate(chunk, start=start):
            i = indices[pos] if indices is not None else pos
            env = bench.make_env(task, snapshot, seed=task_seed(spec.seed, i), llm=llm)
            demos, n = snapshot.demos_for(str(getattr(bench, "name", "")), task.gym)
            system = prompting.system_prompt(spec.prompting, bench.system_prompt(task),
                                             (reflections or {}).get(i))
            episodes.append(start_episode(models, prompting.wrap(spec.prompting, env), system,
                                          seed=task_seed(spec.seed, i), demos=demos, n_demos=n))

        def tokens_now() -> int:       # mask 1 = generated by the policy
            return tokens_before + sum(sum(ep.mask) for ep in episodes)

        def at_turn_boundary() -> bool:
            # rollout asks at every turn boundary, the one place inside a batch where progress
            # can be read (a batch of 16 UserGym episodes runs for tens of minutes on a CPU)
            stop_if_interrupted()
            if progress is not None:
                progress.update(start, tokens_now())
            return False

        # a later attempt samples afresh (the first keeps the seeds evaluations always had)
        torch.manual_seed(task_seed(spec.seed, 10_000_000 + start + 1_000_003 * attempt))
        max_turns = max(int(snapshot.knobs["env"][t.gym]["max_steps"]) for t in chunk)
        rollout(models, episodes, max_turns=max_turns, response_length=int(opts["response_length"]),
                temperature=float(opts["temperature"]), top_p=float(opts["top_p"]),
                max_episode_tokens=int(opts["max_episode_tokens"]), should_stop=at_turn_boundary)
        tokens_before = tokens_now()
        for pos, ep in enumerate(episodes, start=start):
            i = indices[pos] if indices is not None else pos
            records.append({"index": i, **ep.record(), "turn_count": len(ep.turns)})
        if progress is not None:
            progress.update(start + len(chunk), tokens_before, force=True)
    return records


def reflexion_episodes(models, bench, tasks, snapshot, protocol: dict[str, Any], spec: EvalSpec,
                       progress, llm, show_progress: bool) -> list[dict[str, Any]]:
    """Reflexion's attempts (training/prompting.py): the first over every task with progress
    lines, later ones over the tasks still failed, each with its reflections."""
    from training import prompting

    opts = {**DEFAULTS, **{k: protocol[k] for k in DEFAULTS if k in protocol}}

    def attempt(indices: list[int], memory: dict[int, list[str]], k: int) -> list[dict[str, Any]]:
        return run_episodes(models, bench, [tasks[i] for i in indices], snapshot, protocol, spec,
                            progress if k == 0 else None, llm, indices=indices,
                            reflections=memory, attempt=k)

    def write(failed: list[dict[str, Any]], k: int) -> list[str]:
        return prompting.reflect(models, failed, temperature=float(opts["temperature"]),
                                 top_p=float(opts["top_p"]), seed=task_seed(spec.seed, 20_000_000 + k))

    say = (lambda line: print(line, file=sys.stderr, flush=True)) if show_progress else (lambda line: None)
    return prompting.run_reflexion(attempt, write, len(tasks), spec.attempts, say)


# ---- what it costs, and how far it got --------------------------------------------------------

@dataclass(frozen=True)
class Work:
    """The most an evaluation can generate: every episode running to its turn limit with every
    turn at its token limit, or to the episode's token budget (prompt and replies count too)."""

    episodes: int
    max_turns: int
    new_tokens: int                # per turn (response_length)
    episode_budget: int            # max_episode_tokens
    gyms: int

    @property
    def tokens(self) -> int:
        return self.episodes * min(self.max_turns * self.new_tokens, self.episode_budget)


def work_of(tasks: list, knobs: dict[str, Any], protocol: dict[str, Any]) -> Work:
    opts = {**DEFAULTS, **{k: protocol[k] for k in DEFAULTS if k in protocol}}
    return Work(episodes=len(tasks),
                max_turns=max(int(knobs["env"][t.gym]["max_steps"]) for t in tasks),
                new_tokens=int(opts["response_length"]),
                episode_budget=int(opts["max_episode_tokens"]), gyms=len({t.gym for t in tasks}))


def duration(seconds: float) -> str:
    if seconds < 60:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def work_lines(work: Work, label: str, on_cpu: bool) -> list[str]:
    """The estimate printed before the model loads; on the CPU, past 15 minutes at the measured
    CPU rate, a one-sentence warning with a quicker setting."""
    lines = [f"{label}: {work.episodes} episodes x up to {work.max_turns} turns x up to "
             f"{work.new_tokens:,} new tokens a turn (at most {work.episode_budget:,} tokens an "
             f"episode): up to {work.tokens:,} generated tokens."]
    upper_s = work.tokens / CPU_TOKENS_PER_S
    if on_cpu and upper_s > 15 * 60:
        quick = Work(work.gyms * QUICK_CPU["episodes"], QUICK_CPU["max_turns"],
                     QUICK_CPU["max_new_tokens"], work.episode_budget, work.gyms)
        flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in QUICK_CPU.items())
        lines.append(f"On the CPU that can take up to {duration(upper_s)} at the ~"
                     f"{CPU_TOKENS_PER_S:.0f} tokens/s a 2-core CPU generates (episodes that end "
                     f"sooner take less); for a quick look add `{flags}` (up to "
                     f"{duration(quick.tokens / CPU_TOKENS_PER_S)}), which the summary records as "
                     f"a deviation from the protocol.")
    return lines


class ProgressLines:
    """Progress as plain lines on stderr, read alike on a terminal, through a pipe or in a log
    file: one at the end of every batch of episodes, and inside a long batch one every `every_s`
    seconds. Time left is proportional once an episode is done; before that, an upper bound
    from the remaining token budget at the rate measured so far."""

    def __init__(self, total: int, max_tokens: int, label: str, every_s: float = 60.0,
                 out=None, clock=time.monotonic):
        self.total, self.max_tokens, self.label, self.every_s = total, max_tokens, label, every_s
        self.out, self.clock = out, clock
        self.t0 = self.last = clock()

    def update(self, done: int, tokens: int, force: bool = False) -> None:
        now = self.clock()
        if not force and now - self.last < self.every_s:
            return
        self.last = now
        elapsed = max(now - self.t0, 1e-9)
        rate = tokens / elapsed
        if done >= self.total:
            left = "done"
        elif done:
            left = f"about {duration(elapsed / done * (self.total - done))} left"
        elif rate > 0:
            left = f"at most {duration((self.max_tokens - tokens) / rate)} left"
        else:
            left = "time left not known yet"
        print(f"{self.label}: {done}/{self.total} episodes, {tokens:,} tokens at {rate:.1f} "
              f"tokens/s, {duration(elapsed)} elapsed, {left}", file=self.out or sys.stderr,
              flush=True)


def _invalid_rate(records: list[dict[str, Any]]) -> float:
    """Share of agent turns the environment refused for their format."""
    turns = [t for r in records for t in r.get("turns", [])]
    return statistics.fmean(float(bool(t.get("invalid_action"))) for t in turns) if turns else 0.0


def env_return(record: dict[str, Any]) -> float:
    """The environment's own reward summed over an episode's turns: UserGym's number in the paper
    (appendix B: "the environment reward averaged within and across gyms"; UserRL sums the
    per-turn rewards, so Intention reaches 1.2-2.0 in table 1), where `score` is normalised to
    [0, 1]. No reward module adds to it: evaluation runs none."""
    return sum(float(t.get("env_reward", 0.0)) for t in record.get("turns", []))


def summarize(records: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Per gym: mean score, the environment's summed reward (env_reward, the paper's UserGym
    scale), success rate, mean turns, truncated share, number of episodes."""
    by_gym: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_gym.setdefault(r["gym"], []).append(r)
    return {gym: {"score": statistics.fmean(float(r["score"]) for r in rs),
                  "env_reward": statistics.fmean(env_return(r) for r in rs),
                  "invalid_rate": _invalid_rate(rs),
                  "success": statistics.fmean(float(bool(r["success"])) for r in rs),
                  "turns": statistics.fmean(r["turn_count"] for r in rs),
                  "truncated": statistics.fmean(float(bool(r["truncated"])) for r in rs),
                  "errors": sum(1 for r in rs if r.get("error")), "n": len(rs)}
            for gym, rs in sorted(by_gym.items())}


def eval_id(spec: EvalSpec, run: str | None, step: int | None, model: str | None) -> str:
    what = (f"{run}-step-{step:06d}" if model is None else
            "model-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in model)[-60:])
    tail = f"-first{spec.episodes}" if spec.episodes else ""
    tail += f"-turns{spec.max_turns}" if spec.max_turns is not None else ""
    tail += f"-tokens{spec.max_new_tokens}" if spec.max_new_tokens is not None else ""
    # some gyms' results never overwrite the whole bench's
    tail += "-gyms-" + "-".join(sorted(spec.gyms)) if spec.gyms else ""
    # another count of worked examples never overwrites the default's results (the shipped 1)
    tail += f"-demos{spec.demonstrations}" if spec.demonstrations not in (None, 1) else ""
    # another prompting method's results sit beside the plain ones
    tail += {"react": "-react", "reflexion": f"-reflexion{spec.attempts}"}.get(spec.prompting, "")
    if spec.user_url:                   # another user's results never overwrite the offline ones
        tail += "-user" + hashlib.sha1(f"{spec.user_url}|{spec.user_model}".encode()).hexdigest()[:8]
    if spec.data_dir:                   # another folder's tasks never overwrite the shipped ones'
        folder = str(Path(spec.data_dir).expanduser().resolve())
        tail += "-data" + hashlib.sha1(folder.encode()).hexdigest()[:8]
    return f"{what}-{spec.bench.replace(':', '_')}-{spec.split}-seed{spec.seed}{tail}"


def write_results(out_dir: Path, records: list[dict[str, Any]], summary: dict[str, Any]) -> Path:
    """episodes.jsonl and summary.json, written to a temporary sibling and renamed into place."""
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{out_dir.name}-", dir=out_dir.parent))
    with open(tmp / "episodes.jsonl", "w") as f:
        for r in records:
            f.write(json.dumps(r, default=str) + "\n")
    (tmp / "summary.json").write_text(json.dumps(summary, indent=1, default=str) + "\n")
    if out_dir.exists():
        shutil.rmtree(out_dir)
    os.rename(tmp, out_dir)
    return out_dir


def evaluate(spec: EvalSpec, out_root: Path, *, checkpoint: Path | None = None,
             model: str | None = None, run: str | None = None, step: int | None = None,
             refused: list[str] | None = None, show_progress: bool = True) -> Path:
    """Run one evaluation and write runs/NAME/eval/<id>/; returns that folder."""
    bench = load_bench(spec.bench)
    protocol = dict(bench.eval_protocol)
    split = spec.split or protocol.get("split", "test")
    proto_gyms = protocol.get("gyms")
    known = tuple(proto_gyms or getattr(bench, "gyms", ()) or ())
    if spec.gyms:
        unknown = sorted(set(spec.gyms) - set(known)) if known else []
        if unknown:
            raise EvalError(f"no gym {', '.join(unknown)} in bench {spec.bench}: its gyms are "
                            f"{', '.join(known)}.")
    asked = list(spec.gyms) if spec.gyms else (list(proto_gyms) if proto_gyms else None)
    try:
        loaded = load_bench_tasks(bench, split, asked, spec.data_dir, strict=False)
    except TaskDataError as exc:
        raise EvalError(str(exc)) from None
    # original files that lack what a gym needs (UserRL ships no TravelGym option database):
    # those tasks are left out and the summary says so, as a deviation from the protocol
    skipped = {g: {"tasks": n, "why": why} for g, (n, why) in unrunnable(loaded).items()}
    skipped.update({g: {"tasks": 0, "why": "the data folder holds no such tasks"}
                    for g in (asked or ()) if not any(t.gym == g for t in loaded)})
    if spec.gyms:                      # `--gyms`: the others are left out by the command
        skipped.update({g: {"tasks": None, "why": "not asked for (--gyms)"}
                        for g in known if g not in spec.gyms})
    tasks = [t for t in loaded if t.data.get("runnable", True) is not False
             and (not spec.gyms or t.gym in spec.gyms)]
    if not tasks:
        raise EvalError(f"bench {spec.bench} has no tasks in split {split!r}.")
    all_tasks = len(tasks)
    if spec.episodes:                  # every table column stays filled
        tasks = first_per_gym(tasks, spec.episodes)
    gyms = tuple(sorted({t.gym for t in tasks}))
    used = apply_overrides(protocol, spec)
    snapshot = pristine_snapshot(used, gyms, str(getattr(bench, "name", "")))
    with_demonstrations(snapshot, gyms, spec.demonstrations)
    shown = demonstrations_shown(snapshot, str(getattr(bench, "name", "")), gyms)
    if spec.user_url:                 # one fixed LLM user answers every episode of every gym
        for g in gyms:
            snapshot.knobs.setdefault("user", {}).setdefault(g, {}).update(strategy_mix=0.0, llm="default")
    work = work_of(tasks, snapshot.knobs, used)
    label = f"eval {getattr(bench, 'name', spec.bench)}/{split}"
    if show_progress:
        from training.policy import pick_device

        on_cpu = pick_device(spec.device).type == "cpu"
        print(*work_lines(work, label, on_cpu), sep="\n", file=sys.stderr, flush=True)
    t0 = time.time()
    models = load_policy(checkpoint, model, spec.device)
    llm = endpoint_user(spec) if spec.user_url else \
        llm_user(spec.user_llm, snapshot.knobs, gyms, spec.seed, spec.device)
    progress = ProgressLines(len(tasks), work.tokens, label) if show_progress else None
    if spec.prompting == "reflexion":
        records = reflexion_episodes(models, bench, tasks, snapshot, used, spec, progress, llm,
                                     show_progress)
    else:
        records = run_episodes(models, bench, tasks, snapshot, used, spec, progress, llm)
    summary = {"bench": getattr(bench, "name", spec.bench), "split": split, "seed": spec.seed,
               "batch_size": spec.batch_size,    # the sampler is reseeded per batch
               "episodes": len(records), "source": "model" if checkpoint is None else "checkpoint",
               "model": model, "checkpoint": str(checkpoint) if checkpoint else None,
               "run": run, "run_index": int(run.split("-")[1]) if run else None, "step": step,
               "per_gym": summarize(records), "protocol": protocol,
               # where the tasks came from: a different task set is a different table
               "data": str(Path(spec.data_dir).expanduser().resolve()) if spec.data_dir else "shipped",
               "deviations": deviations(protocol, spec, all_tasks, len(tasks))
               + demonstration_deviation(protocol, shown) + (
                   [{"setting": "gyms", "protocol": list(proto_gyms or known or gyms),
                     "used": list(gyms), "left_out": skipped}] if skipped else []),
               # worked examples the policy saw before each task, per gym (the paper's: none)
               "demonstrations": shown,
               # the prompting method (Table 1: ReAct, Reflexion) and Reflexion's tries per task
               "prompting": spec.prompting,
               "attempts": spec.attempts if spec.prompting == "reflexion" else 1,
               "knobs": {"env": {g: snapshot.knobs["env"][g] for g in gyms},
                         "user": {g: snapshot.knobs.get("user", {}).get(g) for g in gyms}},
               "user_llm": (f"http {spec.user_model} at {spec.user_url}" if spec.user_url else
                            spec.user_llm if llm is not None else "none (symbolic arm only)"),
               # which user answered: the bench's own (offline) or one endpoint for every gym;
               # results of different users are never averaged together (report_data)
               "user_protocol": (f"endpoint {spec.user_model}" if spec.user_url else "offline"),
               "wall": {"refused": list(refused or [])}, "wall_s": round(time.time() - t0, 2),
               "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    spec = EvalSpec(**{**spec.__dict__, "split": split})
    stop_if_interrupted()              # a stopped evaluation writes nothing
    return write_results(Path(out_root) / eval_id(spec, run, step, model), records, summary)


class Interrupted(BaseException):
    """SIGTERM or SIGINT (from `orchestrator eval`, which forwards both, or from Ctrl-C). A
    BaseException, as KeyboardInterrupt is: the signal can land while the model code is being
    imported, inside a library's `try: import ... except Exception`, which would swallow it."""

    def __init__(self, signum: int):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_STOP: list[int] = []      # the signal received, kept: a raise that lands in a __del__ is lost


def _interrupted(signum: int, frame) -> None:
    for sig in (signal.SIGTERM, signal.SIGINT):      # Ctrl-C reaches both processes: once is enough
        signal.signal(sig, signal.SIG_IGN)
    _STOP.append(signum)
    raise Interrupted(signum)


def stop_if_interrupted() -> None:
    """Raise Interrupted when a signal came whose exception Python swallowed: raised while a
    finalizer (__del__, e.g. the regex module's) ran, it is only printed as "Exception ignored"
    and the evaluation would go on; the turn boundaries and the write check this."""
    if _STOP:
        raise Interrupted(_STOP[0])


def _quiet_unraisable(hook):
    """sys.unraisablehook that drops our own Interrupted (stop_if_interrupted acts on it) and
    passes anything else to `hook`."""
    def quiet(unraisable):
        if not isinstance(unraisable.exc_value, Interrupted):
            hook(unraisable)
    return quiet


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.evaluate", description=__doc__.split("\n")[0])
    p.add_argument("--bench", required=True)
    p.add_argument("--split", default="test")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--episodes", type=int, default=None)
    p.add_argument("--batch-size", type=int, default=16,
                   help="episodes advanced together, one generate call per turn (default 16)")
    p.add_argument("--max-turns", type=int, default=None,
                   help="override the protocol's turn limit (recorded as a deviation)")
    p.add_argument("--max-new-tokens", type=int, default=None,
                   help="override the protocol's new tokens a turn (recorded as a deviation)")
    p.add_argument("--device", default="auto")
    p.add_argument("--data-dir", default=None,
                   help="the bench's original files instead of the shipped tasks")
    p.add_argument("--user-url", default=None, help="an OpenAI-compatible endpoint as every gym's user")
    p.add_argument("--user-model", default=None, help="the endpoint's model name")
    p.add_argument("--user-key-env", default=None, help="the variable holding the endpoint's key")
    p.add_argument("--user-llm", default="default",
                   help="LLM user where the protocol has an LLM arm: default, a folder, or none")
    p.add_argument("--demonstrations", type=int, default=None,
                   help="worked examples before each task (default: the shipped 1; 0: the paper's)")
    p.add_argument("--prompting", default="plain", choices=("plain", "react", "reflexion"),
                   help="prompting method (training/prompting.py; default plain)")
    p.add_argument("--attempts", type=int, default=3, help="reflexion: tries per task (default 3)")
    p.add_argument("--gyms", default=None,
                   help="comma-separated gyms to evaluate (default: the protocol's; a deviation)")
    p.add_argument("--out-root", required=True, help="the experiment's eval/ folder")
    p.add_argument("--checkpoint", default=None)
    p.add_argument("--run", default=None)
    p.add_argument("--step", type=int, default=None)
    p.add_argument("--model", default=None)
    p.add_argument("--wall", action="append", default=[], help="a path never to open")
    p.add_argument("--no-progress", action="store_true")
    a = p.parse_args(argv)
    if (a.checkpoint is None) == (a.model is None):
        p.error("give exactly one of --checkpoint and --model")
    ckpt = Path(a.checkpoint).resolve() if a.checkpoint else None
    refused: list[str] = []
    allowed = [ckpt, ckpt.parent.parent / "config.json"] if ckpt else []
    install_wall([Path(w) for w in a.wall], allowed, refused)
    for name in ("batch_size", "max_turns", "max_new_tokens"):
        if getattr(a, name) is not None and getattr(a, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if a.attempts < 1:
        p.error("--attempts must be at least 1")
    if a.demonstrations is not None and not 0 <= a.demonstrations <= MAX_DEMONSTRATIONS:
        p.error(f"--demonstrations must be between 0 and {MAX_DEMONSTRATIONS}")
    spec = EvalSpec(bench=a.bench, split=a.split, seed=a.seed, episodes=a.episodes,
                    batch_size=a.batch_size, device=a.device, user_llm=a.user_llm,
                    max_turns=a.max_turns, max_new_tokens=a.max_new_tokens, data_dir=a.data_dir,
                    user_url=a.user_url, user_model=a.user_model, user_key_env=a.user_key_env,
                    demonstrations=a.demonstrations, prompting=a.prompting, attempts=a.attempts,
                    gyms=tuple(g.strip() for g in a.gyms.split(",") if g.strip()) if a.gyms else None)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _interrupted)
    sys.unraisablehook = _quiet_unraisable(sys.unraisablehook)
    try:
        out = evaluate(spec, Path(a.out_root), checkpoint=ckpt, model=a.model, run=a.run,
                       step=a.step, refused=refused, show_progress=not a.no_progress)
    except Interrupted as exc:
        print(f"evaluate: stopped by {exc}; nothing was written.", file=sys.stderr)
        return 128 + exc.signum
    except PermissionError as exc:      # the wall: something tried to read a walled path
        print(f"evaluate: refused: {exc}", file=sys.stderr)
        return 3
    except (EvalError, ValueError, FileNotFoundError) as exc:
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    except MemoryError as exc:   # the KV cache's refusal (training.kvengine) says what to change
        if not str(exc):
            raise
        print(f"evaluate: {exc}", file=sys.stderr)
        return 2
    summary = json.loads((out / "summary.json").read_text())
    for gym, s in summary["per_gym"].items():
        print(f"{gym:>10}: reward {s['env_reward']:.3f}  score {s['score']:.3f}  "
              f"success {s['success']:.3f}  n={s['n']}")
    if summary["deviations"]:
        print("not the bench's protocol: " + "; ".join(
            f"{d['setting']}: {d['used']} instead of {d['protocol']}" for d in summary["deviations"])
            + " (the report shows these numbers in a row of their own).")
    print(f"results: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
