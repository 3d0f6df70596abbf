"""ColBench task data: the shipped splits, the seeded generator, and the loader for files in the
original schema (written here by the test itself)."""
from __future__ import annotations

import json

import pytest

from training.benches import get_bench
from training.benches.colbench import data, tasks
from training.benches.colbench.scorer import ReferenceCache, score_answer
from training.benches.colbench.spec import FACT_KINDS


def test_shipped_splits_are_large_distinct_and_annotated():
    train, test = data.load_tasks("train"), data.load_tasks("test")
    assert len(train) >= 150 and len(test) >= 50
    refs = [t.data["ground_truth"] for t in train + test]
    assert len(set(refs)) == len(refs)                        # no test task repeats a train task
    assert len({t.id for t in train + test}) == len(refs)
    for t in train + test:
        assert t.gym == "colbench" and t.prompt and len(t.data["test_cases"]) >= 5
        assert f"`{t.data['func']}(" in t.prompt                  # the name is told, details are not
        assert all(f.keywords and f.text for f in t.facts) and len(t.facts) >= 3
    assert data.fact_kinds(train + test) == set(FACT_KINDS)    # every declared kind is in the data


def test_shipped_files_are_what_the_seeded_generator_writes():
    fresh = tasks.generate(seed=0)
    for split in ("train", "test"):
        shipped = [json.loads(line) for line in (data.DATA_DIR / f"{split}.jsonl").read_text().splitlines()]
        assert shipped == fresh[split]
    assert tasks.generate(seed=1)["test"] != fresh["test"]


def test_shipped_references_pass_their_own_tests_in_the_sandbox():
    cache = ReferenceCache()
    sample = data.load_tasks("test")[::7]
    for t in sample:
        s = score_answer(t, t.data["ground_truth"], cache=cache)
        assert s.success and s.counted >= 4, (t.id, s.to_json())


ORIGINAL = [
    {"problem_description": "Write a function that computes a tip.",
     "ground_truth": "def calculate_tip(bill, percent=15, round_up=False):\n"
                     "    if bill <= 0:\n        return 0\n"
                     "    tip = bill * percent / 100\n"
                     "    if round_up:\n        return {'tip': int(tip) + 1, 'total': bill + int(tip) + 1}\n"
                     "    return {'tip': round(tip, 2), 'total': round(bill + tip, 2)}\n",
     "test_cases": {"test1": "calculate_tip(100)", "test2": "calculate_tip(80, 20, True)",
                    "test3": "calculate_tip(-5)"}},
    {"problem_description": "Count the vowels.",
     "ground_truth": "def count_vowels(s):\n    return sum(c in 'aeiou' for c in s.lower())\n",
     "test_cases": json.dumps({"test1": "count_vowels('Hello')", "test2": "count_vowels('')"})},
]


def test_loader_reads_a_file_in_the_original_schema(tmp_path):
    (tmp_path / "backend_tasks").mkdir()
    path = tmp_path / "backend_tasks" / "test.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in ORIGINAL) + "\n\n")
    loaded = get_bench("colbench").load_tasks("test", data_dir=tmp_path)
    assert [t.data["func"] for t in loaded] == ["calculate_tip", "count_vowels"]
    assert loaded[1].data["test_cases"] == {"test1": "count_vowels('Hello')", "test2": "count_vowels('')"}
    assert data.load_tasks("test", data_dir=path)[0].prompt == ORIGINAL[0]["problem_description"]
    tip = loaded[0]
    texts = {f.kind: [] for f in tip.facts}
    for f in tip.facts:
        texts[f.kind].append(f.text)
    # facts derived from the reference: arguments with defaults, early returns, returned shapes
    assert "The argument 'percent' defaults to 15." in texts["argument"]
    assert any("bill <= 0" in t and "returns 0" in t for t in texts["edge_case"])
    assert any("'tip', 'total'" in t for t in texts["shape"])
    s = score_answer(tip, "def calculate_tip(bill, percent=15, round_up=False):\n    return 0\n",
                     cache=ReferenceCache())
    assert s.counted == 3 and s.passed == 1 and s.pass_rate == pytest.approx(1 / 3)


def test_loader_errors_name_the_file_and_line(tmp_path):
    bad = tmp_path / "train.jsonl"
    bad.write_text(json.dumps(ORIGINAL[0]) + "\n" + json.dumps({"problem_description": "x"}) + "\n")
    with pytest.raises(data.TaskFileError, match=r"train.jsonl:2: not a ColBench task"):
        data.load_tasks("train", data_dir=tmp_path)
    with pytest.raises(data.TaskFileError, match="no ColBench test file"):
        data.load_tasks("test", data_dir=tmp_path)
    with pytest.raises(data.TaskFileError, match="unknown split"):
        data.load_tasks("dev")
    assert data.load_tasks("train", gyms=["travel"]) == []


def test_hidden_details_decide_the_tests():
    """A correct solution of a sibling task (same family and description style, other hidden
    details) must not pass: the tests check what only the collaborator knows."""
    first = {}
    for t in data.load_tasks("train"):
        first.setdefault(t.data["family"], t)
    cache = ReferenceCache()
    for t in data.load_tasks("test")[::6]:
        sibling = first[t.data["family"]].data["ground_truth"]
        s = score_answer(t, sibling, cache=cache)
        assert not s.success and s.pass_rate < 1.0, t.id
