"""What a task family produces for one ColBench task, before it is written in the original schema.

A family (families_*.py) draws a few parameters from a seeded `random.Random` and returns a
`Spec`: the underspecified description the agent sees, the reference function (the collaborator's
private artifact), the hidden test calls, and the hidden facts that the reference implies. The
facts are written from the same parameters that wrote the reference, so they cannot disagree
with it.
"""
from __future__ import annotations

from dataclasses import dataclass, field

# Fact kinds the shipped data uses (the symbolic user's kind filter names these; the paper's
# A.2 `reveal_return_shape` defect: every kind the data has must be filterable).
FACT_KINDS = ("argument", "return", "shape", "edge_case", "rule")


@dataclass
class Spec:
    family: str
    func: str                       # the function the agent must write
    description: str                # what the agent is told (details left out on purpose)
    source: str                     # reference implementation (Python source)
    tests: list[str]                # hidden call expressions, e.g. "shipping_cost(1200, 2)"
    facts: list[tuple[str, str, tuple[str, ...]]] = field(default_factory=list)
    # each fact: (kind, what the collaborator says, keywords a question must touch)

    def add(self, kind: str, text: str, *keywords: str) -> "Spec":
        assert kind in FACT_KINDS, kind
        self.facts.append((kind, text, tuple(keywords)))
        return self


def call(func: str, *args) -> str:
    """A call expression with literal arguments: call("f", [1, 2], "a") -> "f([1, 2], 'a')"."""
    return f"{func}({', '.join(repr(a) for a in args)})"
