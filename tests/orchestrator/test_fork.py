"""`orchestrator fork` (paper Figure 7): one experiment's history continued into two arms, intra-run
and inter-run, that start from the same checkpoint and workspace commit, each with its own copy
of the experience pool; on the CPU with the tiny model."""
from __future__ import annotations

import json

import pytest

from orchestrator import ledger
from orchestrator.cli import main
from orchestrator.workspace import LIVE_REF, Workspace
from training import metrics

SMALL = ["--preset", "cpu", "--set", "gyms=[\"intention\"]", "--set", "data.train_batch_size=1",
         "--set", "rollout.n=1", "--set", "rollout.max_turns=2", "--set", "rollout.response_length=8",
         "--set", "trainer.save_freq=2", "--set", "model.precision=fp32", "--set", "model.device=cpu"]


@pytest.mark.slow          # ~1-2 minutes: a 2-step source run and two 2-step arms
def test_fork_continues_one_history_into_two_arms_from_the_same_policy(tmp_path, tiny_model_dir,
                                                                     monkeypatch, capsys):
    """The source run finished, so its checkpoint keeps only the policy (orchestrator/prune.py):
    each arm's run starts from that same policy, exported once per arm."""
    runs = tmp_path / "runs"
    pool = tmp_path / "pool"
    pool.mkdir()
    (pool / "usergym-finding.md").write_text("---\nbench: \"usergym\"\n---\nA finding.\n")
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(pool))
    base = ["--runs-dir", str(runs)]
    assert main(base + ["start", "src", "--agent", "none", "--bench", "usergym", "--steps", "2",
                        "--model", str(tiny_model_dir), "--no-live", *SMALL]) == 0
    src_live = Workspace(runs / "src" / "workspace").rev(LIVE_REF)
    for control in ("intra-run", "inter-run"):
        assert main(base + ["fork", "src", "--control", control, "--steps", "2"]) == 0
    assert "train it with `orchestrator start src-inter-run" in capsys.readouterr().out
    weights = []
    for control in ("intra-run", "inter-run"):
        arm = runs / f"src-{control}"
        meta = json.loads((arm / "experiment.json").read_text())
        assert meta["control"] == control and meta["cap"] == 2
        assert meta["forked_from"] == {**meta["forked_from"], "experiment": "src", "run": "run-001",
                                       "checkpoint": "step-000002", "commit": src_live,
                                       "start": "policy"}
        assert [r["name"] for r in meta["runs"]] == ["run-001", "run-002"]
        assert not (arm / "run-001" / "checkpoints").exists()          # history, not weights
        assert (arm / "run-001" / "metrics.jsonl").read_text() == \
            (runs / "src" / "run-001" / "metrics.jsonl").read_text()
        model = json.loads((arm / "run-002" / "config.json").read_text())["model"]["path"]
        assert model == str(arm / "models" / "run-001-step-000002")
        weights.append((arm / "models" / "run-001-step-000002" / "model.safetensors").read_bytes())
        assert Workspace(arm / "workspace").rev(LIVE_REF) == src_live
        assert (arm / "experience" / "usergym-finding.md").exists()
        assert [r["action"] for r in ledger.read_lines(arm, "control")][-1] == "fork"
    assert weights[0] == weights[1]                                       # the same start
    for control in ("intra-run", "inter-run"):
        assert main(base + ["start", f"src-{control}", "--agent", "builtin", "--every", "1",
                            "--no-live"]) == 0
        arm = runs / f"src-{control}"
        run = arm / "run-002"
        started = [e for e in metrics.read_lines(run / "events.jsonl") if e["event"] == "started"][0]
        assert started["resumed"] is False
        assert [r["step"] for r in metrics.read_lines(run / "metrics.jsonl")] == [1, 2]
        meta = json.loads((arm / "experiment.json").read_text())
        assert meta["control"] == control and [r["state"] for r in meta["runs"]][-1] == "finished"
    # the inter-run arm has no session during its run, and its cap leaves no run to review for
    assert ledger.read_lines(runs / "src-inter-run", "session") == []
    assert ledger.read_lines(runs / "src", "session") == []                # the source is untouched
    # what an arm's sessions learn goes to its own pool, never the shared one
    assert [p.name for p in pool.iterdir()] == ["usergym-finding.md"]


def test_a_whole_checkpoint_is_resumed_where_it_stopped(tmp_path):
    """A stopped run keeps its checkpoints whole: the arm's run resumes it (the checkpoint's
    files linked in, its steps continuing), with the source run's config."""
    from gate_testkit import make_experiment

    from orchestrator.fork import fork_experiment
    from orchestrator.prune import RESUME_FILES

    exp = make_experiment(tmp_path, "src")
    ckpt = exp / "run-001" / "checkpoints" / "step-000004"
    ckpt.mkdir(parents=True)
    for name in ("policy.pt", *RESUME_FILES):
        (ckpt / name).write_bytes(b"weights")
    (ckpt / "state.json").write_text(json.dumps({"step": 4}))
    (exp / "run-001" / "config.json").write_text(json.dumps(
        {"workspace": {"repo": "old"}, "trainer": {"total_steps": 10}, "model": {"path": ""}}))
    meta = json.loads((exp / "experiment.json").read_text())
    meta["runs"] = [{"name": "run-001", "state": "stopped", "start_commit": None}]
    (exp / "experiment.json").write_text(json.dumps(meta))
    arm = fork_experiment("src", "inter-run", tmp_path / "runs", steps=3)
    config = json.loads((arm / "run-002" / "config.json").read_text())
    assert config["trainer"]["total_steps"] == 7 and config["workspace"]["repo"] == str(arm / "workspace")
    copied = arm / "run-002" / "checkpoints" / "step-000004"
    assert (copied / "critic.pt").stat().st_ino == (ckpt / "critic.pt").stat().st_ino   # linked
    meta = json.loads((arm / "experiment.json").read_text())
    assert meta["forked_from"]["start"] == "resumed" and meta["runs"][-1]["from_checkpoint"] == "step-000004"


def test_fork_refusals_are_one_sentence(tmp_path, capsys):
    from gate_testkit import make_experiment

    make_experiment(tmp_path, "e1")
    runs = str(tmp_path / "runs")
    assert main(["--runs-dir", runs, "fork", "nope", "--control", "intra-run"]) == 2
    assert main(["--runs-dir", runs, "fork", "e1", "--control", "intra-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["orchestrator: no experiment 'nope' in " + str((tmp_path / "runs").resolve()) +
                   ": name the experiment to fork.",
                   "orchestrator: experiment e1 has no runs yet: there is no history to fork."]
    assert not (tmp_path / "runs" / "e1-intra-run").exists()
