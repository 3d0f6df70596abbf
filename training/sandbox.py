"""Run untrusted Python (reward modules, ColBench answers, rule regexes, anything an agent wrote)
in a separate, walled-in process, never in the caller's (README, "What the sandbox protects
against").

Each child is a fresh `python -I` (isolated: no PYTHONPATH, no user site, no current folder on the
path, so it cannot import the trainer's modules) in its own temporary folder, with a clean
environment, behind four layers (PEP 578 says an audit hook alone is not a sandbox, and
tests/faults/test_fault_os_walls.py shows the ways out it left):
1. namespaces (training/isolation.py, bubblewrap): a read-only view of the Python installation
   and nothing else of the file system but its folder, a private /tmp and /dev/shm, its own PID
   namespace (nothing outlives the call), no network, its own IPC namespace, no capabilities;
2. a seccomp filter (libseccomp), loaded by the child before anything untrusted runs: process
   creation, device nodes, ptrace, sockets, mounts kill the child (kind "forbidden");
3. rlimits: CPU seconds, address space, file size, open files;
4. an audit hook (PEP 578) refusing, with a reason the caller sees: files outside its folder
   (reading the Python installation is allowed, so imports work), folders outside it as
   descriptors, sockets, fork/exec/spawn/subprocess/system, ctypes, subinterpreters, signals,
   changing folder or rlimits.
Where the kernel refuses namespaces, layers 2-4 run alone, and the sandbox says so once on
stderr (`isolation()`). fd 1 and 2 go to /dev/null; `print` goes to a writer capped at
max_output_bytes. The parent enforces the wall-clock limit and kills the child at its deadline.
Results travel as JSON lines on a dedicated pipe and are parsed as untrusted data
(`parse_result`): anything outside the size, depth and type limits is a failed call.
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

from training import isolation as isolation_mod

# A result's value nests at most this deep: ColBench outputs are lists of lists at most a few
# levels deep; json.loads raised RecursionError near 1,000 levels in the trainer.
MAX_DEPTH = 32


@dataclass(frozen=True)
class Limits:
    wall_s: float = 5.0             # wall-clock seconds for the whole process (run_*) or one call (worker)
    cpu_s: float = 5.0              # CPU seconds (RLIMIT_CPU), for the process's whole life
    memory_mb: int = 512            # address space (RLIMIT_AS)
    max_output_bytes: int = 1_000_000   # what print() may write before the call fails
    audit_hook: bool = True         # False only in tests that show the OS walls hold on their own


@dataclass
class SandboxResult:
    ok: bool
    value: Any = None
    error: str | None = None
    kind: str = "ok"     # ok | exception | timeout | memory | crash | output_limit | forbidden
    stdout: str = ""
    wall_s: float = 0.0
    extra: dict = field(default_factory=dict)


# The child's program, a plain file beside this one, copied into each child's folder.
_CHILD = (Path(__file__).parent / "sandbox_child.py").read_text()



KINDS = ("ok", "exception", "timeout", "memory", "crash", "output_limit", "forbidden")
_RESULT_KEYS = frozenset(("phase", "ok", "value", "error", "kind", "stdout"))


class SandboxError(RuntimeError):
    """The sandbox itself could not start (not the untrusted code failing)."""


def _clean_env(workdir: str) -> dict[str, str]:
    return {"PATH": "/usr/bin:/bin", "HOME": workdir, "TMPDIR": workdir, "LANG": "C.UTF-8",
            "PYTHONHASHSEED": "0", "PYTHONDONTWRITEBYTECODE": "1", "OMP_NUM_THREADS": "1"}


def _depth(value: Any) -> int:
    """How deep a parsed result nests, without recursion (stops counting past MAX_DEPTH)."""
    deepest, todo = 0, [(value, 1)]
    while todo:
        v, d = todo.pop()
        if d > deepest:
            deepest = d
            if d > MAX_DEPTH:
                return d
        if isinstance(v, dict):
            todo += [(x, d + 1) for x in v.values()]
        elif isinstance(v, list):
            todo += [(x, d + 1) for x in v]
    return deepest


def parse_result(line: bytes) -> tuple[dict | None, str | None]:
    """(message, None) for a line of the result pipe within the limits, else (None, why).

    Only the untrusted code can put a line outside them there: the runner checks its own
    results against the same depth limit and sends them through json. So anything else is a
    forged line, and the caller never sees an exception from it: a deeply nested
    value made `json.loads` raise RecursionError, which crashed the trainer's step, the
    pre-commit hook and the gate (tests/faults/test_fault_os_walls.py, deep_forged_result)."""
    try:
        msg = json.loads(line)
    except (ValueError, RecursionError, MemoryError) as exc:
        return None, f"not JSON ({type(exc).__name__})"
    if not isinstance(msg, dict) or not set(msg) <= _RESULT_KEYS:
        return None, "not a result object"
    if not isinstance(msg.get("ok"), bool) or msg.get("kind", "ok") not in KINDS:
        return None, "no ok/kind"
    if not isinstance(msg.get("error"), (str, type(None))) or \
            not isinstance(msg.get("stdout", ""), str):
        return None, "error or stdout is not text"
    if _depth(msg.get("value")) > MAX_DEPTH:
        return None, f"a value nested deeper than {MAX_DEPTH} levels"
    return msg, None


def _probe(iso: isolation_mod.Isolation) -> str | None:
    """Why a trivial call fails under `iso`, or None when it works (isolation_mod.isolation)."""
    child = _Child("def f():\n    return 1\n", Limits(wall_s=30.0, cpu_s=30.0), iso=iso)
    try:
        res = child.load if not child.load.ok else child.request(
            {"op": "call", "func": "f", "args": [], "timeout": 30.0}, 30.0)
    finally:
        child.close()
    if res.ok and res.value == 1:
        return None
    if iso.bwrap:
        return isolation_mod.bwrap_error(iso.bwrap) or res.error or res.kind
    return res.error or res.kind


def isolation() -> isolation_mod.Isolation:
    """The walls this machine gives the sandbox (found once per process, on first use)."""
    return isolation_mod.isolation(_probe)


class _Child:
    """One sandboxed process: load the module, then answer call/eval requests one at a time."""

    def __init__(self, source: str, limits: Limits, workdir: str | None = None,
                 iso: isolation_mod.Isolation | None = None):
        self.limits = limits
        self.iso = iso or isolation()
        self.own_dir = workdir is None
        self.dir = os.path.realpath(workdir or tempfile.mkdtemp(prefix="eau-sandbox-"))
        Path(self.dir, "module.py").write_text(source)
        Path(self.dir, "_runner.py").write_text(_CHILD)
        rfd, wfd = os.pipe()
        cfg = {"memory_mb": limits.memory_mb, "cpu_s": limits.cpu_s, "load_s": limits.wall_s,
               "max_output_bytes": limits.max_output_bytes, "max_depth": MAX_DEPTH,
               "audit_hook": limits.audit_hook,
               "seccomp": self.iso.seccomp.hex() if self.iso.seccomp else None}
        argv = [sys.executable, "-I", "-X", "utf8", "_runner.py", str(wfd), json.dumps(cfg)]
        env = _clean_env(self.dir)
        if self.iso.bwrap:
            argv = isolation_mod.bwrap_argv(self.iso.bwrap, self.dir, ("module.py", "_runner.py"),
                                            env) + argv
        self.proc = subprocess.Popen(
            argv, cwd=self.dir, env=env, stdin=subprocess.PIPE,
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
        msg, why = parse_result(line)
        if msg is None:
            self.kill()
            return SandboxResult(False, kind="forbidden", wall_s=time.monotonic() - t0,
                                 error=f"the code wrote a malformed result on the sandbox's pipe "
                                       f"({why})")
        return SandboxResult(ok=msg["ok"], value=msg.get("value"), error=msg.get("error"),
                             kind=msg.get("kind", "ok"), stdout=msg.get("stdout", ""),
                             wall_s=time.monotonic() - t0)

    def _signal(self, code: int) -> int | None:
        """The signal that ended the child, if one did. Under bwrap the exit status is bwrap's,
        which reports a child killed by signal S as 128 + S; a child may also exit with such a
        code itself, which then reads as that signal: it can pass for a CPU timeout or a
        refusal, never for a success (the call fails either way)."""
        if code < 0:
            return -code
        if self.iso.bwrap and code > 128:
            return code - 128
        return None

    def _died(self, t0: float) -> SandboxResult:
        code = self.proc.wait()
        self.kill()
        sig = self._signal(code)
        if sig in (signal.SIGXCPU, signal.SIGKILL):
            kind, err = "timeout", f"CPU limit of {self.limits.cpu_s} s exceeded"
        elif sig == signal.SIGXFSZ:
            kind, err = "output_limit", "file size limit exceeded"
        elif sig == signal.SIGSYS:
            kind, err = "forbidden", ("the code made a system call the sandbox's seccomp "
                                      "filter refuses (process creation, device nodes, sockets, "
                                      "ptrace...)")
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
