"""Codex as the meta-agent: `codex exec -C <workspace> --json -o FILE` under a permission profile.

Facts seen with codex-cli 0.171.0 (the pinned version, scripts/agent_clis.txt; its requests read
from its own traffic to orchestrator/agents/scripted.py) that shape the command line:
- `--full-auto` is gone (exit 2); `exec` runs with the approval policy `never`: a command the
  sandbox refuses fails, nobody is asked;
- the model's commands run in bubblewrap with no capabilities (CapEff 0, even as root) under the
  permission profile this adapter passes with `-c` (`default_permissions` and
  `[permissions.eau_session.filesystem]`): read the disk (`:root`), write the workspace
  (`:project_roots`) and the experience pool, never read runs/NAME/eval/ (`"none"`: `cat` there
  says "Permission denied"). Nothing else is writable: /tmp and $TMPDIR, which the older
  `--sandbox workspace-write` left writable, stay read-only (an experiment under /tmp was
  writable). `.git` inside the workspace stays read-only whatever the profile says, so Codex
  edits files and leaves a last message, and this adapter commits the edits with that message
  (DESIGN.md, "Interfaces"); git commands that write (commit, reset, update-ref) fail with
  "Read-only file system". The network stays off (a profile enables it only when it says so);
- a `sandbox_mode` or `[sandbox_workspace_write]` in the person's config.toml makes Codex ignore
  permission profiles, and with them the eval wall, so such a config is refused before the session;
- the sandbox cannot start when CODEX_HOME lies under the temporary folder (stderr: "Refusing to
  create helper binaries under temporary dir"; every command then fails with "bwrap: execvp
  codex-linux-sandbox"), so that is refused before the session too;
- the mount namespace `base.hidden_eval.wrap` makes for root drops every capability, after which
  bubblewrap fails ("setting up uid map: Operation not permitted"): the profile's "none" entry is
  Codex's own eval wall, and the chmod of `hidden_eval` stays for non-root users;
- offline it prints `Reconnecting... waiting for network` (after about 3 s) and retries for
  ever; a 401 from the endpoint is retried five times (7 s). Both end the session at once as
  unavailable, from its JSON events;
- a model endpoint of one's own is a `[model_providers.X]` table (base_url, wire_api
  "responses", env_key) selected by `model_provider` in $CODEX_HOME/config.toml, which this
  adapter leaves to Codex; OPENAI_BASE_URL is ignored, so it goes in as `-c openai_base_url=`;
- without `--json` it prints nothing on stdout; it waits on an open stdin. Codex has no
  system-prompt flag: the skill's text leads the prompt.
"""
from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path

from orchestrator import experience, gitops
from orchestrator.agents import base, clis

EXE = "codex"
INSTALL_HINT = ("install it with `bash scripts/install_agent_clis.sh` (or `npm install -g "
                "@openai/codex`) and log in (`codex login`) or set OPENAI_API_KEY")
LOGIN_HINT = "log in with `codex login`, or set OPENAI_API_KEY"         # installed, not logged in
CREDENTIAL_ENV = ("OPENAI_API_KEY", "CODEX_HOME")
# what a refused command's output says: the sandbox's read-only mounts, a missing permission
REFUSED_OUTPUT = ("Read-only file system", "Permission denied", "Operation not permitted")


PROFILE = "eau_session"


def permission_profile(ctx: base.SessionContext) -> list[str]:
    """The `-c` overrides that select this session's permission profile (values are TOML)."""
    pool = Path(ctx.experience_dir or experience.pool_dir()).resolve()
    eval_dir = (ctx.exp_dir / "eval").resolve()
    fs = (f'{{":root"="read", ":project_roots"={{"."="write"}}, {json.dumps(str(pool))}="write", '
          f'{json.dumps(str(eval_dir))}="none"}}')
    return ["-c", f'default_permissions="{PROFILE}"', "-c", f"permissions.{PROFILE}.filesystem={fs}"]


def credential_env() -> tuple[str, ...]:
    """The variables the session's environment keeps: OpenAI's key, CODEX_HOME, and the key
    variable (`env_key`) of the custom model provider config.toml selects."""
    provider = clis.codex_provider()
    return CREDENTIAL_ENV + ((str(provider["env_key"]),) if provider and provider.get("env_key") else ())


def build_argv(ctx: base.SessionContext, last_message: str, exe: str = EXE) -> list[str]:
    argv = [exe, "exec", "-C", str(ctx.workspace), *permission_profile(ctx),
            "--skip-git-repo-check", "--json", "-o", last_message]
    if os.environ.get("OPENAI_BASE_URL"):
        argv += ["-c", f"openai_base_url={os.environ['OPENAI_BASE_URL']}"]
    skill = ctx.skill_path.read_text() if ctx.skill_path.exists() else ""
    prompt = (f"{skill}\n\n---\n\n{ctx.prompt}\nYou cannot run git commit here: leave your edits in "
              "the workspace and end with the commit message (subject, `Why:` and `Expect:` lines) "
              "as your last message.\n")
    return argv + ["--", prompt]        # the skill opens with "---": keep it from reading as a flag


def events(stdout: str) -> list[dict]:
    out = []
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                out.append(json.loads(line))
            except json.JSONDecodeError:
                continue            # a line cut by the kill: the rest still counts
    return out


def _error_texts(evs: list[dict]) -> list[str]:
    return [str(e.get("message") or (e.get("error") or {}).get("message") or "")
            for e in evs if e.get("type") in ("error", "turn.failed")]


def unreachable(stdout: str) -> str:
    """Why Codex cannot work, read from its events as they come; "" while nothing says so."""
    for text in _error_texts(events(stdout)):
        if "waiting for network" in text:
            return f"codex cannot reach its model endpoint (offline): {text}"
        if "unauthorized" in text.lower():        # "unexpected status 401 Unauthorized: ..."
            return f"codex has no valid credentials: {text}"
    return ""


def rollout(evs: list[dict]) -> Path | None:
    """Codex's own record of the session, $CODEX_HOME/sessions/Y/M/D/rollout-*-<thread id>.jsonl:
    every tool call and its output. `--json` leaves out the commands the sandbox refused (0.171.0
    printed 5 of 9 command_execution items in a scripted run: none of the 4 refused ones)."""
    thread = next((e.get("thread_id") for e in evs if e.get("type") == "thread.started"), None)
    if not thread:
        return None
    found = sorted((clis.codex_home() / "sessions").glob(f"*/*/*/rollout-*-{thread}.jsonl"))
    return found[-1] if found else None


def denials(rollout_text: str) -> list[str]:
    """exec(<command>) for every tool call whose output says the sandbox refused it."""
    calls, out = {}, []
    for line in rollout_text.splitlines():
        try:
            item = json.loads(line).get("payload") or {}
        except json.JSONDecodeError:
            continue
        if item.get("type") == "function_call":
            try:
                args = json.loads(item.get("arguments") or "{}")
            except json.JSONDecodeError:
                args = {}
            calls[item.get("call_id")] = args.get("cmd") or item.get("arguments")
        elif item.get("type") == "function_call_output" and \
                any(s in str(item.get("output")) for s in REFUSED_OUTPUT):
            out.append(f"exec({calls.get(item.get('call_id'), '?')})")
    return out


def cannot_start() -> str:
    """Why a session cannot work under this adapter's profile, known before it starts; "" if none."""
    # Codex's temporary folder is Rust's std::env::temp_dir(): $TMPDIR, else /tmp (Python's
    # tempfile.gettempdir() is cached at its first call, so it is not asked)
    home, tmp = clis.codex_home().resolve(), Path(os.environ.get("TMPDIR") or "/tmp").resolve()
    if home == tmp or tmp in home.parents:
        return (f"codex cannot start its sandbox with CODEX_HOME ({home}) inside the temporary "
                f"folder {tmp}: point CODEX_HOME (or TMPDIR) elsewhere.")
    try:
        config = tomllib.loads((home / "config.toml").read_text())
    except (OSError, tomllib.TOMLDecodeError):
        config = {}
    legacy = [k for k in ("sandbox_mode", "sandbox_workspace_write") if k in config]
    if legacy:
        return (f"{home / 'config.toml'} sets {' and '.join(legacy)}, under which Codex ignores the "
                f"permission profile that keeps runs/NAME/eval/ unreadable: remove {legacy[0]}.")
    return ""


def run(ctx: base.SessionContext) -> base.SessionResult:
    res = base.SessionResult(ctx.agent, ctx.session_id, base.FAILED)
    exe = clis.find("codex")
    if exe is None:
        res.status, res.reason = base.UNAVAILABLE, f"codex is not installed: {INSTALL_HINT}."
        return res
    why = cannot_start()
    if why:
        res.status, res.reason = base.UNAVAILABLE, why
        return res
    last = ctx.session_dir / "last-message.txt"
    dirty = set(gitops.dirty_paths(ctx.workspace))
    with base.hidden_eval(ctx):         # no wrap: see the module's docstring
        proc = base.run_process(build_argv(ctx, str(last), exe), cwd=ctx.workspace,
                                env=base.clean_env(ctx, keep=credential_env()), timeout_s=ctx.time_limit_s,
                                stdout_path=ctx.session_dir / "transcript.jsonl",
                                stderr_path=ctx.session_dir / "stderr.txt", give_up=unreachable)
    # codex-cli 0.171.0 starts its file-system helper in a bwrap of its own session
    # (`--new-session ... codex-linux-sandbox ... --codex-run-as-fs-helper`), which outlives the
    # CLI's process group: one per session stayed asleep under init until killed
    base.end_leftovers(str(ctx.workspace), "--codex-run-as-fs-helper")
    res.transcript = str(ctx.session_dir / "transcript.jsonl")
    evs = events(proc.stdout)
    res.turns = sum(1 for e in evs if e.get("type") == "turn.completed")
    record = rollout(evs)
    if record:                          # kept beside the transcript: nothing of the session lost
        (ctx.session_dir / "rollout.jsonl").write_text(record.read_text(errors="replace"))
        res.denials = denials(record.read_text(errors="replace"))
    errors = _error_texts(evs)
    message = last.read_text() if last.exists() else ""
    if proc.gave_up:
        res.status, res.reason = base.UNAVAILABLE, proc.gave_up
    elif proc.returncode is None:
        res.status, res.reason = base.TIMEOUT, f"killed at its time limit of {ctx.time_limit_s:.0f} s"
    elif proc.returncode != 0:         # a session that ended well keeps its work, blips or not
        why = unreachable(proc.stdout) or (f"codex has no credentials: {LOGIN_HINT}."
                                           if "not logged in" in proc.stderr.lower() else "")
        tail = (errors[-1] if errors else proc.stderr.strip()[-300:]) or "no output"
        res.status = base.UNAVAILABLE if why else base.FAILED
        res.reason = why or f"codex exited {proc.returncode}: {tail}"
    else:
        res.status, res.reason = base.OK, message.strip().splitlines()[0] if message.strip() else ""
    if res.status == base.OK:            # only a finished session's edits are committed
        _, refused = base.commit_leftovers(ctx, dirty, message)
        if refused:
            res.status, res.reason = base.REFUSED, refused
    else:
        base.discard_leftovers(ctx, dirty)
    if res.denials:
        res.reason = f"{res.reason} (refused by the sandbox: {'; '.join(res.denials)})"
    return res
