"""Claude Code as the meta-agent: `claude -p` with the EAU skill, isolated settings and narrow tools.

Facts seen with claude-code 2.1.197 and checked again with 2.1.332, the pinned version
(scripts/agent_clis.txt; its requests read from its own traffic to orchestrator/agents/scripted.py),
that shape the command line:
- under `--setting-sources ""` no project skill is found, so the skill goes in through
  `--append-system-prompt-file` (a flag `--help` no longer lists, still accepted: the skill's text
  is in the system prompt of every recorded request); our own `--settings FILE` carries the
  permission rules. A settings file that fails validation is silently ignored under `-p`
  (`--help`), so the end-to-end test checks that its deny rules answer;
- `--allowedTools` takes every word after it, so the prompt comes before it;
- `--output-format stream-json` (with `--verbose`, which -p requires for it) writes each message,
  tool result and permission denial as it happens, so runs/NAME/agents/sNNN/transcript.jsonl can
  be followed live; its last line is the result object `--output-format json` would print;
- as root `bypassPermissions` is refused: `--permission-mode dontAsk` with allow rules, where
  anything not allowed is denied ("...denied because Claude Code is running in don't ask mode"),
  a deny rule answers "Permission to use Bash with command ... has been denied" or "File is in a
  directory that is denied by your permission settings"; all are listed in `permission_denials`.
  A compound command (`git add F && git commit -m M`) is allowed when each part is;
- its tools in 2.1.332: Bash, Read, Edit, Write, Glob, Grep, Skill, Agent and a few more (no LS);
- the JSON result says `subtype: "success"` even on failure: `is_error` and the exit code decide;
- without credentials it exits 1 at once ("Not logged in"); a key the endpoint refuses ends it in
  3 s with `api_error_status` 401; an endpoint it cannot reach ends it in 3 s with
  `terminal_reason` "api_error" and no status ("Connection refused ... (ECONNREFUSED)"), both
  with CLAUDE_CODE_MAX_RETRIES=2 (without it a bad key is retried for minutes); it waits on an
  open stdin, so stdin is /dev/null.
Permission rule paths starting with `//` are absolute; deny beats allow, so runs/NAME/eval/ stays
unreadable even though it sits beside the readable run folder.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

from orchestrator import experience, gitops
from orchestrator.agents import base, clis

EXE = "claude"
INSTALL_HINT = ("install it with `bash scripts/install_agent_clis.sh` (or `npm install -g "
                "@anthropic-ai/claude-code`) and log in (`claude /login`) or set ANTHROPIC_API_KEY")
LOGIN_HINT = "log in with `claude /login`, or set ANTHROPIC_API_KEY"     # installed, not logged in
CREDENTIAL_ENV = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN", "CLAUDE_CODE_OAUTH_TOKEN",
                  "ANTHROPIC_BASE_URL", "ANTHROPIC_MODEL", "CLAUDE_CONFIG_DIR")


def _abs(path: Path) -> str:
    return "/" + str(path.resolve())          # "//abs/path": an absolute permission-rule path


def permissions(ctx: base.SessionContext) -> tuple[list[str], list[str]]:
    """(allow, deny) rules: read the run, ledger, skill and pool; edit the workspace and the pool;
    git only for status/diff/log/add/commit; the skill's scripts; never the eval folder."""
    ws, pool = ctx.workspace, Path(ctx.experience_dir or experience.pool_dir())
    scripts = ctx.skill_path.parent / "scripts"
    allow = ["Glob", "Grep",
             f"Read({_abs(ws)}/**)", f"Edit({_abs(ws)}/**)",
             f"Read({_abs(ctx.run_dir)}/**)", f"Read({_abs(ctx.exp_dir)}/ledger.jsonl)",
             f"Read({_abs(ctx.skill_path.parent)}/**)",
             f"Read({_abs(pool)}/**)", f"Edit({_abs(pool)}/**)",
             *[f"Bash(git {verb}:*)" for verb in ("status", "diff", "log", "add", "commit", "show")],
             f"Bash({sys.executable} {scripts}/*)", f"Bash(python {scripts}/*)"]
    deny = [f"Read({_abs(ctx.exp_dir)}/eval/**)", f"Edit({_abs(ctx.exp_dir)}/eval/**)",
            f"Edit({_abs(ws)}/.git/**)", "Bash(git push:*)", "Bash(git reset:*)",
            "Bash(git checkout:*)", "Bash(git rebase:*)", "WebFetch", "WebSearch"]
    return allow, deny


def build_argv(ctx: base.SessionContext, settings: Path, exe: str = EXE) -> list[str]:
    allow, _ = permissions(ctx)
    return [exe, "-p", ctx.prompt,
            "--append-system-prompt-file", str(ctx.skill_path),
            "--setting-sources", "", "--settings", str(settings),
            "--add-dir", str(ctx.run_dir), str(Path(ctx.experience_dir or experience.pool_dir())),
            str(ctx.skill_path.parent),
            "--permission-mode", "dontAsk", "--max-turns", str(ctx.max_turns),
            "--output-format", "stream-json", "--verbose",
            *(["--max-budget-usd", f"{ctx.budget_usd:g}"] if ctx.budget_usd else []),
            "--allowedTools", *allow]          # last: it swallows every word after it


def run(ctx: base.SessionContext) -> base.SessionResult:
    res = base.SessionResult(ctx.agent, ctx.session_id, base.FAILED)
    exe = clis.find("claude-code")
    if exe is None:
        res.status, res.reason = base.UNAVAILABLE, f"claude is not installed: {INSTALL_HINT}."
        return res
    allow, deny = permissions(ctx)
    settings = ctx.session_dir / "claude-settings.json"
    settings.write_text(json.dumps({"permissions": {"allow": allow, "deny": deny,
                                                    "defaultMode": "dontAsk"}}, indent=1))
    env = base.clean_env(ctx, keep=CREDENTIAL_ENV)
    env.update({"CLAUDE_CODE_MAX_RETRIES": "2", "DISABLE_AUTOUPDATER": "1", "DISABLE_TELEMETRY": "1"})
    dirty = set(gitops.dirty_paths(ctx.workspace))
    proc = base.run_process(build_argv(ctx, settings, exe), cwd=ctx.workspace, env=env,
                            timeout_s=ctx.time_limit_s, stdout_path=ctx.session_dir / "transcript.jsonl",
                            stderr_path=ctx.session_dir / "stderr.txt")
    res.transcript = str(ctx.session_dir / "transcript.jsonl")
    out = _parse(proc.stdout)
    res.cost_usd, res.turns = out.get("total_cost_usd"), out.get("num_turns")
    res.denials = [_denial(d) for d in out.get("permission_denials") or []]
    text = str(out.get("result") or "")
    if proc.returncode is None:
        res.status, res.reason = base.TIMEOUT, f"killed at its time limit of {ctx.time_limit_s:.0f} s"
    elif "not logged in" in (text + proc.stdout + proc.stderr).lower():
        res.status, res.reason = base.UNAVAILABLE, f"claude has no credentials (Not logged in): {LOGIN_HINT}."
    elif out.get("api_error_status") in (401, 403):
        res.status, res.reason = base.UNAVAILABLE, f"claude's credentials were refused: {text.strip()[:300]}"
    elif out.get("terminal_reason") == "api_error" and out.get("api_error_status") is None:
        res.status, res.reason = base.UNAVAILABLE, \
            f"claude cannot reach its model endpoint (offline?): {text.strip()[:300]}"
    elif proc.returncode != 0 or out.get("is_error") or not out:
        tail = (text or proc.stderr or proc.stdout).strip()[-300:]
        res.reason = f"claude exited {proc.returncode}: {tail or 'no output'}"
    else:
        res.status, res.reason = base.OK, text.strip()[:500]
    if res.status == base.OK:            # only a finished session's edits are committed
        _, refused = base.commit_leftovers(ctx, dirty, text)
        if refused:
            res.status, res.reason = base.REFUSED, refused
    else:
        base.discard_leftovers(ctx, dirty)
    if res.denials:
        res.reason = f"{res.reason} (denied: {'; '.join(res.denials)})"
    return res


def _parse(stdout: str) -> dict:
    """The session's result object: the last line of type "result" of `--output-format
    stream-json` (one JSON object a line: init, each message and tool result, the result)."""
    for line in reversed(stdout.strip().splitlines()):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(obj, dict) and obj.get("type") == "result":
            return obj
    return {}


def _denial(d: dict) -> str:
    inp = d.get("tool_input") or {}
    target = inp.get("file_path") or inp.get("path") or inp.get("command") or ""
    return f"{d.get('tool_name', '?')}({target})"
