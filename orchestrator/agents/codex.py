"""Codex as the meta-agent: `codex exec --sandbox workspace-write -C <workspace> --json -o FILE`.

Facts seen running codex-cli 0.171.0 (tests/fakes/codex mimics it): `--full-auto` is gone (exit 2);
the workspace-write sandbox keeps `.git` read-only, so Codex edits files and leaves a last message,
and this adapter commits the edits with that message (DESIGN.md, "Interfaces"); it ignores
OPENAI_BASE_URL, so a base URL goes in as `-c openai_base_url=...`; without a network it never
gives up, so the wall-clock limit is what ends it; without `--json` it prints nothing on stdout; it
waits on an open stdin. Codex has no system-prompt flag: the skill's text leads the prompt.
"""
from __future__ import annotations

import json
import os
import shutil

from orchestrator import gitops
from orchestrator.agents import base

EXE = "codex"
INSTALL_HINT = "install it with `npm install -g @openai/codex` and log in (`codex login`)"
CREDENTIAL_ENV = ("OPENAI_API_KEY", "CODEX_HOME")


def build_argv(ctx: base.SessionContext, last_message: str) -> list[str]:
    argv = [EXE, "exec", "--sandbox", "workspace-write", "-C", str(ctx.workspace),
            "--skip-git-repo-check", "--json", "-o", last_message]
    if os.environ.get("OPENAI_BASE_URL"):
        argv += ["-c", f"openai_base_url={os.environ['OPENAI_BASE_URL']}"]
    skill = ctx.skill_path.read_text() if ctx.skill_path.exists() else ""
    prompt = (f"{skill}\n\n---\n\n{ctx.prompt}\nYou cannot run git commit here: leave your edits in "
              "the workspace and end with the commit message (subject, `Why:` and `Expect:` lines) "
              "as your last message.\n")
    return argv + ["--", prompt]        # the skill opens with "---": keep it from reading as a flag


def run(ctx: base.SessionContext) -> base.SessionResult:
    res = base.SessionResult(ctx.agent, ctx.session_id, base.FAILED)
    if shutil.which(EXE) is None:
        res.status, res.reason = base.UNAVAILABLE, f"codex is not installed: {INSTALL_HINT}."
        return res
    last = ctx.session_dir / "last-message.txt"
    dirty = set(gitops.dirty_paths(ctx.workspace))
    with base.hidden_eval(ctx) as wall:
        proc = base.run_process(wall.wrap(build_argv(ctx, str(last))), cwd=ctx.workspace,
                                env=base.clean_env(ctx, keep=CREDENTIAL_ENV), timeout_s=ctx.time_limit_s,
                                stdout_path=ctx.session_dir / "transcript.jsonl",
                                stderr_path=ctx.session_dir / "stderr.txt")
    res.transcript = str(ctx.session_dir / "transcript.jsonl")
    events = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    res.turns = sum(1 for e in events if e.get("type") == "turn.completed")
    errors = [str(e.get("message") or (e.get("error") or {}).get("message") or "")
              for e in events if e.get("type") in ("error", "turn.failed")]
    message = last.read_text() if last.exists() else ""
    if proc.returncode is None:
        res.status, res.reason = base.TIMEOUT, f"killed at its time limit of {ctx.time_limit_s:.0f} s"
    elif any("401" in e or "unauthorized" in e.lower() or "login" in e.lower() for e in errors) \
            or "not logged in" in proc.stderr.lower():
        res.status, res.reason = base.UNAVAILABLE, f"codex has no credentials: {INSTALL_HINT}."
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
    return res
