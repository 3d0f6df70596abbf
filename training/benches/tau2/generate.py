"""Rewrite all of tau2's shipped data: `python -m training.benches.tau2.generate`.

Runs each domain's generator (`<domain>/generate.py`: its db.json and tasks.json) in turn;
deterministic, so a rerun rewrites the same files. The helpers the generators share live in
synth.py, which imports none of them: this runner sits above both.
"""
from __future__ import annotations

from training.benches.tau2.airline import generate as airline
from training.benches.tau2.retail import generate as retail
from training.benches.tau2.telecom import generate as telecom


def main() -> None:
    for module in (retail, airline, telecom):
        module.main()


if __name__ == "__main__":
    main()
