"""`python -m training.trainer --run DIR [--resume]`: the trainer subprocess (paper 4.4): PPO,
or GRPO / InfoPO (`algorithm.name`; the EAU layer above is the same for all three).

    orchestrator start demo                                # the usual way: the supervisor runs it
    python -m training.trainer --run runs/demo/run-001     # by hand, on a run folder's config.json
    python -m training.trainer --run runs/demo/run-001 --resume   # from its newest checkpoint
    python -m torch.distributed.run --standalone --nproc_per_node 2 -m training.trainer \
        --run-dir runs/demo/run-001                        # two processes (trainer.parallel set)

It reads DIR/config.json (training.config.Config) and writes only inside DIR (DESIGN.md, "The
trainer subprocess"): metrics.jsonl, events.jsonl, trajectories/step-NNNNNN.jsonl,
checkpoints/step-NNNNNN/, heartbeat, and snapshots/ (exported workspace trees).

What happens at start (`Trainer.__init__`), and why:
1. The config is validated and the bench's tasks of `data.split` loaded; an empty set of tasks
   stops here with one sentence, not hours later.
2. Policy, critic (ppo only) and frozen reference load (training.policy); with `--resume` the
   newest whole checkpoint's weights go in before any wrapping, so a one-process checkpoint
   resumes a several-process run and back.
3. The workspace's live commit (or the plain workspace.dir; on a resume, the checkpoint's commit)
   is exported and built into the snapshot the rollouts use (training.live). On a fresh start
   `budget.check_run` refuses a config under which a gym can never succeed (a turn too short for
   its shortest answer) before any episode is wasted on it.

What happens every step (`run`, then `run_step`), and why:
1. Wait while a meta-agent session holds the run (training/hold.py, `orchestrator start
   --max-lag N`), so training runs at most N steps ahead of a session's fix.
2. At the step boundary, swap in a newly promoted workspace commit (`maybe_reload`, paper section
   4.5): a change applies to whole steps only, and a commit that fails to load is skipped
   (training.live.AgreedSnapshots: the same commit on every process).
3. Reseed from (seed, step): `--resume` then continues exactly as the uninterrupted run would.
4. Sample `train_batch_size` tasks and roll out `rollout.n` episodes of each together
   (training.rollout): each episode keeps its KV cache across turns and takes its next turn as
   soon as its user has replied (training/kvengine.py), decoding batched over all of them.
5. Score each agent turn: the environment's reward plus the snapshot's reward modules
   (training.rewards), which the meta-agent edits.
6. Old and reference log-probs, then advantages: ppo's values and turn-level GAE; grpo's
   group baseline over a task's rollout.n episodes shared among turns by UserRL's credits
   (training/grpo.py); infopo adds each turn's information gain (training/infogain.py). Then
   clipped-loss epochs over mini-batches with gradient accumulation (training.update).
7. One line of metrics.jsonl (`step_metrics`) and the step's trajectories; a checkpoint every
   `trainer.save_freq` steps. SIGTERM checkpoints the last finished step and exits 0.

Several processes (`trainer.parallel` ddp | fsdp under torchrun, above; training.distributed):
every process derives the same global list of (task, sample) pairs of a step and rolls out only
its share, with its own sampling seed; the update is exact over the global batch
(training.update); rank 0 alone decides which live commit to apply (and broadcasts it), writes the
run files and checkpoints (whole state dicts in the one-process format, so either kind of run
resumes the other). A stop (SIGTERM) and a failed reload are agreed by all processes at the step
boundary, never mid-step. With one process (no torchrun, or world size 1) nothing of this runs.
"""
from __future__ import annotations

import argparse
import contextlib
import copy
import importlib
import importlib.util
import os
import random
import signal
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training import budget, checkpoint, live, metrics, rewards, steps
from training import distributed as D
from training import hold as hold_mod
from training.benches import TaskDataError, load_bench_tasks, train_gyms
from training.config import Config, ConfigError
from training.kvengine import KVCacheMemoryError, weight_copies
from training.policy import ModelLoadError, load_models
from training.rollout import Episode, RolloutStats, engine_logprobs, rollout, start_episode
from training.users import leak
from training.users.llm import LLMUserConfigError, run_users
from training.update import collate, ppo_update, score_batch
from training.vllm_backend import VLLMStartError


def load_bench(name: str):
    """The BENCH object: a bench name (training.benches), or "module:ATTR" / "file.py:ATTR" of a
    custom bench with the same API (the tests' toy bench)."""
    if ":" in name:
        module, attr = name.rsplit(":", 1)
        if module.endswith(".py"):
            spec = importlib.util.spec_from_file_location(Path(module).stem, module)
            if spec is None or spec.loader is None:
                raise ConfigError(f"bench file {module} cannot be imported.")
            mod = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = mod
            spec.loader.exec_module(mod)
        else:
            mod = importlib.import_module(module)
        return getattr(mod, attr)
    from training.benches import get_bench
    return get_bench(name)


def phase(name: str):
    """A named range of the step for torch.profiler (benchmarks/step_profile.py reads the eau/*
    ranges as the step's breakdown); without a profiler running it costs one function call."""
    return torch.profiler.record_function(name)


def _mark_written(opt: torch.optim.Optimizer, args, kwargs) -> None:
    """An optimiser step's post hook: bump the version counter of every parameter it holds,
    without touching the data, so that whatever copies the policy sees the step."""
    for group in opt.param_groups:
        for p in group["params"]:
            torch.autograd.graph.increment_version(p)


def step_seed(seed: int, step: int) -> int:
    return (seed * 1_000_003 + step * 7919) % (2**31 - 1)


def reseed(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


class Trainer:
    def __init__(self, run_dir: Path | str, *, resume: bool = False):
        self.files = metrics.RunFiles(run_dir)
        self.cfg = Config.load(self.files.config).validate()
        if self.cfg.trainer.threads > 0:
            torch.set_num_threads(self.cfg.trainer.threads)
        self.dist = self._join()
        self.main = self.dist.is_main
        self.bench = load_bench(self.cfg.bench)
        self.gyms = tuple(self.cfg.gyms) or train_gyms(self.bench)
        try:
            self.tasks = load_bench_tasks(self.bench, self.cfg.data.split, self.gyms,
                                          self.cfg.data.data_dir)
        except TaskDataError as exc:
            raise ConfigError(str(exc)) from None
        if not self.tasks:
            raise ConfigError(f"bench {self.cfg.bench} has no {self.cfg.data.split} tasks for "
                              f"gyms {', '.join(self.gyms)}: check the `gyms` of config.json.")
        self.stop_requested = False
        self.step = 0
        self.failed_commits: set[str] = set()
        reseed(self.cfg.trainer.seed)
        # grpo and infopo have no critic: none is built, stepped or checkpointed
        self.has_critic = self.cfg.algorithm.name == "ppo"
        self.models = load_models(self.cfg.model, seed=self.cfg.trainer.seed,
                                  device=self.dist.device if self.dist.active else None,
                                  critic=self.has_critic, critic_lora=self.cfg.critic.lora_rank)
        if self.cfg.rollout.backend == "vllm":     # before the users: it may serve the LLM user
            from training.vllm_backend import start_engine
            self.models.vllm = start_engine(self.cfg, self.models, self.files.dir)
        try:
            self.llm = run_users(self.cfg, self.models)
        except LLMUserConfigError as exc:
            raise ConfigError(str(exc)) from None
        self.watcher: live.LiveWatcher | None = None
        ws = self.cfg.workspace
        if ws.repo and self.main:        # rank 0 alone follows the live ref (maybe_reload)
            self.watcher = live.LiveWatcher(Path(ws.repo), ws.live_ref, ws.poll_s)
        if self.main:
            checkpoint.remove_partial(self.files.checkpoints)
        D.barrier(self.dist)
        self.snapshots = live.AgreedSnapshots(ws, self.files.snapshots, self.check_snapshot,
                                              self.dist)
        saved = checkpoint.read_for_resume(self.files.checkpoints, self.cfg.algorithm.name,
                                           self.has_critic) if resume else None
        if saved is not None:            # whole weights into the plain models, before any sharding
            self.models.policy.load_state_dict(saved[0]["policy"])
            if self.has_critic:
                self.models.critic.load_state_dict(saved[0]["critic"])
        self._parallelize()
        # after the wrapping: FSDP replaces the parameters by their shards
        self.actor_opt = self._optimizer(self.models.policy, self.cfg.actor.optim)
        self.critic_opt = self._optimizer(self.models.critic, self.cfg.critic.optim) \
            if self.has_critic else None
        resumed = self._resume(saved) if saved is not None else None
        if resumed is None:
            self.live = self.snapshots.initial()
            # refuse now a config under which a gym can never succeed, not after hours of
            # truncated episodes (training/budget.py; `orchestrator start` checks it first)
            budget.check_run(self.cfg, self.bench, self.tasks, self.live.snapshot,
                             self.models.tokenizer)
        if self.main:
            self._drop_lines_past_step()
            extra = {"world_size": self.dist.world_size, "parallel": self.cfg.trainer.parallel} \
                if self.dist.active else {}
            self.files.event("started", step=self.step, commit=self.live.commit, resumed=resume,
                             pid=os.getpid(), precision=self.models.precision, **extra)

    # ---- set-up ---------------------------------------------------------------------------
    def _join(self) -> D.DistInfo:
        """This process's place under torchrun; one process (today's trainer) without it."""
        world = int(os.environ.get("WORLD_SIZE", "1"))
        if world <= 1:
            return D.DistInfo()
        if self.cfg.trainer.parallel == "none":
            raise ConfigError(f"the trainer runs in {world} processes but trainer.parallel is "
                              "none: set it to ddp or fsdp.")
        if world > self.cfg.episodes_per_step:
            raise ConfigError(f"{world} processes but only {self.cfg.episodes_per_step} episodes "
                              "a step: raise data.train_batch_size * rollout.n or use fewer.")
        try:
            return D.init(device=self.cfg.model.device)
        except D.ParallelConfigError as exc:
            raise ConfigError(str(exc)) from None

    def _parallelize(self) -> None:
        """Wrap policy and critic for the update (DDP or FSDP2) and pick the rollout's model.

        The update calls the policy through `PolicyLogprobs`, the wrapped root (DDP/FSDP act in
        its forward). Rollouts never go through the wrapper: each process decodes its own
        episodes for a different number of steps, so a collective per decode step (FSDP's
        all-gather of every layer) would deadlock or at best pay a gather per token. Under DDP
        the bare policy holds the whole weights already; under FSDP rollouts use a plain copy
        whose weights are gathered from the shards once per step (`_sync_rollout_policy`).
        Both are plain tensors, so the CUDA-graph fast path (training.generation) applies.
        """
        if not self.dist.active:
            return
        from training.policy import PolicyLogprobs

        m, strategy = self.models, self.cfg.trainer.parallel
        m.rollout_policy = copy.deepcopy(m.policy).eval().requires_grad_(False) \
            if strategy == "fsdp" else m.policy
        m.actor = D.wrap_model(PolicyLogprobs(m.policy), self.dist, strategy)
        if m.critic is not None:
            m.critic_train = D.wrap_model(m.critic, self.dist, strategy)

    def _sync_rollout_policy(self) -> None:
        """FSDP: the rollout copy := the trained shards, gathered whole (every process)."""
        if self.dist.active and self.cfg.trainer.parallel == "fsdp":
            D.copy_full_params(self.models.rollout_policy, self.models.policy)

    @staticmethod
    def _optimizer(model: torch.nn.Module, optim, fused: bool | None = None) -> torch.optim.Optimizer:
        params = [p for p in model.parameters() if p.requires_grad]
        # CUDA: the fused kernel (one launch for all parameters) in place of the foreach
        # default; the CPU keeps the default, which every CPU resume test was written against
        if fused is None:
            fused = bool(params) and params[0].device.type == "cuda" and \
                not any(hasattr(p, "full_tensor") for p in params)        # FSDP2's DTensors
        opt = torch.optim.AdamW(params, lr=optim.lr, betas=tuple(optim.betas),
                                weight_decay=optim.weight_decay, fused=fused or None)
        if fused:
            # the fused kernel writes the parameters without bumping their version counters
            # (torch 2.13: Tensor._version stays 0 across a fused step; the H200's 2.11 behaved
            # alike, its copies never refreshed), and the rollout
            # engine's bf16 copy, the merged LoRA copy and the vLLM push all detect new weights by
            # those counters: without this, every GPU rollout of the H200 runs up to 2026-12-06
            # decoded the initial policy (PPO and EAU rollouts identical step by step, seed 1)
            opt.register_step_post_hook(_mark_written)
        return opt

    def check_snapshot(self, snap) -> None:
        """A snapshot is usable when every gym's environment builds and resets from it, and its
        demonstrations parse under the gyms' own action parsers (training/demonstrations.py)."""
        from training import demonstrations

        name = getattr(self.bench, "name", "")
        if name in snap.demonstrations and hasattr(self.bench, "check_action"):
            bad = demonstrations.problems(self.bench, name, snap.demonstrations[name])
            if bad:
                raise demonstrations.DemonstrationError(bad[0])
        for gym in self.gyms:
            task = next((t for t in self.tasks if t.gym == gym), None)
            if task is not None:
                self.bench.make_env(task, snap, seed=0, llm=None).reset(seed=0)

    # ---- hot reload (paper 4.5) -----------------------------------------------------------
    def maybe_reload(self) -> None:
        """At a step boundary: swap in the live ref's commit if it is new and loads on every
        process (training.live.AgreedSnapshots); a commit that fails is skipped from then on."""
        if not self.cfg.workspace.repo:
            return
        commit, seen_at = self.snapshots.next_commit(self.watcher, self.live.commit,
                                                     self.failed_commits)
        if commit is None:
            return
        t0 = time.monotonic()
        try:
            new = self.snapshots.load(commit)
        except live.SnapshotError as exc:
            self.failed_commits.add(commit)
            if self.main:
                self.files.event("reload_failed", commit=commit, step=self.step + 1,
                                 error=str(exc))
            return
        old, self.live = self.live, new
        old.close()
        if self.main:
            self.files.event("applied", commit=commit, step=self.step + 1,
                             load_s=round(time.monotonic() - t0, 4),
                             waited_s=round(t0 - seen_at, 4))

    def coefficients(self) -> dict[str, float]:
        """Optimiser knobs of the live snapshot, applied in place: a meta-agent's change of lr,
        entropy or KL coefficient takes effect at the next step, without a restart."""
        agent = self.live.knobs.get("agent", {})
        lr = self.cfg.actor.optim.lr * float(agent.get("lr_multiplier", 1.0))
        for group in self.actor_opt.param_groups:
            group["lr"] = lr
        return {"entropy_coeff": float(agent.get("entropy_coeff", self.cfg.actor.entropy_coeff)),
                "kl_loss_coef": float(agent.get("kl_loss_coef", self.cfg.actor.kl_loss_coef)),
                "lr": lr}

    # ---- one step -------------------------------------------------------------------------
    def make_episodes(self, step: int) -> list[Episode]:
        seed = step_seed(self.cfg.trainer.seed, step)
        rng = random.Random(seed)
        bs = self.cfg.data.train_batch_size
        chosen = rng.sample(self.tasks, bs) if bs <= len(self.tasks) else rng.choices(self.tasks, k=bs)
        # the step's global (task, sample) pairs, the same on every process; envs are built only
        # for this process's share (global episode g on rank g % world)
        pairs = [(i, j, task) for i, task in enumerate(chosen) for j in range(self.cfg.rollout.n)]
        episodes = []
        for i, j, task in D.shard(pairs, self.dist):
            ep_seed = seed + 1000 * i + j
            env = self.bench.make_env(task, self.live.snapshot, seed=ep_seed, llm=self.llm)
            demos, n = self.live.snapshot.demos_for(self.bench.name, task.gym)
            episodes.append(start_episode(self.models, env, self.bench.system_prompt(task),
                                          seed=ep_seed, demos=demos, n_demos=n))
        return episodes

    def run_step(self, step: int) -> dict[str, Any] | None:
        """One PPO step; None when a stop was requested mid-rollout (nothing is changed then)."""
        t_start = time.perf_counter()
        seed = step_seed(self.cfg.trainer.seed, step)
        # each process samples its own episodes, so its own stream (one process: today's seed)
        reseed(D.seed_for(seed, self.dist) % (2**31 - 1) if self.dist.active else seed)
        coefs = self.coefficients()
        patches = self.live.snapshot.patches        # environment patches (training/env_patches.py)
        before = (patches.errors, patches.calls) if patches is not None else (0, 0)
        with phase("eau/rollout"):
            episodes = self.make_episodes(step)
            stats = self._rollout(episodes)
        if patches is not None:   # this step's calls of the workspace's patches, and failures
            stats.patch_errors = patches.errors - before[0]
            stats.patch_calls = patches.calls - before[1]
        # a SIGTERM may have reached some processes only: agree before the collective update
        if D.any_true(self.stop_requested, self.dist):
            self.stop_requested = True
            return None
        with phase("eau/rewards"):
            records, turn_rewards, score_stats = self._score(episodes)
            batch = collate(episodes, turn_rewards, self.models.tokenizer.pad_token_id,
                            [ep.observations() for ep in episodes], engine_logprobs(episodes))
        t_update = time.perf_counter()
        total = self.cfg.episodes_per_step if self.dist.active else None
        with phase("eau/score_batch"):
            advantage = score_batch(self.models, batch, self.cfg, self.dist, total)
        score_s = time.perf_counter() - t_update
        with phase("eau/ppo_update"):
            update = ppo_update(self.models, self.actor_opt, self.critic_opt, batch, self.cfg,
                                coefs, seed=seed, info=self.dist, global_size=total)
        update.update(advantage)
        update_s = time.perf_counter() - t_update
        records, stats, score_stats, tokens, peak = self._gather(
            records, stats, score_stats, int(batch.lengths.sum()))
        out = step_metrics(step, records, update, stats, score_stats, coefs,
                           commit=self.live.commit,
                           update_tokens=tokens * self.cfg.actor.ppo_epochs, peak_mb=peak,
                           step_s=time.perf_counter() - t_start, update_s=update_s,
                           score_s=score_s)
        if self.main:
            self.write_trajectories(step, records)
        return out

    def _rollout(self, episodes: list[Episode]) -> RolloutStats:
        """Play this process's episodes to their end (or to a requested stop). Under
        rollout.backend vllm the engine wakes with the policy's weights first and sleeps again
        after, so the update has its memory (training/vllm_backend.py)."""
        self._sync_rollout_policy()
        r = self.cfg.rollout
        engine = self.models.vllm
        decoded = self.models.rollout_policy or self.models.policy
        copies = weight_copies(decoded) or 0
        with engine.awake(self.models.policy) if engine is not None else contextlib.nullcontext():
            stats = rollout(self.models, episodes, max_turns=r.max_turns,
                            response_length=r.response_length, temperature=r.temperature,
                            top_p=r.top_p, max_episode_tokens=r.max_episode_tokens,
                            should_stop=lambda: self.stop_requested)
        if engine is not None:
            stats.weights_sent, stats.weight_sync_s = engine.last_sent, engine.last_push_s
        after = weight_copies(decoded)
        stats.weights_copied = None if after is None else after - copies
        return stats

    def _score(self, episodes: list[Episode]
               ) -> tuple[list[dict[str, Any]], list[list[float]], rewards.ScoreStats]:
        """The episodes' records with their returns, and each turn's reward: the env's own plus
        the live snapshot's reward modules (training.rewards)."""
        score_stats = rewards.ScoreStats()
        records = [ep.record() for ep in episodes]
        turn_rewards = [rewards.score_episode(rec, self.live.modules, self.live.knobs, score_stats)
                        for rec in records]
        for rec in records:
            rec["return"] = sum(t["reward"] for t in rec["turns"])
        return records, turn_rewards, score_stats

    def _gather(self, records: list[dict[str, Any]], stats: RolloutStats,
                score_stats: rewards.ScoreStats, tokens: int):
        """The step's records in global episode order and its counts over all processes
        (sums; times and peak memory: the largest)."""
        if not self.dist.active:
            return records, stats, score_stats, tokens, peak_memory_mb()
        parts = D.gather_objects((records, stats, score_stats, tokens, peak_memory_mb(),
                                  self.live.commit), self.dist)
        if len({p[5] for p in parts}) != 1:   # maybe_reload's agreement broken: never train on
            raise RuntimeError("processes trained one step on different workspace commits: "
                               + ", ".join(p[5][:12] or "-" for p in parts))
        world = self.dist.world_size
        merged: list[Any] = [None] * sum(len(p[0]) for p in parts)
        for rank, part in enumerate(parts):
            for k, rec in enumerate(part[0]):
                merged[k * world + rank] = rec
        st = RolloutStats(generated_tokens=sum(p[1].generated_tokens for p in parts),
                          generate_s=max(p[1].generate_s for p in parts),
                          env_s=max(p[1].env_s for p in parts),
                          turns=sum(p[1].turns for p in parts),
                          patch_errors=sum(p[1].patch_errors for p in parts),
                          patch_calls=sum(p[1].patch_calls for p in parts),
                          weights_sent=sum(p[1].weights_sent for p in parts),
                          weight_sync_s=max(p[1].weight_sync_s for p in parts))
        sc = rewards.ScoreStats.merged([p[2] for p in parts])
        return merged, st, sc, sum(p[3] for p in parts), max(p[4] for p in parts)

    def write_trajectories(self, step: int, records: list[dict[str, Any]]) -> None:
        path = self.files.trajectory_path(step)
        path.unlink(missing_ok=True)
        keep = records[: self.cfg.trainer.trajectories_per_step]
        metrics.append_lines(path, [{"step": step, **rec} for rec in keep])

    # ---- checkpoints (training/checkpoint.py) -------------------------------------------------
    def save(self, reason: str) -> None:
        """Checkpoint the last finished step (collective: every process calls it)."""
        tensors = checkpoint.whole_state(
            checkpoint.run_state(self.models, self.actor_opt, self.critic_opt), self.dist)
        if tensors is None:           # not rank 0: it gave its shards to the gather
            return
        checkpoint.save_run(self.files, self.step, tensors,
                            {"commit": self.live.commit,
                             "failed_commits": sorted(self.failed_commits),
                             "algorithm": self.cfg.algorithm.name, "time": time.time()},
                            keep=self.cfg.trainer.keep_checkpoints, reason=reason)

    def _resume(self, saved: tuple[dict, dict, dict]) -> int:
        """The optimisers, RNG, step and snapshot of a read checkpoint (weights are loaded
        before the wrapping, in __init__)."""
        tensors, meta, rng = saved
        checkpoint.restore_optimizers({"actor_optim": self.actor_opt,
                                       "critic_optim": self.critic_opt}, tensors, self.dist)
        checkpoint.set_rng_state(rng)
        self.step = int(meta["step"])
        self.failed_commits = set(meta.get("failed_commits", []))
        try:
            self.live = self.snapshots.initial(meta.get("commit") or None)
        except live.SnapshotError:
            self.live = self.snapshots.initial()
        return self.step

    def _drop_lines_past_step(self) -> None:
        """No step twice and no torn line: metrics and trajectories past the step we (re)start
        from are left over from a killed process and are dropped (also on a fresh start)."""
        metrics.truncate_after_step(self.files.metrics, self.step)
        for path in self.files.trajectories.glob("step-*.jsonl"):
            if int(path.stem.split("-")[1]) > self.step:
                path.unlink()

    # ---- the loop -------------------------------------------------------------------------
    def wait_while_held(self) -> bool:
        """At a step boundary: wait while a meta-agent session holds the run (training/hold.py,
        `orchestrator start --max-lag`). True when it waited."""
        waited, hold, waited_s = hold_mod.wait_at_boundary(
            self.files.dir, self.step + 1, self.dist, lambda: self.stop_requested,
            is_main=self.main)
        if waited and self.main:
            self.files.event("held", step=self.step + 1, session=(hold or {}).get("session"),
                             waited_s=round(waited_s, 3))
        return waited

    def _stop_agreed(self) -> bool:
        """A stop requested on any process (SIGTERM) is a stop on all, at this step boundary."""
        self.stop_requested = D.any_true(self.stop_requested, self.dist)
        return self.stop_requested

    def run(self, stop_at: int | None = None) -> int:
        """Train until trainer.total_steps (or `stop_at`), SIGTERM, or an error; exit code."""
        heartbeat = hold_mod.Heartbeat(self.files, self.cfg.trainer.heartbeat_s).start() \
            if self.main else None
        if self.watcher is not None:
            self.watcher.start()
        last_saved = self.step
        try:
            end = self.cfg.trainer.total_steps if stop_at is None else min(
                stop_at, self.cfg.trainer.total_steps)
            while self.step < end and not self._stop_agreed():
                if self.wait_while_held() and self._stop_agreed():
                    break
                self.maybe_reload()
                record = self.run_step(self.step + 1)
                if record is None:
                    break
                self.step += 1
                if self.main:
                    self.files.metric(record)
                    print(f"step {self.step}: reward {record['reward/mean']:.3f} "
                          f"turns {record['episode/turns']:.1f} {record['perf/step_s']:.1f}s "
                          f"commit {record['workspace/commit'][:8] or '-'}"
                          + rewards.errors_text(record), file=sys.stderr, flush=True)
                freq = self.cfg.trainer.save_freq
                if freq > 0 and self.step % freq == 0:
                    self.save("save_freq")
                    last_saved = self.step
            # rank 0's view of the folder decides (saving is collective)
            none_yet = self.main and checkpoint.latest(self.files.checkpoints) is None
            if last_saved != self.step or D.broadcast_object(none_yet, self.dist):
                self.save("sigterm" if self.stop_requested else "end")
            if self.main:
                self.files.event("finished", step=self.step,
                                 reason="sigterm" if self.stop_requested else "total_steps"
                                 if self.step >= self.cfg.trainer.total_steps else "stop_at")
            return 0
        finally:
            if heartbeat is not None:
                heartbeat.stop()
            if self.watcher is not None:
                self.watcher.stop()
            self.live.close()


def step_metrics(step: int, records: list[dict[str, Any]], update: dict[str, Any],
                 stats: RolloutStats, score_stats: rewards.ScoreStats, coefs: dict[str, float], *,
                 commit: str, update_tokens: int, peak_mb: float, step_s: float,
                 update_s: float, score_s: float = 0.0) -> dict[str, Any]:
    """One line of metrics.jsonl (DESIGN.md's metric names): the episodes' metrics, the update's,
    and the step's counts, knobs and times, all over every process."""
    out = episode_metrics(records)
    out.update(update)
    out.update({"step": step, "time": time.time(), "workspace/commit": commit,
                "episode/env_errors": sum(rec["error"] is not None for rec in records),
                "actor/entropy_coeff": coefs["entropy_coeff"],
                "actor/kl_loss_coef": coefs["kl_loss_coef"], "actor/lr": coefs["lr"],
                "perf/step_s": step_s,
                "perf/rollout_s": stats.generate_s + stats.env_s,
                # the rollout's parts: the policy's decoding, and everything else of a turn
                # (environments, users, templates), which runs on the host between decodes
                "perf/generate_s": stats.generate_s, "perf/env_s": stats.env_s,
                # perf/update_s includes perf/score_s: the no-grad passes (old and reference
                # log-probs, values) before the gradient epochs
                "perf/score_s": score_s,
                "perf/update_s": update_s,
                "perf/rollout_tokens_per_s": stats.generated_tokens / max(stats.generate_s, 1e-9),
                # every token the update forwards (prompt, observations, actions) in all its
                # epochs, as verl counts throughput
                "perf/update_tokens_per_s": update_tokens / max(update_s, 1e-9),
                "perf/generated_tokens": stats.generated_tokens,
                # rollout.backend vllm: the policy's weights pushed into the engine before this
                # step's rollout (0 when unchanged, and under the KV engine) and the time it took
                "rollout/weights_sent": stats.weights_sent, "perf/weight_sync_s": stats.weight_sync_s,
                # the KV engine's bf16 copy (CUDA): 1 when it took the weights of the last
                # update before this rollout; 0 after an update means stale rollouts (every GPU
                # run up to 2026-12-06, the fused optimiser's step unseen); absent on the CPU
                **({"rollout/weights_copied": stats.weights_copied}
                   if stats.weights_copied is not None else {}),
                # a patch call that failed used the environment's own code for that turn
                "env_patch/errors": stats.patch_errors, "env_patch/calls": stats.patch_calls,
                "perf/peak_mem_mb": peak_mb})
    out.update(score_stats.metrics(len(records)))
    return out


def peak_memory_mb() -> float:
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / 2**20
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def episode_metrics(records: list[dict[str, Any]]) -> dict[str, float]:
    """DESIGN.md's episode-side metric names, per gym and per user arm."""
    out: dict[str, float] = {}
    turns = [t for r in records for t in r["turns"]]
    returns = [r["return"] for r in records]
    out["reward/mean"] = float(np.mean(returns)) if returns else 0.0
    out["success/mean"] = float(np.mean([r["success"] for r in records])) if records else 0.0
    out["episode/turns"] = float(np.mean([len(r["turns"]) for r in records])) if records else 0.0
    out["episode/truncated_frac"] = float(np.mean([r["truncated"] for r in records])) if records else 0.0
    out["episode/question_rate"] = float(np.mean([t["asked_question"] for t in turns])) if turns else 0.0
    # the share of agent turns the environment refused for their format (no tool prefix, a tool
    # the gym lacks, a malformed tool call): all of them refused means no learning signal at all
    out["episode/invalid_rate"] = float(np.mean([t.get("invalid_action", False) for t in turns])) \
        if turns else 0.0
    # the share the environment took in format but rejected for their arguments ("A probe needs
    # exactly four integers.", a tau call to an unknown tool): invalid_rate does not count them,
    # and they were half the function turns of the H100 runs of 2026-12-06 at step 24
    out["episode/rejected_rate"] = float(np.mean([bool(t.get("rejected")) for t in turns])) \
        if turns else 0.0
    # turns that repeat an earlier turn of their episode word for word (training.rollout.novelty):
    # a policy farming a reward that pays per disclosure asks the same question again and again
    out["episode/repeat_rate"] = float(np.mean([t.get("repeated", False) for t in turns])) \
        if turns else 0.0
    # the environment's own final score (the paper's UserGym/ColBench number), which no reward
    # module adds to: reward/* includes the modules' credit, so a module that pays for the wrong
    # thing raises reward/* while score/* and success/* stay flat
    out["score/mean"] = float(np.mean([r.get("score") or 0.0 for r in records])) if records else 0.0
    revealed = sum(len(t["revealed_facts"]) for t in turns)
    leaked = sum(len(t["leaked_facts"]) for t in turns)
    out["user/leak_rate"] = leaked / revealed if revealed else 0.0
    # user replies that say one sentence three times or more (training.users.leak.looped_reply):
    # an LLM user's loop, which the policy then hears and copies (the 2026-12-08 LLM-user run)
    looped = {id(t): leak.looped_reply(t.get("user") or "") for t in turns if t.get("user_replied")}
    out["user/looped_rate"] = float(np.mean(list(looped.values()))) if looped else 0.0
    arms = [r["user_arm"] for r in records if r["user_arm"]]
    out["user/symbolic_frac"] = (sum(a == "symbolic" for a in arms) / len(arms)) if arms else 1.0
    for gym in sorted({r["gym"] for r in records}):
        mine = [r for r in records if r["gym"] == gym]
        out[f"reward/{gym}"] = float(np.mean([r["return"] for r in mine]))
        out[f"success/{gym}"] = float(np.mean([r["success"] for r in mine]))
        out[f"score/{gym}"] = float(np.mean([r.get("score") or 0.0 for r in mine]))
        mine_turns = [t for r in mine for t in r["turns"]]
        if mine_turns:
            out[f"invalid/{gym}"] = float(np.mean([t.get("invalid_action", False) for t in mine_turns]))
            out[f"repeat/{gym}"] = float(np.mean([t.get("repeated", False) for t in mine_turns]))
            mine_looped = [looped[id(t)] for t in mine_turns if id(t) in looped]
            if mine_looped:
                out[f"looped/{gym}"] = float(np.mean(mine_looped))
            out[f"rejected/{gym}"] = float(np.mean([bool(t.get("rejected")) for t in mine_turns]))
        # the share of the gym's disclosing user replies that told again only what was told while
        # the question asked for a fact never told (training.users.leak.stale_replies): the tau
        # user's name, repeated to "name and zip code?", at 82% of its disclosures (GRPO seed 0 of
        # 2026-12-07, step 24); absent where no reply disclosed anything
        disclosing = len(leak.disclosing_replies(mine_turns))
        if disclosing:
            stale = sum(len(leak.stale_replies(r["turns"])) for r in mine)
            out[f"stale/{gym}"] = stale / disclosing
        # the share of the gym's tasks whose rollout.n episodes all returned alike: under grpo and
        # infopo such a group has no advantage and teaches nothing (`grpo/tied_frac` is every
        # gym's); at steps 6, 12 and 24 of the GRPO run of 2026-12-07 (seed 0) all of function's
        # 8 groups and turtle's 7 tied at 0, travel's 5 of 8, persuade's 1 of 16 and tau's none
        # of 9 (its shipped elicited_fact pays each telling of the name). Absent with one
        # episode a task
        groups: dict[str, list[float]] = {}
        for r in mine:
            groups.setdefault(str(r.get("task_id")), []).append(round(float(r["return"]), 6))
        sized = [g for g in groups.values() if len(g) > 1]
        if sized:
            out[f"tied/{gym}"] = sum(len(set(g)) == 1 for g in sized) / len(sized)
        # the share of the gym's episodes that took each step its success needs, at any turn
        # (training.steps, as the diagnosis and the replay judge a step): a worked example or a
        # step reward changes this first; in the CPU run of 16 steps score/tau stayed 0 while the
        # policy shown the tau example began asking for name and zip code
        taken = [steps.taken(gym, r["turns"]) for r in mine]
        for step in steps.NEEDED.get(gym, ()):
            out[f"took/{gym}/{step}"] = float(np.mean([step in t for t in taken]))
        for arm in sorted({r["user_arm"] for r in mine if r["user_arm"]}):
            arm_eps = [r for r in mine if r["user_arm"] == arm]
            out[f"reward/{gym}/{arm}"] = float(np.mean([r["return"] for r in arm_eps]))
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.trainer",
                                     description="EAU's PPO trainer: run one training run folder.")
    # --run-dir: the same; under torchrun `--run` would be read as an abbreviation of torchrun's
    # own --run-path (its parser sees every option, even those after the module name)
    parser.add_argument("--run", "--run-dir", dest="run", required=True,
                        help="run folder holding config.json")
    parser.add_argument("--resume", action="store_true",
                        help="continue from the newest whole checkpoint of the run")
    parser.add_argument("--stop-at", type=int, default=None,
                        help="stop (with a checkpoint) after this step, before total_steps")
    args = parser.parse_args(argv)
    files = metrics.RunFiles(args.run)
    if not files.config.exists():
        print(f"trainer: {files.config} does not exist: write the run's config.json first.",
              file=sys.stderr)
        return 2
    trainer = None
    rank0 = int(os.environ.get("RANK", "0")) == 0      # torchrun: rank 0 alone writes events

    def on_term(signum, frame):
        if trainer is not None:
            trainer.stop_requested = True
        else:
            raise SystemExit(0)

    signal.signal(signal.SIGTERM, on_term)
    try:
        trainer = Trainer(args.run, resume=args.resume)
        code = trainer.run(stop_at=args.stop_at)
        D.shutdown(trainer.dist)
        return code
    except (ConfigError, ModelLoadError, live.SnapshotError, VLLMStartError,
            KVCacheMemoryError) as exc:
        if rank0:
            files.event("crashed", error=str(exc), step=trainer.step if trainer else 0)
        print(f"trainer: {exc}", file=sys.stderr)
        return 2
    except Exception as exc:
        if rank0:
            files.event("crashed", error=f"{type(exc).__name__}: {exc}",
                        traceback=traceback.format_exc(), step=trainer.step if trainer else 0)
        raise


if __name__ == "__main__":
    D.exit_process(main())
