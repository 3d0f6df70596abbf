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
(benchmarks/example_probe.py), so nothing is written into the source tree.

It prints per variant the episodes that asked the hotel example's parking question (its words,
"parking at the hotel"), those of them whose task has no hotel, the episodes that asked any
question, that asked one the user answered with a preference ("For the ..., I want ..."), that
searched, that recommended an option ("[answer] <id>"), and that succeeded.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import example_probe  # noqa: E402

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
    p = example_probe.parser(__doc__, VARIANTS, "travel", max_turns=10)
    a = p.parse_args()
    rows = example_probe.run(a, example_probe.chosen(p, a, VARIANTS), "travel", edit_workspace,
                             lambda episodes, copy: counts(episodes))
    example_probe.report(a, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
