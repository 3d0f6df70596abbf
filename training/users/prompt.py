"""What every LLM user backend shares: the prompt it gets, the reply of a failed call, and the
error of a setting that cannot work.

The prompt (`user_messages`) keeps hidden facts hidden unless asked (paper section 4.2): the system
message is the environment's own instructions when it gives them (`state.extra["system_prompt"]`,
tau2) or else the persona text from the workspace, the gym's role (`state.extra["user_role"]`),
the request and the hidden facts with the rule to disclose one only when the assistant asks for it
(less the kinds `user.<gym>.withhold_kinds` withholds, as the symbolic user never tells them).
The conversation follows with roles swapped: the agent speaks as "user", the simulated user answers
as "assistant".

A leaf module: training.users.llm (the local backend and the router that builds every backend)
and training.users.http (the HTTP backend) both import it at the top, instead of each other.
"""
from __future__ import annotations

from training.benches.base import UserReply, UserState

DISCLOSURE_RULE = ("Hidden information you hold. Share a piece only when the assistant asks about it, "
                   "one piece at a time; never volunteer the rest, never reveal this list:")
REPLY_STYLE = "Reply as the user, in one or two short sentences."
# user.<gym>.repetition_penalty acts on the reply's own tokens (training/kvengine.py); vLLM's and
# the OpenAI-compatible servers' repetition_penalty acts on the whole conversation, the prompt's
# hidden facts included, which kept the 135M user from telling any of them
NO_REPLY_PENALTY = ("{who} has no repetition penalty on the reply alone (user.<gym>."
                    "repetition_penalty is {value}): set it back to 1.0, or answer the gym with the "
                    "local LLM user (user.<gym>.llm default, rollout.backend kv).")


class LLMUserConfigError(ValueError):
    """An LLM-user setting that cannot work (the message names the entry and what to fix)."""


def system_prompt(state: UserState) -> str:
    if state.extra.get("system_prompt"):
        text = state.extra["system_prompt"]
        return f"{text}\n\n{state.persona}".strip() if state.persona else text
    parts = [state.persona.strip()] if state.persona.strip() else []
    parts.append(state.extra.get("user_role", "You are the user talking to an assistant."))
    parts.append(f"Your request: {state.task.prompt}")
    # user.<gym>.withhold_kinds binds this user as it binds the symbolic one: a withheld fact is
    # not in its prompt, so it cannot be told. Listed, the 135M reference user disclosed it unasked
    # in about half its replies (user/leak_rate 0.53, 2026-12-08 H100 run with the LLM user alone),
    # and the meta-agent's leak remedy, which withholds a kind, changed nothing for it.
    withheld = set(state.knobs.get("withhold_kinds") or ())
    facts = [f for f in state.task.facts if f.kind not in withheld]
    if facts:
        parts.append(DISCLOSURE_RULE + "\n" + "\n".join(f"- {f.text}" for f in facts))
    parts.append(REPLY_STYLE)
    return "\n\n".join(parts)


def user_messages(state: UserState) -> list[dict[str, str]]:
    """Chat messages for the LLM user: system prompt, then the dialogue with roles swapped."""
    messages = [{"role": "system", "content": system_prompt(state)}]
    for m in state.history:
        messages.append({"role": "user" if m["role"] == "agent" else "assistant", "content": m["content"]})
    if not state.history or state.history[-1]["role"] != "agent":
        messages.append({"role": "user", "content": state.agent_message})
    return messages


def failed(error: str) -> UserReply:
    return UserReply(text="", arm="llm", failed=True, error=error)
