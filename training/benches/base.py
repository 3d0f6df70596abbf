"""Contracts shared by every bench: tasks, facts, the text environment and the user state.

Every environment follows Gymnasium's text contract (DESIGN.md, "Interfaces"):
`reset(seed=None, options=None) -> (obs, info)` and
`step(action: str) -> (obs, reward, terminated, truncated, info)`; running out of turns sets
`truncated`, never `terminated`.

So that the rollout can batch the LLM user across all episodes of a batch, `step` is also offered
in two halves: `prepare(action)` does the agent's side and returns the `UserState` that the user
must answer (or None when no user reply is needed: a tool call, a final answer), and
`complete(reply)` applies the user's reply and returns the same 5-tuple as `step`. `step` is
exactly `prepare` + `self.user.respond(state)` + `complete`.

Info keys every environment fills (the trainer's metrics and the meta-agent's diagnostics read
them; DESIGN.md metric names): `gym`, `task_id`, `turn`, `user_arm` ("symbolic" | "llm" | None),
`asked_question` (bool: the agent's turn put a question to the user), `answered` (bool: the agent
submitted an answer this turn), `revealed_facts` (fact ids disclosed this turn), `leaked_facts`
(fact ids disclosed that the agent did not ask for), `rule_id` (symbolic rule that fired),
`tool_calls` (list of {name, arguments, result, error}); at the end `success` (bool) and `score`.
"""
from __future__ import annotations

import abc
import dataclasses
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Fact:
    """One piece of hidden information a user holds and may disclose when asked."""

    id: str
    kind: str                 # e.g. "preference", "return", "argument", "edge_case", "shape"
    text: str                 # what the user says when disclosing it
    keywords: tuple[str, ...] = ()   # words a question must touch to match this fact
    importance: int = 1       # Intention's 3/2/1 weighting; 1 elsewhere


@dataclass(frozen=True)
class Task:
    """One task of a bench, as loaded from its JSONL (ours) or from the original files."""

    id: str
    gym: str                  # "travel", ..., "colbench", "retail", "airline", "telecom"
    split: str                # "train" | "test"
    prompt: str               # the (underspecified) first request the agent sees
    facts: tuple[Fact, ...] = ()
    data: dict[str, Any] = field(default_factory=dict)   # gym-specific payload (answers, tests, ...)
    # What the prompt already tells the agent about the user's subject (Telepathy's "I am thinking
    # of a fruit": Fact(kind="category", text="It is a fruit.")). The user confirms it when asked,
    # so it never contradicts the prompt, but it was never hidden: telling it is no disclosure
    # (never in revealed_facts, so no reward, no leak, no max_reveals spent; withhold_kinds leaves
    # it alone).
    stated: tuple[Fact, ...] = ()

    def fact_kinds(self) -> set[str]:
        """The kinds of the hidden facts (what withhold_kinds and a rule's `kinds` may name)."""
        return {f.kind for f in self.facts}


@dataclass
class UserState:
    """What a user simulator sees when it must reply (parsed state of the interaction)."""

    gym: str
    task: Task
    turn: int                          # agent turns taken so far, this one included
    agent_message: str                 # the agent's text this turn, without the [action] prefix
    history: list[dict[str, str]]      # chat so far: {"role": "agent"|"user", "content": ...}
    revealed: dict[str, int]           # fact id -> how many times disclosed so far
    questions_asked: int = 0           # agent turns so far that asked the user something
    knobs: dict[str, Any] = field(default_factory=dict)    # knobs["user"][gym]
    persona: str = ""                  # persona text from the workspace
    extra: dict[str, Any] = field(default_factory=dict)    # gym-specific parsed state


@dataclass(frozen=True)
class UserReply:
    text: str
    revealed_facts: tuple[str, ...] = ()
    rule_id: str | None = None
    arm: str = "symbolic"              # "symbolic" | "llm"
    failed: bool = False               # the backend failed (HTTP error...): the episode is marked failed
    error: str | None = None


class TextEnv(abc.ABC):
    """Base class of every environment; subclasses implement `_reset`, `prepare` and `complete`."""

    gym: str = ""
    # The rollout's own turn limit (rollout.max_turns), set by training.rollout: an episode it
    # would cut is ended by the environment itself at that turn, so the environment's closing
    # record (score, success: what it does at its own max_steps) is written for it too. Without
    # it a UserGym episode cut at the rollout's cap kept score 0 and success False whatever it
    # had achieved (a turtle answer covering 33% of the story logged score 0).
    turn_cap: int | None = None
    # The workspace's environment patches (training.env_patches.EnvPatches) of the live snapshot,
    # set by the bench's make_env; None runs the built-in code only (evaluation always does).
    patches: Any = None

    def __init__(self, task: Task, knobs: dict[str, Any], user: Any, *, seed: int = 0):
        self.task = task
        self.knobs = knobs                      # the whole knobs.json of the live snapshot
        self.user = user                        # has respond(UserState) -> UserReply
        self.seed = seed
        self.turn = 0
        self.done = False

    @property
    def max_steps(self) -> int:
        return self.capped(int(self.knobs["env"][self.task.gym]["max_steps"]))

    def hooked(self, hook: str, default: Any, arg: Any) -> Any:
        """What the workspace's patch of this gym answers for `hook` (training/env_patches.py),
        or `default`, the built-in code's answer, when there is no such patch or it fails."""
        if self.patches is None:
            return default
        return self.patches.call(self.task.gym, hook, arg, default)

    def closing_record(self) -> dict[str, Any]:
        """The `score` and `success` of an episode the rollout ended between turns (its token
        budget, rollout.max_episode_tokens), as the environment writes them when it ends one at
        its own limit. Default: nothing (score 0, success False), which is right for ColBench
        (only an answer scores, and an answer ends the episode) and tau2 (a premature end
        scores 0); UserGym's gyms keep what was achieved."""
        return {}

    def capped(self, steps: int) -> int:
        """`steps` (the env.<gym>.max_steps knob) within the rollout's turn cap, if one is set."""
        return steps if self.turn_cap is None else min(steps, int(self.turn_cap))

    def reset(self, seed: int | None = None, options: dict | None = None) -> tuple[str, dict]:
        if seed is not None:
            self.seed = seed
        self.turn = 0
        self.done = False
        return self._reset(options or {})

    def step(self, action: str):
        state = self.prepare(action)
        reply = self.user.respond(state) if state is not None else None
        return self.complete(reply)

    @abc.abstractmethod
    def _reset(self, options: dict) -> tuple[str, dict]: ...

    @abc.abstractmethod
    def prepare(self, action: str) -> UserState | None: ...

    @abc.abstractmethod
    def complete(self, reply: UserReply | None): ...


def replace(obj, **changes):
    return dataclasses.replace(obj, **changes)
