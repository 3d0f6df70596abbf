"""What every meta-agent session gets and gives back, and the steps all adapters share.

DESIGN.md, "Interfaces": `run_session(ctx) -> SessionResult`; ctx names the experiment folder, the
workspace, the skill, the prompt, a time limit and a budget; the result says how it ended, which
commits it made, its cost where known and where its transcript is. `run_session` here dispatches
to the adapter, and whatever happens (a CLI not installed, no credentials, a hang, a crash) ends
with a result whose reason goes to the ledger as a "session" line; it never raises, so training
goes on and the next session is tried as scheduled.
"""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

from orchestrator import diagnostics, effects, experience, gitops
from orchestrator.workspace import Workspace, parse_trailers

# refs only the gate (and `orchestrator start`) may move: the live and judged refs, the gate's
# notes, the run tags; guarded for the CLIs, which run while the gate is held: a session that
# moved refs/eau/live itself would skip the gate (tests/faults/test_fault_agent_reach.py tries it)
GUARDED_REFS = ("refs/eau/", "refs/notes/", "refs/tags/")
GUARDED_AGENTS = ("claude-code", "codex", "command")

# how a session ended
OK, NO_CHANGE, FAILED, TIMEOUT, UNAVAILABLE, REFUSED = (
    "ok", "no_change", "failed", "timeout", "unavailable", "refused")


@dataclass
class SessionContext:
    """Everything one session needs; the adapters read nothing else."""

    agent: str                      # claude-code | codex | builtin | command
    session_id: str                 # "s001": names the session folder and the commit identity
    exp_dir: Path                   # runs/NAME
    workspace: Path                 # the experiment's git workspace: the only place it may edit
    run_dir: Path                   # runs/NAME/run-NNN: the current run's logs (read-only)
    bench: str                      # usergym | colbench | tau2
    skill_path: Path                # skills/eau/SKILL.md (or the generic instruction)
    prompt: str = ""                # the task text; built by build_prompt when empty
    time_limit_s: float = 600.0     # wall clock; the process group is killed after it
    budget_usd: float | None = None # spend limit, for the CLIs that take one
    max_turns: int = 30
    window: int = 10                # the W of measured effects and the harder-direction check
    experience_dir: Path | None = None
    command: list[str] | None = None   # the executable of the `command` adapter
    extra_env: dict[str, str] = field(default_factory=dict)
    step: int | None = None         # the trainer's last step when the session began

    @property
    def session_dir(self) -> Path:
        path = self.exp_dir / "agents" / self.session_id
        path.mkdir(parents=True, exist_ok=True)
        return path


@dataclass
class SessionResult:
    agent: str
    session_id: str
    status: str                     # ok | no_change | failed | timeout | unavailable | refused
    reason: str = ""
    commits: list[str] = field(default_factory=list)
    cost_usd: float | None = None
    turns: int | None = None
    denials: list[str] = field(default_factory=list)
    transcript: str | None = None
    duration_s: float = 0.0
    control: dict[str, Any] | None = None   # a restart/resume request left in control.json
    step: int | None = None         # the trainer's last step when the session began

    def ledger_line(self) -> dict[str, Any]:
        return {"type": "session", **asdict(self), "time": time.time()}


# ----------------------------------------------------------------------------- the prompt

def build_prompt(ctx: SessionContext) -> str:
    """The task text: where things are, the current findings, recent effects, the experience index.
    Under the generic skill (the paper's generic meta-agent baseline, Table 4) only where things are."""
    if ctx.skill_path.parent.name == "generic":
        return (f"A training run is in progress. Run logs (read-only): {ctx.run_dir}\n"
                f"Workspace (a git repository; the only place you may edit and commit): {ctx.workspace}\n"
                "Improve training. Commit with `Why:` and `Expect:` lines.\n")
    eff = effects.ledger_read(ctx.exp_dir, "effect")[-8:]
    findings = diagnostics.diagnose(ctx.run_dir, ctx.window, eff)
    metrics = diagnostics.read_metrics(ctx.run_dir)
    step = metrics[-1]["step"] if metrics else 0
    lines = [
        f"You are the EAU meta-agent, session {ctx.session_id}, for the {ctx.bench} training run "
        f"{ctx.run_dir.name} (now at step {step}).",
        f"Workspace (a git repository; the ONLY place you may edit and commit): {ctx.workspace}",
        f"Run logs (read-only): {ctx.run_dir} (metrics.jsonl, events.jsonl, trajectories/)",
        f"Experience pool (read; add findings as markdown files): {ctx.experience_dir or experience.pool_dir()}",
        f"Intervention ledger (read-only): {ctx.exp_dir / 'ledger.jsonl'}",
        f"Skill scripts: {sys.executable} {ctx.skill_path.parent / 'scripts'}/<summarize|diagnose|"
        f"knobs|effects>.py (see the skill for their arguments)",
        "Follow the skill's instructions. Make at most one focused intervention per gym (one that "
        "reaches every gym goes alone), commit each with `Why:` and `Expect:` lines, or make none "
        "when nothing needs fixing.",
        "",
        "Diagnostics now:" if findings else "Diagnostics now: no failure mode detected.",
        *[f"- [{f.kind}{'/' + f.gym if f.gym else ''}] {f.message}" for f in findings],
        "",
        "Measured effects of recent interventions:" if eff else "No measured effects yet.",
        *[f"- {e['commit'][:10]} {e['metric']} {e['before']} -> {e['after']} (floor "
          f"{e['noise_floor']}): {e['label']}" for e in eff],
        "",
        "Experience pool index:",
        experience.index(ctx.experience_dir, ctx.bench),
    ]
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- running a CLI

@dataclass
class ProcResult:
    returncode: int | None          # None: killed at the time limit, or given up on
    stdout: str
    stderr: str
    duration_s: float
    gave_up: str = ""               # why the CLI was ended early (give_up's answer)


def run_process(argv: list[str], *, cwd: Path, env: dict[str, str], timeout_s: float,
                stdout_path: Path, stderr_path: Path,
                give_up: Callable[[str], str] | None = None) -> ProcResult:
    """Run a CLI in its own process group with stdin from /dev/null (both CLIs wait on an open
    stdin: claude-code 2.1.197 and codex-cli 0.171.0 do); at the time limit the whole group gets
    SIGTERM, then SIGKILL. `give_up(stdout so far)` is asked every second: a reason it returns
    ends the CLI then (codex-cli 0.171.0 offline prints "Reconnecting... waiting for network"
    and waits for ever)."""
    t0, reason = time.monotonic(), ""
    with open(stdout_path, "w") as out, open(stderr_path, "w") as err:
        # its own process group, in the orchestrator's session: a new session would be a new
        # autogroup, where the session thread's SCHED_IDLE would not hold it below the trainer
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=err, process_group=0)
        ACTIVE.add(proc)
        # its own process group outlives a SIGKILLed orchestrator: the pid file lets the next
        # `orchestrator start` end it (kill_leftover_agents; the fault test
        # tests/faults/test_fault_orchestrator_kill.py kills an orchestrator mid-session)
        pid_file = stdout_path.parent / AGENT_PID
        pid_file.write_text(f"{proc.pid}\n")
        deadline, rc = t0 + timeout_s, None
        try:
            while rc is None:
                wait = deadline - time.monotonic()
                try:
                    rc = proc.wait(timeout=max(0.0, min(wait, 1.0) if give_up else wait))
                except subprocess.TimeoutExpired:
                    reason = give_up(stdout_path.read_text(errors="replace")) if give_up else ""
                    if reason or time.monotonic() >= deadline:
                        _kill_group(proc)
                        break
        finally:
            ACTIVE.discard(proc)
            pid_file.unlink(missing_ok=True)
    return ProcResult(rc, stdout_path.read_text(errors="replace"),
                      stderr_path.read_text(errors="replace"), time.monotonic() - t0, reason)


ACTIVE: set[subprocess.Popen] = set()     # CLI sessions running now (killed when `start` ends)


def kill_active() -> None:
    """End every session CLI still running (its own process group): `start` is going away."""
    for proc in list(ACTIVE):
        _kill_group(proc)


AGENT_PID = "agent.pid"


def kill_leftover_agents(exp_dir: Path) -> list[int]:
    """End the process group of every session CLI a killed orchestrator left running; their pids."""
    ended = []
    for pid_file in sorted(Path(exp_dir).glob(f"agents/*/{AGENT_PID}")):
        try:
            pid = int(pid_file.read_text().strip())
            os.killpg(pid, signal.SIGKILL)
            ended.append(pid)
        except (ValueError, ProcessLookupError, PermissionError):
            pass
        pid_file.unlink(missing_ok=True)
    return ended


def _processes() -> list[tuple[int, list[bytes]]]:
    """(pid, arguments) of every process this user can read."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                found.append((int(entry.name), (entry / "cmdline").read_bytes().split(b"\0")))
            except OSError:
                continue                # gone meanwhile, or not ours to read
    return found


def naming(marker: str) -> list[int]:
    """Processes whose command line names `marker` (a session's workspace: after the session,
    none should be left)."""
    return [pid for pid, args in _processes() if any(marker.encode() in a for a in args)]


def end_leftovers(marker: str, program: str) -> list[int]:
    """SIGKILL every process whose command line names both `marker` (the session's workspace)
    and `program` (a helper of the CLI's), orphaned yet or not (a helper whose parent is still
    dying is reparented a moment later); their pids."""
    ended = []
    for pid, args in _processes():
        if any(marker.encode() in a for a in args) and any(program.encode() in a for a in args):
            try:
                os.kill(pid, signal.SIGKILL)
                ended.append(pid)
            except (ProcessLookupError, PermissionError):
                pass
    return ended


def _kill_group(proc: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 3.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue


def clean_env(ctx: SessionContext, keep: tuple[str, ...] = ()) -> dict[str, str]:
    """The environment a CLI runs with: PATH, HOME, locale, the named credentials, and EAU_* facts."""
    base = {k: v for k, v in os.environ.items()
            if k in ("PATH", "HOME", "LANG", "LC_ALL", "TERM", "TMPDIR", "USER") or k in keep}
    base.update({
        "EAU_AGENT": ctx.agent, "EAU_SESSION": ctx.session_id, "EAU_EXP_DIR": str(ctx.exp_dir),
        "EAU_WORKSPACE": str(ctx.workspace), "EAU_RUN_DIR": str(ctx.run_dir), "EAU_BENCH": ctx.bench,
        "EAU_SKILL": str(ctx.skill_path), "EAU_TIME_LIMIT_S": str(ctx.time_limit_s),
        "EAU_EXPERIENCE_DIR": str(ctx.experience_dir or experience.pool_dir()),
        "EAU_PROMPT_FILE": str(ctx.session_dir / "prompt.md"),
        **gitops.identity_env(ctx.agent, ctx.session_id), **ctx.extra_env,
    })
    return base


# ----------------------------------------------------------------------------- guards

def protected_fingerprint(ctx: SessionContext) -> dict[str, tuple[float, int]]:
    """mtime and size of the files a session must never change: the experiment's record, every
    run's config, and the eval folder (a CLI without a sandbox could still write there)."""
    paths = [ctx.exp_dir / "experiment.json", *ctx.exp_dir.glob("run-*/config.json")]
    eval_dir = ctx.exp_dir / "eval"
    if eval_dir.is_dir():
        paths += [p for p in eval_dir.rglob("*") if p.is_file()]
    out = {}
    for p in paths:
        if p.exists():
            st = p.stat()
            out[str(p)] = (st.st_mtime, st.st_size)
    return out


def changed_protected(before: dict[str, tuple[float, int]], ctx: SessionContext) -> list[str]:
    after = protected_fingerprint(ctx)
    return sorted(p for p in set(before) | set(after) if before.get(p) != after.get(p))


def guarded_refs(ws: Path) -> dict[str, str]:
    out = gitops.git(ws, "for-each-ref", "--format=%(refname) %(objectname)", *GUARDED_REFS)
    return dict(line.split(" ", 1) for line in out.splitlines() if line.strip())


def restore_refs(ws: Path, before: dict[str, str]) -> list[str]:
    """Put back every guarded ref the session created, moved or deleted; returns their names."""
    after = guarded_refs(ws)
    moved = sorted(r for r in set(before) | set(after) if before.get(r) != after.get(r))
    for ref in moved:
        if ref in before:
            gitops.git(ws, "update-ref", ref, before[ref])
        else:
            gitops.git(ws, "update-ref", "-d", ref)
    return moved


def read_control(ws: Path) -> dict[str, Any] | None:
    path = ws / "control.json"
    if not path.exists():
        return None
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError:
        return None
    return data if isinstance(data, dict) and data.get("action") in ("restart", "resume") else None


# ----------------------------------------------------------------------------- the entry point

def run_session(ctx: SessionContext) -> SessionResult:
    """Run one session with the adapter `ctx.agent`, then record it in the ledger."""
    from orchestrator.agents import get_adapter

    t0 = time.monotonic()
    if not ctx.prompt:
        ctx.prompt = build_prompt(ctx)
    (ctx.session_dir / "prompt.md").write_text(ctx.prompt)
    start_head = gitops.head(ctx.workspace)
    guard = protected_fingerprint(ctx)
    refs = guarded_refs(ctx.workspace) if ctx.agent in GUARDED_AGENTS else None
    try:
        result = get_adapter(ctx.agent).run(ctx)
    except Exception as exc:      # an adapter bug fails its session, never the training
        result = SessionResult(ctx.agent, ctx.session_id, FAILED, f"adapter error: {exc!r}")
    touched = changed_protected(guard, ctx)
    if touched:
        result.status = REFUSED
        result.reason = f"session wrote outside the workspace: {', '.join(touched)}"
    moved = restore_refs(ctx.workspace, refs) if refs is not None else []
    if moved:
        result.status = REFUSED
        result.reason = (f"session moved refs only the gate may move ({', '.join(moved)}); they "
                         f"were put back") + (f"; {result.reason}" if touched else "")
    try:
        made = ensure_trailers(ctx, start_head)
    except gitops.GitError:
        made = []
    result.commits = made
    if result.status == OK and not made:
        # an agent whose only attempted writes were denied (outside the workspace) was refused
        result.status = REFUSED if result.denials else NO_CHANGE
    result.control = read_control(ctx.workspace) if made else None
    result.duration_s = round(time.monotonic() - t0, 2)
    result.step = ctx.step
    (ctx.session_dir / "result.json").write_text(json.dumps(asdict(result), indent=1))
    effects.ledger_append(ctx.exp_dir, result.ledger_line())
    return result


# ----------------------------------------------------------------------------- after a CLI exits

def commit_leftovers(ctx: SessionContext, before_dirty: set[str], message: str) -> tuple[str | None, str]:
    """Commit the edits a CLI left uncommitted (Codex's sandbox keeps .git read-only, DESIGN.md),
    with the message it left. A refusal by the pre-commit hook (the gate) restores those files."""
    new = [p for p in gitops.dirty_paths(ctx.workspace) if p not in before_dirty]
    if not new:
        return None, ""
    if "Why:" not in message:
        message = (message.strip() or f"{ctx.agent} session {ctx.session_id} edits") + \
            "\n\nWhy: (the agent left no rationale)\nExpect: (none given)\n"
    try:
        gitops.git(ctx.workspace, "add", "--", *new)
        gitops.git(ctx.workspace, "commit", "-q", "-m",
                   gitops.with_trailers(message, ctx.agent, ctx.session_id),
                   env=gitops.identity_env(ctx.agent, ctx.session_id))
        return gitops.head(ctx.workspace), ""
    except gitops.GitError as exc:
        discard_leftovers(ctx, before_dirty)
        return None, f"commit refused: {exc}"


def discard_leftovers(ctx: SessionContext, before_dirty: set[str]) -> list[str]:
    """Put back what a failed, refused or killed session left half-done (only its own edits)."""
    new = [p for p in gitops.dirty_paths(ctx.workspace) if p not in before_dirty]
    if new:
        gitops.git(ctx.workspace, "reset", "-q", "--", *new, check=False)
    for p in new:
        if gitops.show_file(ctx.workspace, "HEAD", p) is not None:
            gitops.git(ctx.workspace, "checkout", "-q", "HEAD", "--", p, check=False)
        else:
            (ctx.workspace / p).unlink(missing_ok=True)
    return new


def ensure_trailers(ctx: SessionContext, start: str) -> list[str]:
    """Give every commit of the session the `Eau-Agent:`/`Eau-Session:` trailers, rewriting (with
    their trees, authors and dates kept) the session's own new commits that lack them. Commits the
    session did not make are left alone; returns the session's commits."""
    commits = gitops.commits_between(ctx.workspace, start)
    if not commits or all(parse_trailers(gitops.message(ctx.workspace, c)).get("Eau-Session")
                          for c in commits):
        return commits
    if not Workspace(ctx.workspace).is_ancestor(start, "HEAD"):
        return commits      # main was reset or rewritten: left as it is for the gate to refuse
    parent, out = start, []
    for c in commits:
        fmt = gitops.git(ctx.workspace, "log", "-1", "--format=%T%n%an%n%ae%n%ad", c).splitlines()
        tree, name, email, date = fmt[:4]
        env = {"GIT_AUTHOR_NAME": name, "GIT_AUTHOR_EMAIL": email, "GIT_AUTHOR_DATE": date,
               **{k: v for k, v in gitops.identity_env(ctx.agent, ctx.session_id).items()
                  if k.startswith("GIT_COMMITTER")}}
        msg = gitops.with_trailers(gitops.message(ctx.workspace, c), ctx.agent, ctx.session_id)
        parent = gitops.git(ctx.workspace, "commit-tree", tree, "-p", parent, "-m", msg, env=env).strip()
        out.append(parent)
    gitops.git(ctx.workspace, "update-ref", "HEAD", parent, commits[-1])
    return out


class hidden_eval:
    """Keep runs/NAME/eval/ unreadable while a CLI without read rules (command; codex too, beside
    its permission profile's own "none" entry) runs (DESIGN.md: evaluation is walled off). A chmod
    is no barrier for root: there `wrap` runs the CLI in its own mount namespace with the folder
    covered by an empty tmpfs and no capabilities left to uncover it
    (tests/faults/test_fault_agent_reach.py), where unshare and setpriv work (codex does not take
    `wrap`: its bubblewrap cannot map users without capabilities)."""

    def __init__(self, ctx: SessionContext):
        self.path, self.mode = ctx.exp_dir / "eval", None

    def __enter__(self) -> "hidden_eval":
        if self.path.is_dir():
            self.mode = self.path.stat().st_mode & 0o777
            self.path.chmod(0)
        return self

    def __exit__(self, *exc: object) -> None:
        if self.mode is not None:
            self.path.chmod(self.mode)

    def wrap(self, argv: list[str]) -> list[str]:
        if self.mode is None or os.geteuid() != 0 or not _namespaces_work():
            return argv
        script = ('mount -t tmpfs -o size=4k,mode=000 eau-eval "$0" && '
                  'exec setpriv --bounding-set=-all --inh-caps=-all -- "$@"')
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script,
                str(self.path), *argv]


_NAMESPACES: list[bool] = []


def _namespaces_work() -> bool:
    """Whether this machine lets us make a mount namespace and drop capabilities (asked once)."""
    if not _NAMESPACES:
        ok = bool(shutil.which("unshare") and shutil.which("setpriv"))
        if ok:
            probe = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                                    "mount -t tmpfs -o size=4k eau-probe /mnt 2>/dev/null || "
                                    "mount -t tmpfs -o size=4k eau-probe /tmp && "
                                    "exec setpriv --bounding-set=-all --inh-caps=-all -- true"],
                                   capture_output=True, timeout=30)
            ok = probe.returncode == 0
        _NAMESPACES.append(ok)
    return _NAMESPACES[0]
