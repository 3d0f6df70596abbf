"""Any executable as the meta-agent: `--agent command` with `--agent-cmd "PROG ARGS"`.

It gets the same context as the CLIs, through environment variables (EAU_WORKSPACE, EAU_RUN_DIR,
EAU_EXP_DIR, EAU_SKILL, EAU_PROMPT_FILE, EAU_EXPERIENCE_DIR, EAU_SESSION, EAU_TIME_LIMIT_S and the
session's git identity) and the prompt file's path as its last argument. It runs in the
workspace; it may commit itself, or leave edits and a commit message in
`$EAU_SESSION_DIR/message.txt`, which this adapter commits. Exit 0 is success.
"""
from __future__ import annotations

import shlex
import shutil

from orchestrator import gitops
from orchestrator.agents import base


def run(ctx: base.SessionContext) -> base.SessionResult:
    res = base.SessionResult(ctx.agent, ctx.session_id, base.FAILED)
    if not ctx.command:
        res.status, res.reason = base.UNAVAILABLE, "no command given: pass --agent-cmd \"PROGRAM ARGS\"."
        return res
    if shutil.which(ctx.command[0]) is None:
        res.status, res.reason = base.UNAVAILABLE, f"{ctx.command[0]} is not an executable on PATH."
        return res
    env = base.clean_env(ctx)
    env["EAU_SESSION_DIR"] = str(ctx.session_dir)
    dirty = set(gitops.dirty_paths(ctx.workspace))
    prompt_file = str(ctx.session_dir / "prompt.md")
    with base.hidden_eval(ctx) as wall:
        proc = base.run_process(wall.wrap([*ctx.command, prompt_file]), cwd=ctx.workspace, env=env,
                                timeout_s=ctx.time_limit_s, stdout_path=ctx.session_dir / "transcript.txt",
                                stderr_path=ctx.session_dir / "stderr.txt")
    res.transcript = str(ctx.session_dir / "transcript.txt")
    if proc.returncode is None:
        res.status, res.reason = base.TIMEOUT, f"killed at its time limit of {ctx.time_limit_s:.0f} s"
    elif proc.returncode != 0:
        res.reason = f"{shlex.join(ctx.command)} exited {proc.returncode}: " \
                     f"{(proc.stderr or proc.stdout).strip()[-300:] or 'no output'}"
    else:
        res.status, res.reason = base.OK, proc.stdout.strip()[-300:]
    if res.status == base.OK:
        msg_file = ctx.session_dir / "message.txt"
        _, refused = base.commit_leftovers(ctx, dirty, msg_file.read_text() if msg_file.exists() else "")
        if refused:
            res.status, res.reason = base.REFUSED, refused
    else:
        base.discard_leftovers(ctx, dirty)
    return res
