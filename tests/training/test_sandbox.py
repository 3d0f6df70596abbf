"""The sandbox contains hostile code: each escape attempt fails in the child, the caller goes on."""
import os
import time

import pytest

from training.sandbox import Limits, ModuleWorker, is_finite_number, run_calls, run_function

L = Limits(wall_s=2, cpu_s=2, memory_mb=256, max_output_bytes=10_000)

HOSTILE = '''
import os
def double(x): return 2 * x
def spin():
    while True: pass
def eat(): return len(bytearray(2 * 10**9))
def fork(): return os.fork()
def sock():
    import socket
    return socket.create_connection(("127.0.0.1", 9))
def read_home(): return open(os.path.expanduser("~root/.bashrc")).read()
def read_abs(path): return open(path).read()
def write_out(): open("/tmp/eau-sandbox-escape", "w").write("x")
def write_in():
    open("note.txt", "w").write("kept")
    return open("note.txt").read()
def shout(): print("x" * 100_000)
def hard_exit(): os._exit(3)
def soft_exit(): raise SystemExit(1)
def spawn():
    import subprocess
    return subprocess.run(["true"]).returncode
def nan(): return float("nan")
'''


@pytest.mark.parametrize("func,kind", [
    ("spin", "timeout"), ("eat", "memory"), ("fork", "forbidden"), ("sock", "forbidden"),
    ("read_home", "forbidden"), ("write_out", "forbidden"), ("shout", "output_limit"),
    ("hard_exit", "crash"), ("soft_exit", "exception"), ("spawn", "forbidden"),
])
def test_hostile_code_is_contained(func, kind):
    res = run_function(HOSTILE, func, [], L)
    assert not res.ok and res.kind == kind, res
    assert not os.path.exists("/tmp/eau-sandbox-escape")


def test_cannot_read_project_files(tmp_path):
    secret = tmp_path / "eval" / "secret.json"
    secret.parent.mkdir()
    secret.write_text("{}")
    res = run_function(HOSTILE, "read_abs", [str(secret)], L)
    assert res.kind == "forbidden"


def test_allowed_work_in_own_folder_and_values():
    assert run_function(HOSTILE, "double", [21], L).value == 42
    assert run_function(HOSTILE, "write_in", [], L).value == "kept"
    nan = run_function(HOSTILE, "nan", [], L)
    assert nan.ok and not is_finite_number(nan.value)


def test_missing_import_is_an_exception_not_a_crash_of_the_caller():
    res = run_function("import no_such_module_anywhere\n", "f", [], L)
    assert res.kind == "exception" and "no_such_module_anywhere" in res.error


def test_run_calls_times_each_call_and_keeps_going():
    src = "import time\ndef f(a): return [a, a]\ndef slow():\n    while True: pass\n"
    out = run_calls(src, ["f(1)", "slow()", "1/0", "f(None)"], L, per_call_wall_s=0.5)
    assert [r.kind for r in out] == ["ok", "timeout", "exception", "ok"]
    assert out[0].value == [1, 1] and out[3].value == [None, None]


def test_worker_reuses_process_and_restarts_after_a_timeout():
    with ModuleWorker(HOSTILE, L) as w:
        t0 = time.monotonic()
        assert [w.call("double", [i]).value for i in range(50)] == [2 * i for i in range(50)]
        assert time.monotonic() - t0 < 5          # one process, not fifty
        assert w.call("spin", [], timeout_s=0.3).kind == "timeout"
        assert w.call("double", [4]).value == 8
        assert w.restarts == 1
