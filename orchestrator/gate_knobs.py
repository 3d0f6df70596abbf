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
- A knob that is new in knobs.json (the agent added it to the schema too, which no widening check
  sees) must be one that some part of the trainer reads: training/knob_readers.py declares them.
"""
from __future__ import annotations

from typing import Any

from orchestrator.gate_context import ALL_GYMS, GateContext

KNOBS = "knobs.json"
# knobs that only the LLM user reads (the mixture's share, its sampling temperature and its
# repetition penalty)
LLM_ONLY = ("strategy_mix", "temperature", "repetition_penalty")
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


def reply_penalty_reasons(changes: list[dict], knobs: Any, ctx: GateContext) -> list[str]:
    """A `user.<gym>.repetition_penalty` other than 1.0 where the run answers the gym's LLM user
    through vLLM or a server: theirs penalises the whole conversation, the hidden facts of the
    user's prompt included (the 135M user then told none: benchmarks/RESULTS-learning.md, twelfth
    session), and
    ours acts on the reply alone, in the local user (training/kvengine.py)."""
    reasons = []
    for ch in changes:
        parts = ch["path"].split(".")
        if len(parts) != 3 or parts[0] != "user" or parts[2] != "repetition_penalty" or \
                ch["new"] in (None, 1, 1.0):
            continue
        name = ((knobs or {}).get("user", {}).get(parts[1]) or {}).get("llm", "default")
        kind = ctx.llm_user_kind(str(name))
        if kind in ("vllm", "http"):
            where = "the vLLM engine" if kind == "vllm" else "an OpenAI-compatible server"
            reasons.append(f"{KNOBS}: {ch['path']} {ch['old']} -> {ch['new']} cannot act: the "
                           f"run answers {parts[1]}'s LLM user ({name!r}) through {where}, whose "
                           f"repetition penalty would also fall on the hidden facts of its prompt; "
                           f"the penalty on the reply alone is the local user's (user.<gym>.llm "
                           f"default with rollout.backend kv, or a local model).")
    return reasons


def unread_knob_reasons(changes: list[dict], old_knobs: Any) -> list[str]:
    """A knob new in knobs.json that no reader declares (training/knob_readers.py). Only writes
    are judged: a seed (no earlier knobs.json) is the person's starting point."""
    if not isinstance(old_knobs, dict):
        return []
    from training.knob_readers import is_read          # plain Python: no torch

    reasons = []
    for ch in changes:
        if ch["old"] is None and ch["new"] is not None and not is_read(ch["path"], ALL_GYMS):
            reasons.append(f"{KNOBS}: {ch['path']} is a new knob that no part of the trainer reads "
                           f"(training/knob_readers.py declares none by that name), so it would "
                           f"change nothing; remove it, or have the project's code read it first.")
    return reasons
