"""Write the shipped UserGym tasks: `python -m training.benches.usergym.generate [--seed 0]`.

Each gym's `generate(rng, n)` builds tasks from the hand-written tables (tables.py) with a seeded
RNG; this script numbers them, splits them into train and test and writes
`data/<gym>/{train,test}.jsonl` (format in common.py). Persuade's test claims are disjoint from its
train claims; every other gym draws one pool and cuts it. Rerunning with the same seed rewrites the
same files byte for byte.

A fact's keywords leave out what the agent's own prompt hits (`keys_outside_prompt`), the rule the
UserRL loader applies to its files (userrl.keywords): a key the prompt holds pays a policy for
repeating its prompt.
"""
from __future__ import annotations

import argparse
import random
from dataclasses import replace
from pathlib import Path

from training.benches.base import Task
from training.benches.usergym import BENCH, function, intention, persuade, tau, telepathy, travel, turtle
from training.benches.usergym.common import DATA_DIR, write_jsonl
from training.users.symbolic import key_hit, words

MODULES = {"travel": travel, "function": function, "persuade": persuade, "tau": tau,
           "turtle": turtle, "intention": intention, "telepathy": telepathy}
N_TRAIN, N_TEST = 120, 30


def keys_outside_prompt(task: Task) -> Task:
    """`task` with each fact's keywords that its agent prompt (BENCH.agent_prompt: the system
    prompt and the first observation) hits left out, by the users' own matching (`key_hit`: every
    word of the key is in the prompt, a shared prefix of 4+ letters counting). Written against a
    stand-in prompt, the tables' keys paid for the real one sent back in 40 of 150 intention tasks
    ("time" in the system prompt's "one missing detail at a time"), 12 of 144 turtle ("act" in
    "You act through one tool") and 6 of 150 persuade tasks ("thinking" against "think")
    (tests/benches/usergym/test_usergym_data.py). A fact left without a key could not be asked
    for, so that is an error: give it a key the prompt lacks."""
    bag = set(words(BENCH.agent_prompt(task)))
    facts = []
    for fact in task.facts:
        keys = tuple(k for k in fact.keywords if not key_hit(k, bag))
        if fact.keywords and not keys:
            raise ValueError(f"{task.id}: the agent's prompt holds every keyword of fact {fact.id!r} "
                             f"({', '.join(fact.keywords)}): give it one the prompt lacks (tables.py or "
                             f"the gym's generate).")
        facts.append(replace(fact, keywords=keys))
    return replace(task, facts=tuple(facts))


def _number(tasks: list[Task], gym: str, split: str) -> list[Task]:
    return [keys_outside_prompt(replace(t, id=f"{gym}-{split}-{i:04d}", split=split))
            for i, t in enumerate(tasks)]


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
