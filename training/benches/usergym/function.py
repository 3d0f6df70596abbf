"""FunctionGym: a hidden function of four numbers; the agent probes it and answers a test case.

Actions: `[action] 1 2 3 4` probes the function (the gym replies with its output; no user turn);
any other [action] is a message to the user, who may reveal hints; `[search] test` shows the test
case; `[answer] 42` submits f(test case) and ends the episode.

Reward (UserRL's FunctionGym semantics): 1.0 for a correct answer (within 0.01, or 0.1% of its
size), else 0.0; clipped to [0, 1]. EAU's predicate term (reward.predicate_weight, paper table 8
note a) is added after the clip on each probe: weight * (good - bad) / 3 over five predicates,
probe_new (+), probe_one_change (+: differs from an earlier probe in exactly one input),
probe_small (+: every input within [-10, 10]), probe_repeat (-), probe_invalid (-: not four
integers). info["predicates"] lists those that fired. env.function.max_repeated_probes: an input
probed more often than 1 + max_repeated_probes times is refused (no output).

Task data: facts are hints about the function, Fact(kind="hint"); `data` = {"rule": str (a Python
expression in a, b, c, d with + - * / and **), "test_case": [4 ints], "expected": float}.
"""
from __future__ import annotations

import ast
import math
import random
import re

from training.benches.base import Fact, Task
from training.benches.usergym.common import Outcome, UserGymEnv

GYM = "function"
FACT_KINDS = frozenset({"hint"})
PREDICATES = {"probe_new": 1, "probe_one_change": 1, "probe_small": 1, "probe_repeat": -1, "probe_invalid": -1}
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_OPS = {ast.Add: lambda x, y: x + y, ast.Sub: lambda x, y: x - y, ast.Mult: lambda x, y: x * y,
        ast.Div: lambda x, y: x / y}


class BadRule(ValueError):
    """A function rule that is not an arithmetic expression in a, b, c, d."""


def evaluate(rule: str, args: list[float]) -> float:
    """Evaluate `rule` at (a, b, c, d) = args with + - * / and powers; raises ZeroDivisionError
    (also for a power that is undefined, complex or too large)."""
    env = dict(zip("abcd", args))

    def ev(node):
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](ev(node.left), ev(node.right))
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Pow):
            base, exp = ev(node.left), ev(node.right)
            if abs(exp) > 64 or (base == 0 and exp < 0):   # UserRL's rules raise inputs to inputs
                raise ZeroDivisionError("undefined power")
            try:
                value = base ** exp
            except OverflowError:
                raise ZeroDivisionError("overflow") from None
            if isinstance(value, complex):
                raise ZeroDivisionError("complex power")
            return float(value)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand)
        if isinstance(node, ast.Name) and node.id in env:
            return float(env[node.id])
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
            return float(node.value)
        raise BadRule(f"function rule {rule!r}: only a, b, c, d, numbers, + - * / and ** are allowed.")

    try:
        tree = ast.parse(rule.replace("^", "**"), mode="eval")
    except SyntaxError:
        raise BadRule(f"function rule {rule!r} is not an arithmetic expression.") from None
    return ev(tree)


def is_correct(value: float, expected: float) -> bool:
    return math.isfinite(value) and abs(value - expected) <= max(0.01, 1e-3 * abs(expected))


class FunctionEnv(UserGymEnv):
    gym = GYM
    user_role = ("You chose a hidden function of four numbers. Answer questions about it with short "
                 "hints only when asked; never state the formula.")

    def setup(self) -> None:
        self.probes: dict[tuple[int, ...], int] = {}
        self.correct = False

    def intro(self) -> str:
        return ("My mapping function is settled and ready. Probe it with [action] and four integers, "
                "get the test case with [search] test, then [answer] the output for the test case.")

    def on_agent(self, act: str, content: str) -> Outcome:
        d = self.task.data
        if act == "search":
            return Outcome(obs="Test case: " + " ".join(str(x) for x in d["test_case"]))
        if act == "answer":
            m = _NUMBER.search(content)
            ok = bool(m) and is_correct(float(m.group()), float(d["expected"]))
            self.correct = ok
            return Outcome(obs="Correct!" if ok else "Incorrect.", reward=float(ok), terminated=True)
        numbers = _NUMBER.findall(content)
        if not numbers:
            return Outcome(to_user=True)
        return self._probe(numbers)

    def _probe(self, numbers: list[str]) -> Outcome:
        fired: list[str] = []
        if len(numbers) != 4 or any("." in x for x in numbers):
            fired.append("probe_invalid")
            # rejected for its arguments, not its format: the tag is right, so invalid_rate does not
            # count it (30-49% of the function turns of the H100 runs of 2026-12-06 at step 24)
            return self._shaped(Outcome(obs="A probe needs exactly four integers.",
                                        info={"rejected": "probe"}), fired)
        args = tuple(int(x) for x in numbers)
        seen = self.probes.get(args, 0)
        fired.append("probe_repeat" if seen else "probe_new")
        if any(sum(a != b for a, b in zip(args, p)) == 1 for p in self.probes):
            fired.append("probe_one_change")
        if all(-10 <= x <= 10 for x in args):
            fired.append("probe_small")
        self.probes[args] = seen + 1
        if seen > int(self.env_knobs["max_repeated_probes"]):
            return self._shaped(Outcome(obs=f"You already probed {list(args)} {seen} times; try other inputs.",
                                        info={"probe_refused": True}), fired)
        try:
            out = f"{evaluate(self.task.data['rule'], list(args)):g}"
        except ZeroDivisionError:
            out = "undefined (division by zero)"
        return self._shaped(Outcome(obs=f"Output for {' '.join(map(str, args))}: {out}"), fired)

    def _shaped(self, outcome: Outcome, fired: list[str]) -> Outcome:
        w = float(self.knobs.get("reward", {}).get("predicate_weight", 0.0))
        outcome.extra_reward = w * sum(PREDICATES[p] for p in fired) / 3
        outcome.info["predicates"] = fired
        return outcome

    def score(self) -> float:
        return float(self.correct)

    def success(self) -> bool:
        return self.correct


_OP_HINTS = {"+": ("addition", ("add", "plus", "sum")), "-": ("subtraction", ("subtract", "minus", "differen")),
             "*": ("multiplication", ("multipl", "times", "product")), "/": ("division", ("divi", "ratio")),
             "**2": ("squaring", ("square", "power"))}


def random_rule(rng: random.Random) -> str:
    """A random expression in two to four of a, b, c, d."""
    names = rng.sample("abcd", rng.choice((2, 3, 4)))
    expr = names[0]
    for name in names[1:]:
        op = rng.choice(["+", "-", "*", "*", "/"])
        term = f"{name}**2" if rng.random() < 0.2 else name
        expr = f"({expr}) {op} {term}" if rng.random() < 0.5 and " " in expr else f"{expr} {op} {term}"
    return expr


def generate(rng: random.Random, n: int) -> list[Task]:
    tasks, seen = [], set()
    while len(tasks) < n:
        rule = random_rule(rng)
        case = [rng.randint(-9, 9) for _ in range(4)]
        try:
            expected = evaluate(rule, case)
        except ZeroDivisionError:
            continue
        if rule in seen or not math.isfinite(expected):
            continue
        seen.add(rule)
        facts = [Fact(id=f"op{i}", kind="hint", text=f"The function uses {name}.", keywords=(*kw, "operation"))
                 for i, (sym, (name, kw)) in enumerate(_OP_HINTS.items())
                 if (sym in rule if sym != "*" else re.search(r"\*(?!\*)", rule.replace("**2", "")))]
        used = [v for v in "abcd" if v in rule]
        facts.append(Fact(id="inputs", kind="hint", text=f"It uses the inputs {', '.join(used)}.",
                          keywords=("input", "variable", "argument")))
        tasks.append(Task(id="", gym=GYM, split="", prompt="Guess my mapping function of four numbers.",
                          facts=tuple(facts), data={"rule": rule, "test_case": case,
                                                    "expected": round(expected, 6)}))
    return tasks
