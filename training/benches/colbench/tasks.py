"""Generate the shipped ColBench tasks (seeded) and write them in the original JSONL schema.

    python -m training.benches.colbench.tasks [--seed 0] [--train 160] [--test 60]

writes training/benches/colbench/data/{train,test}.jsonl. Each line has the original ColBench
backend-programming keys (`problem_description`, `ground_truth`, `test_cases` as a dict of call
expressions) plus our annotations (`task_id`, `family`, `func`, `hidden_facts`). Families are
spread evenly over both splits; a task whose reference source already exists is drawn again, so
no test task repeats a train task. Every reference is checked here (it is our own code, run
in-process only at build time): each test call must give a JSON value, and at least four must
give a value other than None (the scorer never counts a None reference output).
"""
from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

from training.benches.colbench import families_pricing, families_records, families_text
from training.benches.colbench.spec import Spec

FAMILIES = families_pricing.FAMILIES + families_text.FAMILIES + families_records.FAMILIES
DATA_DIR = Path(__file__).resolve().parent / "data"


class FamilyError(ValueError):
    """A family produced a task whose reference fails on its own tests (a bug in the family)."""


def check_spec(spec: Spec) -> None:
    ns: dict = {}
    exec(compile(spec.source, f"<{spec.family}>", "exec"), ns)     # build time, our own code
    counted = 0
    for expr in spec.tests:
        try:
            value = eval(expr, ns)
        except Exception:       # noqa: BLE001 - a raising reference is allowed, it is not counted
            continue
        json.dumps(value)
        counted += value is not None
    if counted < 4:
        raise FamilyError(f"family {spec.family}: only {counted} counted tests in {spec.tests}")


def to_record(spec: Spec, task_id: str) -> dict:
    facts = [{"id": f"{task_id}/f{i}", "kind": kind, "text": text, "keywords": list(kw)}
             for i, (kind, text, kw) in enumerate(spec.facts)]
    return {"problem_description": spec.description,
            "ground_truth": spec.source,
            "test_cases": {f"test{i + 1}": expr for i, expr in enumerate(spec.tests)},
            "task_id": task_id, "family": spec.family, "func": spec.func, "hidden_facts": facts}


def generate(seed: int = 0, n_train: int = 160, n_test: int = 60) -> dict[str, list[dict]]:
    """Both splits, deterministic in `seed`; families take turns so each split covers all."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: dict[str, list[dict]] = {"train": [], "test": []}
    for split, n in (("train", n_train), ("test", n_test)):
        for i in range(n):
            family = FAMILIES[i % len(FAMILIES)]
            for _attempt in range(200):
                spec = family(rng)
                if spec.source not in seen:
                    break
            else:
                raise FamilyError(f"family {family.__name__} ran out of distinct tasks")
            seen.add(spec.source)
            check_spec(spec)
            out[split].append(to_record(spec, f"colbench-{split}-{i:04d}"))
    return out


def write(data: dict[str, list[dict]], folder: Path = DATA_DIR) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    for split, rows in data.items():
        with open(folder / f"{split}.jsonl", "w") as f:
            for row in rows:
                f.write(json.dumps(row, sort_keys=True) + "\n")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--train", type=int, default=160)
    ap.add_argument("--test", type=int, default=60)
    ap.add_argument("--out", type=Path, default=DATA_DIR)
    args = ap.parse_args(argv)
    data = generate(args.seed, args.train, args.test)
    write(data, args.out)
    kinds: dict[str, int] = {}
    for row in data["train"] + data["test"]:
        for fact in row["hidden_facts"]:
            kinds[fact["kind"]] = kinds.get(fact["kind"], 0) + 1
    print(f"wrote {len(data['train'])} train and {len(data['test'])} test tasks to {args.out}; "
          f"fact kinds: {kinds}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
