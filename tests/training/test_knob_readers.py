"""training/knob_readers.py declares who reads each knob; the gate refuses a knob it does not
declare. These tests keep the declarations honest against the code and the shipped workspace."""
from __future__ import annotations

import json
import re
from pathlib import Path

from orchestrator.gate_checks import flatten
from orchestrator.gate_context import ALL_GYMS
from training import knob_readers

ROOT = Path(__file__).resolve().parents[2]


def test_every_shipped_knob_is_declared_with_its_reader():
    shipped = flatten(json.loads((ROOT / "workspace" / "knobs.json").read_text()))
    undeclared = [path for path in shipped if not knob_readers.is_read(path, ALL_GYMS)]
    assert undeclared == []


def test_every_declared_reader_names_its_knob():
    """A declaration whose reader never mentions the knob's name would let a dead knob through."""
    for pattern, where in knob_readers.READERS.items():
        name = [part for part in pattern.split(".") if not part.startswith("<")][-1]
        source = (ROOT / where).read_text()
        assert re.search(rf"[\"']{re.escape(name)}[\"']", source), (pattern, where)


def test_gyms_and_modules_match_only_their_kind():
    assert knob_readers.reader("env.colbench.min_questions", ALL_GYMS) == "training/benches/colbench/env.py"
    assert knob_readers.is_read("reward.modules.my_module.weight", ALL_GYMS)
    assert not knob_readers.is_read("env.nogym.max_steps", ALL_GYMS)
    assert not knob_readers.is_read("env.travel.min_questions", ALL_GYMS)
    assert not knob_readers.is_read("reward.modules.my-module.weight", ALL_GYMS)
