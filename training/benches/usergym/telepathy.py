"""TelepathyGym: the user thinks of an entity; the agent asks yes/no questions and guesses it.

Reward (UserRL's TelepathyGym semantics): an [answer] guess is scored 1.0 when it names the entity
(its name or an alias, case-insensitive), else 0.0; the turn pays the improvement over the best
guess so far, max(0, score - best), clipped to [0, 1]; a correct guess ends the episode. Questions
([action]) go to the user and earn nothing themselves. success = the entity was named.

Task data: facts are the entity's properties, Fact(kind="category" | "attribute", text = "It is a
fruit.", keywords = the words a yes/no question must touch); `data` = {"entity": str,
"aliases": [str], "category": str}. The shipped tasks' prompts name the category ("I am thinking of
a fruit", as UserRL's do), so they hold attributes only; UserRL's files add a category fact.
"""
from __future__ import annotations

import random
import re

from training.benches.base import Fact, Task
from training.benches.usergym import tables
from training.benches.usergym.common import Outcome, UserGymEnv

GYM = "telepathy"
FACT_KINDS = frozenset({"category", "attribute"})


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9 ]+", " ", text.lower()).strip()


def guess_score(guess: str, entity: str, aliases: list[str]) -> float:
    g = f" {_norm(guess)} "
    return 1.0 if any(f" {_norm(name)} " in g for name in [entity, *aliases] if name) else 0.0


class TelepathyEnv(UserGymEnv):
    gym = GYM

    @property
    def user_role(self) -> str:
        return (f"You are thinking of {self.task.data['entity']}. Answer each yes/no question about it "
                f"truthfully with Yes or No, and never say its name.")

    def setup(self) -> None:
        self.best = 0.0

    def intro(self) -> str:
        return f"{self.task.prompt}\nTry to uncover what's the entity I am thinking of!"

    def on_agent(self, act: str, content: str) -> Outcome:
        if act == "answer":
            d = self.task.data
            s = guess_score(content, d["entity"], d.get("aliases", []))
            gain, self.best = max(0.0, s - self.best), max(self.best, s)
            obs = "Correct! That is what I was thinking of." if s >= 1.0 else "No, that is not it."
            return Outcome(obs=obs, reward=gain, terminated=s >= 1.0)
        if act == "search":
            return Outcome(obs="[search] is not available here: ask yes/no questions with [action].")
        return Outcome(to_user=True)

    def score(self) -> float:
        return self.best

    def success(self) -> bool:
        return self.best >= 1.0


def _article(word: str) -> str:
    return ("an " if word[0] in "aeiou" else "a ") + word


def generate(rng: random.Random, n: int) -> list[Task]:
    """One task per entity of the table (in a seeded order); `n` at most the table's size."""
    lines = [l for l in tables.ENTITIES.strip().splitlines()]
    rng.shuffle(lines)
    tasks = []
    for line in lines[:n]:
        name, category, attrs = line.split("|")
        # no category fact: the prompt below names the category, so the user revealed it (and
        # elicited_fact paid for it) to an agent that only repeated its prompt
        facts = []
        for i, pair in enumerate(attrs.split(";")):
            phrase, keyword = pair.split(":")
            facts.append(Fact(id=f"a{i}", kind="attribute", text=f"It {phrase}.", keywords=(keyword,)))
        prompt = f"I am thinking of {_article(category)}. Try to guess what it is by asking yes/no questions!"
        tasks.append(Task(id="", gym=GYM, split="", prompt=prompt, facts=tuple(facts),
                          data={"entity": name, "aliases": [], "category": category}))
    return tasks
