"""benchmarks/travel_example_probe.py counts, per set of worked examples shown, what the untrained
policy did in TravelGym; its figures are the baseline of the copied_question finding. Here its
workspace edits and its counts run on hand-written episodes (no model)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from episodes import ep, turn  # noqa: E402


def _probe():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("travel_example_probe",
                                                  ROOT / "benchmarks" / "travel_example_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _shown(copy: Path) -> list[str]:
    knobs = json.loads((copy / "workspace" / "knobs.json").read_text())
    demos = json.loads((copy / "workspace" / "demonstrations" / "usergym.json").read_text())["travel"]
    return [d["id"] for d in demos[:knobs["env"]["travel"]["demonstrations"]]]


def test_each_variant_shows_its_examples(tmp_path):
    probe = _probe()
    got = {}
    for v in probe.VARIANTS:
        copy = tmp_path / v
        shutil.copytree(ROOT / "workspace", copy / "workspace")
        probe.edit_workspace(copy, v)
        got[v] = _shown(copy)
    assert got == {"shipped": ["travel-hotel-denver"],
                   "two": ["travel-hotel-denver", "travel-flight-oslo"],
                   "three": ["travel-hotel-denver", "travel-flight-oslo", "travel-restaurant-lima"],
                   "flight": ["travel-flight-oslo"]}


def test_the_parking_question_is_counted_apart_in_tasks_without_a_hotel(tmp_path):
    probe = _probe()
    parking = "[action] Do you need parking at the hotel?"
    eps = [ep("travel", [turn(parking, "For the hotel, I want parking: yes.")], prompt="I need a hotel in Oslo."),
           ep("travel", [turn(parking, "I'm not sure; could you ask about something more specific?"),
                         turn("[search] flight Oslo", "F1 | SkyJet | Oslo | $90"),
                         turn("[answer] F1", "The user accepts F1.")], prompt="I need a flight to Oslo.",
              success=True),
           ep("travel", [turn("[action] Which cuisine would you like?", "For the restaurant, I want "
                              "cuisine: seafood.")], prompt="I need a restaurant in Lima.")]
    f = tmp_path / "episodes.jsonl"
    f.write_text("".join(json.dumps(e) + "\n" for e in eps))
    assert probe.counts(f) == {"episodes": 3, "asked the parking question": 2,
                               "of them, tasks without a hotel": 1, "asked": 3, "told a preference": 2,
                               "searched": 1, "recommended": 1, "succeeded": 1}
