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


# ---- results as data, and the operating system's walls ---------------------------------------

from training import isolation, sandbox  # noqa: E402


@pytest.mark.parametrize("line,why", [
    (b'{"ok": true, "value": ' + b"[" * 5000 + b"]" * 5000 + b"}", "not JSON (RecursionError)"),
    (b'{"ok": true, "value": ' + b"[" * 40 + b"]" * 40 + b"}", "nested deeper than 32"),
    (b'{"ok": tru', "not JSON (JSONDecodeError)"),
    (b'[1, 2]', "not a result object"),
    (b'{"ok": true, "extra": 1}', "not a result object"),
    (b'{"ok": "yes"}', "no ok/kind"),
    (b'{"ok": true, "kind": "pwned"}', "no ok/kind"),
    (b'{"ok": false, "error": {"a": 1}}', "error or stdout is not text"),
    (b'{"ok": true, "value": 1' + b"0" * 5000 + b'}', "not JSON (ValueError)"),   # int digits limit
])
def test_a_result_outside_the_limits_is_refused_never_raised(line, why):
    msg, reason = sandbox.parse_result(line)
    assert msg is None and why in reason


def test_a_result_within_the_limits_is_read():
    nested = b"[" * 31 + b"1.5" + b"]" * 31
    msg, reason = sandbox.parse_result(b'{"ok": true, "kind": "ok", "value": ' + nested + b', "stdout": ""}')
    assert reason is None and msg["ok"] is True and sandbox._depth(msg["value"]) == 32


def test_an_honest_result_too_deep_fails_the_call_in_the_child():
    src = "def deep(n):\n    v = 1\n    for _ in range(n):\n        v = [v]\n    return v\n"
    assert run_function(src, "deep", [30], L).ok
    res = run_function(src, "deep", [40], L)
    assert res.kind == "output_limit" and "deeper than 32" in res.error


def test_threads_work_under_the_seccomp_filter():
    """clone with CLONE_THREAD passes the filter, clone3 answers ENOSYS and glibc falls back to
    clone: a filter that refused threads would break numpy's and torch's thread pools."""
    src = ("import threading\ndef run():\n    out = []\n"
           "    ts = [threading.Thread(target=out.append, args=(i,)) for i in range(4)]\n"
           "    [t.start() for t in ts]\n    [t.join() for t in ts]\n    return sorted(out)\n")
    assert run_function(src, "run", [], L).value == [0, 1, 2, 3]


@pytest.mark.skipif(not sandbox.isolation().namespaces,
                    reason="bwrap cannot create namespaces on this machine (see README)")
def test_the_child_sees_only_the_python_installation_and_its_folder(tmp_path):
    source = os.path.abspath(sandbox.__file__)   # the project's folder may hold the venv
    src = ("import os\ndef look(paths):\n"
           "    return sorted(os.listdir('/')), [os.path.exists(p) for p in paths]\n")
    res = run_function(src, "look", [[source, "/proc/1", str(tmp_path), "/etc/passwd"]],
                       Limits(2, 2, 256, audit_hook=False))
    top, seen = res.value
    assert seen == [False, False, False, False]
    # the root holds the system's library folders, /dev, /tmp and the first folder of each
    # Python root, wherever the clone lives (CI's clone is under /check, this machine's under /work)
    python_tops = {root.strip("/").split("/")[0] for root in isolation.python_roots()}
    assert set(top) <= {"usr", "lib", "lib64", "lib32", "etc", "dev", "tmp"} | python_tops, top


def test_folder_descriptors_inside_its_folder_work_and_lead_nowhere_else(tmp_path):
    """dir_fd calls below the sandbox folder (shutil.rmtree, TemporaryDirectory) are allowed; a
    descriptor of any other folder, or '..' beside one, is refused (test_fault_os_walls.py)."""
    src = ("import os, tempfile, sysconfig\n"
           "def tmpdir():\n    with tempfile.TemporaryDirectory() as d:\n"
           "        os.makedirs(d + '/a/b')\n        open(d + '/a/b/f', 'w').write('x')\n"
           "    return os.path.exists(d)\n"
           "def up():\n    os.mkdir('a')\n    fd = os.open('a', os.O_RDONLY)\n"
           "    os.mkdir('../../x', dir_fd=fd)\n"
           "def outside():\n    return os.open(sysconfig.get_paths()['stdlib'], os.O_RDONLY)\n"
           "def relative_up():\n    return open('../x').read()\n")
    assert run_function(src, "tmpdir", [], L).value is False
    for func, why in (("up", "'..' beside a dir_fd"), ("outside", "a folder outside the sandbox"),
                      ("relative_up", "'..' in a relative path")):
        res = run_function(src, func, [], L)
        assert res.kind == "forbidden" and why in res.error, (func, res)


@pytest.mark.skipif(not sandbox.isolation().namespaces,
                    reason="bwrap cannot create namespaces on this machine (see README)")
def test_a_python_installation_under_tmp_keeps_its_namespaces(tmp_path):
    """A venv under /tmp (a clone in /tmp, as a fresh-clone check makes) was hidden by the child's
    private /tmp, so no child started and the sandbox fell back to fewer walls: the probe must
    find namespaces from such a venv too."""
    import subprocess
    import sys
    import venv

    assert str(tmp_path).startswith("/tmp/")
    venv.create(tmp_path / "venv", system_site_packages=True, with_pip=False, symlinks=True)
    root = os.path.dirname(os.path.dirname(os.path.abspath(sandbox.__file__)))
    probe = ("import sys; sys.path.insert(0, sys.argv[1]); from training import sandbox; "
             "iso = sandbox.isolation(); print(iso.namespaces, iso.missing)")
    out = subprocess.run([str(tmp_path / "venv" / "bin" / "python"), "-c", probe, root],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[0] == "True", out.stdout + out.stderr
