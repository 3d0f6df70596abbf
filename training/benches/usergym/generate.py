"""Write the shipped UserGym tasks: `python -m training.benches.usergym.generate [--seed 0]`.

Each gym's `generate(rng, n)` builds tasks from the hand-written tables (tables.py) with a seeded
RNG; this script numbers them, splits them into train and test and writes
`data/<gym>/{train,test}.jsonl` (format in common.py). Persuade's test claims are disjoint from its
train claims; every other gym draws one pool and cuts it. Rerunning with the same seed rewrites the
same files byte for byte.
"""
from __future__ import annotations

import argparse
import random
from dataclasses import replace
from pathlib import Path

from training.benches.base import Task
from training.benches.usergym import function, intention, persuade, tau, telepathy, travel, turtle
from training.benches.usergym.common import DATA_DIR, write_jsonl

MODULES = {"travel": travel, "function": function, "persuade": persuade, "tau": tau,
           "turtle": turtle, "intention": intention, "telepathy": telepathy}
N_TRAIN, N_TEST = 120, 30


def _number(tasks: list[Task], gym: str, split: str) -> list[Task]:
    return [replace(t, id=f"{gym}-{split}-{i:04d}", split=split) for i, t in enumerate(tasks)]


def build(gym: str, seed: int = 0) -> dict[str, list[Task]]:
    rng = random.Random(f"usergym:{gym}:{seed}")
    if gym == "persuade":
        n_claims = len(persuade.tables.CLAIMS)
        train = persuade.generate(rng, N_TRAIN, claims=list(range(n_claims - 4)))
        test = persuade.generate(rng, N_TEST, claims=list(range(n_claims - 4, n_claims)))
    else:
        pool = MODULES[gym].generate(rng, N_TRAIN + N_TEST)
        test, train = pool[:N_TEST], pool[N_TEST:]
    return {"train": _number(train, gym, "train"), "test": _number(test, gym, "test")}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=DATA_DIR)
    args = parser.parse_args(argv)
    for gym in MODULES:
        for split, tasks in build(gym, args.seed).items():
            write_jsonl(args.out / gym / f"{split}.jsonl", tasks)
            print(f"{gym}/{split}: {len(tasks)} tasks")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
