"""The sandbox's child program (training/sandbox.py copies it into each child's folder as
`_runner.py` and runs it with `python -I`): load the seccomp filter, set the rlimits, install the
audit hook, import the untrusted module, then answer call/eval requests read from stdin with one
JSON line each on the result pipe (fd argv[1]).

Self-contained on purpose: the child cannot import the project (isolated mode, and in its
namespaces the project's folder does not exist), and nothing here may be imported by the parent.
Everything the untrusted code shares a process with is written to survive its patching: the hook
binds what it uses once (see `_make_hook`).
"""
import builtins, io, json, math, os, resource, signal, sys
RES_FD = int(sys.argv[1]); CFG = json.loads(sys.argv[2])
HOME = os.path.realpath(os.getcwd())
ALLOWED_READ = [os.path.realpath(p) for p in {sys.prefix, sys.base_prefix, sys.exec_prefix,
                 sys.base_exec_prefix, os.path.dirname(os.__file__)}]
DEV_OK = ("/dev/null", "/dev/urandom", "/dev/random")
MAX_DEPTH = CFG["max_depth"]

class Forbidden(Exception): pass
class OutputLimit(Exception): pass
ATTEMPTS = []   # refused operations during the current call, even when the code catches Forbidden

def _load_seccomp(program_hex):
    """Load the parent's seccomp program (training/isolation.py) into this process, for good:
    no_new_privs first (the kernel's condition), then PR_SET_SECCOMP; refuse to go on otherwise."""
    import ctypes
    prog = bytes.fromhex(program_hex)
    class Fprog(ctypes.Structure):
        _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]
    buf = ctypes.create_string_buffer(prog, len(prog))
    fprog = Fprog(len(prog) // 8, ctypes.cast(buf, ctypes.c_void_p))
    libc = ctypes.CDLL(None, use_errno=True)
    ulong = ctypes.c_ulong
    libc.prctl.argtypes = [ctypes.c_int, ulong, ctypes.c_void_p, ulong, ulong]
    if libc.prctl(38, 1, None, 0, 0) != 0:                       # PR_SET_NO_NEW_PRIVS
        raise OSError(ctypes.get_errno(), "PR_SET_NO_NEW_PRIVS")
    if libc.prctl(22, 2, ctypes.addressof(fprog), 0, 0) != 0:    # PR_SET_SECCOMP, MODE_FILTER
        raise OSError(ctypes.get_errno(), "PR_SET_SECCOMP")
    if libc.prctl(21, 0, None, 0, 0) != 2:                       # PR_GET_SECCOMP: 2 = filter
        raise OSError(0, "the filter is not in force")

def _resolve(path, base, lstat, readlink, deny):
    """The absolute path with every symlink resolved, as the kernel would walk it from `base`
    (os.path.realpath's result, written with C functions only: realpath is Python code whose
    module globals the sandboxed code can patch; `posixpath._joinrealpath = ...` got out)."""
    stack, todo, hops = [], path.split("/")[::-1], 0
    if not path.startswith("/"):
        todo += base.split("/")[::-1]
    while todo:
        part = todo.pop()
        if part == "" or part == ".":
            continue
        if part == "..":
            if stack:
                stack.pop()
            continue
        here = "/" + "/".join(stack + [part])
        try:
            st = lstat(here)
        except OSError:
            stack.append(part)
            continue
        if st.st_mode & 0o170000 == 0o120000:                   # S_IFLNK
            hops += 1
            if hops > 40:
                raise deny(f"too many symbolic links in {path!r}")
            target = readlink(here)
            if target.startswith("/"):
                stack = []
            todo += target.split("/")[::-1]
        else:
            stack.append(part)
    return "/" + "/".join(stack)

# Audit events that change the file system: (event, where its paths sit, where its dir_fd
# arguments sit), in CPython 3.11's layouts. Tuples, not a dict: the hook holds this very object,
# and the untrusted code reaches it (as `sys.modules['__main__'].CHANGES`, or as a local of the
# hook's frame on a refusal's traceback); a dict there was emptied, and every link, rename and
# remove outside the folder went through (test_fault_os_walls.py, clear_hook_state_via_*).
CHANGES = (("os.remove", (0,), (1,)), ("os.rmdir", (0,), (1,)), ("os.mkdir", (0,), (2,)),
           ("os.rename", (0, 1), (2, 3)), ("os.symlink", (0, 1), (2,)),
           ("os.link", (0, 1), (2, 3)), ("os.truncate", (0,), ()), ("os.chmod", (0,), (2,)),
           ("os.chown", (0,), (3,)), ("os.utime", (0,), (3,)), ("shutil.rmtree", (0,), (1,)))

def _make_hook(home, allowed_read):
    """The audit hook. Everything its checks read is bound here, once, as default values (a
    module that set CFG or patched builtins got out, test_fault_hostile_code.py). The code can
    reach those values (as locals of the hook's frame on a refusal's traceback, or where the
    module holds them), so each is one it cannot change: strings, ints, tuples, frozensets, C
    functions, and `_resolve`, whose `__code__` the hook refuses to let anyone set. It makes no
    closure: a closure's cells are writable (`cell.cell_contents = ...`).
    `_attempts` is the one mutable value: it reports refusals the code caught, and code that
    empties it hides such a refusal from the report, never gets past one. `_Forbidden` is a
    class the code may patch, but whatever it then does, an exception leaves the hook and the
    operation is refused."""
    def hook(event, args, *, _home=(home,), _read=tuple(allowed_read) + (home,), _base=home,
             _dev_ok=frozenset(DEV_OK), _attempts=ATTEMPTS, _Forbidden=Forbidden,
             _resolve=_resolve, _lstat=os.lstat, _stat=os.stat, _readlink=os.readlink,
             _str=str, _bytes=bytes, _int=int, _type=type, _fspath=os.fspath, _len=len,
             _changes=tuple(CHANGES), _changed=frozenset(c[0] for c in CHANGES),
             _write_flags=os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC,
             _refused=frozenset((
                 "ctypes.dlopen", "ctypes.dlsym", "ctypes.cdata", "os.kill", "os.killpg",
                 "os.chdir", "os.chroot", "os.setuid", "os.putenv", "os.unsetenv",
                 "os.fork", "os.forkpty", "os.system", "os.exec", "os.posix_spawn", "os.spawn",
                 "subprocess.Popen", "os.startfile", "resource.setrlimit", "resource.prlimit",
                 # a subinterpreter runs with none of this interpreter's audit hooks
                 "cpython.PyInterpreterState_New",
                 # reaching the hook's defaults: the garbage collector, tracers
                 "sys.settrace", "sys.setprofile", "sys._current_frames", "gc.get_objects",
                 "gc.get_referrers", "gc.get_referents")),
             _imports=frozenset(("_posixshmem", "_xxsubinterpreters")),
             _func_attrs=frozenset(("__code__", "__defaults__", "__kwdefaults__"))):
        def deny(msg):
            _attempts.append(msg)
            return _Forbidden(msg)

        def path_of(p):
            t = _type(p)
            if t is _str:
                return p
            if t is _bytes:
                return p.decode("utf-8", "surrogateescape")
            p = _fspath(p)     # os.PathLike: called once here; the C call took its own copy
            return p if _type(p) is _str else p.decode("utf-8", "surrogateescape")

        def inside(p, roots):
            for r in roots:
                if p == r or p.startswith(r + "/"):
                    return True
            return False

        if event == "open":
            path, mode, flags = args[0], args[1], args[2]
            if path is None or _type(path) is _int:
                return
            path = path_of(path)
            if path in _dev_ok:
                return
            if not path.startswith("/") and ".." in path.split("/"):
                # "open" carries no dir_fd: a relative ".." is judged from the sandbox folder
                # while the kernel may walk it from a descriptor's folder
                raise deny(f"open {path!r}: '..' in a relative path")
            real = _resolve(path, _base, _lstat, _readlink, deny)
            if inside(real, _home):
                return
            m = _str(mode) if mode else ""          # no any(): builtins are the code's to patch
            writing = "w" in m or "a" in m or "x" in m or "+" in m or (flags or 0) & _write_flags
            if not writing and inside(real, _read):
                try:
                    is_dir = _stat(real).st_mode & 0o170000 == 0o040000
                except OSError:
                    is_dir = False
                if not is_dir:
                    return
                raise deny(f"open {path!r}: a folder outside the sandbox folder (a descriptor "
                           f"for dir_fd= calls)")
            raise deny(f"open {path!r} outside the sandbox folder")
        if event in ("os.listdir", "os.scandir") and args and args[0] not in (None, "", "."):
            p = args[0]
            if _type(p) is not _int and \
                    not inside(_resolve(path_of(p), _base, _lstat, _readlink, deny), _read):
                raise deny(f"list {p!r} outside the sandbox folder")
            return
        if event.startswith("socket."):
            raise deny("network access is not allowed")
        if event in _refused:
            raise deny(f"{event} is not allowed")
        if event == "import" and args[0] in _imports:
            raise deny(f"import {args[0]} is not allowed")
        if event == "object.__setattr__" and _len(args) > 1 and args[1] in _func_attrs:
            raise deny(f"setting a function's {args[1]} is not allowed")
        if event in _changed:
            for name, paths, dir_fds in _changes:
                if name == event:
                    break
            by_fd = False
            for i in dir_fds:
                if i < _len(args) and args[i] not in (None, -1):
                    by_fd = True
            for i in paths:
                a = args[i] if i < _len(args) else None
                if a is None:
                    continue
                if _type(a) is _int:
                    if event == "os.truncate":        # ftruncate: only a file it opened for writing
                        continue
                    raise deny(f"{event} on a file descriptor is not allowed")
                p = path_of(a)
                if by_fd and not p.startswith("/"):
                    # a folder descriptor is one inside the sandbox folder (opening any other
                    # is refused above), and a name without '..' stays below it: shutil.rmtree
                    # and TemporaryDirectory work this way
                    if ".." in p.split("/"):
                        raise deny(f"{event} {a!r}: '..' beside a dir_fd")
                    continue
                if not inside(_resolve(p, _base, _lstat, _readlink, deny), _home):
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

def _depth(v):
    """How deep `v` nests, counted without recursion (a deep value must not crash the runner)."""
    deepest, todo = 0, [(v, 1)]
    while todo:
        v, d = todo.pop()
        if d > deepest:
            deepest = d
            if d > MAX_DEPTH:
                return d
        if type(v) is dict:
            todo += [(x, d + 1) for x in v.values()]
        elif type(v) in (list, tuple):
            todo += [(x, d + 1) for x in v]
    return deepest

def _jsonable(v):
    if _depth(v) > MAX_DEPTH:
        raise OutputLimit(f"the result nests deeper than {MAX_DEPTH} levels")
    try:
        json.dumps(v, allow_nan=True); return v
    except (TypeError, ValueError):
        return repr(v)[:CFG["max_output_bytes"]]

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
        r = {"ok": False, "kind": "exception", "error": f"SystemExit({e.code!r})"[:2000]}
    except BaseException as e:
        try:
            r = {"ok": False, "kind": "exception", "error": f"{type(e).__name__}: {e}"[:2000]}
        except BaseException:         # an exception whose str() raises, or recurses
            r = {"ok": False, "kind": "exception", "error": type(e).__name__}
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__
    if ATTEMPTS and r["kind"] in ("ok", "exception"):   # a caught Forbidden is still an attempt
        r = {"ok": False, "kind": "forbidden",
             "error": str(ATTEMPTS[0])[:2000] + " (the code caught the refusal)"}
    r["stdout"] = out.text()[-4000:]
    return r

def main():
    null = os.open(os.devnull, os.O_RDWR)
    os.dup2(null, 1); os.dup2(null, 2)
    sys.__stdout__ = sys.__stderr__ = open(os.devnull, "w")
    if CFG["seccomp"]:
        try:
            _load_seccomp(CFG["seccomp"])
        except (OSError, ImportError, AttributeError) as e:   # never run the code without it
            _send({"phase": "load", "ok": False, "kind": "crash",
                   "error": f"the sandbox could not load its seccomp filter: {e}"})
            return
    signal.signal(signal.SIGALRM, _on_alarm)
    mem = CFG["memory_mb"] * 1024 * 1024
    _limit(resource.RLIMIT_AS, mem)
    _limit(resource.RLIMIT_CPU, max(1, math.ceil(CFG["cpu_s"])))
    _limit(resource.RLIMIT_FSIZE, max(CFG["max_output_bytes"], 1 << 20))
    _limit(resource.RLIMIT_NOFILE, 256)
    _limit(resource.RLIMIT_NPROC, 1)
    source = open("module.py").read()
    stdin = sys.stdin
    ns = {"__name__": "sandboxed", "__file__": os.path.join(HOME, "module.py")}
    if CFG["audit_hook"]:
        sys.addaudithook(_make_hook(HOME, ALLOWED_READ))
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


if __name__ == "__main__":
    main()
