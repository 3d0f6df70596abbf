"""The operating system's walls around the sandbox's children (README, "What the sandbox protects
against"; the attacks they stop: tests/faults/test_fault_os_walls.py): namespaces by
bubblewrap, and a seccomp filter built by libseccomp.

PEP 578 says an audit hook is not a sandbox, and hostile reward modules showed it: a private
CPython entry point (`_posixsubprocess.fork_exec`) spawned a process that outlived the call,
`dir_fd=` calls wrote into the venv, `mknod`/`mkfifo` and POSIX shared memory raised no audit
event, a subinterpreter ran with no hook at all. So every child now runs
- in `bwrap --unshare-all` (Debian's `bubblewrap`): its own mount namespace with a read-only view
  of the Python installation and the system libraries it links, its own folder (a tmpfs holding
  the module and the runner read-only), a private empty `/tmp` and `/dev/shm` (tmpfs, sizes
  below) and a minimal `/dev`, no `/proc`;
  its own PID namespace (when the call ends, bwrap's init dies and the kernel kills everything
  left in it, sessions included), no network, its own IPC and UTS namespaces, no capabilities;
- under a seccomp filter that kills the process on process creation (fork, vfork, clone without
  CLONE_THREAD, execve), device nodes and FIFOs (mknod), ptrace and cross-process memory, sockets,
  mounts and namespaces, and a list of kernel interfaces a reward function never needs.

Why the child loads the filter itself (`prctl(PR_SET_SECCOMP)` through ctypes, before the audit
hook and before any untrusted byte runs) and not through bwrap's `--seccomp FD`: bwrap loads its
filter before it execs the command, so that filter must allow execve; ours can refuse it. And
it holds where namespaces are refused (a container without user namespaces): there the sandbox
keeps the filter and the audit hook and says so once, loudly (`isolation()`).

Why ctypes over libseccomp rather than PyPI's `pyseccomp`: we call five functions of the library
(init, resolve a name, add a rule, export the BPF program, release), in the trusted parent only;
pyseccomp is itself a ctypes wrapper of the same library, so it would add a dependency and no
safety. Debian's `python3-seccomp` binds only Debian's own Python, not a venv's.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass, field

# Memory-backed folders of a child, outside RLIMIT_AS, so bounded here: its own folder (a host
# folder once, where files of RLIMIT_FSIZE each could fill the host's disk within
# the CPU limit), and a private /tmp and /dev/shm; 96 MiB at most per child, freed when it ends.
FOLDER_BYTES = 64 << 20
TMPFS_BYTES = 16 << 20

# libseccomp's constants (seccomp.h)
_ACT_KILL_PROCESS = 0x80000000
_ACT_ALLOW = 0x7FFF0000
_CMP_MASKED_EQ = 7
CLONE_THREAD = 0x00010000


def _act_errno(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)


# Killed on sight (SIGSYS: the parent reports kind "forbidden", and the code cannot catch it).
KILLED = (
    # processes (`_posixsubprocess` spawned one with no audit event); clone is below, with its
    # CLONE_THREAD condition
    "fork", "vfork", "execve", "execveat",
    # device nodes and FIFOs (class 3)
    "mknod", "mknodat",
    # other processes' memory
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_open", "pidfd_getfd",
    # network
    "socket", "socketpair",
    # mounts, namespaces and roots (where namespaces are refused, the child is real root)
    "mount", "umount2", "pivot_root", "chroot", "unshare", "setns", "open_tree", "move_mount",
    "fsopen", "fsconfig", "fsmount", "fspick", "mount_setattr",
    # opening any file by handle, bypassing paths (the "shocker" container escape)
    "open_by_handle_at", "name_to_handle_at",
    # System V IPC and POSIX message queues (host-wide where the IPC namespace is refused)
    "shmget", "shmat", "msgget", "semget", "mq_open",
    # kernel interfaces: io_uring runs opens and connects outside this filter's view
    "io_uring_setup", "io_uring_enter", "io_uring_register", "bpf", "perf_event_open",
    "userfaultfd", "keyctl", "add_key", "request_key", "init_module", "finit_module",
    "delete_module", "kexec_load", "kexec_file_load", "reboot", "swapon", "swapoff", "acct",
    "syslog", "iopl", "ioperm", "quotactl", "settimeofday", "clock_settime", "clock_adjtime",
    "adjtimex",
)
# Refused with an error the code sees, where a library may try them and fall back.
REFUSED = (
    ("clone3", errno.ENOSYS),          # its flags sit behind a pointer seccomp cannot read; glibc
                                       # then creates threads with clone, checked below
    ("memfd_create", errno.EPERM),     # anonymous files: memory outside RLIMIT_AS (libffi,
                                       # which may try it, falls back to other memory)
    ("memfd_secret", errno.EPERM),
    # signals: a pthread_kill or abort() to itself fails; nothing else is the child's to signal
    ("kill", errno.EPERM), ("tkill", errno.EPERM), ("tgkill", errno.EPERM),
    ("rt_sigqueueinfo", errno.EPERM), ("rt_tgsigqueueinfo", errno.EPERM),
    ("pidfd_send_signal", errno.EPERM),
)


class _ArgCmp(ctypes.Structure):        # struct scmp_arg_cmp
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int),
                ("datum_a", ctypes.c_uint64), ("datum_b", ctypes.c_uint64)]


def _libseccomp():
    lib = ctypes.CDLL(ctypes.util.find_library("seccomp") or "libseccomp.so.2")
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int,
                                           ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


def build_filter() -> bytes:
    """The BPF program (struct sock_filter[]) of the filter above, for this machine's architecture
    (libseccomp also kills calls made through another ABI, e.g. int 0x80 or x32 on x86-64).
    Raises OSError when libseccomp is missing or refuses a rule."""
    lib = _libseccomp()
    ctx = lib.seccomp_init(_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        def add(action: int, name: str, *cmps: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:                 # not a system call on this architecture (iopl on arm64)
                return
            arr = (_ArgCmp * len(cmps))(*cmps) if cmps else None
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), arr)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")
        for name in KILLED:
            add(_ACT_KILL_PROCESS, name)
        for name, code in REFUSED:
            add(_act_errno(code), name)
        # clone(flags, ...): a new thread (CLONE_THREAD set) is allowed, a new process is not
        add(_ACT_KILL_PROCESS, "clone", _ArgCmp(0, _CMP_MASKED_EQ, CLONE_THREAD, 0))
        with tempfile.TemporaryFile() as f:
            rc = lib.seccomp_export_bpf(ctx, f.fileno())
            if rc < 0:
                raise OSError(-rc, f"seccomp_export_bpf: {os.strerror(-rc)}")
            f.seek(0)
            return f.read()
    finally:
        lib.seccomp_release(ctx)


# -- the mount namespace ----------------------------------------------------------------------
def python_roots() -> list[str]:
    """Folders the child must read to start Python and import the standard library and the
    venv's packages: the prefixes, the real interpreter's folder, outermost first, none nested."""
    paths = {os.path.realpath(p) for p in (sys.prefix, sys.base_prefix, sys.exec_prefix,
                                           sys.base_exec_prefix)}
    paths |= {os.path.abspath(p) for p in (sys.prefix, sys.exec_prefix)}   # a venv by its own name
    paths.add(os.path.dirname(os.path.realpath(sys.executable)))
    out: list[str] = []
    for p in sorted(paths, key=len):
        if not any(p == q or p.startswith(q.rstrip("/") + "/") for q in out):
            out.append(p)
    return out


def _system_libraries() -> list[str]:
    """bwrap arguments for the shared libraries the interpreter and its extension modules link
    (libc, libm, libz, libssl, libffi...): /usr/lib and its merged-/usr links, and ld.so.cache
    (without it the dynamic linker does not look in /usr/lib/<multiarch>)."""
    args: list[str] = []
    for path in ("/usr/lib", "/usr/lib64", "/usr/lib32"):
        if os.path.isdir(path) and not os.path.islink(path):
            args += ["--ro-bind", path, path]
    for path in ("/lib", "/lib64", "/lib32"):
        if os.path.islink(path):
            args += ["--symlink", os.readlink(path), path]
        elif os.path.isdir(path):
            args += ["--ro-bind", path, path]
    return args + ["--ro-bind-try", "/etc/ld.so.cache", "/etc/ld.so.cache"]


def bwrap_argv(bwrap: str, workdir: str, files: tuple[str, ...], env: dict[str, str]) -> list[str]:
    """The bwrap command line that runs a child in a private copy of `workdir` holding only
    `files` (names in it) with `env`, and nothing else."""
    # --die-with-parent is PR_SET_PDEATHSIG, which fires when the *thread* that started bwrap
    # ends: the trainer starts reward workers from its main thread, and run_calls' children
    # end before their (pool) thread returns
    argv = [bwrap, "--unshare-all", "--die-with-parent", "--new-session", "--cap-drop", "ALL"]
    argv += _system_libraries()
    argv += ["--dev", "/dev",
             "--size", str(TMPFS_BYTES), "--tmpfs", "/tmp",
             "--size", str(TMPFS_BYTES), "--tmpfs", "/dev/shm"]
    # after the private /tmp, not before: bwrap mounts in order, and a venv under /tmp (a clone
    # in /tmp/x/.venv) bound first was hidden by the tmpfs, so every child failed to start
    # ("execvp /tmp/x/.venv/bin/python: No such file or directory") and the probe fell back to
    # no namespaces
    for root in python_roots():
        argv += ["--ro-bind", root, root]
    # its folder: a tmpfs at the host folder's path, holding the host's two files read-only
    # (bwrap takes bind sources from the host's root)
    argv += ["--size", str(FOLDER_BYTES), "--tmpfs", workdir]
    for name in files:
        argv += ["--ro-bind", os.path.join(workdir, name), os.path.join(workdir, name)]
    argv += ["--chdir", workdir, "--clearenv"]
    for key, value in env.items():
        argv += ["--setenv", key, value]
    return argv + ["--"]


# -- what this machine allows -----------------------------------------------------------------
@dataclass(frozen=True)
class Isolation:
    bwrap: str | None             # the bwrap executable, None when namespaces are not used
    seccomp: bytes | None = field(repr=False)   # the BPF program the child loads, or None
    missing: tuple[str, ...] = ()   # one sentence per missing layer

    @property
    def namespaces(self) -> bool:
        return self.bwrap is not None

    def describe(self) -> str:
        layers = (["namespaces (bwrap)"] if self.bwrap else []) + \
                 (["seccomp"] if self.seccomp else []) + ["audit hook", "rlimits"]
        return " + ".join(layers) + ("; missing: " + " ".join(self.missing) if self.missing else "")


_LOCK = threading.Lock()
_STATE: Isolation | None = None


def isolation(probe) -> Isolation:
    """The layers this machine allows, found once per process (each layer is tried on a real
    child by `probe(isolation) -> error or None`, given by training.sandbox). A missing layer is
    reported once on stderr, loudly: the README says what is then left."""
    global _STATE
    with _LOCK:
        if _STATE is not None:
            return _STATE
        _STATE = _find_layers(probe)
        missing = _STATE.missing
        if missing:
            print("\n".join([
                "EAU sandbox: WARNING: untrusted code (reward modules, ColBench answers, rule "
                "replays) runs with fewer walls than it should on this machine:", *missing,
                "What is then left unprotected: README, \"What the sandbox protects against\"."]),
                file=sys.stderr, flush=True)
        return _STATE


def _find_layers(probe) -> Isolation:
    """Both layers when one child runs with both (the common case: one probe, ~50 ms, which
    every hook process pays once); otherwise each layer is tried on its own."""
    missing = []
    try:
        program = build_filter()
    except (OSError, AttributeError) as exc:
        program = None
        missing.append(f"no seccomp filter (libseccomp: {exc}; scripts/setup.sh installs "
                       f"the Debian package libseccomp2).")
    bwrap = shutil.which("bwrap")
    if bwrap is not None and program is not None and probe(Isolation(bwrap, program)) is None:
        return Isolation(bwrap, program)
    if program is not None:
        err = probe(Isolation(None, program))
        if err:
            program = None
            missing.append(f"no seccomp filter (the kernel refused it: {err}).")
    if bwrap is None:
        missing.append("no namespaces (bwrap is not installed; scripts/setup.sh installs the "
                       "Debian package bubblewrap).")
    else:
        err = probe(Isolation(bwrap, program))
        if err:
            bwrap = None
            missing.append(f"no namespaces (bwrap cannot create them here: {err}).")
    return Isolation(bwrap, program, tuple(missing))


def bwrap_error(bwrap: str) -> str | None:
    """bwrap's own complaint when it cannot start a trivial sandbox here, or None."""
    try:
        proc = subprocess.run([bwrap, "--unshare-all", "--die-with-parent", "--ro-bind", "/", "/",
                               "--", "/bin/sh", "-c", "exit 0"], capture_output=True, text=True,
                              timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    return (proc.stderr.strip().splitlines() or [f"bwrap exited with code {proc.returncode}"])[-1]
