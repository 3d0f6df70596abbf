"""The supervised warm start (training/warmstart.py): which examples go in (the training gyms'
worked exchanges, successful training episodes only), one-sentence refusals, and a TRL SFT run
on the tiny model whose folder a run can start from (skipped where TRL is not installed)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from training import demonstrations
from training.benches import get_bench
from training.warmstart import examples_from_demonstrations, examples_from_runs, main

PROJECT = Path(__file__).resolve().parents[2]


def test_demonstrations_give_one_example_per_assistant_turn_of_the_training_gyms():
    bench = get_bench("usergym")
    demos = demonstrations.load_dir(PROJECT / "workspace")["usergym"]
    gyms = list(bench.train_gyms)
    assert "intention" not in gyms                       # held out, as in the paper
    examples = examples_from_demonstrations(bench, demos, gyms)
    want = sum(m["role"] == "assistant" for g in gyms for ex in demos[g] for m in ex["messages"])
    assert len(examples) == want > 0
    for ex in examples:
        roles = [m["role"] for m in ex["prompt"]]
        assert roles[0] == "system" and roles[-1] == "user" and ex["prompt"][0]["content"]
        assert ex["completion"][0]["role"] == "assistant"
        assert bench.check_action(next(g for g in gyms if any(
            ex["completion"][0]["content"] == m["content"] for e in demos[g] for m in e["messages"])),
            ex["completion"][0]["content"]) is None
    intention = {m["content"] for ex in demos["intention"] for m in ex["messages"]}
    assert not any(ex["completion"][0]["content"] in intention for ex in examples)


def _episode(gym, success, text, error=None):
    return {"gym": gym, "system": "sys", "prompt": "task", "success": success, "error": error,
            "turns": [{"agent": "[action] ask", "user": "reply"}, {"agent": text, "user": "ok"}]}


def test_runs_give_their_successful_training_episodes_once(tmp_path):
    traj = tmp_path / "exp" / "run-001" / "trajectories"
    traj.mkdir(parents=True)
    lines = [_episode("travel", True, "[answer] A"), _episode("travel", True, "[answer] A"),
             _episode("travel", False, "[answer] B"), _episode("travel", True, "[answer] C", "boom"),
             _episode("intention", True, "[answer] D")]
    (traj / "step-000001.jsonl").write_text("\n".join(json.dumps(x) for x in lines) + "\n{\"torn")
    examples = examples_from_runs([tmp_path / "exp"], ["travel"])
    assert [ex["completion"][0]["content"] for ex in examples] == ["[action] ask", "[answer] A"]
    assert [m["content"] for m in examples[1]["prompt"]] == ["sys", "task", "[action] ask", "reply"]


def test_bad_input_is_one_sentence(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")      # the hub id below: offline, never fetched
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("")
    for argv, words in (
            (["--bench", "usergym", "--out", str(tmp_path / "full")], "is not empty"),
            (["--bench", "usergym", "--out", str(tmp_path / "o"), "--gyms", "nope"],
             "'nope' is not a gym of usergym"),
            (["--bench", "usergym", "--out", str(tmp_path / "o"), "--from-runs", str(tmp_path)],
             "holds no trajectories"),
            (["--bench", "usergym", "--out", str(tmp_path / "o"), "--model", "nobody/none-xyz"],
             "could not be fetched from the Hugging Face hub")):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert words in err and len(err.splitlines()) == 1, err


def test_sft_writes_a_model_folder_a_run_starts_from(tmp_path, tiny_model_dir):
    pytest.importorskip("trl")
    import torch
    from transformers import AutoModelForCausalLM

    from training.config import ModelConfig
    from training.policy import load_models

    out = tmp_path / "warm"
    assert main(["--bench", "usergym", "--out", str(out), "--model", str(tiny_model_dir),
                 "--gyms", "travel", "--epochs", "1", "--lr", "1e-3", "--device", "cpu"]) == 0
    record = json.loads((out / "warmstart.json").read_text())
    assert record["examples"]["demonstrations"] > 0 and record["steps"] >= 1
    models = load_models(ModelConfig(path=str(out), device="cpu"), seed=0, critic=False)
    before = AutoModelForCausalLM.from_pretrained(tiny_model_dir).state_dict()
    after = models.policy.state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert models.tokenizer.padding_side == "left"
