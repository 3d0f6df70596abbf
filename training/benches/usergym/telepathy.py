"""TelepathyGym: the user thinks of an entity; the agent asks yes/no questions and guesses it.

Reward (UserRL's TelepathyGym semantics): an [answer] guess is scored 1.0 when it names the entity
(its name or an alias, case-insensitive), else 0.0; the turn pays the improvement over the best
guess so far, max(0, score - best), clipped to [0, 1]; a correct guess ends the episode. Questions
([action]) go to the user and earn nothing themselves. success = the entity was named.

Task data: facts are the entity's hidden properties, Fact(kind="category" | "attribute", text =
"It has a stone.", keywords = the words a yes/no question must touch); `data` = {"entity": str,
"aliases": [str], "category": str}. The prompt names the category ("I am thinking of a fruit", in
the shipped tasks and in UserRL's), so that is no hidden fact but the task's stated one
(Task.stated, `stated_category`): the user answers "Is it a fruit?" with a truthful "Yes." that
tells and pays nothing. UserRL's files also label each entity with a category, a hidden fact where
the prompt does not name it (the prompt's "fruit", the label "food").
"""
from __future__ import annotations

import random
import re

from training.benches.base import Fact, Task
from training.benches.usergym import tables
from training.benches.usergym.common import Outcome, UserGymEnv
from training.users.symbolic import words

GYM = "telepathy"
FACT_KINDS = frozenset({"category", "attribute"})
# Where a telepathy prompt names its category: "I am thinking of a fruit. Try to guess what it is
# ...", and in UserRL's files also "... of a U.S. national park. Try to guess which one it is ..."
# (every one of their 401 prompts reads so).
_NAMED = re.compile(r"I am thinking of (.+?)[.!]?\s+Try to guess")
# Words of a category phrase that name no category: UserRL's prompts say "a type of fruit", "one
# of the Seven Wonders", "a widely used software application"; a key "type" would have the user
# confirm "Is it a type of bird?" to a fruit. Short words go too: "U.S." splits into "u" and "s",
# and "s" is also what "it's" leaves.
_FILLER = frozenset("the of in on for from to and or its our one type kind sort known used widely "
                    "well".split())


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


def stated_category(prompt: str) -> tuple[Fact, ...]:
    """The category the prompt names, as the task's stated fact (Task.stated), or none if it names
    none. Each word of the phrase but fillers is a keyword, and any one confirms it (symbolic.py):
    "Is it an instrument?" and "Is it musical?" both get "Yes." for "a musical instrument", so the
    user never denies a word its prompt said."""
    m = _NAMED.search(prompt)
    if m is None:
        return ()
    named = m.group(1).strip()
    keys = tuple(dict.fromkeys(w for w in words(named) if len(w) >= 3 and w not in _FILLER))
    return (Fact(id="category", kind="category", text=f"It is {named}.", keywords=keys),) if keys else ()


def generate(rng: random.Random, n: int) -> list[Task]:
    """One task per entity of the table (in a seeded order); `n` at most the table's size."""
    lines = [l for l in tables.ENTITIES.strip().splitlines()]
    rng.shuffle(lines)
    tasks = []
    for line in lines[:n]:
        name, category, attrs = line.split("|")
        facts = []
        for i, pair in enumerate(attrs.split(";")):
            phrase, keyword = pair.split(":")
            facts.append(Fact(id=f"a{i}", kind="attribute", text=f"It {phrase}.", keywords=(keyword,)))
        prompt = f"I am thinking of {_article(category)}. Try to guess what it is by asking yes/no questions!"
        # the category is stated, not hidden: as a hidden fact the user revealed it (and
        # elicited_fact paid for it) to an agent that only repeated its prompt, in all 132 tasks
        tasks.append(Task(id="", gym=GYM, split="", prompt=prompt, facts=tuple(facts),
                          data={"entity": name, "aliases": [], "category": category},
                          stated=stated_category(prompt)))
    return tasks
