"""Run untrusted Python (reward modules, ColBench answers, anything an agent wrote) in a separate,
limited process, never in the caller's (README, "What the sandbox protects against").

Each child is a fresh `python -I` (isolated: no PYTHONPATH, no user site, no current folder on the
path, so it cannot import the trainer's modules) started in a new process session inside its own
temporary folder, with a clean environment. Before the untrusted code runs, the child:
- sets rlimits: CPU seconds, address space, file size, open files (and processes, which root ignores);
- installs an audit hook (PEP 578) refusing: opening files outside its folder (reading the Python
  installation is allowed, so imports work), listing folders outside it, sockets, fork/exec/spawn/
  subprocess/system, ctypes, signals to other processes, and changing folder;
- sends fd 1 and 2 to /dev/null and captures `print` through a writer capped at max_output_bytes.
The parent enforces the wall-clock limit and kills the whole process group on expiry, so anything
that escaped the hook's fork ban dies with it. Results travel as JSON lines on a dedicated pipe.

Not protected against: code that exhausts the machine's CPU within its own time limit, native
extension modules that bypass the audit hook (ctypes itself is refused), or kernel bugs.
"""
from __future__ import annotations

import json
import math
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Limits:
    wall_s: float = 5.0             # wall-clock seconds for the whole process (run_*) or one call (worker)
    cpu_s: float = 5.0              # CPU seconds (RLIMIT_CPU), for the process's whole life
    memory_mb: int = 512            # address space (RLIMIT_AS)
    max_output_bytes: int = 1_000_000   # what print() may write before the call fails
    max_procs: int = 0              # extra processes allowed: 0 refuses fork/exec
    allow_network: bool = False


@dataclass
class SandboxResult:
    ok: bool
    value: Any = None
    error: str | None = None
    kind: str = "ok"     # ok | exception | timeout | memory | crash | output_limit | forbidden
    stdout: str = ""
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


# The child's program: self-contained (the child cannot import ours), written beside the code.
_CHILD = r'''
import builtins, io, json, math, os, resource, signal, sys, traceback
RES_FD = int(sys.argv[1]); CFG = json.loads(sys.argv[2])
HOME = os.path.realpath(os.getcwd())
ALLOWED_READ = [os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                 sys.base_exec_prefix, os.path.dirname(os.__file__)}]
DEV_OK = {"/dev/null", "/dev/urandom", "/dev/random"}

class Forbidden(Exception): pass
class OutputLimit(Exception): pass
ATTEMPTS = []   # refused operations during the current call, even when the code catches Forbidden

def _make_hook(home, allowed_read, allow_network, max_procs):
    # Everything the hook uses is bound here, once: the untrusted code shares this process, so
    # module globals (HOME, CFG), os.path.realpath or builtins it could patch are never read
    # again (a module that set CFG["allow_network"] or patched any() got out; see tests/faults).
    realpath, fsdecode, sep, attempts, deny_cls = os.path.realpath, os.fsdecode, os.sep, ATTEMPTS, Forbidden
    is_a, to_str, any_, int_t, bytes_t, str_t = isinstance, str, any, int, bytes, str
    write_flags = os.O_WRONLY | os.O_RDWR | os.O_CREAT
    home_roots, read_roots = (home,), tuple(allowed_read) + (home,)
    dev_ok = frozenset(DEV_OK)
    refused = frozenset(("ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "os.kill", "os.killpg",
                         "os.chdir", "os.chroot", "os.setuid", "os.putenv", "os.unsetenv",
                         # reaching the hook's closure: the garbage collector, tracers (which
                         # could rewrite a running frame's cells)
                         "sys.settrace", "sys.setprofile", "gc.get_objects", "gc.get_referrers",
                         "gc.get_referents"))
    procs = frozenset(("os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn",
                       "os.spawn", "subprocess.Popen", "os.startfile"))
    changes = frozenset(("os.remove", "os.rmdir", "os.rename", "os.mkdir", "os.symlink",
                         "os.link", "os.truncate", "os.chmod", "os.chown", "shutil.rmtree",
                         "os.utime"))

    def deny(msg):
        attempts.append(msg)
        return deny_cls(msg)

    def inside(path, roots):
        p = realpath(path)
        for r in roots:
            if p == r or p.startswith(r + sep):
                return True
        return False

    def hook(event, args):
        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            if is_a(path, int_t) or path is None:
                return
            path = fsdecode(path)
            writing = (mode and any_(c in to_str(mode) for c in "wax+")) or (flags or 0) & write_flags
            if path in dev_ok or inside(path, home_roots):
                return
            if not writing and inside(path, read_roots):
                return
            raise deny(f"open {path!r} outside the sandbox folder")
        if event in ("os.listdir", "os.scandir") and args and args[0] not in (None, "", "."):
            p = args[0]
            if not is_a(p, int_t) and not inside(fsdecode(p), read_roots):
                raise deny(f"list {p!r} outside the sandbox folder")
        if event.startswith("socket.") and not allow_network:
            raise deny("network access is not allowed")
        if event in procs and max_procs <= 0:
            raise deny(f"{event} is not allowed")
        if event in refused:
            raise deny(f"{event} is not allowed")
        if event in changes:
            for a in args[:2]:
                if is_a(a, (str_t, bytes_t)) and not inside(fsdecode(a), home_roots):
                    raise deny(f"{event} {a!r} outside the sandbox folder")
    return hook

class CappedWriter(io.TextIOBase):
    def __init__(self, cap): self.cap, self.parts, self.n = cap, [], 0
    def write(self, s):
        self.n += len(s)
        if self.n > self.cap:
            raise OutputLimit(f"output over {self.cap} bytes")
        self.parts.append(s); return len(s)
    def text(self): return "".join(self.parts)

def _limit(kind, value):
    try:
        resource.setrlimit(kind, (value, value))
    except (ValueError, OSError):
        pass

def _jsonable(v):
    try:
        json.dumps(v, allow_nan=True); return v
    except (TypeError, ValueError):
        return repr(v)

def _send(msg):
    data = (json.dumps(msg, allow_nan=True, default=repr) + "\n").encode()
    while data:
        n = os.write(RES_FD, data); data = data[n:]

class Alarm(BaseException): pass
def _on_alarm(signum, frame): raise Alarm()

def _run_one(fn, per_call_s):
    out = CappedWriter(CFG["max_output_bytes"]); sys.stdout = sys.stderr = out
    del ATTEMPTS[:]
    if per_call_s: signal.setitimer(signal.ITIMER_REAL, per_call_s)
    try:
        value = fn()
        r = {"ok": True, "value": _jsonable(value), "kind": "ok"}
    except Alarm:
        r = {"ok": False, "kind": "timeout", "error": f"call exceeded {per_call_s} s"}
    except Forbidden as e:
        r = {"ok": False, "kind": "forbidden", "error": str(e)}
    except OutputLimit as e:
        r = {"ok": False, "kind": "output_limit", "error": str(e)}
    except MemoryError:
        r = {"ok": False, "kind": "memory", "error": "memory limit exceeded"}
    except SystemExit as e:
        r = {"ok": False, "kind": "exception", "error": f"SystemExit({e.code!r})"}
    except BaseException as e:
        r = {"ok": False, "kind": "exception", "error": f"{type(e).__name__}: {e}"[:2000]}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    if ATTEMPTS and r["kind"] in ("ok", "exception"):   # a caught Forbidden is still an attempt
        r = {"ok": False, "kind": "forbidden", "error": ATTEMPTS[0] + " (the code caught the refusal)"}
    r["stdout"] = out.text()[-4000:]
    return r

def main():
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1); os.dup2(null, 2)
    sys.__stdout__ = sys.__stderr__ = open(os.devnull, "w")
    signal.signal(signal.SIGALRM, _on_alarm)
    mem = CFG["memory_mb"] * 1024 * 1024
    _limit(resource.RLIMIT_AS, mem)
    _limit(resource.RLIMIT_CPU, max(1, math.ceil(CFG["cpu_s"])))
    _limit(resource.RLIMIT_FSIZE, max(CFG["max_output_bytes"], 1 << 20))
    _limit(resource.RLIMIT_NPROC, CFG["max_procs"] + 1 if CFG["max_procs"] > 0 else 1)
    source = open("module.py").read()
    stdin = sys.stdin
    ns = {"__name__": "sandboxed", "__file__": os.path.join(HOME, "module.py")}
    sys.addaudithook(_make_hook(HOME, ALLOWED_READ, bool(CFG["allow_network"]), int(CFG["max_procs"])))
    load = _run_one(lambda: exec(compile(source, "module.py", "exec"), ns), CFG.get("load_s"))
    _send({"phase": "load", **load})
    if not load["ok"]:
        return
    for line in stdin:
        req = json.loads(line)
        if req.get("op") == "call":
            fn = ns.get(req["func"])
            if not callable(fn):
                _send({"ok": False, "kind": "exception", "error": f"module defines no function {req['func']!r}"})
                continue
            _send(_run_one(lambda: fn(*req["args"]), req.get("timeout")))
        elif req.get("op") == "eval":
            expr = req["expr"]
            _send(_run_one(lambda: eval(compile(expr, "<test>", "eval"), ns), req.get("timeout")))
        else:
            break

main()
'''


KINDS = ("ok", "exception", "timeout", "memory", "crash", "output_limit", "forbidden")


class SandboxError(RuntimeError):
    """The sandbox itself could not start (not the untrusted code failing)."""


def _clean_env(workdir: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}


class _Child:
    """One sandboxed process: load the module, then answer call/eval requests one at a time."""

    def __init__(self, source: str, limits: Limits, workdir: str | None = None):
        self.limits = limits
        self.own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="eau-sandbox-")
        Path(self.dir, "module.py").write_text(source)
        Path(self.dir, "_runner.py").write_text(_CHILD)
        rfd, wfd = os.pipe()
        cfg = {"memory_mb": limits.memory_mb, "cpu_s": limits.cpu_s, "max_procs": limits.max_procs,
               "max_output_bytes": limits.max_output_bytes, "allow_network": limits.allow_network,
               "load_s": limits.wall_s}
        self.proc = subprocess.Popen(
            [sys.executable, "-I", "-X", "utf8", "_runner.py", str(wfd), json.dumps(cfg)],
            cwd=self.dir, env=_clean_env(self.dir), stdin=subprocess.PIPE,
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(wfd,),
            start_new_session=True)
        os.close(wfd)
        self.rfd = rfd
        self.buf = b""
        self.max_line = 4 * limits.max_output_bytes + (8 << 20)   # a result line, values included
        self.load = self._read(limits.wall_s + 5.0)

    def _read(self, timeout: float) -> SandboxResult:
        t0 = time.monotonic()
        deadline = t0 + timeout
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                self.kill()
                return SandboxResult(False, kind="timeout", error=f"exceeded {timeout:.1f} s wall clock",
                                     wall_s=time.monotonic() - t0)
            ready, _, _ = select.select([self.rfd], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(self.rfd, 1 << 16)
                if not chunk:
                    return self._died(t0)
                self.buf += chunk
                if len(self.buf) > self.max_line:     # code writing to the result pipe itself
                    self.kill()
                    return SandboxResult(False, kind="output_limit", wall_s=time.monotonic() - t0,
                                         error=f"result over {self.max_line} bytes")
            elif self.proc.poll() is not None:
                return self._died(t0)
        line, self.buf = self.buf.split(b"\n", 1)
        try:
            msg = json.loads(line)
            ok = msg["ok"] if isinstance(msg, dict) else None
        except (ValueError, KeyError):
            ok = None
        if not isinstance(ok, bool) or msg.get("kind", "ok") not in KINDS:
            # only the untrusted code can put a malformed line on the pipe: treat it as an attack
            self.kill()
            return SandboxResult(False, kind="forbidden", wall_s=time.monotonic() - t0,
                                 error="the code wrote a malformed result on the sandbox's pipe")
        return SandboxResult(ok=ok, value=msg.get("value"), error=msg.get("error"),
                             kind=msg.get("kind", "ok"), stdout=str(msg.get("stdout", "")),
                             wall_s=time.monotonic() - t0)

    def _died(self, t0: float) -> SandboxResult:
        code = self.proc.wait()
        self.kill()
        if code == -signal.SIGXCPU or code == -signal.SIGKILL:
            kind, err = "timeout", f"CPU limit of {self.limits.cpu_s} s exceeded"
        elif code == -signal.SIGXFSZ:
            kind, err = "output_limit", "file size limit exceeded"
        else:
            kind, err = "crash", f"sandboxed process exited with code {code}"
        return SandboxResult(False, kind=kind, error=err, wall_s=time.monotonic() - t0)

    def request(self, req: dict, timeout: float) -> SandboxResult:
        if not self.alive():
            return SandboxResult(False, kind="crash", error="sandboxed process is not running")
        try:
            self.proc.stdin.write((json.dumps(req) + "\n").encode())
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            return self._died(time.monotonic())
        # the child's own timer fires at `timeout`; the parent waits a little longer, then kills
        return self._read(timeout + 2.0)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass

    def close(self) -> None:
        if self.alive():
            try:
                self.proc.stdin.write(b'{"op": "quit"}\n')
                self.proc.stdin.flush()
                self.proc.wait(timeout=1)
            except (OSError, subprocess.TimeoutExpired):
                pass
        self.kill()
        for f in (self.proc.stdin,):
            try:
                f.close()
            except OSError:
                pass
        try:
            os.close(self.rfd)
        except OSError:
            pass
        if self.own_dir:
            shutil.rmtree(self.dir, ignore_errors=True)


def run_function(source: str, func: str, args: list, limits: Limits = Limits(), *,
                 workdir: str | None = None) -> SandboxResult:
    """Import `source` in a fresh sandboxed process and call `func(*args)`; JSON in and out."""
    child = _Child(source, limits, workdir)
    try:
        if not child.load.ok:
            return child.load
        return child.request({"op": "call", "func": func, "args": args,
                              "timeout": limits.wall_s}, limits.wall_s)
    finally:
        child.close()


def run_calls(source: str, expressions: list[str], limits: Limits = Limits(), *,
              per_call_wall_s: float = 2.0) -> list[SandboxResult]:
    """Execute `source` in a fresh sandboxed process, then evaluate each expression in its
    namespace with its own time limit. A call that kills the process fails, and so do the rest."""
    child = _Child(source, limits)
    try:
        if not child.load.ok:
            return [child.load for _ in expressions]
        out = []
        for expr in expressions:
            if not child.alive():
                out.append(SandboxResult(False, kind="crash",
                                         error="sandboxed process died on an earlier call"))
                continue
            out.append(child.request({"op": "eval", "expr": expr, "timeout": per_call_wall_s},
                                     per_call_wall_s))
        return out
    finally:
        child.close()


class ModuleWorker:
    """A persistent sandboxed process with one module imported once, answering many calls.

    A call that times out, crashes or breaks a limit kills the process; the next call starts a
    new one (the module is imported again). Thread-safe: calls are serialised.
    """

    def __init__(self, source: str, limits: Limits = Limits()):
        self.source = source
        self.limits = limits
        self._child: _Child | None = None
        self._lock = threading.Lock()
        self.restarts = 0
        self.load_result = self._start()

    def _start(self) -> SandboxResult:
        self._child = _Child(self.source, self.limits)
        return self._child.load

    def call(self, func: str, args: list, timeout_s: float | None = None) -> SandboxResult:
        with self._lock:
            if self._child is None or not self._child.alive():
                self.restarts += 1
                if self._child is not None:
                    self._child.close()
                load = self._start()
                if not load.ok:
                    return load
            if not self.load_result.ok:
                return self.load_result
            res = self._child.request({"op": "call", "func": func, "args": args,
                                       "timeout": timeout_s or self.limits.wall_s},
                                      timeout_s or self.limits.wall_s)
            if res.kind in ("timeout", "memory", "crash"):
                self._child.close()          # a fresh process for the next call
            return res

    def close(self) -> None:
        with self._lock:
            if self._child is not None:
                self._child.close()
                self._child = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def is_finite_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
