"""ColBench scorer on hand-made answers: Pass/Success as scorer.py defines them, every failure mode
contained in the sandbox, and the caller (this test process) unharmed."""
from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from training.benches.base import Task
from training.benches.colbench.scorer import ReferenceCache, extract_code, same, score_answer

REF = """
def double(x):
    if x < 0:
        return None
    return x * 2
"""
# four hidden tests; the reference gives None on the last, so it never counts: 3 counted
TASK = Task(id="t-double", gym="colbench", split="test", prompt="Write double(x).",
            data={"ground_truth": REF, "func": "double",
                  "test_cases": {"t1": "double(1)", "t2": "double(2)", "t3": "double(5)",
                                 "t4": "double(-1)"}})


def score(code: str):
    return score_answer(TASK, code, cache=CACHE)


CACHE = ReferenceCache()
PROJECT = Path(__file__).resolve().parents[3]


def test_fully_right_answer_passes_all_counted_tests():
    s = score("def double(x):\n    return x * 2\n")   # differs from the reference on double(-1) only
    assert (s.pass_rate, s.success, s.passed, s.counted, s.kind) == (1.0, True, 3, 3, "ok")
    assert not s.tests[3].counted                       # None reference output: never counted


def test_partly_right_answer_gets_the_fraction():
    s = score("def double(x):\n    return x * 2 if x < 3 else 0\n")
    assert s.passed == 2 and s.pass_rate == pytest.approx(2 / 3) and not s.success


def test_wrong_answer_scores_zero():
    s = score("def double(x):\n    return x - 1\n")
    assert s.pass_rate == 0.0 and not s.success


def test_fenced_answer_and_no_code():
    assert score("Here it is:\n```python\ndef double(x):\n    return 2 * x\n```\nThanks!").success
    assert extract_code("```py\na = 1\n```") == "a = 1"
    s = score("   ")
    assert s.kind == "no_code" and s.pass_rate == 0.0


@pytest.mark.parametrize("code", ["def double(x):\n    raise RuntimeError('boom')\n",
                                  "def double(x) return x\n",                  # syntax error
                                  "import no_such_module\ndef double(x):\n    return 2 * x\n",
                                  "def other(x):\n    return 2 * x\n"])
def test_crashing_answers_score_zero(code):
    s = score(code)
    assert s.pass_rate == 0.0 and not s.success


def test_slow_answer_times_out_quickly():
    t0 = time.monotonic()
    s = score("def double(x):\n    while True:\n        pass\n")
    assert s.pass_rate == 0.0
    assert {t.kind for t in s.tests} <= {"timeout", "crash"}
    assert time.monotonic() - t0 < 15


def test_partly_slow_answer_keeps_its_fast_tests():
    s = score("def double(x):\n    while x == 5:\n        pass\n    return 2 * x\n")
    assert s.passed == 2 and s.tests[2].kind == "timeout"


def test_printing_megabytes_fails_only_through_the_output_limit():
    s = score("def double(x):\n    print('x' * 5_000_000)\n    return 2 * x\n")
    assert s.pass_rate == 0.0 and s.tests[0].kind == "output_limit"
    s = score("def double(x):\n    for _ in range(10**6):\n        print('spam spam spam')\n    return 2 * x\n")
    assert s.pass_rate == 0.0


def test_memory_bomb_is_contained():
    s = score("def double(x):\n    return len(bytearray(10 ** 11)) and 2 * x\n")
    assert s.pass_rate == 0.0 and s.tests[0].kind in ("memory", "exception", "crash")


ESCAPES = {
    "read outside": "open('/etc/passwd').read()",
    "read project": "open(PROJECT + '/.git/HEAD').read()",
    "list outside": "os.listdir('/')",
    "write outside": "open(CANARY_DIR + '/pwned.txt', 'w').write('x')",
    "remove outside": "os.remove(CANARY_DIR + '/canary.txt')",
    "fork bomb": "[os.fork() for _ in iter(int, 1)]",
    "subprocess": "__import__('subprocess').run(['rm', '-rf', CANARY_DIR])",
    "socket": "__import__('socket').create_connection(('127.0.0.1', 22))",
    "kill caller": "os.kill(os.getppid(), 9)",
}


@pytest.mark.parametrize("name", sorted(ESCAPES))
@pytest.mark.parametrize("caught", [False, True])
def test_escaping_the_sandbox_scores_zero_and_harms_nothing(name, caught, tmp_path):
    canary = tmp_path / "canary.txt"
    canary.write_text("intact")
    attempt = ESCAPES[name]
    if caught:       # right answers that swallow the refusal still score 0
        body = f"    try:\n        {attempt}\n    except BaseException:\n        pass\n    return 2 * x\n"
    else:
        body = f"    {attempt}\n    return 2 * x\n"
    code = (f"import os\nCANARY_DIR = {str(tmp_path)!r}\nPROJECT = {str(PROJECT)!r}\n"
            f"def double(x):\n{body}")
    cwd, env = os.getcwd(), dict(os.environ)
    s = score(code)
    assert s.pass_rate == 0.0 and not s.success
    assert s.kind == "forbidden", [t.error for t in s.tests]
    assert canary.read_text() == "intact" and not (tmp_path / "pwned.txt").exists()
    assert os.getcwd() == cwd and dict(os.environ) == env


@pytest.mark.parametrize("code", ["import sys\nsys.exit(0)\n",
                                  "def double(x):\n    exit(3) if x == 5 else None\n    return 2 * x\n",
                                  "import os\ndef double(x):\n    os._exit(0) if x == 5 else None\n"
                                  "    return 2 * x\n"])
def test_calling_exit_scores_zero_and_the_caller_lives_on(code):
    s = score(code)        # right on two tests, but ends its process on the third: 0 overall
    assert s.pass_rate == 0.0 and not s.success and s.kind == "exit"
    assert score("def double(x):\n    return 2 * x\n").success     # still scoring afterwards


def test_reference_outputs_are_computed_once_per_task():
    cache = ReferenceCache()
    for _ in range(3):
        score_answer(TASK, "def double(x):\n    return 2 * x\n", cache=cache)
    assert cache.computed == 1


def test_a_reference_that_counts_nothing_scores_zero():
    task = Task(id="t-none", gym="colbench", split="test", prompt="",
                data={"ground_truth": "def f():\n    return None\n", "test_cases": {"a": "f()"},
                      "func": "f"})
    s = score_answer(task, "def f():\n    return None\n", cache=ReferenceCache())
    assert s.kind == "reference_error" and s.pass_rate == 0.0 and not s.success


def test_output_comparison():
    assert same(0.1 + 0.2, 0.3) and same([1, {"a": 2.0}], [1, {"a": 2}])
    assert not same(1, True) and not same("1", 1) and not same([1, 2], [2, 1])
    assert not same({"a": 1}, {"a": 1, "b": 2}) and same(True, True)


def test_answers_run_in_a_clean_environment_and_a_temporary_folder(monkeypatch):
    monkeypatch.setenv("EAU_SECRET_TOKEN", "hunter2")
    code = (f"import os\nPROJECT = {str(PROJECT)!r}\n"
            "def double(x):\n"
            "    clean = 'EAU_SECRET_TOKEN' not in os.environ\n"
            "    elsewhere = not os.getcwd().startswith(PROJECT)\n"
            "    return 2 * x if clean and elsewhere else -1\n")
    assert score(code).success
