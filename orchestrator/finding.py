"""One diagnosed problem with the numbers that show it: what every detector returns (the
modules orchestrator.diagnostics and orchestrator.turn_findings), what the built-in agent acts on
and what `skills/eau/scripts/diagnose.py` prints."""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any


# the gym a per-gym metric is about: took/tau/identify, success/tau, score/tau, reward/tau,
# invalid/tau (its refused share), repeat/tau, stale/tau (its user's replies telling again what
# it told while an asked fact waits)
METRIC_GYM = re.compile(r"\b(?:took|success|score|reward|invalid|repeat|stale)/([\w-]+)")


def metric_gym(metric: str | None) -> str | None:
    """The gym named by a per-gym metric, or None (reward/mean, episode/invalid_rate: every
    gym's). The caller checks the name against its run's gyms (reward/mean names no gym)."""
    m = METRIC_GYM.match(metric or "")
    return m.group(1) if m and m.group(1) != "mean" else None


@dataclass
class Finding:
    """One diagnosed problem, with the numbers that show it."""

    kind: str            # deadlock | leak | reply_growth | entropy_collapse | template_collapse |
                         # low_success | high_success | nan | harm | invalid_actions | format_learned |
                         # reward_hack | loop | missing_step | early_answer | restated_prompt |
                         # idle_module | no_effect | module_errors | stale_rollouts |
                         # rejected_calls | uninformative_user | stale_disclosure |
                         # copied_example | copied_question
    gym: str | None      # the gym it concerns, None for run-wide findings
    message: str         # one sentence a person can read
    evidence: dict[str, Any] = field(default_factory=dict)
    irreversible: bool = False   # NaN / collapse: a restart, not a knob, is the remedy (section 4.6)

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
