#!/usr/bin/env python3
"""Print the measured effects of applied interventions from an experiment's ledger (JSON lines).

Usage: effects.py EXP_DIR"""
import argparse
import json

import _common  # noqa: F401

from orchestrator import effects

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("exp_dir")
a = p.parse_args()
for e in effects.ledger_read(a.exp_dir, "effect"):
    print(json.dumps({k: e.get(k) for k in ("commit", "run", "step", "metric", "before", "after",
                                            "delta", "noise_floor", "label")}))
