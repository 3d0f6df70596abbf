"""tau2-bench's scoring of an episode (its `evaluate_simulation`, "all" mode without NL assertions).

- An episode that stopped prematurely (out of turns, too many tool errors) scores 0.
- Otherwise the reward is the product of the task's `reward_basis` parts:
  DB: the agent's database (and, in telecom, the user's device) after replaying the episode's tool
      calls on a fresh world equals, by hash, the state after replaying the gold `actions` on
      another fresh world (tau2 `EnvironmentEvaluator`);
  ENV_ASSERTION: each environment assertion (a function of either side returning a bool) holds
      on the episode's final world;
  COMMUNICATE: every `communicate_info` string occurs in some agent message, compared in lower
      case with commas removed from the message (tau2 `CommunicateEvaluator`);
  ACTION: every gold action is matched by some tool call of the episode (same name, and the same
      values for `compare_args`, all arguments when None) (tau2 `ActionEvaluator`).

The gold world's hash is cached per task, so that scoring many episodes of one task replays the
gold actions once.
"""
from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from typing import Any

from training.benches.tau2.domain import World


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    requestor: str = "assistant"          # "assistant" | "user"


@dataclass
class Score:
    reward: float
    breakdown: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def success(self) -> bool:
        return self.reward >= 1.0


def replay(task_data: dict, calls: list[ToolCall]) -> World:
    """A fresh world for the task with `calls` applied in order (failed calls change nothing)."""
    world = World.for_task(task_data)
    for call in calls:
        world.call(call.name, call.arguments, call.requestor)
    return world


def gold_calls(task_data: dict) -> list[ToolCall]:
    return [ToolCall(a["name"], a["arguments"], a.get("requestor", "assistant"))
            for a in task_data["actions"]]


@functools.lru_cache(maxsize=512)
def _gold_hashes(key: str) -> tuple[str, str | None]:
    task_data = json.loads(key)
    return replay(task_data, gold_calls(task_data)).hashes()


def gold_hashes(task_data: dict) -> tuple[str, str | None]:
    """Hashes of the world after the gold actions (cached by the task's content)."""
    relevant = {k: task_data.get(k) for k in ("domain", "db", "user_db", "initial_state", "actions")}
    return _gold_hashes(json.dumps(relevant, sort_keys=True, default=str))


def communicated(info: str, agent_messages: list[str]) -> bool:
    needle = info.lower()
    return any(needle in m.lower().replace(",", "") for m in agent_messages)


def action_matched(action: dict, calls: list[ToolCall]) -> bool:
    for call in calls:
        if call.name != action["name"]:
            continue
        keys = action.get("compare_args")
        keys = list(call.arguments) if keys is None else keys
        if ({k: v for k, v in call.arguments.items() if k in keys}
                == {k: v for k, v in action["arguments"].items() if k in keys}):
            return True
    return False


def score_episode(task_data: dict, calls: list[ToolCall], agent_messages: list[str], *,
                  premature: bool = False, world: World | None = None) -> Score:
    """Score one episode: `calls` are all tool calls made (agent and user) in order,
    `agent_messages` the agent's texts to the user, `world` the episode's final world (replayed
    from `calls` when not given)."""
    if premature:
        return Score(0.0, {}, "stopped prematurely (out of turns or too many errors)")
    basis = set(task_data["reward_basis"])
    breakdown: dict[str, float] = {}
    if basis & {"DB", "ENV_ASSERTION"}:
        final = world if world is not None else replay(task_data, calls)
        if "DB" in basis:
            breakdown["DB"] = float(final.hashes() == gold_hashes(task_data))
        if "ENV_ASSERTION" in basis:
            breakdown["ENV_ASSERTION"] = float(all(final.check_assertion(a)
                                                   for a in task_data["env_assertions"]))
    if "COMMUNICATE" in basis:
        breakdown["COMMUNICATE"] = float(all(communicated(i, agent_messages)
                                             for i in task_data["communicate_info"]))
    if "ACTION" in basis:
        breakdown["ACTION"] = float(all(action_matched(a, calls) for a in task_data["actions"]))
    reward = 1.0
    for part in breakdown.values():
        reward *= part
    return Score(reward, breakdown)
