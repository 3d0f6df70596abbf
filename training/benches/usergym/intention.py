"""IntentionGym: the agent gets a vague request and must ask for its missing details.

Reward (UserRL's IntentionGym semantics): an [action] question that covers a detail not covered
before pays 1.0 / 0.7 / 0.4 for a detail of importance 3 / 2 / 1, minus 0.2 for each detail beyond
the first that the same question covers (asking everything at once is penalised); clipped to [0, 1]
per turn. The episode ends (terminated) when every detail is covered; success = all covered;
score = covered importance / total importance. Coverage is scored by the gym (fixed threshold),
not by the user, so both user arms see the same reward. [search] and [answer] are not part of this
gym's action space and earn nothing.

Task data: facts are the missing details, Fact(kind="detail", importance=1..3, text = the user's
answer, keywords = words a question must touch); `data` = {"category": str, "task": str}.
"""
from __future__ import annotations

import random

from training.benches.base import Fact, Task
from training.benches.usergym import tables
from training.benches.usergym.common import Outcome, UserGymEnv

GYM = "intention"
FACT_KINDS = frozenset({"detail"})
DETAIL_PAY = {3: 1.0, 2: 0.7, 1: 0.4}
EXTRA_PENALTY = 0.2


class IntentionEnv(UserGymEnv):
    gym = GYM
    user_role = ("You are a user who made a vague request. Answer the assistant's clarifying "
                 "questions only about the detail asked; do not volunteer other details.")

    def setup(self) -> None:
        self.covered: set[str] = set()

    def intro(self) -> str:
        d = self.task.data
        return (f"The category of the task: {d['category']}\nThe initial vague task description: "
                f"{d['task']}\nTry to figure out all the missing details about this through asking "
                f"clarification questions!")

    def on_agent(self, act: str, content: str) -> Outcome:
        if act != "action":
            return Outcome(obs=f"[{act}] is not available here: ask clarifying questions with [action].")
        hits = self.matched(content)
        new = [f for f in hits if f.id not in self.covered]
        reward = sum(DETAIL_PAY.get(f.importance, 0.4) for f in new) - EXTRA_PENALTY * max(0, len(hits) - 1)
        self.covered.update(f.id for f in new)
        done = self.covered >= {f.id for f in self.task.facts}
        return Outcome(reward=reward, terminated=done, to_user=True,
                       info={"covered_details": [f.id for f in new]})

    def score(self) -> float:
        total = sum(f.importance for f in self.task.facts) or 1
        return sum(f.importance for f in self.task.facts if f.id in self.covered) / total

    def success(self) -> bool:
        return self.covered >= {f.id for f in self.task.facts}


def generate(rng: random.Random, n: int) -> list[Task]:
    """`n` distinct vague requests, each with three of its template's five missing details."""
    seen, tasks = set(), []
    while len(tasks) < n:
        category, template, fillers, details = rng.choice(tables.INTENTIONS)
        x = rng.choice(fillers)
        picked = sorted(rng.sample(range(len(details)), 3))
        key = (template, x, tuple(picked))
        if key in seen:
            continue
        seen.add(key)
        facts = []
        for i in picked:
            desc, keywords, options = details[i]
            facts.append(Fact(id=f"d{i}", kind="detail", text=f"{desc}: {rng.choice(options)}.",
                              keywords=keywords, importance=rng.choice((1, 2, 3))))
        task_text = template.format(x=x)
        tasks.append(Task(id="", gym=GYM, split="", prompt=task_text, facts=tuple(facts),
                          data={"category": category, "task": task_text}))
    return tasks
