"""A small bench for the evaluation tests (`tests.training.fake_eval_bench:BENCH`).

Its tasks are "travel" tasks so that the project's pristine workspace knobs apply (env.travel,
user.travel); its `eval_protocol` fixes 3 turns, where the pristine workspace says 16, so a test can
tell which settings an evaluation used. The score depends on what the policy wrote (distinct
characters), so a different checkpoint or seed gives different numbers; the user's reply quotes
the user knobs it was given (facts_per_reply) so a poisoned workspace would show in transcripts.
"""
from __future__ import annotations

from types import SimpleNamespace

from training.benches.base import Fact, Task, TextEnv, UserReply, UserState


class EchoUser:
    def respond(self, state: UserState) -> UserReply:
        n = state.knobs.get("facts_per_reply")
        return UserReply(f"I can tell you {n} thing(s): {state.task.facts[0].text}",
                         (state.task.facts[0].id,), "echo", "symbolic")


class FakeTravelEnv(TextEnv):
    gym = "travel"

    def _reset(self, options):
        self.written = ""
        return self.task.prompt, {"gym": "travel", "task_id": self.task.id, "turn": 0,
                                  "user_arm": "symbolic"}

    def prepare(self, action: str):
        self.turn += 1
        self.written += action
        self.answered = "[answer]" in action
        if self.answered:
            return None
        return UserState("travel", self.task, self.turn, action, [], {},
                         knobs=self.knobs["user"]["travel"])

    def complete(self, reply: UserReply | None):
        info = {"gym": "travel", "task_id": self.task.id, "turn": self.turn,
                "user_arm": "symbolic", "asked_question": "?" in self.written,
                "answered": self.answered, "revealed_facts": [], "leaked_facts": [],
                "rule_id": reply.rule_id if reply else None, "tool_calls": []}
        truncated = self.turn >= self.max_steps and not self.answered
        if self.answered or truncated:
            score = min(1.0, len(set(self.written)) / 40)
            info.update(success=score > 0.5, score=score)
            self.done = True
        return (reply.text if reply else "ok"), 0.0, self.answered, truncated, info


def load_tasks(split: str, gyms=None, data_dir=None) -> list[Task]:
    return [Task(id=f"{split}-{i}", gym="travel", split=split,
                 prompt=f"Plan a trip for me, number {i}.",
                 facts=(Fact(id="f0", kind="preference", text=f"I like city {i}."),))
            for i in range(6)]


def make_env(task: Task, snapshot, *, seed: int, llm=None) -> TextEnv:
    return FakeTravelEnv(task, snapshot.knobs, EchoUser(), seed=seed)


BENCH = SimpleNamespace(
    name="fake", gyms=("travel",), load_tasks=load_tasks, make_env=make_env,
    system_prompt=lambda task: "Ask with [action], answer with [answer].",
    eval_protocol={"split": "test", "max_steps": 3, "user": {"facts_per_reply": 1},
                   "temperature": 1.0, "response_length": 6, "max_episode_tokens": 1024})
