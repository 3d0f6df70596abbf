"""The prompting baselines of the paper's Table 1, ReAct and Reflexion, evaluated by the same walled
protocol as every other row (training/evaluate.py: test split, evaluation user, limits, scorer).
Written from the two papers' descriptions; no code of theirs is used.

- ReAct (Yao et al., 2022, "ReAct: synergizing reasoning and acting in language models"): each
  turn the model writes a free-text thought, then an action, in a "Thought: ... / Action: ..."
  format; the environment carries out the action alone and its observation follows. Here the
  system prompt asks for that format (`react_system`), and `ReActEnv` passes the environment only
  the text after the last `Action:` (the whole turn when there is none, judged as any turn is).
  The full turn, thought included, stays in the conversation the model sees next, as in ReAct's
  trajectories. The worked examples are shown as the protocol shows them (actions, no thoughts).
- Reflexion (Shinn et al., 2023, "Reflexion: language agents with verbal reinforcement
  learning"): the agent attempts a task; when the evaluator says the attempt failed, the same
  model writes a short verbal self-reflection (what went wrong, what to do instead), which is kept
  in an episodic memory and put in the prompt of the next attempt at the same task. Here the
  evaluator is the environment's own success flag, a task gets up to `attempts` tries (it stops
  at the first success), the memory keeps the last `MEMORY` reflections (the paper bounds it to
  1-3), and the task's result is its last attempt's. Between attempts the method sees each test
  task's success, as it does in its paper: that is the method, and the summary records it.
"""
from __future__ import annotations

import re
from typing import Any, Callable

PROMPTINGS = ("plain", "react", "reflexion")
MEMORY = 3                          # reflections kept per task (Reflexion: 1-3)
REFLECTION_TOKENS = 128             # new tokens of one reflection
_ACTION = re.compile(r"^\s*Action\s*:\s*", re.I | re.M)

REACT_INSTRUCTIONS = (
    "Answer in two parts every turn. First a line starting with `Thought:` where you reason about "
    "what you know so far and what to do next. Then a line starting with `Action:` followed by "
    "exactly one action written as described above. Only the text after `Action:` is carried out.")
REFLEXION_HEADER = ("Reflections on your earlier attempts at this same task (they failed; use "
                    "them to do better this time):")
REFLECT_SYSTEM = ("You review a failed attempt of an assistant at a task and write advice for its "
                  "next attempt at the same task.")
REFLECT_ASK = ("The attempt above failed (score {score:.2f}). In two or three sentences, say what "
               "most likely went wrong and write a short, concrete plan for the next attempt.")


def react_system(system: str) -> str:
    return f"{system}\n{REACT_INSTRUCTIONS}"


def react_action(text: str) -> str:
    """The action of a ReAct turn: what follows the last `Action:` line, else the whole turn."""
    found = list(_ACTION.finditer(text))
    return text[found[-1].end():].strip() if found else text


def system_prompt(prompting: str, base: str, reflections: list[str] | None = None) -> str:
    """The system prompt of one episode under `prompting` (reflections: Reflexion's memory)."""
    if prompting == "react":
        return react_system(base)
    if prompting == "reflexion" and reflections:
        return base + "\n" + REFLEXION_HEADER + "\n" + "\n".join(f"- {r}" for r in reflections)
    return base


class ReActEnv:
    """An environment that carries out only a ReAct turn's action (module docstring); everything
    else is the wrapped environment's own."""

    def __init__(self, env):
        self.env = env

    @property
    def task(self):
        return self.env.task

    @property
    def user(self):
        return self.env.user

    @property
    def turn_cap(self):
        return self.env.turn_cap

    @turn_cap.setter
    def turn_cap(self, value) -> None:
        self.env.turn_cap = value

    def reset(self, seed: int | None = None, options: dict | None = None):
        return self.env.reset(seed=seed, options=options)

    def prepare(self, action: str):
        return self.env.prepare(react_action(action))

    def complete(self, reply):
        return self.env.complete(reply)

    def step(self, action: str):
        return self.env.step(react_action(action))

    def closing_record(self) -> dict[str, Any]:
        return self.env.closing_record()


def wrap(prompting: str, env):
    return ReActEnv(env) if prompting == "react" else env


def transcript(record: dict[str, Any]) -> str:
    """A failed attempt as the reflecting model reads it: the task, then each turn's action and
    the reply it got."""
    lines = [f"Task: {record.get('prompt', '')}"]
    for t in record.get("turns", []):
        lines.append(f"Assistant: {t.get('agent', '')}")
        if t.get("user"):
            lines.append(f"Reply: {t['user']}")
    return "\n".join(lines)


def reflect(models, records: list[dict[str, Any]], *, temperature: float, top_p: float,
            seed: int) -> list[str]:
    """One verbal self-reflection per failed attempt, written by the evaluated model itself in
    one batched generate call (Reflexion's self-reflection model is the agent's own LLM)."""
    import torch

    from training.policy import end_of_turn_ids, generate

    tok = models.tokenizer
    contexts = []
    for r in records:
        messages = [{"role": "system", "content": REFLECT_SYSTEM},
                    {"role": "user", "content": transcript(r) + "\n\n" +
                     REFLECT_ASK.format(score=float(r.get("score", 0.0)))}]
        text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
        contexts.append(tok.encode(text, add_special_tokens=False))
    torch.manual_seed(seed)
    stop = set(end_of_turn_ids(tok))
    out = generate(models, contexts, max_new_tokens=REFLECTION_TOKENS, temperature=temperature,
                   top_p=top_p)
    return [" ".join(tok.decode([t for t in ids if t not in stop], skip_special_tokens=True).split())
            or "(no reflection written)" for ids in out]


def run_reflexion(attempt: Callable[[list[int], dict[int, list[str]], int], list[dict[str, Any]]],
                  write: Callable[[list[dict[str, Any]], int], list[str]], tasks: int,
                  attempts: int, say: Callable[[str], None] = lambda line: None) -> list[dict[str, Any]]:
    """Reflexion over `tasks` task indices: `attempt(indices, memory, k)` runs attempt k of those
    tasks with their reflections and returns their records (in order); `write(failed records, k)`
    returns one reflection each. Returns each task's last attempt, with `attempts` (how many it
    took) and `reflections` (the memory it ended with)."""
    memory: dict[int, list[str]] = {i: [] for i in range(tasks)}
    final: dict[int, dict[str, Any]] = {}
    todo = list(range(tasks))
    for k in range(attempts):
        records = attempt(todo, {i: memory[i][-MEMORY:] for i in todo}, k)
        for i, rec in zip(todo, records):
            final[i] = {**rec, "attempts": k + 1, "reflections": list(memory[i][-MEMORY:])}
        failed = [(i, rec) for i, rec in zip(todo, records) if not rec.get("success")]
        say(f"reflexion: attempt {k + 1}/{attempts}: {len(todo) - len(failed)} of {len(todo)} "
            f"tasks succeeded")
        if not failed or k + 1 == attempts:
            break
        for (i, _), text in zip(failed, write([rec for _, rec in failed], k)):
            memory[i].append(text)
        todo = [i for i, _ in failed]
    return [final[i] for i in range(tasks)]
