"""Fault suite: faults tried on purpose. The helpers of the trainer and gate tests
(toy_env, gate_testkit) live beside those tests; put their folders on the import path."""
from __future__ import annotations

import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parents[1]
for sub in ("faults", "training", "orchestrator"):
    if str(TESTS / sub) not in sys.path:
        sys.path.insert(0, str(TESTS / sub))
