"""What the seven UserGym gyms share: the one-tool action format, the turn loop, the info keys,
the task JSONL format, and the user's side of a turn (UserState in, UserReply out).

The agent acts through one tool whose text starts with `[action]` (speak to the user, or act on the
gym), `[search]` (query the gym's database) or `[answer]` (commit to an answer); a `<think>...</think>`
block before it is ignored (UserRL's prompt asks for one). Each gym subclasses `UserGymEnv` and
implements `setup` (fresh episode state), `intro` (first observation), `on_agent(act, content)`
(the gym's reaction, scored by the gym itself so the reward never depends on which user arm
answered), `score`/`success`, and optionally `on_user` (fold the user's reply into the observation).

UserGym's reward semantics (paper appendix B; UserRL): per-turn rewards are clipped to [0, 1] and
summed over the episode. Function adds EAU's predicate term (reward.predicate_weight) after that clip.

Task JSONL (`data/<gym>/{train,test}.jsonl`), one object per line, the same for every gym:
  {"id": str, "gym": str, "split": "train"|"test", "prompt": str,
   "facts": [{"id", "kind", "text", "keywords": [str], "importance": int}],
   "stated": [...facts as above...],      only where the prompt states one (Task.stated; telepathy)
   "data": {...gym-specific payload, documented in the gym's module...}}
"""
from __future__ import annotations

import abc

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable

from training import env_patches
from training.benches.base import Fact, Task, TextEnv, UserReply, UserState
from training.users import leak
from training.users.symbolic import is_question, match_facts

DATA_DIR = Path(__file__).resolve().parent / "data"
_ACTION = re.compile(r"^\s*\[(action|search|answer)\]\s*(.*)$", re.S | re.I)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
ENV_MATCH_THRESHOLD = 0.5   # the gyms' own scorers match questions to facts at a fixed threshold
# The tools each gym offers, in the order its system prompt names them (UserRL's gyms: Intention
# only asks, Persuade argues with [answer], Turtle and Telepathy have nothing to search).
ACTS = {"travel": ("search", "action", "answer"), "function": ("action", "search", "answer"),
        "persuade": ("answer", "action"), "tau": ("action", "search", "answer"),
        "turtle": ("action", "answer"), "intention": ("action",), "telepathy": ("action", "answer")}


def tools_text(gym: str) -> str:
    """"[search], [action] or [answer]": the gym's tools as its prompt and refusals name them."""
    names = [f"[{a}]" for a in ACTS[gym]]
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def parse_action(text: str) -> tuple[str, str]:
    """`[action] hi` -> ("action", "hi"); text without a tool prefix -> ("invalid", text)."""
    m = _ACTION.match(_THINK.sub("", text))
    if not m:
        return "invalid", text.strip()
    return m.group(1).lower(), m.group(2).strip()


def check_action(gym: str, text: str) -> str | None:
    """Why `text` is not an action this gym accepts (None: it is). What the gate asks of every
    assistant turn of a demonstration, and what `invalid_action` counts in a rollout."""
    act, content = parse_action(text)
    if act == "invalid":
        return f"it does not start with {tools_text(gym)}"
    if act not in ACTS[gym]:
        return f"[{act}] is not a tool of {gym} (its tools: {tools_text(gym)})"
    if not content:
        return f"[{act}] has nothing after it"
    return None


def clip01(x: float) -> float:
    return min(1.0, max(0.0, float(x)))


@dataclass
class Outcome:
    """What a gym does with one agent act, before any user reply."""

    obs: str = ""
    reward: float = 0.0                 # the gym's reward for this turn (clipped to [0, 1] later)
    terminated: bool = False
    to_user: bool = False               # the agent's message goes to the user, who replies
    tool_calls: list[dict] = field(default_factory=list)
    extra_reward: float = 0.0           # added after the [0, 1] clip (Function's predicate term)
    info: dict[str, Any] = field(default_factory=dict)


class UserGymEnv(TextEnv):
    """The turn loop shared by the UserGym gyms (see the module docstring)."""

    gym = ""
    user_role = "You are the user. Answer the assistant's questions about your request."

    def __init__(self, task: Task, knobs: dict[str, Any], user: Any, *, seed: int = 0,
                 user_arm: str | None = None, persona: str = ""):
        super().__init__(task, knobs, user, seed=seed)
        self.user_arm = user_arm if user is not None else None
        self.persona = persona

    @property
    def env_knobs(self) -> dict[str, Any]:
        return self.knobs["env"][self.gym]

    @property
    def user_knobs(self) -> dict[str, Any]:
        return self.knobs.get("user", {}).get(self.gym, {})

    # ------------------------------------------------------------ subclass hooks
    def setup(self) -> None: ...

    def intro(self) -> str:
        """The first observation, from the task alone (no episode state: BENCH.agent_prompt
        renders it without a reset)."""
        return self.task.prompt

    @abc.abstractmethod
    def on_agent(self, act: str, content: str) -> Outcome:
        """The gym's answer to one agent act (every gym defines it)."""

    def on_user(self, reply: UserReply, outcome: Outcome) -> str:
        return (outcome.obs + "\n" + reply.text).strip() if outcome.obs else reply.text

    def user_extra(self) -> dict[str, Any]:
        return {}

    def score(self) -> float:
        return 0.0

    def success(self) -> bool:
        return False

    # ------------------------------------------------------------ the loop
    def _reset(self, options: dict) -> tuple[str, dict]:
        self.history: list[dict[str, str]] = []
        self.revealed: dict[str, int] = {}
        self.questions = 0
        self.total_reward = 0.0
        self.user_failed = False
        self._pending: tuple[Outcome, dict, str, str] | None = None
        self.setup()
        obs = self.intro()
        return obs, {"gym": self.gym, "task_id": self.task.id, "turn": 0, "user_arm": self.user_arm}

    def prepare(self, action: str) -> UserState | None:
        if self.done:
            raise RuntimeError("the episode is over: call reset() before step().")
        if self._pending is not None:
            raise RuntimeError("prepare() called twice: call complete(reply) first.")
        self.turn += 1
        act, content = parse_action(action)
        asked = act == "action" and is_question(content)
        # the workspace's environment patch may replace the counter (training/env_patches.py)
        asked = self.hooked("count_question", asked, env_patches.turn_input(
            self.turn, action, content if act == "action" else "",
            content if act == "answer" else None, asked, self.questions, self.env_knobs))
        self.questions += int(asked)
        # refused for its format: no tool prefix, or a tool this gym does not have (the gym's own
        # on_agent answers the latter); `invalid_action` feeds episode/invalid_rate
        invalid = act == "invalid" or act not in ACTS.get(self.gym, (act,))
        if act == "invalid":
            outcome = Outcome(obs=f"Invalid action: start your message with {tools_text(self.gym)}.")
        else:
            outcome = self.on_agent(act, content)
        # user_arm: the episode's arm (drawn at make_env), on every step so the episode is tagged
        # even when no turn reached the user; user_replied says whether this turn got a reply
        info = {"gym": self.gym, "task_id": self.task.id, "turn": self.turn, "user_arm": self.user_arm,
                "user_replied": False,
                "asked_question": asked, "answered": act == "answer", "invalid_action": invalid,
                "revealed_facts": [], "asked_facts": [],
                "leaked_facts": [], "rule_id": None, "tool_calls": outcome.tool_calls, **outcome.info}
        # the user hears what was said to it: an [action]'s text without the tool prefix
        self.history.append({"role": "agent", "content": content if act == "action" else action})
        self._pending = (outcome, info, act, content)
        if not outcome.to_user or self.user is None:
            return None
        return UserState(gym=self.gym, task=self.task, turn=self.turn, agent_message=content,
                         history=list(self.history), revealed=dict(self.revealed),
                         questions_asked=self.questions, knobs=dict(self.user_knobs),
                         persona=self.persona,
                         extra={"act": act, "user_role": self.user_role, **self.user_extra()})

    def complete(self, reply: UserReply | None):
        if self._pending is None:
            raise RuntimeError("complete() called without prepare().")
        outcome, info, act, content = self._pending
        self._pending = None
        obs, terminated = outcome.obs, outcome.terminated
        if reply is not None:
            info["user_arm"], info["user_replied"] = reply.arm, True
            if reply.failed:      # a broken user backend: the episode ends, marked failed
                self.user_failed, terminated = True, True
                info["user_error"] = reply.error
                obs = f"The user could not reply ({reply.error})."
            else:
                self._record_reply(reply, content, info)
                obs = self.on_user(reply, outcome)
        reward = clip01(outcome.reward) + outcome.extra_reward
        self.total_reward += reward
        truncated = not terminated and self.turn >= self.max_steps
        self.done = terminated or truncated
        if self.done:
            info.update(self.closing_record())
        return obs, reward, terminated, truncated, info

    def closing_record(self) -> dict[str, Any]:
        return {"success": bool(self.success()) and not self.user_failed,
                "score": float(self.score()), "user_failed": self.user_failed}

    def _record_reply(self, reply: UserReply, content: str, info: dict) -> None:
        revealed = list(reply.revealed_facts)
        if reply.arm == "llm" and not revealed:      # an LLM says what it says: detect disclosures
            revealed = leak.detect_revealed(reply.text, self.task.facts, known=self.intro())
        threshold = float(self.user_knobs.get("match_threshold", ENV_MATCH_THRESHOLD))
        for fid in revealed:
            self.revealed[fid] = self.revealed.get(fid, 0) + 1
        info["revealed_facts"] = revealed
        asked = self.asked_for(content, threshold)
        info["leaked_facts"] = [fid for fid in revealed if fid not in asked]
        # what the reply answered: a reply that tells again a fact already told while an asked
        # one was never told is read against it (diagnostics.find_stale_disclosures)
        info["asked_facts"] = sorted(asked)
        info["rule_id"] = reply.rule_id
        self.history.append({"role": "user", "content": reply.text})

    def asked_for(self, message: str, threshold: float) -> set[str]:
        """Ids of the facts `message` asks for (a disclosure outside them is a leak)."""
        return set(leak.asked(message, self.task.facts, threshold))

    def matched(self, text: str, facts: Iterable[Fact] | None = None) -> list[Fact]:
        """Facts a message covers, by the gym's own fixed threshold (scoring, not the user)."""
        return [f for f, _ in match_facts(text, self.task.facts if facts is None else facts,
                                          ENV_MATCH_THRESHOLD)]


# ---------------------------------------------------------------- task files

def _fact_to_json(f: Fact) -> dict[str, Any]:
    return {"id": f.id, "kind": f.kind, "text": f.text, "keywords": list(f.keywords), "importance": f.importance}


def _fact_from_json(f: dict[str, Any]) -> Fact:
    return Fact(id=f["id"], kind=f["kind"], text=f["text"], keywords=tuple(f.get("keywords", ())),
                importance=int(f.get("importance", 1)))


def task_to_json(task: Task) -> dict[str, Any]:
    obj = {"id": task.id, "gym": task.gym, "split": task.split, "prompt": task.prompt,
           "facts": [_fact_to_json(f) for f in task.facts], "data": task.data}
    if task.stated:          # written only where there is one, so the other gyms' files stay as they were
        obj["stated"] = [_fact_to_json(f) for f in task.stated]
    return obj


def task_from_json(obj: dict[str, Any]) -> Task:
    return Task(id=obj["id"], gym=obj["gym"], split=obj["split"], prompt=obj["prompt"],
                facts=tuple(_fact_from_json(f) for f in obj.get("facts", [])), data=obj.get("data", {}),
                stated=tuple(_fact_from_json(f) for f in obj.get("stated", [])))


def write_jsonl(path: Path, tasks: Iterable[Task]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for task in tasks:
            fh.write(json.dumps(task_to_json(task), sort_keys=True) + "\n")


class TaskFileError(ValueError):
    """A task file that is missing or cannot be parsed (the message names the file and line)."""


def read_jsonl(path: Path) -> list[Task]:
    if not path.exists():
        raise TaskFileError(f"task file {path} not found: run `python -m training.benches.usergym.generate`.")
    tasks = []
    for n, line in enumerate(path.read_text().splitlines(), 1):
        if line.strip():
            try:
                tasks.append(task_from_json(json.loads(line)))
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                raise TaskFileError(f"{path}:{n}: not a task object ({exc}).") from None
    return tasks
