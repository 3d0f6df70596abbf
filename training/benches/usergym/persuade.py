"""PersuadeGym: the user holds a claim; the agent argues ([answer]) to change the user's position.

Reward (UserRL's PersuadeGym semantics): the user's stance sits on a 7-level scale, 6 = strongly
agree with the claim ... 0 = strongly disagree (the target). A turn pays the levels the stance moved
toward the target, divided by 6, clipped to [0, 1]. The stance moves by `levels_per_concern` when an
argument addresses one of the user's reasons (a hidden concern, matched at the gym's fixed
threshold) that no earlier argument addressed; arguments that address nothing new move nothing.
The episode ends (terminated) at the target; success = the stance ended on the disagree side (<= 2);
score = levels moved / 6. The agent may ask the user for their reasons with [action].

Task data: facts are the user's reasons, Fact(kind="concern", keywords = what an argument must
address); `data` = {"claim": str, "start_level": int, "levels_per_concern": int}.
"""
from __future__ import annotations

import random
import re

from training.benches.base import Fact, Task, UserReply
from training.benches.usergym import tables
from training.benches.usergym.common import Outcome, UserGymEnv

GYM = "persuade"
FACT_KINDS = frozenset({"concern"})
LEVELS = ("strongly disagree", "disagree", "slightly disagree", "neutral", "slightly agree", "agree",
          "strongly agree")
TARGET = 0
_ASKS_REASON = re.compile(r"\b(why|reasons?|concerns?|worr\w*|believe|convince\w*)\b", re.I)


class PersuadeEnv(UserGymEnv):
    gym = GYM

    @property
    def user_role(self) -> str:
        return (f"You believe: {self.task.data['claim']}. Your current position: "
                f"{LEVELS[self.stance]}. Reply to the assistant's arguments in character; give a reason "
                f"for your view only when asked.")

    def setup(self) -> None:
        self.stance = int(self.task.data["start_level"])
        self.addressed: set[str] = set()

    def intro(self) -> str:
        return (f"Claim that you oppose but the environment holds: {self.task.data['claim']}\n"
                f"Try to persuade the environment to change its position regarding this claim!")

    def on_agent(self, act: str, content: str) -> Outcome:
        if act == "search":
            return Outcome(obs="[search] is not available here: argue with [answer] or ask with [action].")
        if act != "answer":
            return Outcome(to_user=True)
        new = [f for f in self.matched(content) if f.id not in self.addressed]
        self.addressed.update(f.id for f in new)
        before = self.stance
        step = int(self.task.data.get("levels_per_concern", 2))
        self.stance = max(TARGET, self.stance - step * len(new))
        moved = before - self.stance
        return Outcome(reward=moved / 6, terminated=self.stance == TARGET, to_user=True,
                       info={"stance": self.stance, "addressed": [f.id for f in new]})

    def asked_for(self, message: str, threshold: float) -> set[str]:
        """Asking why the user holds the claim asks for its reasons: disclosing one is no leak."""
        if _ASKS_REASON.search(message):
            return {f.id for f in self.task.facts}
        return super().asked_for(message, threshold)

    def on_user(self, reply: UserReply, outcome: Outcome) -> str:
        return f"{reply.text}\n(My position on the claim now: {LEVELS[self.stance]}.)"

    def user_extra(self) -> dict:
        return {"stance": self.stance, "claim": self.task.data["claim"]}

    def score(self) -> float:
        return (int(self.task.data["start_level"]) - self.stance) / 6

    def success(self) -> bool:
        return self.stance <= 2


def generate(rng: random.Random, n: int, claims: list[int] | None = None) -> list[Task]:
    """`n` tasks over the given claims (indices into the table): three of five reasons each."""
    claims = list(range(len(tables.CLAIMS))) if claims is None else claims
    combos = [(c, start, sub) for c in claims for start in (5, 6)
              for sub in _subsets(5, 3)]
    rng.shuffle(combos)
    tasks = []
    for c, start, sub in combos[:n]:
        claim, concerns = tables.CLAIMS[c]
        facts = tuple(Fact(id=f"c{i}", kind="concern", text=concerns[i][0], keywords=concerns[i][1])
                      for i in sub)
        tasks.append(Task(id="", gym=GYM, split="", prompt=f"Persuade me that this is wrong: {claim}.",
                          facts=facts, data={"claim": claim, "start_level": start, "levels_per_concern": 2}))
    return tasks


def _subsets(n: int, k: int) -> list[tuple[int, ...]]:
    from itertools import combinations
    return list(combinations(range(n), k))
