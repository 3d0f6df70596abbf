#!/usr/bin/env python3
"""Summarize a run: trends of the main metrics, findings, recent events, sample episodes (JSON).

Usage: summarize.py RUN_DIR [--window W] [--samples N]
A thin CLI over orchestrator.diagnostics.summarize (the built-in agent runs the same code)."""
import argparse
import json

import _common  # noqa: F401

from orchestrator import diagnostics

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("run_dir")
p.add_argument("--window", type=int, default=10)
p.add_argument("--samples", type=int, default=2)
a = p.parse_args()
print(json.dumps(diagnostics.summarize(a.run_dir, a.window, a.samples), indent=1))
