#!/usr/bin/env python3
"""List every knob of a workspace: current value, range, largest change per write, harder direction.

Usage: knobs.py WORKSPACE [--gym G ...] [--json]"""
import argparse
import json

import _common  # noqa: F401

from orchestrator import diagnostics

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("workspace")
p.add_argument("--gym", action="append", default=None)
p.add_argument("--json", action="store_true")
a = p.parse_args()
rows = diagnostics.knob_table(a.workspace, a.gym)
if a.json:
    print(json.dumps(rows, indent=1))
else:
    print(f"{'knob':45} {'value':>12} {'range':>16} {'delta':>7} harder")
    for r in rows:
        rng = f"[{r.get('minimum', '')}, {r.get('maximum', '')}]" if "minimum" in r or "maximum" in r else ""
        print(f"{r['knob']:45} {json.dumps(r['value']):>12} {rng:>16} {str(r.get('x-max-delta', '')):>7} "
              f"{r.get('x-harder', '')}")
