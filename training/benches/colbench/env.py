"""The ColBench episode: the agent talks with a collaborator who privately holds the reference
function, then submits code with `I WANT TO ANSWER:`; hidden tests score it (scorer.py).

Turn loop (paper appendix B), at most `env.colbench.max_steps` agent turns:
- A message without the answer marker goes to the collaborator, whose reply (symbolic rules or
  LLM) is the next observation, cut at `env.colbench.human_response_char_limit` characters; an
  LLM reply is also cut to its first two sentences.
- `I WANT TO ANSWER:` + code ends the episode with reward = Pass (fraction of counted hidden tests
  passed), info success = Success (all passed). Text before the marker is that turn's message.
- `env.colbench.min_questions`: an answer is accepted only after that many turns that asked the
  collaborator a question. The count includes the answering turn itself when its message asks a
  question. The paper's counter left such turns out, so an agent that always asked and answered
  at once was refused forever: 41% of episodes deadlocked (appendix A.2, table 7). A refused
  answer gets a note saying how many more questions are needed; its question, if any, is answered.
  The counter (`counts_as_question`) and the answer parser (`split_action`) can be replaced by the
  workspace's environment patch, `env_patches/colbench.py` (training/env_patches.py).
- Running out of turns without an accepted answer sets `truncated`, reward 0.
"""
from __future__ import annotations

import re
from typing import Any

from training import env_patches
from training.benches.base import Task, TextEnv, UserReply, UserState
from training.benches.colbench.scorer import Score, score_answer
from training.users import leak
from training.users.symbolic import is_question

GYM = "colbench"
MARKER = re.compile(r"I\s+WANT\s+TO\s+ANSWER\s*:", re.I)
_THINK = re.compile(r"<think>.*?</think>", re.S | re.I)
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+")
_CODE = re.compile(r"```(?:python|py)\b|^\s*def \w+\s*\(", re.M | re.I)


def split_action(text: str) -> tuple[str, str | None]:
    """(message, code or None): the text before `I WANT TO ANSWER:` and the code after it."""
    text = _THINK.sub("", text)
    m = MARKER.search(text)
    if m is None:
        return text.strip(), None
    return text[:m.start()].strip(), text[m.end():].strip()


def check_action(text: str) -> str | None:
    """Why `text` is not a ColBench turn (None: it is): a message to the collaborator, or
    `I WANT TO ANSWER:` and code that parses and defines a function. The hidden tests would score
    any other answer 0 without the policy ever learning why; the demonstrations' gate check and
    the rollout's `invalid_action` both use this."""
    import ast

    from training.benches.colbench.scorer import extract_code

    message, code = split_action(text)
    if code is None:
        if not message:
            return "it is empty: ask a question, or write I WANT TO ANSWER: and the code"
        # code without the marker goes to the collaborator as a message and is never scored:
        # the untrained SmolLM2 did this on most first turns (16 held-out tasks, no example)
        if _CODE.search(message):
            return "it holds code but not I WANT TO ANSWER:, so it is a message, never submitted"
        return None
    try:
        tree = ast.parse(extract_code(code))
    except SyntaxError as exc:
        return f"the code after I WANT TO ANSWER: does not parse ({exc.msg}, line {exc.lineno})"
    if not any(isinstance(n, ast.FunctionDef) for n in tree.body):
        return "the code after I WANT TO ANSWER: defines no function"
    return None


def first_sentences(text: str, n: int = 2) -> str:
    parts = _SENTENCE_END.split(text.strip())
    return " ".join(parts[:n])


def collaborator_prompt(task: Task, withheld: list[str]) -> str:
    """The LLM collaborator's system prompt (given whole to training.users.llm through
    `extra["system_prompt"]`): it holds the reference (paper appendix B), the details that may be
    shared, and those of a withheld kind, which must not be."""
    hide = [f.text for f in task.facts if f.kind in withheld]
    share = [f.text for f in task.facts if f.kind not in withheld]
    lines = ["You are a human who asked an assistant to write a Python function. You privately hold "
             "the reference implementation below; the assistant cannot see it. Answer the "
             "assistant's question only from the reference, in at most two sentences, in plain "
             "words. Never show the code or recite it line by line. If the reference does not "
             "settle the question, say you do not know.",
             f"What the assistant was told: {task.prompt}",
             "Reference implementation:\n```python\n" + task.data["ground_truth"].rstrip() + "\n```"]
    if share:
        lines.append("Details you may share when the assistant asks about them:\n"
                     + "\n".join(f"- {t}" for t in share))
    if hide:
        lines.append("Do not reveal these details even when asked: " + " ".join(hide))
    return "\n\n".join(lines)


class ColBenchEnv(TextEnv):
    gym = GYM

    def __init__(self, task: Task, knobs: dict[str, Any], user: Any, *, seed: int = 0,
                 user_arm: str | None = None):
        super().__init__(task, knobs, user, seed=seed)
        self.user_arm = user_arm if user is not None else None

    @property
    def env_knobs(self) -> dict[str, Any]:
        return self.knobs["env"][GYM]

    @property
    def user_knobs(self) -> dict[str, Any]:
        return self.knobs.get("user", {}).get(GYM, {})

    def _reset(self, options: dict) -> tuple[str, dict]:
        self.history: list[dict[str, str]] = []
        self.revealed: dict[str, int] = {}
        self.questions = 0
        self.final: Score | None = None
        self._pending: tuple[dict, str, str | None] | None = None
        return self.task.prompt, {"gym": GYM, "task_id": self.task.id, "turn": 0,
                                  "user_arm": self.user_arm}

    def prepare(self, action: str) -> UserState | None:
        if self.done:
            raise RuntimeError("the episode is over: call reset() before step().")
        if self._pending is not None:
            raise RuntimeError("prepare() called twice: call complete(reply) first.")
        self.turn += 1
        message, code = self.hooked("parse_answer", split_action(action), action)
        asked = self.counts_as_question(message, code)
        # the workspace's environment patch may replace the counter (training/env_patches.py)
        asked = self.hooked("count_question", asked, env_patches.turn_input(
            self.turn, action, message, code, asked, self.questions, self.env_knobs))
        self.questions += int(asked)      # before the answer gate: no deadlock (module docstring)
        need = int(self.env_knobs.get("min_questions", 0))
        accepted = code is not None and self.questions >= need
        info = {"gym": GYM, "task_id": self.task.id, "turn": self.turn, "user_arm": None,
                "asked_question": asked, "answered": accepted,
                "invalid_action": check_action(action) is not None,
                "answer_refused": code is not None
                and not accepted, "questions": self.questions, "revealed_facts": [],
                "asked_facts": [], "leaked_facts": [], "rule_id": None, "tool_calls": []}
        self.history.append({"role": "agent", "content": action})
        self._pending = (info, message, code if accepted else None)
        if accepted or not message or self.user is None:
            return None
        withheld = list(self.user_knobs.get("withhold_kinds", []) or [])
        return UserState(gym=GYM, task=self.task, turn=self.turn, agent_message=message,
                         history=list(self.history), revealed=dict(self.revealed),
                         questions_asked=self.questions, knobs=dict(self.user_knobs),
                         extra={"act": "message", "max_sentences": 2,
                                "system_prompt": collaborator_prompt(self.task, withheld)})

    def counts_as_question(self, message: str, code: str | None) -> bool:
        """The built-in counter: this turn counts towards `min_questions` when its message asks
        the collaborator something, with or without an answer after it."""
        return is_question(message) if message else False

    def complete(self, reply: UserReply | None):
        if self._pending is None:
            raise RuntimeError("complete() called without prepare().")
        info, message, code = self._pending
        self._pending = None
        reward, terminated, obs = 0.0, False, ""
        if code is not None:
            self.final = score_answer(self.task, code)
            reward, terminated = self.final.pass_rate, True
            obs = f"Your code passed {self.final.passed} of {self.final.counted} hidden tests."
            info["tests"] = self.final.to_json()
        else:
            if reply is not None:
                obs = self._take_reply(reply, message, info)
                terminated = bool(reply.failed)       # a broken user backend ends the episode
            if info["answer_refused"] and not terminated:
                left = int(self.env_knobs.get("min_questions", 0)) - self.questions
                obs = (obs + "\n" if obs else "") + (f"(Before answering, ask the collaborator "
                                                     f"{left} more question(s).)")
        truncated = not terminated and self.turn >= self.max_steps
        self.done = terminated or truncated
        if self.done:
            info["success"] = bool(self.final and self.final.success)
            info["score"] = float(self.final.pass_rate) if self.final else 0.0
            info["user_failed"] = bool(info.get("user_error"))
        return obs, reward, terminated, truncated, info

    def _take_reply(self, reply: UserReply, message: str, info: dict) -> str:
        info["user_arm"] = reply.arm
        if reply.failed:
            info["user_error"] = reply.error
            return f"(The collaborator could not reply: {reply.error})"
        text = first_sentences(reply.text, 2) if reply.arm == "llm" else reply.text
        text = text[:int(self.env_knobs.get("human_response_char_limit", 400))]
        revealed = list(reply.revealed_facts)
        if reply.arm == "llm" and not revealed:       # free text: detect what it disclosed
            revealed = leak.detect_revealed(text, self.task.facts, known=self.task.prompt)
        for fid in revealed:
            self.revealed[fid] = self.revealed.get(fid, 0) + 1
        threshold = float(self.user_knobs.get("match_threshold", 0.5))
        info["revealed_facts"] = revealed
        info["leaked_facts"] = leak.leaked(message, revealed, self.task.facts, threshold)
        info["asked_facts"] = leak.asked(message, self.task.facts, threshold)
        info["rule_id"] = reply.rule_id
        self.history.append({"role": "user", "content": text})
        return text
