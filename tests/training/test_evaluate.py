"""The evaluation process (training/evaluate.py) on a tiny random model and a small fake bench:
same checkpoint + same seed -> same numbers; the bench's protocol, not a workspace, sets the
limits; the checkpoint's weights are the ones evaluated; the wall refuses walled paths."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tests.training.fake_eval_bench import make_checkpoint  # noqa: E402
from training import evaluate as ev  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
BENCH = "tests.training.fake_eval_bench:BENCH"


def _run(ckpt: Path | None, out: Path, *, seed: int = 0, model: str | None = None,
         episodes: int | None = 3) -> dict:
    spec = ev.EvalSpec(bench=BENCH, seed=seed, episodes=episodes, batch_size=3, device="cpu")
    folder = ev.evaluate(spec, out, checkpoint=ckpt, model=model,
                         run="run-001" if ckpt else None, step=2 if ckpt else None,
                         show_progress=False)
    episodes_ = [json.loads(line) for line in (folder / "episodes.jsonl").read_text().splitlines()]
    return {"summary": json.loads((folder / "summary.json").read_text()),
            "episodes": episodes_, "dir": folder}


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, tiny_model_dir):
    return make_checkpoint(tmp_path_factory.mktemp("exp"), tiny_model_dir)


@pytest.fixture(scope="module")
def first(ckpt, tmp_path_factory):
    """The checkpoint evaluated once with seed 0 (shared by the tests that only read it)."""
    return _run(ckpt, tmp_path_factory.mktemp("first"))


def test_same_checkpoint_same_seed_same_numbers(ckpt, first, tmp_path):
    a = first
    b = _run(ckpt, tmp_path / "b")
    assert a["summary"]["per_gym"] == b["summary"]["per_gym"]
    assert [e["turns"] for e in a["episodes"]] == [e["turns"] for e in b["episodes"]]
    other = _run(ckpt, tmp_path / "c", seed=1)        # the seed matters: sampled decoding
    assert [e["turns"] for e in other["episodes"]] != [e["turns"] for e in a["episodes"]]
    assert b["summary"]["per_gym"]["travel"]["score"] > 0
    assert a["dir"].name == "run-001-step-000002-tests.training.fake_eval_bench_BENCH-test-seed0-first3"


def test_protocol_sets_limits_over_pristine_workspace(first):
    r = first
    s = r["summary"]
    assert s["knobs"]["env"]["travel"]["max_steps"] == 3      # pristine workspace says 16
    assert s["per_gym"]["travel"]["n"] == 3 and s["episodes"] == 3
    assert all(e["turn_count"] <= 3 for e in r["episodes"])
    replies = [t["user"] for e in r["episodes"] for t in e["turns"] if "thing(s)" in str(t["user"])]
    assert replies and all("I can tell you 1 thing(s)" in x for x in replies)
    assert s["split"] == "test" and s["source"] == "checkpoint" and s["run_index"] == 1


def test_checkpoint_weights_are_evaluated_and_untrained_model_works(first, tiny_model_dir,
                                                                    tmp_path):
    trained = first
    base = _run(None, tmp_path / "b", model=str(tiny_model_dir))
    assert base["summary"]["source"] == "model" and base["dir"].name.startswith("model-")
    assert [e["turns"] for e in base["episodes"]] != [e["turns"] for e in trained["episodes"]]


def test_checkpoint_without_weights_is_refused(tmp_path, tiny_model_dir):
    ckpt = tmp_path / "run-001" / "checkpoints" / "step-000001"
    ckpt.mkdir(parents=True)
    (tmp_path / "run-001" / "config.json").write_text(
        json.dumps({"model": {"path": str(tiny_model_dir)}}))
    with pytest.raises(ev.EvalError, match="no policy weights"):
        ev.load_policy(ckpt, None, "cpu")


WALL_PROBE = r"""
import os, subprocess, sys
from pathlib import Path
from training.evaluate import install_wall
wall, allowed = Path(sys.argv[1]), Path(sys.argv[2])
refused = []
install_wall([wall], [allowed], refused)
print(open(allowed / "ok.txt").read())
for attempt in (lambda: open(wall / "knobs.json").read(), lambda: os.listdir(wall),
                lambda: list(wall.iterdir()), lambda: subprocess.run(["cat", str(wall / "knobs.json")]),
                lambda: open(str(wall / ".." / wall.name / "knobs.json"))):
    try:
        attempt()
        print("READ")
    except PermissionError:
        print("refused")
print(len(refused))
"""


def test_wall_refuses_opening_listing_and_processes(tmp_path):
    wall = tmp_path / "workspace"
    wall.mkdir()
    (wall / "knobs.json").write_text("{}")
    allowed = wall / "allowed"                      # an exception inside a wall (the checkpoint)
    allowed.mkdir()
    (allowed / "ok.txt").write_text("fine")
    out = subprocess.run([sys.executable, "-c", WALL_PROBE, str(wall), str(allowed)],
                         capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["fine"] + ["refused"] * 5 + ["5"]
