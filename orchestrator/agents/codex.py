"""Codex as the meta-agent: `codex exec --sandbox workspace-write -C <workspace> --json -o FILE`.

Facts seen with codex-cli 0.171.0 (the pinned version, scripts/agent_clis.txt; its requests read
from its own traffic to orchestrator/agents/scripted.py) that shape the command line:
- `--full-auto` is gone (exit 2); `exec` runs with the approval policy `never`: a command the
  sandbox refuses fails, nobody is asked;
- the workspace-write sandbox (bubblewrap) lets the model's commands read the whole disk and
  write the workspace, `--add-dir` folders, and /tmp and $TMPDIR unless
  `sandbox_workspace_write.exclude_slash_tmp`/`exclude_tmpdir_env_var` say otherwise: both are set,
  since an experiment under /tmp would otherwise be writable; `.git` stays read-only, so Codex
  edits files and leaves a last message, and this adapter commits the edits with that message
  (DESIGN.md, "Interfaces"); every git command that writes (commit, reset, update-ref) fails
  with "Read-only file system";
- the sandbox cannot start when CODEX_HOME lies under the temporary folder (stderr: "Refusing to
  create helper binaries under temporary dir"; every command then fails with "bwrap: execvp
  codex-linux-sandbox"), so that is refused before the session;
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
import tempfile
from pathlib import Path

from orchestrator import experience, gitops
from orchestrator.agents import base, clis

EXE = "codex"
INSTALL_HINT = ("install it with `bash scripts/install_agent_clis.sh` (or `npm install -g "
                "@openai/codex`) and log in (`codex login`) or set OPENAI_API_KEY")
CREDENTIAL_ENV = ("OPENAI_API_KEY", "CODEX_HOME")
# what a refused command's output says: the sandbox's read-only mounts, a missing permission
REFUSED_OUTPUT = ("Read-only file system", "Permission denied", "Operation not permitted")


def build_argv(ctx: base.SessionContext, last_message: str, exe: str = EXE) -> list[str]:
    pool = Path(ctx.experience_dir or experience.pool_dir())
    argv = [exe, "exec", "--sandbox", "workspace-write", "-C", str(ctx.workspace),
            "--add-dir", str(pool),
            "-c", "sandbox_workspace_write.exclude_slash_tmp=true",
            "-c", "sandbox_workspace_write.exclude_tmpdir_env_var=true",
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


def denials(evs: list[dict]) -> list[str]:
    """The model's commands the sandbox refused: exec(<command>) for each whose output says so."""
    out = []
    for e in evs:
        item = e.get("item") or {}
        if e.get("type") == "item.completed" and item.get("type") == "command_execution" \
                and item.get("exit_code") not in (0, None) \
                and any(s in str(item.get("aggregated_output")) for s in REFUSED_OUTPUT):
            out.append(f"exec({item.get('command', '?')})")
    return out


def _codex_home_in_tmp() -> str:
    home, tmp = clis.codex_home().resolve(), Path(tempfile.gettempdir()).resolve()
    if home == tmp or tmp in home.parents:
        return (f"codex cannot start its sandbox with CODEX_HOME ({home}) inside the temporary "
                f"folder {tmp}: point CODEX_HOME (or TMPDIR) elsewhere.")
    return ""


def run(ctx: base.SessionContext) -> base.SessionResult:
    res = base.SessionResult(ctx.agent, ctx.session_id, base.FAILED)
    exe = clis.find("codex")
    if exe is None:
        res.status, res.reason = base.UNAVAILABLE, f"codex is not installed: {INSTALL_HINT}."
        return res
    if _codex_home_in_tmp():
        res.status, res.reason = base.UNAVAILABLE, _codex_home_in_tmp()
        return res
    last = ctx.session_dir / "last-message.txt"
    dirty = set(gitops.dirty_paths(ctx.workspace))
    with base.hidden_eval(ctx) as wall:
        proc = base.run_process(wall.wrap(build_argv(ctx, str(last), exe)), cwd=ctx.workspace,
                                env=base.clean_env(ctx, keep=CREDENTIAL_ENV), timeout_s=ctx.time_limit_s,
                                stdout_path=ctx.session_dir / "transcript.jsonl",
                                stderr_path=ctx.session_dir / "stderr.txt", give_up=unreachable)
    res.transcript = str(ctx.session_dir / "transcript.jsonl")
    evs = events(proc.stdout)
    res.turns = sum(1 for e in evs if e.get("type") == "turn.completed")
    res.denials = denials(evs)
    errors = _error_texts(evs)
    message = last.read_text() if last.exists() else ""
    if proc.gave_up:
        res.status, res.reason = base.UNAVAILABLE, proc.gave_up
    elif proc.returncode is None:
        res.status, res.reason = base.TIMEOUT, f"killed at its time limit of {ctx.time_limit_s:.0f} s"
    elif unreachable(proc.stdout) or "not logged in" in proc.stderr.lower():
        res.status, res.reason = base.UNAVAILABLE, (unreachable(proc.stdout) or
                                                    f"codex has no credentials: {INSTALL_HINT}.")
    elif proc.returncode != 0:
        tail = (errors[-1] if errors else proc.stderr.strip()[-300:]) or "no output"
        res.reason = f"codex exited {proc.returncode}: {tail}"
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
