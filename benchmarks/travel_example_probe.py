"""Whether the untrained policy copies TravelGym's worked example into tasks it does not fit: the
shipped workspace (`shipped`: one example shown, a hotel in Denver whose question is "Do you need
parking at the hotel?"), the first two shown (`two`: hotel and flight, what the built-in agent's
one more example for a copied question shows), all three shipped examples shown (`three`: hotel,
flight and restaurant, each asking about its own aspect), or the flight example shown alone first
(`flight`).

    python benchmarks/travel_example_probe.py                      # CPU: a few minutes a variant
    python benchmarks/travel_example_probe.py --variants shipped,three --episodes 30 --device cuda

Why: in the ninth session's H100 runs (PPO and EAU, seeds 1-2, the last six steps of each) the
hotel example's question was asked in 35-52% of travel episodes, and in 31-45% of the tasks with
no hotel in them, where the symbolic user can only answer its catch-all. Whether training taught
that or the example alone causes it is what an untrained policy on the held-out travel tasks
says. Each variant runs in a copy of the project's tracked files whose workspace is edited
(benchmarks/tau_example_probe.py's `project_copy`), so nothing is written into the source tree.

It prints per variant the episodes that asked the hotel example's parking question (its words,
"parking at the hotel"), those of them whose task has no hotel, the episodes that asked any
question, that asked one the user answered with a preference ("For the ..., I want ..."), that
searched, that recommended an option ("[answer] <id>"), and that succeeded.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from tau_example_probe import project_copy  # noqa: E402

VARIANTS = ("shipped", "two", "three", "flight")
COPIED = "parking at the hotel"          # the shipped first example's question, in its own words


def edit_workspace(copy: Path, variant: str) -> None:
    knobs_file = copy / "workspace" / "knobs.json"
    knobs = json.loads(knobs_file.read_text())
    demos_file = copy / "workspace" / "demonstrations" / "usergym.json"
    demos = json.loads(demos_file.read_text())
    if variant in ("two", "three"):
        knobs["env"]["travel"]["demonstrations"] = 2 if variant == "two" else len(demos["travel"])
    elif variant == "flight":
        flight = [d for d in demos["travel"] if "flight" in d["id"]]
        demos["travel"] = flight + [d for d in demos["travel"] if d not in flight]
    knobs_file.write_text(json.dumps(knobs, indent=2) + "\n")
    demos_file.write_text(json.dumps(demos, indent=2, ensure_ascii=False) + "\n")


def counts(episodes_file: Path) -> dict[str, int]:
    eps = [json.loads(line) for line in episodes_file.read_text().splitlines() if line.strip()]
    agent = lambda t: (t.get("agent") or "").strip()          # noqa: E731

    def any_turn(ep, pred):
        return any(pred(t) for t in ep.get("turns") or [])

    def copied(ep):
        return any_turn(ep, lambda t: agent(t).startswith("[action]") and COPIED in agent(t).lower())

    return {
        "episodes": len(eps),
        "asked the parking question": sum(copied(e) for e in eps),
        "of them, tasks without a hotel": sum(copied(e) and "hotel" not in (e.get("prompt") or "").lower()
                                              for e in eps),
        "asked": sum(any_turn(e, lambda t: agent(t).startswith("[action]")) for e in eps),
        "told a preference": sum(any_turn(e, lambda t: agent(t).startswith("[action]") and
                                          "i want" in (t.get("user") or "").lower()) for e in eps),
        "searched": sum(any_turn(e, lambda t: agent(t).startswith("[search]")) for e in eps),
        "recommended": sum(any_turn(e, lambda t: agent(t).startswith("[answer]")) for e in eps),
        "succeeded": sum(bool(e.get("success")) for e in eps),
    }


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--variants", default=",".join(VARIANTS),
                   help=f"comma-separated, of {', '.join(VARIANTS)} (default: all)")
    p.add_argument("--episodes", type=int, default=30, help="held-out travel tasks")
    p.add_argument("--max-turns", type=int, default=10)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None, help="also write the counts as JSON here")
    p.add_argument("--keep", default=None,
                   help="copy each variant's episodes.jsonl into this folder, to read what the policy wrote")
    a = p.parse_args()
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in variants if v not in VARIANTS]
    if bad:
        p.error(f"no variant {', '.join(bad)}: give {' or '.join(VARIANTS)}")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="travel-probe-") as tmp:
        for v in variants:
            copy = project_copy(Path(tmp) / v)
            edit_workspace(copy, v)
            cmd = [sys.executable, "-m", "orchestrator.cli", "eval", "--model", "default",
                   "--bench", "usergym", "--gyms", "travel", "--episodes", str(a.episodes),
                   "--max-turns", str(a.max_turns), "--max-new-tokens", str(a.max_new_tokens),
                   "--batch-size", str(a.episodes), "--seed", str(a.seed), "--device", a.device]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [str(copy), os.environ.get("PYTHONPATH", "")]))}
            print(f"{v}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
            subprocess.run(cmd, cwd=copy, env=env, check=True)
            found = sorted((copy / "runs").glob("*/eval/*/episodes.jsonl"))
            rows[v] = counts(found[-1])
            if a.keep:
                Path(a.keep).mkdir(parents=True, exist_ok=True)
                shutil.copy2(found[-1], Path(a.keep) / f"{v}-episodes.jsonl")
    keys = list(next(iter(rows.values())))
    print("| variant | " + " | ".join(keys) + " |")
    print("| --- | " + " | ".join("---:" for _ in keys) + " |")
    for v, r in rows.items():
        print(f"| {v} | " + " | ".join(str(r[k]) for k in keys) + " |")
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "counts": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
