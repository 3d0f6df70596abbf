"""Shared fixtures: a tiny random model with the real SmolLM2 tokenizer, and the real bench data."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHDATA = ROOT.parent / "shared" / "benchdata"


@pytest.fixture(scope="session")
def tiny_model_dir() -> Path:
    """A 2-layer, 64-wide Llama with SmolLM2's real tokenizer (cached under ~/.cache/eau)."""
    from training.smollm2 import tiny_model_dir as build

    return build()


@pytest.fixture(scope="session")
def benchdata() -> Path:
    """The real UserRL / tau2-bench files beside the project; tests skip where they are absent."""
    if not BENCHDATA.is_dir():
        pytest.skip(f"real bench data not found at {BENCHDATA}: loader tests on real files skipped")
    return BENCHDATA
