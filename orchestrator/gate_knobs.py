"""Knob writes that would change nothing: the write gate refuses them in one sentence each.

Kept apart from `orchestrator.gate_checks` (which owns the schema, range, delta and harder-direction
checks) because these ask a different question: not "is the value allowed?" but "would anything
read it?". A write that changes nothing still gets a measured effect in the ledger, and that
effect is noise the meta-agent would learn from (paper appendix A.2: three attributions were
later retracted).

- `user.<gym>.strategy_mix` and `user.<gym>.temperature` act only on the LLM user: the mixture
  picks the symbolic arm for every episode of a run that has no LLM user (training/users/
  mixture.py, `episode_user`), and the temperature is the LLM user's. A run has one when its
  config sets rollout.user_llm, rollout.user_llms, or was started with --user-mode llm|hybrid.
"""
from __future__ import annotations

from typing import Any

from orchestrator.gate_context import ALL_GYMS, GateContext

KNOBS = "knobs.json"
# knobs that only the LLM user reads (the mixture's share and its sampling temperature)
LLM_ONLY = ("strategy_mix", "temperature")
HOW_TO_GIVE_AN_LLM_USER = ("a new run gets one with --set rollout.user_llm=reference, --set "
                           "'rollout.user_llms={...}' or --user-mode llm|hybrid")


def llm_only_reasons(changes: list[dict], ctx: GateContext) -> list[str]:
    """A changed `user.<gym>.strategy_mix` or `.temperature` while the current run has no LLM
    user: every episode is the symbolic user's, so the write changes nothing. Before a run the
    config is unknown and nothing is refused."""
    names, run = ctx.user_llm_names()
    if names is None or names:
        return []
    reasons = []
    for ch in changes:
        parts = ch["path"].split(".")
        if len(parts) == 3 and parts[0] == "user" and parts[2] in LLM_ONLY and ch["old"] is not None:
            what = "mix in" if parts[2] == "strategy_mix" else "sample"
            reasons.append(f"{KNOBS}: {ch['path']} {ch['old']} -> {ch['new']} changes nothing: "
                           f"{run} has no LLM user to {what} (rollout.user_llm none, no "
                           f"rollout.user_llms), so the symbolic user answers every episode; "
                           f"{HOW_TO_GIVE_AN_LLM_USER}.")
    return reasons

