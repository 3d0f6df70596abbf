"""The trainer end to end with a tiny model: smoke run on a real gym, exact resume, run files."""
from __future__ import annotations

import json
import math
import signal
from pathlib import Path

import pytest
import torch

from toy_env import write_run, write_workspace
from training import checkpoint, metrics
from training.trainer import Trainer

PROJECT = Path(__file__).resolve().parents[2]

# DESIGN.md, "The trainer subprocess": metric names every step must carry
DESIGN_METRICS = ["reward/mean", "episode/turns", "episode/question_rate", "user/leak_rate",
                  "user/symbolic_frac", "actor/entropy", "actor/approx_kl", "actor/clipfrac",
                  "actor/pg_loss", "critic/value_loss", "critic/explained_var", "kl/ref",
                  "perf/step_s", "perf/rollout_tokens_per_s", "perf/update_tokens_per_s",
                  "workspace/commit"]
TURN_KEYS = {"turn", "agent", "user", "reward", "revealed_facts", "leaked_facts",
             "asked_question", "answered", "rule_id", "tool_calls", "new_facts", "repeated",
             "user_replied", "asked_facts"}


def _params(sd: dict, prefix: str = "") -> dict[str, torch.Tensor]:
    return {k[len(prefix):]: v for k, v in sd.items() if k.startswith(prefix)}


@pytest.mark.parametrize("bench,user_llm", [("colbench", "none"), ("usergym", "reference")])
def test_smoke_two_steps_on_a_real_gym(tmp_path, tiny_model_dir, bench, user_llm):
    """Two PPO steps on a real gym change policy and critic and write every run file; on UserGym
    the frozen reference answers as the LLM user arm (batched)."""
    from transformers import AutoModelForCausalLM

    run = tmp_path / "run"
    over = {"trainer.save_freq": 2, "rollout.user_llm": user_llm,
            "rollout.user_response_length": 8}
    if bench == "colbench":       # two mini-batches: old log-probs get their own pass
        # turns that can hold an answer (the shortest reference is 54 tokens; training/budget.py)
        over.update({"actor.ppo_mini_batch_size": 1, "rollout.response_length": 64})
    if bench == "usergym":
        over.update({"gyms": ["travel"], "data.train_batch_size": 2, "rollout.n": 2})
    write_run(run, workspace_dir=PROJECT / "workspace", model_dir=tiny_model_dir, bench=bench,
              overrides=over)
    trainer = Trainer(run)
    assert trainer.run() == 0
    rows = list(metrics.read_lines(run / "metrics.jsonl"))
    assert [r["step"] for r in rows] == [1, 2]
    gym = trainer.gyms[0]
    for name in DESIGN_METRICS + [f"reward/{gym}", f"success/{gym}", f"score/{gym}", "score/mean",
                                  "episode/repeat_rate", f"repeat/{gym}"]:
        assert name in rows[-1], name
    assert any(k.startswith(f"reward/{gym}/") for k in rows[-1])     # user-arm split
    if user_llm == "reference":
        arms = {ep["user_arm"] for row in (1, 2) for ep in metrics.read_lines(
            run / "trajectories" / f"step-{row:06d}.jsonl")}
        assert "llm" in arms and min(r["user/symbolic_frac"] for r in rows) < 1.0
    events = [e["event"] for e in metrics.read_lines(run / "events.jsonl")]
    assert events[0] == "started" and "checkpoint" in events and events[-1] == "finished"
    ckpt = checkpoint.latest(run / "checkpoints")
    assert ckpt is not None and ckpt.name == "step-000002"
    episodes = list(metrics.read_lines(run / "trajectories" / "step-000002.jsonl"))
    assert len(episodes) == trainer.cfg.episodes_per_step
    for ep in episodes:
        assert {"gym", "task_id", "user_arm", "turns", "score", "success", "truncated"} <= set(ep)
        assert ep["turns"] and TURN_KEYS <= set(ep["turns"][0])
        # the rollout's marks: a fact is new once per episode, a turn repeats an earlier text
        seen_facts, seen_text = set(), set()
        for t in ep["turns"]:
            assert set(t["new_facts"]) == set(t["revealed_facts"]) - seen_facts
            text = " ".join(t["agent"].split()).lower()
            assert t["repeated"] == (bool(text) and text in seen_text)
            if not t["user_replied"]:     # the environment's own observation: nothing disclosed
                assert t["rule_id"] is None and not t["revealed_facts"]
            seen_facts |= set(t["revealed_facts"])
            seen_text.add(text)
    initial = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    saved = torch.load(ckpt / "policy.pt", weights_only=False)
    changed = [k for k in initial if not torch.equal(initial[k], saved[k])]
    assert changed, "policy parameters did not change"
    critic = _params(torch.load(ckpt / "critic.pt", weights_only=False), "backbone.")
    base = _params(initial, "model.")
    assert any(not torch.equal(base[k], critic[k]) for k in base), "critic backbone unchanged"


def test_resume_matches_uninterrupted(tmp_path, tiny_model_dir):
    """Stop after step 3, resume to 5 == run straight to 5 (same seeds).

    Tolerance: exact equality of every parameter (CPU, same thread count, every step reseeded
    from (seed, step) and the RNG states restored); metrics compared to 1e-9.
    """
    ws = write_workspace(tmp_path / "ws")
    over = {"trainer.total_steps": 5, "trainer.save_freq": 0}
    write_run(tmp_path / "a", workspace_dir=ws, model_dir=tiny_model_dir, overrides=over)
    write_run(tmp_path / "b", workspace_dir=ws, model_dir=tiny_model_dir, overrides=over)
    assert Trainer(tmp_path / "a").run() == 0
    assert Trainer(tmp_path / "b").run(stop_at=3) == 0
    assert checkpoint.latest(tmp_path / "b" / "checkpoints").name == "step-000003"
    # a torn line after the checkpoint (a crash mid-write) and a step past it must both go
    with open(tmp_path / "b" / "metrics.jsonl", "a") as f:
        f.write(json.dumps({"step": 4, "reward/mean": 123.0}) + "\n{\"step\": 5, \"rew")
    resumed = Trainer(tmp_path / "b", resume=True)
    assert resumed.step == 3
    assert resumed.run() == 0
    a = torch.load(checkpoint.latest(tmp_path / "a" / "checkpoints") / "policy.pt")
    b = torch.load(checkpoint.latest(tmp_path / "b" / "checkpoints") / "policy.pt")
    for k in a:
        assert torch.equal(a[k], b[k]), k
    ca = torch.load(checkpoint.latest(tmp_path / "a" / "checkpoints") / "critic.pt")
    cb = torch.load(checkpoint.latest(tmp_path / "b" / "checkpoints") / "critic.pt")
    assert all(torch.equal(ca[k], cb[k]) for k in ca)
    rows_a = list(metrics.read_lines(tmp_path / "a" / "metrics.jsonl"))
    rows_b = list(metrics.read_lines(tmp_path / "b" / "metrics.jsonl"))
    assert [r["step"] for r in rows_b] == [1, 2, 3, 4, 5]
    for ra, rb in zip(rows_a, rows_b):
        for key in ("reward/mean", "actor/pg_loss", "critic/value_loss", "actor/entropy"):
            assert ra[key] == pytest.approx(rb[key], abs=1e-9), key


def test_a_reward_module_failing_after_its_first_calls_shows_in_metrics_and_the_log(
        tmp_path, tiny_model_dir, capfd):
    """A module that answers its first three calls and fails every later one (what the gate's
    few replayed calls in a fresh process never see): each step's metrics count its failed
    calls under its name, the failures' line is in the trajectories, and the trainer's step
    line in trainer.log (stderr) says so."""
    from toy_env import KNOBS

    knobs = json.loads(json.dumps(KNOBS))
    knobs["reward"]["modules"] = {"late": {"enabled": True, "weight": 1.0}}
    ws = write_workspace(tmp_path / "ws", knobs)
    (ws / "rewards").mkdir()
    (ws / "rewards" / "late.py").write_text(
        "APPLIES_TO = ['toy']\ncalls = 0\ndef turn_reward(turn):\n    global calls\n"
        "    calls += 1\n    if calls > 3:\n        raise ZeroDivisionError('division by zero')\n"
        "    return 1.0\n")
    write_run(tmp_path / "run", workspace_dir=ws, model_dir=tiny_model_dir)
    assert Trainer(tmp_path / "run").run() == 0
    one, two = metrics.read_lines(tmp_path / "run" / "metrics.jsonl")
    assert one["reward/module_calls/late"] > 3
    assert one["reward/module_errors/late"] == one["reward/module_calls/late"] - 3
    assert two["reward/module_errors/late"] == two["reward/module_calls/late"] > 0
    turns = [t for ep in metrics.read_lines(tmp_path / "run" / "trajectories" / "step-000002.jsonl")
             for t in ep["turns"]]
    assert all(t["module_errors"] == {"late": "ZeroDivisionError: division by zero"} for t in turns)
    log = capfd.readouterr().err
    assert (f"reward modules failed {two['reward/module_errors']} of "
            f"{two['reward/module_calls']} calls (late ") in log


def test_missing_model_is_one_sentence(tmp_path, tiny_model_dir, monkeypatch):
    from training.policy import ModelLoadError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")      # a hub id the cache lacks, offline
    ws = write_workspace(tmp_path / "ws")
    write_run(tmp_path / "r", workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={"model.path": "nobody/no-such-model-xyz"})
    with pytest.raises(ModelLoadError, match="'nobody/no-such-model-xyz' could not be fetched "
                       "from the Hugging Face hub .HF_HUB_OFFLINE is set.*give a local folder"):
        Trainer(tmp_path / "r")


def test_a_rollout_cache_the_host_cannot_hold_ends_the_run_in_one_sentence(tmp_path, tiny_model_dir,
                                                                           monkeypatch, capsys):
    """A batch whose KV cache would not fit the free memory ends the trainer with exit 2, a
    "crashed" event holding the sentence and that sentence on stderr, instead of the kernel
    killing it mid-step with nothing said."""
    import training.kvengine as K
    from training.trainer import main

    monkeypatch.setattr(K, "_free_host_bytes", lambda: 64 * 1024)
    ws = write_workspace(tmp_path / "ws")
    write_run(tmp_path / "r", workspace_dir=ws, model_dir=tiny_model_dir)
    term = signal.getsignal(signal.SIGTERM)
    try:
        assert main(["--run", str(tmp_path / "r")]) == 2
    finally:
        signal.signal(signal.SIGTERM, term)      # main() installs the trainer's own handler
    crashed = [e for e in metrics.read_lines(tmp_path / "r" / "events.jsonl") if e["event"] == "crashed"]
    assert len(crashed) == 1 and crashed[0]["error"].startswith("the KV cache for ")
    assert crashed[0]["error"].endswith("generate fewer sequences at once (a smaller batch size).")
    assert capsys.readouterr().err.strip().splitlines()[-1] == f"trainer: {crashed[0]['error']}"


def test_lora_trains_only_adapters(tmp_path, tiny_model_dir):
    """model.lora_rank > 0: peft adapters train, base weights stay, the reference is the base."""
    ws = write_workspace(tmp_path / "ws")
    write_run(tmp_path / "r", workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={"model.lora_rank": 4, "trainer.total_steps": 1})
    trainer = Trainer(tmp_path / "r")
    assert trainer.models.reference is None
    before = {k: v.clone() for k, v in trainer.models.policy.state_dict().items()}
    assert trainer.run() == 0
    after = trainer.models.policy.state_dict()
    lora = [k for k in before if "lora_" in k]
    base = [k for k in before if "lora_" not in k]
    assert lora and any(not torch.equal(before[k], after[k]) for k in lora)
    assert all(torch.equal(before[k], after[k]) for k in base)
    row = next(metrics.read_lines(tmp_path / "r" / "metrics.jsonl"))
    assert row["kl/ref"] == pytest.approx(0.0, abs=1e-6)     # adapters start as the identity


def test_restart_drops_torn_and_leftover_lines(tmp_path, tiny_model_dir):
    """A process killed before its first checkpoint left a step and a torn line: a restart
    (with or without --resume) starts metrics from scratch; half-written checkpoints go."""
    ws = write_workspace(tmp_path / "ws")
    run = tmp_path / "r"
    write_run(run, workspace_dir=ws, model_dir=tiny_model_dir, overrides={"trainer.total_steps": 1})
    (run / "metrics.jsonl").write_text(json.dumps({"step": 1, "reward/mean": 9.0}) + '\n{"step": 2,')
    (run / "checkpoints" / ".tmp-step-000001-x").mkdir(parents=True)
    trainer = Trainer(run, resume=True)
    assert trainer.step == 0
    assert list(metrics.read_lines(run / "metrics.jsonl")) == []
    assert not (run / "checkpoints" / ".tmp-step-000001-x").exists()
    assert trainer.run() == 0
    lines = (run / "metrics.jsonl").read_text().splitlines()
    assert [json.loads(x)["step"] for x in lines] == [1]


def test_precision_follows_the_cpu_and_the_config(monkeypatch, tmp_path, tiny_model_dir):
    """model.precision auto: bf16 autocast where the CPU has native bf16 (or on GPU), plain fp32
    on a CPU that would emulate it (16x slower on an AVX2 EPYC); bf16/fp32 force it; the run's
    started event says which."""
    from training import policy
    from training.config import Config, ConfigError

    cpu = torch.device("cpu")
    monkeypatch.setattr(policy, "cpu_has_native_bf16", lambda: False)
    assert policy.pick_precision("auto", cpu) is None
    assert policy.pick_precision("auto", torch.device("cuda")) is torch.bfloat16
    assert policy.pick_precision("bf16", cpu) is torch.bfloat16
    monkeypatch.setattr(policy, "cpu_has_native_bf16", lambda: True)
    assert policy.pick_precision("auto", cpu) is torch.bfloat16
    assert policy.pick_precision("fp32", cpu) is None
    a, b = torch.randn(4, 8), torch.randn(8, 4)
    for dtype, want in ((None, torch.float32), (torch.bfloat16, torch.bfloat16)):
        models = policy.Models(policy=None, critic=None, reference=None, tokenizer=None,
                               device=cpu, path="", autocast_dtype=dtype)
        with models.autocast():
            assert (a @ b).dtype == want
    with pytest.raises(ConfigError, match="model.precision must be auto, bf16 or fp32"):
        Config.from_dict({"bench": "colbench", "model": {"precision": "fp16"}}).validate()
    run = tmp_path / "run"
    write_run(run, workspace_dir=write_workspace(tmp_path / "ws"), model_dir=tiny_model_dir,
              overrides={"trainer.total_steps": 0, "model.precision": "fp32"})
    trainer = Trainer(run)
    assert trainer.models.precision == "fp32"
    started = [e for e in metrics.read_lines(run / "events.jsonl") if e["event"] == "started"]
    assert started[0]["precision"] == "fp32"


def test_bf16_autocast_trains_on_any_cpu(tmp_path, tiny_model_dir):
    """model.precision bf16 (what auto picks on GPUs and on CPUs with native bf16): a PPO step runs
    under bf16 autocast over fp32 master weights, its losses are finite, the weights stay fp32 and
    move, and they move the way the fp32 step moves them. Adam's first step moves each weight by
    about lr in the sign of its gradient, so where bf16 rounding (8 mantissa bits) flips a tiny
    gradient's sign the two steps differ by 2 lr for that weight: the check is the direction of
    the whole update (cosine of the two weight deltas), which a wrong gradient would scatter. Forced, so both kinds of CPU run it; emulated bf16 is slower."""
    from training import checkpoint

    states = {}
    for precision in ("fp32", "bf16"):
        run = tmp_path / precision
        write_run(run, workspace_dir=write_workspace(tmp_path / f"ws-{precision}"),
                  model_dir=tiny_model_dir,
                  overrides={"trainer.total_steps": 1, "model.precision": precision,
                             "rollout.temperature": 0.0})
        trainer = Trainer(run)
        assert trainer.models.precision == {"fp32": "fp32", "bf16": "bf16-autocast"}[precision]
        start = {k: v.detach().float().clone() for k, v in trainer.models.policy.state_dict().items()}
        assert trainer.run() == 0
        row = list(metrics.read_lines(run / "metrics.jsonl"))[-1]
        for key in ("actor/pg_loss", "critic/value_loss", "actor/entropy"):
            assert row[key] is not None and math.isfinite(row[key]), (precision, key)
        states[precision] = torch.load(checkpoint.step_dir(run / "checkpoints", 1) / "policy.pt",
                                       weights_only=False)
    moved = max((states["fp32"][k].float() - start[k]).abs().max().item() for k in start)
    for k, v in states["bf16"].items():
        assert v.dtype == torch.float32, k                   # fp32 master weights
    assert moved > 5e-4                                       # Adam's first step: ~lr = 1e-3
    d32 = torch.cat([(states["fp32"][k].float() - start[k]).flatten() for k in sorted(start)])
    d16 = torch.cat([(states["bf16"][k].float() - start[k]).flatten() for k in sorted(start)])
    cos = torch.nn.functional.cosine_similarity(d32, d16, dim=0).item()
    print(f"bf16 vs fp32 update cosine {cos:.3f}")
    assert cos > 0.8, cos


@pytest.mark.parametrize("marked,lora", [(True, 0), (False, 0), (True, 4)])
def test_each_rollout_decodes_the_last_update_and_the_metrics_say_so(tmp_path, tiny_model_dir, monkeypatch,
                                                                     marked, lora):
    """The GPU path, forced on the CPU: the rollout engine decodes a weight copy and the optimiser
    is the fused AdamW. Each step's rollout takes the weights of the update before it
    (`rollout/weights_copied` 1); without the step's version bump, as every H200 run up to
    2026-12-06 trained, the copy stays at the initial weights and the diagnosis says so."""
    from orchestrator import diagnostics
    from training import kvengine, trainer as trainer_mod

    init = kvengine.RolloutEngine.__init__
    monkeypatch.setattr(kvengine.RolloutEngine, "__init__",
                        lambda self, *a, **kw: init(self, *a, **{**kw, "copy_weights": True}))
    optimizer = Trainer._optimizer
    monkeypatch.setattr(Trainer, "_optimizer", staticmethod(lambda m, o, fused=None: optimizer(m, o, fused=True)))
    if not marked:
        monkeypatch.setattr(trainer_mod, "_mark_written", lambda *a: None)
    ws = write_workspace(tmp_path / "ws")
    write_run(tmp_path / "r", workspace_dir=ws, model_dir=tiny_model_dir,
              overrides={"trainer.total_steps": 3, "model.lora_rank": lora})   # lora: the merged copy
    assert Trainer(tmp_path / "r").run() == 0
    rows = list(metrics.read_lines(tmp_path / "r" / "metrics.jsonl"))
    assert all(r["actor/updates"] > 0 for r in rows)
    assert [r["rollout/weights_copied"] for r in rows] == ([1, 1, 1] if marked else [1, 0, 0])
    stale = [f for f in diagnostics.diagnose(tmp_path / "r", window=3) if f.kind == "stale_rollouts"]
    assert bool(stale) != marked
