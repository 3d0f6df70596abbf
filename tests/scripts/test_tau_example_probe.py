"""benchmarks/tau_example_probe.py counts, per worked-example variant, what the untrained policy
did in TauGym; its figures decide which example the built-in agent shows. Here its workspace
edits and its counts run on hand-written episodes (no model)."""
from __future__ import annotations

import importlib.util
import json
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tests" / "fakes"))
from episodes import tau_calling  # noqa: E402


def _probe():
    spec = importlib.util.spec_from_file_location("tau_example_probe", ROOT / "benchmarks" / "tau_example_probe.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_two_customer_variant_shows_both_examples_and_counts_copies_of_either(tmp_path):
    probe = _probe()
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "workspace", copy / "workspace")
    probe.edit_workspace(copy, "two", 2)
    knobs = json.loads((copy / "workspace" / "knobs.json").read_text())
    demos = json.loads((copy / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"]
    assert (knobs["env"]["tau"]["demonstrations"], knobs["user"]["tau"]["facts_per_reply"]) == (2, 2)
    assert [d["id"] for d in demos[:2]] == ["eau-tau-identify-then-lookup", "eau-tau-identify-then-lookup-2"]
    values = probe.example_values(copy)
    assert {"Souza", "30301", "Okafor", "60614"} <= values
    eps = [tau_calling("Ana", "Souza", "30301"), tau_calling("Kenji", "Okafor", "60614"),
           tau_calling("Lena", "Khan", "94402"),
           tau_calling("Ana", "Souza", "30301", told=("Ana", "Souza", "30301"))]
    f = tmp_path / "episodes.jsonl"
    f.write_text("".join(json.dumps(e) + "\n" for e in eps))
    got = probe.counts(f, values)
    assert (got["episodes"], got["asked zip"], got["told zip"], got["named find_user_id"]) == (4, 4, 4, 4)
    # the two examples' customers copied; the user's own facts, and a user who is the example's
    # customer, are not copies, and those two calls identify the user
    assert (got["copied the example's values"], got["identified"]) == (2, 2)


def test_the_shipped_variant_shows_no_call_values(tmp_path):
    probe = _probe()
    copy = tmp_path / "copy"
    shutil.copytree(ROOT / "workspace", copy / "workspace")
    probe.edit_workspace(copy, "shipped", 2)
    assert probe.example_values(copy) == set()
