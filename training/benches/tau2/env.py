"""The tau2 environment: the agent talks to a simulated user and calls the domain's tools.

Agent actions, one per turn (`step(action)`), parsed by `parse_action`:
  - a tool call: a JSON object {"name": TOOL, "arguments": {...}} either inside
    `<tool_call>...</tool_call>` (anywhere in the text; text outside the tags is not sent to
    anyone) or as the whole message (optionally in a ```json fence). `arguments` may also be a
    JSON string of the object. The observation is `TOOL RESULT (name): <content>` (the content is
    `Error: ...` when the call failed).
  - anything else: a message to the user; the observation is the user's reply.
  - a message containing `###STOP###` ends the episode (tau2's agent stop).
`<think>...</think>` blocks are dropped first (an unclosed one runs to the end of the message).
The user ends the episode with `###STOP###`, `###TRANSFER###` or `###OUT-OF-SCOPE###`. In telecom
the user acts on their own phone: a user reply may hold `<tool_call>` blocks for the user tools;
they run on the phone, and the agent sees the reply with each block replaced by
`[I ran NAME: RESULT]`.

Episode limits (tau2): env.<domain>.max_steps agent turns (default 50) -> truncated, score 0;
10 tool errors -> terminated, score 0 (tau2's max_errors). At the end the task is scored with
`scoring.score_episode` (DB hash, environment assertions, communicated info, actions), and
info["success"], info["score"], info["reward_breakdown"] are set; the final reward is the score.
"""
from __future__ import annotations

import json
import re
from typing import Any

from training.benches.base import Task, TextEnv, UserReply, UserState
from training.benches.tau2.domain import World
from training.benches.tau2.scoring import Score, ToolCall, score_episode
from training.benches.tau2.users import user_system_prompt
from training.users import leak

USER_STOP_TOKENS = ("###STOP###", "###TRANSFER###", "###OUT-OF-SCOPE###")
AGENT_STOP_TOKEN = "###STOP###"
MAX_ERRORS = 10
GREETING = "Hi! How can I help you today?"
_TAGGED = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.S)
_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.S)
_THINK = re.compile(r"<think>.*?(</think>|$)", re.S)


class ActionParseError(ValueError):
    pass


def _call_from_json(text: str) -> ToolCall:
    try:
        obj = json.loads(text)
    except ValueError as exc:
        raise ActionParseError(f"the tool call is not valid JSON ({exc.msg})") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        raise ActionParseError('a tool call must be {"name": "...", "arguments": {...}}')
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        try:
            args = json.loads(args) if args.strip() else {}
        except ValueError:
            raise ActionParseError("the tool call's arguments string is not valid JSON") from None
    return ToolCall(obj["name"], args if args is not None else {})


def parse_action(action: str) -> tuple[list[ToolCall], str]:
    """(tool calls, message text). Raises ActionParseError for a malformed tool call."""
    action = _THINK.sub("", action)            # a reasoning model's thoughts reach no one
    tagged = _TAGGED.findall(action)
    if tagged:
        return [_call_from_json(t) for t in tagged], _TAGGED.sub("", action).strip()
    text = action.strip()
    fenced = _FENCE.match(text)
    body = fenced.group(1) if fenced else text
    if body.startswith("{") and body.endswith("}") and '"name"' in body:
        return [_call_from_json(body)], ""
    return [], text


def check_action(text: str, tools: dict[str, set[str]] | None = None) -> str | None:
    """Why `text` is not a tau2 agent turn (None: it is): a malformed tool call, an empty turn,
    or (given the domain's tools: name -> argument names) a call to a tool the domain does not
    have or with an argument the tool does not take. The demonstrations' gate check and the
    rollout's `invalid_action` use it."""
    try:
        calls, message = parse_action(text)
    except ActionParseError as exc:
        return str(exc)
    if not calls and not message:
        return "it is empty: write a message, a <tool_call>, or ###STOP###"
    for call in calls if tools is not None else []:
        if call.name not in tools:
            return f"it calls {call.name!r}, which is not a tool of this domain"
        extra = sorted(set(call.arguments) - tools[call.name]) if isinstance(call.arguments, dict) else []
        if extra:
            return f"{call.name} takes no argument {extra[0]!r} (it takes {', '.join(sorted(tools[call.name]))})"
    return None


def has_stop(text: str, tokens: tuple[str, ...]) -> bool:
    return any(t in text for t in tokens)


class Tau2Env(TextEnv):
    """One tau2 episode over a Task of domain retail, airline or telecom."""

    def __init__(self, task: Task, knobs: dict[str, Any], user: Any, *, seed: int = 0,
                 arm: str | None = None, persona: str = ""):
        super().__init__(task, knobs, user, seed=seed)
        self.gym = task.gym
        self.arm = arm
        self.persona = persona

    @property
    def max_steps(self) -> int:
        return self.capped(int(self.knobs.get("env", {}).get(self.task.gym, {}).get("max_steps", 50)))

    # -- Gymnasium contract ----------------------------------------------------------------------
    def _reset(self, options: dict) -> tuple[str, dict]:
        self.world = World.for_task(self.task.data)
        self.calls: list[ToolCall] = []
        self.agent_messages: list[str] = []
        self.history: list[dict[str, str]] = [{"role": "agent", "content": GREETING}]
        self.revealed: dict[str, int] = {}
        self.questions = 0
        self.errors = 0
        self._pending: dict[str, Any] = {}
        self.score: Score | None = None
        reply = self.user.respond(self._user_state(GREETING))   # the user speaks first
        text = self._apply_user_reply(reply, info := self._info(), GREETING)
        self.history.append({"role": "user", "content": text})
        return text, info

    def prepare(self, action: str) -> UserState | None:
        if self.done:
            raise RuntimeError("step() called on a finished episode; call reset() first")
        self.turn += 1
        info = self._info()
        self._pending = {"info": info, "obs": "", "end": None, "message": ""}
        try:
            calls, text = parse_action(action)
        except ActionParseError as exc:
            self.errors += 1
            info["invalid_action"] = True
            self._pending["obs"] = f"TOOL RESULT: Error: {exc}."
            info["tool_calls"].append({"name": None, "arguments": None, "result": str(exc),
                                       "error": True})
            return None
        if calls:       # tool calls and their results are between the agent and the system
            self._pending["obs"] = self._run_agent_calls(calls, info)
            return None
        info["invalid_action"] = not text       # an empty turn says nothing to anyone
        self.history.append({"role": "agent", "content": text})
        self.agent_messages.append(text)
        self._pending["message"] = text
        if has_stop(text, (AGENT_STOP_TOKEN,)):
            info["answered"] = True
            self._pending["end"] = "agent_stop"
            return None
        asked = "?" in text
        info["asked_question"] = asked
        self.questions += int(asked)
        return self._user_state(text)

    def complete(self, reply: UserReply | None):
        info, obs = self._pending["info"], self._pending["obs"]
        end = self._pending["end"]
        if reply is not None:
            obs = self._apply_user_reply(reply, info, self._pending["message"])
            self.history.append({"role": "user", "content": obs})
            if reply.failed:
                end = "user_failed"        # the user backend broke: the episode fails (score 0)
            elif has_stop(reply.text, USER_STOP_TOKENS):
                end = "user_stop"
        if end is None and self.errors >= MAX_ERRORS:
            end = "too_many_errors"
        truncated = end is None and self.turn >= self.max_steps
        terminated = end is not None
        reward = 0.0
        if terminated or truncated:
            self.done = True
            premature = truncated or end in ("too_many_errors", "user_failed")
            self.score = score_episode(self.task.data, self.calls, self.agent_messages,
                                       premature=premature, world=self.world)
            reward = self.score.reward
            info.update(success=self.score.success, score=self.score.reward,
                        reward_breakdown=self.score.breakdown, end_reason=end or "max_steps")
        return obs, reward, terminated, truncated, info

    # -- helpers ---------------------------------------------------------------------------------
    def _info(self) -> dict[str, Any]:
        return {"gym": self.gym, "task_id": self.task.id, "turn": self.turn,
                "user_arm": self.arm, "asked_question": False, "answered": False,
                "invalid_action": False,
                "revealed_facts": [], "asked_facts": [], "leaked_facts": [], "rule_id": None,
                "tool_calls": []}

    def _run_agent_calls(self, calls: list[ToolCall], info: dict) -> str:
        parts = []
        for call in calls:
            result = self.world.call(call.name, call.arguments, "assistant")
            self.calls.append(call)
            self.errors += int(result.error)
            info["tool_calls"].append({"name": call.name, "arguments": call.arguments,
                                       "result": result.content, "error": result.error,
                                       "requestor": "assistant"})
            if not result.error and self.world.tools.has_tool(call.name) and \
                    self.world.tools.tool_kind(call.name) == "write":
                info["answered"] = True
            parts.append(f"TOOL RESULT ({call.name}): {result.content}")
        return "\n".join(parts)

    def _user_state(self, message: str) -> UserState:
        return UserState(gym=self.gym, task=self.task, turn=self.turn, agent_message=message,
                         history=list(self.history), revealed=dict(self.revealed),
                         questions_asked=self.questions,
                         knobs=self.knobs.get("user", {}).get(self.gym, {}),
                         persona=self.persona,
                         extra={"act": "message", "system_prompt": user_system_prompt(self.task),
                                "stop_tokens": USER_STOP_TOKENS})

    def _apply_user_reply(self, reply: UserReply, info: dict, agent_message: str) -> str:
        """Record the reply's disclosures and run its phone actions (telecom); return the text
        the agent reads."""
        info["user_arm"] = self.arm or reply.arm
        if reply.failed:
            info["user_failed"], info["user_error"] = True, reply.error
        info["rule_id"] = reply.rule_id
        info["user_replied"] = True
        revealed = list(reply.revealed_facts)
        if reply.arm == "llm" and not revealed:      # an LLM says what it says: detect disclosures
            revealed = leak.detect_revealed(reply.text, self.task.facts, known=self.task.prompt)
        info["revealed_facts"] = revealed
        if self.turn > 0:      # a leak: a known detail (not the request itself) given unasked
            threshold = float(self.knobs.get("user", {}).get(self.gym, {}).get("match_threshold", 0.5))
            hidden = [f for f in self.task.facts if f.kind != "request"]
            info["leaked_facts"] = [fid for fid in leak.leaked(agent_message, revealed, hidden, threshold)
                                    if fid in {f.id for f in hidden}]
            info["asked_facts"] = leak.asked(agent_message, hidden, threshold)
        for fid in revealed:
            self.revealed[fid] = self.revealed.get(fid, 0) + 1
        if self.world.user_tools is None:
            return _TAGGED.sub("", reply.text).strip()

        def run(match: re.Match) -> str:
            try:
                call = _call_from_json(match.group(1))
            except ActionParseError as exc:
                return f"[I could not do that: {exc}]"
            call = ToolCall(call.name, call.arguments, "user")
            result = self.world.call(call.name, call.arguments, "user")
            self.calls.append(call)
            info["tool_calls"].append({"name": call.name, "arguments": call.arguments,
                                       "result": result.content, "error": result.error,
                                       "requestor": "user"})
            return f"[I ran {call.name}: {result.content}]"

        return _TAGGED.sub(run, reply.text).strip()
