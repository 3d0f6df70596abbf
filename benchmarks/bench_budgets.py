"""Token budgets per bench: what a solved episode needs, against each bench's CPU preset.

    PYTHONPATH=. .venv/bin/python benchmarks/bench_budgets.py [--split train] [--json FILE]

With the real SmolLM2-135M-Instruct tokenizer (read without torch: training.budget.ChatTokenizer),
over the shipped tasks of every gym, as training.budget measures them at a run's start:
  prompt        system prompt + first observation, chat-templated (training.rollout.start_episode)
  answer        the longest turn a solved episode writes (training.budget.solving_turns)
  fits          share of tasks whose answer fits the bench's cpu rollout.response_length
and, for ColBench and tau2, whole solved episodes replayed through the environment with its
symbolic user, counted as the rollout builds them:
  ColBench      ask about each hidden fact in turn (at most --questions), then answer with the
                reference solution
  tau2          the oracle of tests/benches/tau2/test_tau2_oracle.py: the gold tool calls, the
                gold phone actions asked of the user, what must be said, then "anything else?"
                until the user ends the call
  before answer tokens when the last turn starts (what rollout.max_episode_tokens must exceed)
  solved        tokens of the whole episode, answer included
  turns         agent turns of the solved episode
The last lines say whether each bench's cpu preset passes training.budget's check.
"""
from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests" / "benches" / "tau2"))   # the oracle's phone requests

from test_tau2_oracle import ASK_USER                                   # noqa: E402

from training import budget                                             # noqa: E402
from training.benches import get_bench                                  # noqa: E402
from training.config import ConfigError, resolve                        # noqa: E402
from training.snapshot import Snapshot                                  # noqa: E402


class Counter:
    """One episode's messages; `tokens()` is what the rollout's sequence holds before the next
    turn (prompt, turns, replies, the template's generation prompt)."""

    def __init__(self, tok, system: str, obs: str):
        self.tok = tok
        self.messages = [{"role": "system", "content": system}, {"role": "user", "content": obs}]
        self.turns = 0
        self.longest = 0

    def exchange(self, action: str, obs: str) -> None:
        self.turns += 1
        self.longest = max(self.longest, len(self.tok.encode(action)) + 1)
        self.messages += [{"role": "assistant", "content": action}, {"role": "user", "content": obs}]

    def tokens(self) -> int:
        text = self.tok.apply_chat_template(self.messages, tokenize=False, add_generation_prompt=True)
        return len(self.tok.encode(text))


def colbench_episode(tok, bench, task, snap, seed: int, questions: int) -> tuple[int, int, int]:
    """(tokens before the answer, solved tokens, turns) of ask-each-fact-then-answer."""
    env = bench.make_env(task, snap, seed=seed)
    c = Counter(tok, bench.system_prompt(task), env.reset(seed=seed)[0])
    for fact in task.facts[:questions]:
        ask = f"Could you tell me about the {' and the '.join(fact.keywords[:2])}?"
        obs, _, terminated, truncated, _ = env.step(ask)
        c.exchange(ask, obs)
    before = c.tokens()
    answer = budget.solving_turns("colbench", task, snap.knobs)[0]
    return before, before + len(tok.encode(answer)) + 1, c.turns + 1


def tau2_episode(tok, bench, task, snap, seed: int) -> tuple[int, int, int]:
    """(tokens before the last turn, solved tokens, turns) of the tau2 oracle; raises if the
    oracle does not score 1 (the figures would not be a solved episode's)."""
    env = bench.make_env(task, snap, seed=seed)
    c = Counter(tok, bench.system_prompt(task), env.reset(seed=seed)[0])
    acts = []
    for a in task.data["actions"]:
        if a["requestor"] == "user":
            acts.append(ASK_USER[a["name"]].format(**a["arguments"]))
        else:
            acts.append("<tool_call>" + json.dumps({"name": a["name"], "arguments": a["arguments"]})
                        + "</tool_call>")
    if task.data["communicate_info"]:
        acts.append("Here is what you asked: " + ", ".join(task.data["communicate_info"]) + ".")
    acts += ["Is there anything else I can help with?"] * 6
    for act in acts:
        before = c.tokens()
        obs, reward, terminated, truncated, _ = env.step(act)
        c.exchange(act, obs)
        if terminated or truncated:
            if reward != 1.0:
                raise RuntimeError(f"the oracle failed {task.id}")
            return before, c.tokens(), c.turns
    raise RuntimeError(f"the user never ended {task.id}")


def spread(values) -> str:
    v = sorted(values)
    return f"{v[0]:,} / {statistics.median(v):,.0f} / {v[-1]:,}" if v else "-"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--split", default="train")
    ap.add_argument("--questions", type=int, default=5, help="ColBench questions before the answer")
    ap.add_argument("--json", default=None, help="also write the figures to this file")
    args = ap.parse_args(argv)
    tok = budget.ChatTokenizer(budget.tokenizer_folder(""))
    snap = Snapshot.from_dir(ROOT / "workspace")
    rows, verdicts = [], {}
    print("| bench | gym | tasks | prompt min / median / max | answer min / median / max | "
          "fits cpu turn | before answer median / max | solved median / max | turns |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |")
    for name in ("usergym", "colbench", "tau2"):
        bench, cfg = get_bench(name), resolve(name, "cpu")
        for gym in bench.gyms:
            tasks = bench.load_tasks(args.split, gyms=[gym])
            need = budget.measure(name, bench, tasks, snap, tok)[gym]
            fits = sum(a <= cfg.rollout.response_length for a in need.answers)
            episodes = []
            if name == "colbench":
                episodes = [colbench_episode(tok, bench, t, snap, i, args.questions)
                            for i, t in enumerate(tasks)]
            elif name == "tau2":
                episodes = [tau2_episode(tok, bench, t, snap, i) for i, t in enumerate(tasks)]
            row = {"bench": name, "gym": gym, "tasks": len(tasks), "prompt": need.prompts,
                   "answer": need.answers, "fits": fits,
                   "response_length": cfg.rollout.response_length,
                   "before_answer": [e[0] for e in episodes], "solved": [e[1] for e in episodes],
                   "turns": [e[2] for e in episodes]}
            rows.append(row)
            turns = spread(row["turns"]) if episodes else "-"
            print(f"| {name} | {gym} | {len(tasks)} | {spread(need.prompts)} | "
                  f"{spread(need.answers)} | {fits}/{len(need.answers)} at "
                  f"{cfg.rollout.response_length} | "
                  f"{spread(row['before_answer']).split(' / ', 1)[-1] if episodes else '-'} | "
                  f"{spread(row['solved']).split(' / ', 1)[-1] if episodes else '-'} | {turns} |")
        try:
            budget.check_start(cfg, ROOT / "workspace")
            verdicts[name] = "passes"
        except ConfigError as exc:
            verdicts[name] = f"refused: {exc}"
    print()
    for name, verdict in verdicts.items():
        cfg = resolve(name, "cpu").rollout
        print(f"{name} cpu preset (max_turns {cfg.max_turns}, response_length "
              f"{cfg.response_length}, max_episode_tokens {cfg.max_episode_tokens}): {verdict}")
    if args.json:
        Path(args.json).write_text(json.dumps({"rows": rows, "verdicts": verdicts}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
