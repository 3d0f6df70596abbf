"""A small bench for the evaluation tests (`tests.training.fake_eval_bench:BENCH`).

Its tasks are "travel" tasks so that the project's pristine workspace knobs apply (env.travel,
user.travel); its `eval_protocol` fixes 3 turns, where the pristine workspace says 16, so a test can
tell which settings an evaluation used. The score depends on what the policy wrote (distinct
characters), so a different checkpoint or seed gives different numbers; the user's reply quotes
the user knobs it was given (facts_per_reply) so a poisoned workspace would show in transcripts.
With FAKE_EVAL_PEEK=PATH set, make_env reads PATH: a bench that peeks where it must not; with
FAKE_EVAL_SLEEP_S=S it sleeps S seconds first (an evaluation still running when it is stopped).
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path
from types import SimpleNamespace

from training.benches.base import Fact, Task, TextEnv, UserReply, UserState
from training.evaluate import stop_if_interrupted


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
    peek = os.environ.get("FAKE_EVAL_PEEK")     # a bench that (wrongly) reads a walled path
    if peek:
        Path(peek).read_text()
    # a long first step that checks for a stop as a real evaluation does at its turn boundaries,
    # where a signal whose exception was swallowed (raised in a finalizer) is acted on. Unchecked,
    # such a stop waits out orchestrator eval's 30 s grace: 33 s once in the suite, 3 s alone
    # (the likely cause; not reproduced in 24 tries at delays of 0-4 s)
    end = time.monotonic() + float(os.environ.get("FAKE_EVAL_SLEEP_S", "0"))
    while time.monotonic() < end:
        stop_if_interrupted()
        time.sleep(0.05)
    return FakeTravelEnv(task, snapshot.knobs, EchoUser(), seed=seed)


def make_checkpoint(exp: Path, model_dir: Path, *, step: int = 2, noise: float = 0.5) -> Path:
    """runs/NAME/run-001 with config.json naming the base model and one checkpoint whose policy
    weights are the base model's plus seeded noise (so it writes differently from the base)."""
    import torch
    from transformers import AutoModelForCausalLM

    run = exp / "run-001"
    ckpt = run / "checkpoints" / f"step-{step:06d}"
    ckpt.mkdir(parents=True)
    (run / "config.json").write_text(json.dumps({"model": {"path": str(model_dir),
                                                           "lora_rank": 0}}))
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    gen = torch.Generator().manual_seed(123)
    state = {k: v + noise * torch.randn(v.shape, generator=gen) if v.is_floating_point() else v
             for k, v in model.state_dict().items()}
    torch.save(state, ckpt / "policy.pt")
    (ckpt / "state.json").write_text(json.dumps({"step": step}))
    return ckpt


BENCH = SimpleNamespace(
    name="fake", gyms=("travel",), load_tasks=load_tasks, make_env=make_env,
    system_prompt=lambda task: "Ask with [action], answer with [answer].",
    eval_protocol={"split": "test", "max_steps": 3, "user": {"facts_per_reply": 1},
                   "temperature": 1.0, "response_length": 6, "max_episode_tokens": 1024})

# The same bench under UserGym's name, so the pristine workspace's worked examples for travel
# (demonstrations/usergym.json) are the ones shown before its tasks.
AS_USERGYM = SimpleNamespace(**{**vars(BENCH), "name": "usergym"})


class NeverSolvedEnv(FakeTravelEnv):
    """FakeTravelEnv whose tasks are never solved: every Reflexion attempt fails."""

    def complete(self, reply: UserReply | None):
        obs, reward, terminated, truncated, info = super().complete(reply)
        if "success" in info:
            info["success"] = False
        return obs, reward, terminated, truncated, info


def make_never_solved_env(task: Task, snapshot, *, seed: int, llm=None) -> TextEnv:
    return NeverSolvedEnv(task, snapshot.knobs, EchoUser(), seed=seed)


NEVER_SOLVED = SimpleNamespace(**{**vars(BENCH), "make_env": make_never_solved_env})


def two_gym_tasks(split: str, gyms=None, data_dir=None) -> list[Task]:
    """The travel tasks, and the same again under turtle's name: `eval --gyms` picks among them."""
    tasks = load_tasks(split) + [Task(id=t.id, gym="turtle", split=t.split, prompt=t.prompt,
                                      facts=t.facts) for t in load_tasks(split)]
    return [t for t in tasks if gyms is None or t.gym in gyms]


TWO_GYMS = SimpleNamespace(**{**vars(BENCH), "gyms": ("travel", "turtle"), "load_tasks": two_gym_tasks})
