"""benchmarks/user_loop_probe.py rebuilds an LLM user's states from a run's trajectories and has
the user answer them again under each repetition penalty; its figures are why the penalty falls
on the reply alone. Here on a hand-written persuade episode and the tiny model."""
from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from episodes import ep, turn  # noqa: E402


def _probe():
    spec = importlib.util.spec_from_file_location("user_loop_probe",
                                                  ROOT / "benchmarks" / "user_loop_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _run(tmp_path) -> Path:
    """A run folder whose one trajectory step has a persuade episode of the shipped first
    training task: an LLM reply that loops, a symbolic one, a refused turn no user heard."""
    first = json.loads((ROOT / "training" / "benches" / "usergym" / "data" / "persuade" /
                        "train.jsonl").read_text().splitlines()[0])
    turns = [turn("[action] Why do you hold it?", "I'm sorry. I'm sorry. I'm sorry.",
                  user_replied=True, user_arm="llm"),
             turn("No tool prefix here", "Invalid action: start your message with [action].",
                  user_replied=False, invalid_action=True),
             turn("[action] What worries you most?", "Teamwork.", user_replied=True,
                  user_arm="symbolic"),
             turn("[action] Anything else?", "Games help reflexes.", user_replied=True,
                  user_arm="llm")]
    rec = ep("persuade", turns, task=first["id"]) | {"seed": 3, "user_arm": "llm"}
    run = tmp_path / "run-001"
    (run / "trajectories").mkdir(parents=True)
    (run / "trajectories" / "step-000001.jsonl").write_text(json.dumps(rec) + "\n")
    return run


def test_the_llm_replies_are_rebuilt_with_the_history_before_them(tmp_path):
    found = _probe().llm_states(_run(tmp_path), steps=6)
    assert [r for _, r in found] == ["I'm sorry. I'm sorry. I'm sorry.", "Games help reflexes."]
    first, last = found[0][0], found[1][0]
    assert first.agent_message == "Why do you hold it?" and first.turn == 1
    # the later state holds every earlier turn as the user heard it: the refused one unanswered,
    # the symbolic arm's reply as recorded
    assert last.history == [
        {"role": "agent", "content": "Why do you hold it?"},
        {"role": "user", "content": "I'm sorry. I'm sorry. I'm sorry."},
        {"role": "agent", "content": "No tool prefix here"},
        {"role": "agent", "content": "What worries you most?"},
        {"role": "user", "content": "Teamwork."},
        {"role": "agent", "content": "Anything else?"}]
    assert last.turn == 4


def test_each_penalty_gets_its_counts_and_a_bad_run_is_one_sentence(tmp_path, tiny_model_dir, capsys):
    probe = _probe()
    out = tmp_path / "counts.json"
    assert probe.main([str(_run(tmp_path)), "--model", str(tiny_model_dir), "--penalties", "1.0,1.5",
                       "--max-new-tokens", "8", "--out", str(out)]) == 0
    data = json.loads(out.read_text())
    assert data["states"] == 2 and data["recorded_looped"] == 1 and list(data["rows"]) == ["1", "1.5"]
    assert all(0 <= r["looped"] <= 2 and r["disclosed a fact"] <= 2 and r["mean characters"] > 0
               for r in data["rows"].values())
    assert "| 1.5 |" in capsys.readouterr().out
    empty = tmp_path / "empty"
    empty.mkdir()
    assert probe.main([str(empty)]) == 2
    assert "has no trajectories/step-*.jsonl" in capsys.readouterr().err
