#!/usr/bin/env python3
"""Run the diagnostics on a run folder and print the findings, most urgent first (JSON).

Usage: diagnose.py RUN_DIR [--window W] [--exp EXP_DIR]
(--exp adds the measured effects not yet reverted: "harmed" and "no effect" changes to take back)
A thin CLI over orchestrator.diagnostics.diagnose (the built-in agent runs the same code)."""
import argparse
import json

import _common  # noqa: F401

from orchestrator import diagnostics, effects

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("run_dir")
p.add_argument("--window", type=int, default=10)
p.add_argument("--exp", default=None, help="experiment folder: include the effects in its ledger")
a = p.parse_args()
eff = effects.open_effects(a.exp) if a.exp else []
print(json.dumps([f.to_dict() for f in diagnostics.diagnose(a.run_dir, a.window, eff)], indent=1))
