"""The trainer over two gloo processes under torchrun, against one process.

What a user depends on: `trainer.parallel` ddp or fsdp with `trainer.nproc_per_node` 2, started
the way the orchestrator starts it (orchestrator.supervisor: torchrun), trains the same model as
one process on the same global batch; rank 0 writes each metrics line once; its checkpoint is
the one-process format, so a one-process run resumes it and continues as one process would.

Rollouts are greedy (rollout.temperature 0), so both runs roll out the same episodes whatever
the sampling seeds (each process has its own; one process has another). The toy bench's user
and arms are seeded per episode from the global episode index. Two mini-batches of 2 of the 4
episodes per step; in steps 1 and 2 each lies wholly on one process (permutations of seed 0), so
the other runs zero-weight passes to keep the collectives in step.

Tolerance: every parameter within atol 2e-4 (+ rtol 1e-3) of the one-process run after two PPO
steps at lr 1e-3 (Adam), and again after a third step resumed from the two-process checkpoint.
The two runs group episodes differently into forward passes (another padding length, gradients
summed across processes in another order; both in fp32, pinned by toy_env.write_run: under the
bf16 autocast that `model.precision auto` picks on CPUs with native bf16 the same comparison
differed by 2.3e-4 and failed), so they agree to rounding,
not bit for bit. Adam's first steps move each weight by about lr in the sign of its gradient, so
an error in the gradient's direction (a local instead of a global token mean or whitening) moves
weights by ~1e-3 and fails; an error in its scale alone (a missing world-size factor) hardly moves
Adam's weights but shows in the grad-norm metrics, compared to 1e-3 relative.
"""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest
import torch

from toy_env import write_run, write_workspace
from training import checkpoint, metrics
from training.trainer import Trainer

ATOL, RTOL = 2e-4, 1e-3
OVERRIDES = {"rollout.temperature": 0.0, "trainer.total_steps": 3, "trainer.save_freq": 0,
             "actor.ppo_mini_batch_size": 1,          # 4 episodes, 2 mini-batches of 2
             "actor.ppo_micro_batch_size": 1, "critic.ppo_micro_batch_size": 2,
             "trainer.keep_checkpoints": 0}


def _state(run: Path, step: int, name: str) -> dict[str, torch.Tensor]:
    return torch.load(checkpoint.step_dir(run / "checkpoints", step) / f"{name}.pt",
                      weights_only=False)


def _assert_close(a: dict, b: dict, what: str) -> float:
    worst = 0.0
    assert a.keys() == b.keys(), what
    for k in a:
        diff = (a[k].float() - b[k].float()).abs().max().item() if a[k].numel() else 0.0
        worst = max(worst, diff)
        assert torch.allclose(a[k].float(), b[k].float(), atol=ATOL, rtol=RTOL), \
            f"{what} {k}: max diff {diff:.2e}"
    return worst


@pytest.fixture(scope="module")
def one_process(tmp_path_factory, tiny_model_dir):
    """The reference: one process, the same global batch, stopped at 2, resumed to 3."""
    root = tmp_path_factory.mktemp("one")
    ws = write_workspace(root / "ws")
    write_run(root / "run", workspace_dir=ws, model_dir=tiny_model_dir, overrides=OVERRIDES)
    assert Trainer(root / "run").run(stop_at=2) == 0
    assert Trainer(root / "run", resume=True).run() == 0
    return root / "run"


def _launch(run: Path, timeout_s: float = 300.0) -> int:
    """The two-process run started as the orchestrator starts it (torchrun via Supervisor)."""
    from orchestrator.supervisor import Supervisor

    sup = Supervisor(run, env={"OMP_NUM_THREADS": "1"}, python=sys.executable)
    assert "torch.distributed.run" in sup.argv(False)
    sup.start()
    try:
        return sup.proc.wait(timeout=timeout_s)
    finally:
        if sup.proc.poll() is None:
            sup._kill()


@pytest.mark.parametrize("strategy", ["ddp", "fsdp"])
def test_two_processes_match_one_and_resume_in_one(tmp_path, tiny_model_dir, one_process,
                                                   strategy):
    ws = write_workspace(tmp_path / "ws")
    run = tmp_path / "run"
    write_run(run, workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={**OVERRIDES, "trainer.total_steps": 2, "trainer.parallel": strategy,
                         "trainer.nproc_per_node": 2})
    t0 = time.monotonic()
    rc = _launch(run)
    log = (run / "trainer.log").read_text(errors="replace")
    assert rc == 0, log[-4000:]
    print(f"{strategy}: two-process run took {time.monotonic() - t0:.1f} s")

    # rank 0 alone writes: one metrics line per step, one started and one finished event
    rows = list(metrics.read_lines(run / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2]
    events = [e["event"] for e in metrics.read_lines(run / "events.jsonl")]
    assert events.count("started") == 1 and events.count("finished") == 1
    started = next(metrics.read_lines(run / "events.jsonl"))
    assert started["world_size"] == 2 and started["parallel"] == strategy
    episodes = list(metrics.read_lines(run / "trajectories" / "step-000002.jsonl"))
    assert len(episodes) == 4                                       # all ranks' episodes

    # the same model as one process over the same global batch, and the same metrics
    ref_rows = list(metrics.read_lines(one_process / "metrics.jsonl"))[:2]
    for got, want in zip(rows, ref_rows):
        assert got["reward/mean"] == want["reward/mean"]           # same (greedy) episodes
        assert got["perf/action_tokens"] == want["perf/action_tokens"]
        assert got["actor/updates"] == want["actor/updates"] == 2
        # the grad norms see a wrong gradient scale, which Adam's updates would hide
        for key in ("actor/pg_loss", "critic/value_loss", "actor/entropy", "kl/ref",
                    "actor/grad_norm", "critic/grad_norm", "critic/values_mean",
                    "critic/explained_var"):
            if want[key] is None:                # NaN (no return variance): null in both
                assert got[key] is None, key
            else:
                assert got[key] == pytest.approx(want[key], abs=1e-4, rel=1e-3), key
    for step in (1, 2):
        name = f"step-{step:06d}.jsonl"
        texts = [[t["agent"] for t in ep["turns"]] for ep in
                 metrics.read_lines(run / "trajectories" / name)]
        assert texts == [[t["agent"] for t in ep["turns"]] for ep in
                         metrics.read_lines(one_process / "trajectories" / name)]
    worst = max(_assert_close(_state(run, 2, n), _state(one_process, 2, n), f"{strategy} {n}")
                for n in ("policy", "critic"))
    print(f"{strategy}: largest parameter difference after 2 steps {worst:.2e}")
    opt = _state(run, 2, "actor_optim")
    ref_opt = _state(one_process, 2, "actor_optim")
    assert opt["state"].keys() == ref_opt["state"].keys()           # one-process format
    for k in opt["state"]:
        assert opt["state"][k]["exp_avg"].shape == ref_opt["state"][k]["exp_avg"].shape

    # the two-process checkpoint resumes in one process (no torchrun) and continues as one would
    cfg = json.loads((run / "config.json").read_text())
    cfg["trainer"]["total_steps"] = 3
    (run / "config.json").write_text(json.dumps(cfg))
    resumed = Trainer(run, resume=True)
    assert resumed.step == 2 and not resumed.dist.active
    assert resumed.run() == 0
    assert [r["step"] for r in metrics.read_lines(run / "metrics.jsonl")] == [1, 2, 3]
    for n in ("policy", "critic"):
        _assert_close(_state(run, 3, n), _state(one_process, 3, n), f"{strategy} resumed {n}")


def test_two_processes_infopo_match_one(tmp_path, tiny_model_dir):
    """infopo (grpo's group baseline plus the information gain) under FSDP over two processes
    trains as one process: a task's two episodes lie on different processes (global episodes
    2i and 2i+1), so a per-process baseline would see groups of one; the counterfactual passes
    run on each process's own episodes, a different number each, outside the collectives.
    Greedy rollouts; the chars reward module makes the groups' scores differ."""
    from test_algorithms import chars_workspace

    ws = chars_workspace(tmp_path / "ws")
    over = {**OVERRIDES, "trainer.total_steps": 2, "algorithm.name": "infopo"}
    write_run(tmp_path / "one", workspace_dir=ws, model_dir=tiny_model_dir, overrides=over)
    assert Trainer(tmp_path / "one").run() == 0
    run = tmp_path / "two"
    write_run(run, workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={**over, "trainer.parallel": "fsdp", "trainer.nproc_per_node": 2})
    rc = _launch(run)
    assert rc == 0, (run / "trainer.log").read_text(errors="replace")[-4000:]
    rows = list(metrics.read_lines(run / "metrics.jsonl"))
    ref_rows = list(metrics.read_lines(tmp_path / "one" / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2]
    assert min(r["grpo/tied_frac"] for r in ref_rows) < 1.0       # the advantages were not 0
    for got, want in zip(rows, ref_rows):
        assert got["reward/mean"] == want["reward/mean"]
        for key in ("grpo/group_std_mean", "grpo/tied_frac", "infopo/gain_turns",
                    "infopo/skipped_turns"):
            assert got[key] == want[key], key
        for key in ("infopo/gain_mean", "infopo/gate_mean", "actor/pg_loss", "actor/grad_norm"):
            assert got[key] == pytest.approx(want[key], abs=1e-4, rel=1e-3), key
    assert not (checkpoint.step_dir(run / "checkpoints", 2) / "critic.pt").exists()
    _assert_close(_state(run, 2, "policy"), _state(tmp_path / "one", 2, "policy"), "infopo fsdp")


def test_supervisor_command(tmp_path, tiny_model_dir):
    """nproc_per_node > 1: torchrun, standalone, with time to checkpoint on SIGTERM; 1: as today."""
    from orchestrator.supervisor import Supervisor

    ws = write_workspace(tmp_path / "ws")
    write_run(tmp_path / "a", workspace_dir=ws, model_dir=tiny_model_dir)
    one = Supervisor(tmp_path / "a", python="py").argv(True)
    assert one == ["py", "-m", "training.trainer", "--run", str(tmp_path / "a"), "--resume"]
    write_run(tmp_path / "b", workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={"trainer.parallel": "fsdp", "trainer.nproc_per_node": 4})
    argv = Supervisor(tmp_path / "b", python="py").argv(False)
    assert argv[:3] == ["py", "-m", "torch.distributed.run"]
    assert "--standalone" in argv and argv[argv.index("--nproc_per_node") + 1] == "4"
    assert int(argv[argv.index("--shutdown_timeout") + 1]) >= 60
    # --run-dir: torchrun's own parser would read `--run` as its --run-path
    assert argv[-4:] == ["-m", "training.trainer", "--run-dir", str(tmp_path / "b")]
    assert "--resume" not in argv


def test_world_size_without_parallel_is_refused(tmp_path, tiny_model_dir, monkeypatch):
    """Several processes with trainer.parallel none would not share gradients: one sentence."""
    from training.config import ConfigError

    ws = write_workspace(tmp_path / "ws")
    write_run(tmp_path / "r", workspace_dir=ws, model_dir=tiny_model_dir)
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="trainer.parallel is none"):
        Trainer(tmp_path / "r")


@pytest.mark.slow
def test_two_processes_reload_and_stop_together(tmp_path, tiny_model_dir):
    """Live reload and SIGTERM with two processes (ddp), launched and stopped by the Supervisor.

    Rank 0 decides the commit: an applied commit that cuts episodes to one turn shows in
    `episode/turns` (over both processes' episodes) from its step on, so both swapped at that
    step; a broken reward module is refused by both; stop() checkpoints and ends the run."""
    import git
    from test_live import commit_knobs, events, promote, steps, wait_for
    from toy_env import KNOBS

    from orchestrator.supervisor import Supervisor

    repo = git.Repo.init(tmp_path / "ws")
    knobs = json.loads(json.dumps(KNOBS))
    promote(repo, commit_knobs(repo, knobs, "start"))
    run = tmp_path / "run"
    write_run(run, repo=tmp_path / "ws", model_dir=tiny_model_dir,
              overrides={"trainer.total_steps": 1000, "trainer.parallel": "ddp",
                         "trainer.nproc_per_node": 2})
    sup = Supervisor(run, env={"OMP_NUM_THREADS": "1"}, python=sys.executable).start()
    try:
        wait_for(lambda: len(steps(run)) >= 1, 180, "the first step")
        knobs["env"]["toy"]["max_steps"] = 1
        good = commit_knobs(repo, knobs, "fewer turns")
        promote(repo, good)
        applied = wait_for(lambda: events(run, "applied"), 90, "applied")[0]
        assert applied["commit"] == good.hexsha
        wait_for(lambda: any(r["step"] >= applied["step"] for r in steps(run)), 90, "next step")
        for r in steps(run):
            assert r["episode/turns"] == (1 if r["step"] >= applied["step"] else 3), r["step"]
        knobs["reward"]["modules"] = {"broken": {"enabled": True, "weight": 1.0}}
        bad = commit_knobs(repo, knobs, "broken module",
                           {"rewards/broken.py": "APPLIES_TO = ['toy']\nimport no_such_module\n"})
        promote(repo, bad)
        failed = wait_for(lambda: events(run, "reload_failed"), 90, "reload_failed")[0]
        assert failed["commit"] == bad.hexsha
        last = steps(run)[-1]["step"]
        wait_for(lambda: steps(run)[-1]["step"] >= last + 1, 90, "a step after the failure")
        assert steps(run)[-1]["workspace/commit"] == good.hexsha
        sup.stop(timeout_s=120)
        assert sup.proc.poll() is not None
        ckpts = events(run, "checkpoint")
        assert ckpts and ckpts[-1]["reason"] == "sigterm", (run / "trainer.log").read_text()[-3000:]
        assert events(run, "finished")[-1]["reason"] == "sigterm"
        done = [r["step"] for r in steps(run)]
        assert done == list(range(1, len(done) + 1))                # each step once
        assert checkpoint.latest(run / "checkpoints").name == f"step-{done[-1]:06d}"
        assert sup.proc.returncode == 0          # each worker checkpointed and exited 0
    finally:
        if sup.proc is not None and sup.proc.poll() is None:
            sup._kill()


@pytest.mark.gpu
def test_torchrun_world_size_one_fsdp_trainer_on_gpu(tmp_path, tiny_model_dir):
    """The trainer's parallel path through torchrun on one GPU (the device machine; never
    CI) trains exactly as the plain one-process trainer on the same GPU."""
    import subprocess

    runs = {}
    for name, parallel in (("plain", "none"), ("torchrun", "fsdp")):
        ws = write_workspace(tmp_path / f"ws-{name}")
        run = runs[name] = tmp_path / name
        write_run(run, workspace_dir=ws, model_dir=tiny_model_dir,
                  overrides={**OVERRIDES, "trainer.total_steps": 2, "trainer.parallel": parallel,
                             "model.device": "cuda"})
        head = ([sys.executable, "-m", "training.trainer"] if name == "plain" else
                [sys.executable, "-m", "torch.distributed.run", "--standalone",
                 "--nproc_per_node", "1", "-m", "training.trainer"])
        proc = subprocess.run(head + ["--run-dir", str(run)], capture_output=True, text=True,
                              timeout=300, cwd=Path(__file__).resolve().parents[2])
        assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["step"] for r in metrics.read_lines(runs["torchrun"] / "metrics.jsonl")] == [1, 2]
    for n in ("policy", "critic"):
        _assert_close(_state(runs["torchrun"], 2, n), _state(runs["plain"], 2, n), f"gpu {n}")
