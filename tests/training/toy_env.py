"""A small real task for the trainer's tests: the user holds a hidden number; the agent must ask
for it (a question, "?") and then answer it (`[answer] N`). Reward 1 for the right number.

It follows training.benches.base.TextEnv with the two-phase prepare/complete API and exposes a
BENCH object like a real bench (`tests.training.toy_env:BENCH` in a config's `bench`). Its user
has two arms: "symbolic" answers plainly, "llm" answers in a wordier way; the arm is drawn per
episode from knobs user.toy.strategy_mix, seeded.
"""
from __future__ import annotations

import random
import re
from types import SimpleNamespace

from training.benches.base import Fact, Task, TextEnv, UserReply, UserState


class ToyUser:
    def __init__(self, arm: str):
        self.arm = arm
        self.batches = 0

    def respond(self, state: UserState) -> UserReply:
        return self.respond_batch([state])[0]

    def respond_batch(self, states: list[UserState]) -> list[UserReply]:
        self.batches += 1
        out = []
        for s in states:
            fact = s.task.facts[0]
            if "?" in s.agent_message:
                text = fact.text if self.arm == "symbolic" else f"Well, since you ask: {fact.text}"
                out.append(UserReply(text, (fact.id,), "ask-number", self.arm))
            else:
                out.append(UserReply("Please ask me a question.", (), None, self.arm))
        return out


class ToyEnv(TextEnv):
    gym = "toy"

    def _reset(self, options):
        mix = float(self.knobs["user"]["toy"]["strategy_mix"])
        self.arm = "llm" if random.Random(self.seed).random() < mix else "symbolic"
        self.user = ToyUser(self.arm)
        self.revealed: dict[str, int] = {}
        self.last: dict = {}
        return self.task.prompt, {"gym": "toy", "task_id": self.task.id, "turn": 0,
                                  "user_arm": self.arm}

    def prepare(self, action: str):
        self.turn += 1
        match = re.search(r"\[answer\]\s*(-?\d+)", action)
        self.last = {"action": action, "answer": match.group(1) if match else None}
        if match:
            return None
        return UserState("toy", self.task, self.turn, action, [], dict(self.revealed),
                         knobs=self.knobs["user"]["toy"])

    def complete(self, reply: UserReply | None):
        info = {"gym": "toy", "task_id": self.task.id, "turn": self.turn, "user_arm": self.arm,
                "asked_question": "?" in self.last["action"],
                "answered": self.last["answer"] is not None,
                "revealed_facts": list(reply.revealed_facts) if reply else [],
                "leaked_facts": [], "rule_id": reply.rule_id if reply else None, "tool_calls": []}
        for f in info["revealed_facts"]:
            self.revealed[f] = self.revealed.get(f, 0) + 1
        if self.last["answer"] is not None:
            ok = self.last["answer"] == str(self.task.data["number"])
            info.update(success=ok, score=float(ok))
            self.done = True
            return "Thanks.", float(ok), True, False, info
        truncated = self.turn >= self.max_steps
        if truncated:
            info.update(success=False, score=0.0)
            self.done = True
        return reply.text if reply else "", 0.0, False, truncated, info


def load_tasks(split: str, gyms=None, data_dir=None) -> list[Task]:
    rng = random.Random(7 if split == "train" else 8)
    tasks = []
    for i in range(6):
        n = rng.randint(10, 99)
        tasks.append(Task(id=f"toy-{split}-{i}", gym="toy", split=split,
                          prompt="I am thinking of a number. Find it and answer with [answer] N.",
                          facts=(Fact(f"n{i}", "number", f"The number is {n}.", ("number",)),),
                          data={"number": n}))
    return tasks


def make_env(task: Task, snapshot, *, seed: int, llm=None) -> ToyEnv:
    return ToyEnv(task, snapshot.knobs, user=None, seed=seed)


def system_prompt(task: Task) -> str:
    return "Ask the user questions, then reply with [answer] N."


BENCH = SimpleNamespace(name="toy", gyms=("toy",), load_tasks=load_tasks, make_env=make_env,
                        system_prompt=system_prompt, eval_protocol={})

KNOBS = {"agent": {"entropy_coeff": 0.001, "kl_loss_coef": 0.001, "lr_multiplier": 1.0},
         "env": {"toy": {"max_steps": 3}},
         "user": {"toy": {"strategy_mix": 0.5}},
         "reward": {"default_scale": 1.0, "per_gym_scale": {"toy": 1.0},
                    "turn_reward_clip": {"min": -1.0, "max": 2.0}, "modules": {}}}


def write_run(run_dir, *, workspace_dir=None, repo=None, overrides=None, model_dir=None,
              bench=None) -> "object":
    """Write config.json of a small CPU run on this toy bench (or `bench`); returns the Config."""
    import json
    from pathlib import Path

    from training.config import resolve

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    base = {"model.path": str(model_dir), "rollout.response_length": 6, "rollout.max_turns": 3,
            "trainer.total_steps": 2, "trainer.save_freq": 0, "trainer.heartbeat_s": 0.5,
            "trainer.threads": 1, "actor.optim.lr": 1e-3, "critic.optim.lr": 1e-3,
            # model.precision auto picks bf16 autocast only on CPUs with native bf16 (avx512_bf16,
            # amx_bf16), so a test comparing numbers would compare different arithmetic on
            # different machines: on a 2-core Sapphire Rapids the FSDP-vs-one-process weights
            # differed by 2.3e-4 under bf16, 1.4e-5 under fp32. Tests pin fp32; the bf16 path has
            # its own test (test_trainer.py, test_bf16_autocast_trains_on_any_cpu).
            "model.precision": "fp32"}
    if repo is not None:
        base["workspace.repo"] = str(repo)
    if workspace_dir is not None:
        base["workspace.dir"] = str(workspace_dir)
    base.update(overrides or {})
    cfg = resolve(bench or f"{Path(__file__).resolve()}:BENCH", "cpu", base)
    (run_dir / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    return cfg


def write_workspace(folder, knobs=None):
    import json
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "knobs.json").write_text(json.dumps(knobs or KNOBS, indent=1))
    return folder
