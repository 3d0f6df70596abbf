"""Cutting a generated row at its first stop id: the rule every generation backend follows
(training.generation's backends, and training.vllm_backend on the rows vLLM returns).

A leaf module, so that training.generation (which builds the vLLM backend) and
training.vllm_backend (which needs this rule) both import it at the top instead of each other
inside a function.
"""
from __future__ import annotations

from typing import Sequence


def trim(tokens: Sequence[int], stop_ids: Sequence[int]) -> list[int]:
    """Tokens up to and including the first stop id."""
    out: list[int] = []
    stops = set(stop_ids)
    for t in tokens:
        out.append(int(t))
        if t in stops:
            break
    return out
