"""Score a ColBench answer: run the hidden test calls on the reference and on the agent's code,
each in its own sandboxed process (training/sandbox.py), and compare the outputs.

Definitions (ColBench backend programming, paper appendix B: Pass and Succ.):
  a test COUNTS when the reference call returns a value other than None (a raising reference or a
  None output never counts); it PASSES when the answer's call returns an equal value.
  Pass    = passed / counted (0.0 when nothing counts)
  Success = counted > 0 and every counted test passes
Code that tries to leave its sandbox (files outside its folder, sockets, fork/exec, ctypes) or
ends its own process (sys.exit, exit(), os._exit) scores 0 on the whole answer, whatever else it
got right. Crashes, timeouts, memory and output limits fail
the tests they hit; the trainer's process is never the one running the code.

Reference outputs are computed once per task (same sandbox) and cached in memory, keyed by the
hash of the reference and its tests, so an edited task never reuses a stale value.
"""
from __future__ import annotations

import hashlib
import json
import math
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from training.benches.base import Task
from training.sandbox import Limits, SandboxResult, run_calls

# One answer: 512 MB, 100 kB of printed output, 1 s of wall clock per test call and 4 s of CPU for
# the whole process (an answer that loops forever costs at most ~4 s, not 1 s x every test).
LIMITS = Limits(wall_s=5.0, cpu_s=4.0, memory_mb=512, max_output_bytes=100_000)
PER_CALL_S = 1.0
_SELF_EXIT = re.compile(r"exited with code \d")      # >= 0: it exited; a signal gives a negative code
_FENCE = re.compile(r"```(?:python|py)?[ \t]*\n(.*?)```", re.S | re.I)


@dataclass(frozen=True)
class TestOutcome:
    name: str
    expr: str
    reference: Any
    answer: Any
    counted: bool
    passed: bool
    kind: str                     # the answer call's sandbox kind: ok | exception | timeout | ...
    error: str | None = None


@dataclass(frozen=True)
class Score:
    pass_rate: float              # Pass: passed / counted
    success: bool                 # Success: every counted test passed
    passed: int
    counted: int
    kind: str                     # ok | no_code | forbidden | exit | reference_error
    tests: tuple[TestOutcome, ...] = ()
    wall_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {"pass": self.pass_rate, "success": self.success, "passed": self.passed,
                "counted": self.counted, "kind": self.kind, "wall_s": round(self.wall_s, 3),
                "failures": [{"test": t.name, "kind": t.kind, "error": t.error}
                             for t in self.tests if t.counted and not t.passed][:5]}


def extract_code(answer: str) -> str:
    """The code of an answer: the fenced blocks if any (joined), else the text itself."""
    blocks = _FENCE.findall(answer)
    return ("\n\n".join(blocks) if blocks else answer).strip()


def same(a: Any, b: Any) -> bool:
    """Equal outputs: numbers within 1e-6 relative (float noise only), containers element-wise."""
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b if isinstance(a, bool) and isinstance(b, bool) else False
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return math.isclose(a, b, rel_tol=1e-6, abs_tol=1e-9) or (a != a and b != b)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


class ReferenceCache:
    """Reference outputs per task, computed once in the sandbox (thread-safe)."""

    def __init__(self):
        self._values: dict[str, list[SandboxResult]] = {}
        self._lock = threading.Lock()
        self.computed = 0

    @staticmethod
    def key(task: Task) -> str:
        blob = json.dumps([task.data["ground_truth"], task.data["test_cases"]], sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    def get(self, task: Task) -> list[SandboxResult]:
        key = self.key(task)
        with self._lock:
            if key in self._values:
                return self._values[key]
        results = run_calls(task.data["ground_truth"], list(task.data["test_cases"].values()),
                            LIMITS, per_call_wall_s=PER_CALL_S)
        with self._lock:
            self.computed += 1
            return self._values.setdefault(key, results)


REFERENCES = ReferenceCache()


def escape_kind(results: list[SandboxResult]) -> str | None:
    """"forbidden" when the code tried to leave the sandbox (even if it caught the refusal),
    "exit" when it ended its own process (sys.exit, exit(), os._exit): both score 0, so leaving
    the sandbox never pays."""
    if any(r.kind == "forbidden" for r in results):
        return "forbidden"
    if any((r.error or "").startswith("SystemExit") or
           (r.kind == "crash" and _SELF_EXIT.search(r.error or "")) for r in results):
        return "exit"
    return None


def score_answer(task: Task, answer: str, *, cache: ReferenceCache = REFERENCES,
                 limits: Limits = LIMITS, per_call_s: float = PER_CALL_S) -> Score:
    """Score the agent's answer text (code, fenced or not) on `task`'s hidden tests."""
    names = list(task.data["test_cases"])
    exprs = [task.data["test_cases"][n] for n in names]
    refs = cache.get(task)
    counted_idx = [i for i, r in enumerate(refs) if r.ok and r.value is not None]
    code = extract_code(answer)
    if not counted_idx:
        return Score(0.0, False, 0, 0, "reference_error")
    if not code:
        return Score(0.0, False, 0, len(counted_idx), "no_code")
    results = run_calls(code, exprs, limits, per_call_wall_s=per_call_s)
    wall = sum(r.wall_s for r in results)
    outcomes = []
    for i, (name, expr, ref, res) in enumerate(zip(names, exprs, refs, results)):
        counted = i in counted_idx
        passed = counted and res.ok and same(ref.value, res.value)
        outcomes.append(TestOutcome(name, expr, ref.value, res.value, counted, passed, res.kind,
                                    res.error))
    escape = escape_kind(results)
    if escape:
        return Score(0.0, False, 0, len(counted_idx), escape, tuple(outcomes), wall)
    passed = sum(o.passed for o in outcomes)
    return Score(passed / len(counted_idx), passed == len(counted_idx), passed, len(counted_idx),
                 "ok", tuple(outcomes), wall)


def score_many(pairs: list[tuple[Task, str]], workers: int = 1, *,
               cache: ReferenceCache = REFERENCES) -> list[Score]:
    """Score many (task, answer) pairs, `workers` sandboxes at a time (order kept)."""
    if workers <= 1:
        return [score_answer(t, a, cache=cache) for t, a in pairs]
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda ta: score_answer(ta[0], ta[1], cache=cache), pairs))
