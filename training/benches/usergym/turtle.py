"""TurtleGym (lateral-thinking "turtle soup"): a puzzling surface story; the agent asks yes/no
questions and then tells the hidden story.

Reward (UserRL's TurtleGym semantics): an [answer] is scored by the share of the hidden story's key
points it states (each key point matched at the gym's fixed threshold); the turn pays the
improvement over the best answer so far, max(0, score - best), clipped to [0, 1]. An answer whose
score reaches env.turtle.success_threshold ends the episode (terminated) and is a success; a weaker
answer lets the agent keep asking. Questions ([action]) go to the user and earn nothing themselves.

Task data: facts are the story's key points, Fact(kind="clue", keywords = words that touch it);
`data` = {"title": str, "surface": str, "bottom": str}.
"""
from __future__ import annotations

import random

from training.benches.base import Task, Fact
from training.benches.usergym import tables
from training.benches.usergym.common import Outcome, UserGymEnv

GYM = "turtle"
FACT_KINDS = frozenset({"clue"})


class TurtleEnv(UserGymEnv):
    gym = GYM

    @property
    def user_role(self) -> str:
        return (f"You host a lateral-thinking puzzle. The hidden story: {self.task.data['bottom']} "
                f"Answer each yes/no question with Yes, No or Irrelevant; never tell the story.")

    def setup(self) -> None:
        self.best = 0.0

    def intro(self) -> str:
        d = self.task.data
        return (f"Title: {d['title']}\nSurface: {d['surface']}\nTry to uncover the hidden narrative "
                f"behind the surface, revealing the twist or true meaning of the story!")

    def answer_score(self, text: str) -> float:
        facts = self.task.facts
        return len(self.matched(text, facts)) / len(facts) if facts else 0.0

    def on_agent(self, act: str, content: str) -> Outcome:
        if act == "answer":
            s = self.answer_score(content)
            gain, self.best = max(0.0, s - self.best), max(self.best, s)
            solved = s >= float(self.env_knobs["success_threshold"])
            obs = ("You have uncovered the story." if solved else
                   f"Your story covers part of the truth ({s:.0%}); keep asking.")
            return Outcome(obs=obs, reward=gain, terminated=solved, info={"answer_score": s})
        if act == "search":
            return Outcome(obs="[search] is not available here: ask yes/no questions with [action].")
        return Outcome(to_user=True)

    def score(self) -> float:
        return self.best

    def success(self) -> bool:
        return self.best >= float(self.env_knobs["success_threshold"])


def generate(rng: random.Random, n: int) -> list[Task]:
    """Stories of the table with a seeded name and place filled in; `n` distinct variants."""
    combos = [(s, name, place) for s in range(len(tables.STORIES)) for name in tables.NAMES
              for place in tables.PLACES]
    rng.shuffle(combos)
    tasks, seen = [], set()
    for s, name, place in combos:
        if len(tasks) >= n:
            break
        if (s, name) in seen:           # one variant per (story, name)
            continue
        seen.add((s, name))
        title, surface, bottom, clues = tables.STORIES[s]
        fill = {"name": name, "place": place}
        facts = tuple(Fact(id=f"k{i}", kind="clue", text=text.format(**fill), keywords=kw)
                      for i, (text, kw) in enumerate(clues))
        surface = surface.format(**fill)
        tasks.append(Task(id="", gym=GYM, split="", prompt=f"{title}: {surface}", facts=facts,
                          data={"title": title, "surface": surface, "bottom": bottom.format(**fill)}))
    return tasks
