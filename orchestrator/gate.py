"""The write gate: judges every commit on a workspace's `main`, in order, exactly once.

For each commit not yet judged (first-parent order, oldest first) the gate builds the tree the
trainer would run if it were accepted (the commit's own change applied on the live tree: normally
just the commit's tree), runs every check of `orchestrator.gate_checks` against the live tree, and
then (DESIGN.md, "The experiment workspace"):
- accepted: `refs/eau/live` advances (the trainer hot-reloads it);
- rejected: a revert commit on `main` brings main's tree back to the live tree, naming the
  rejected commits and the reasons, so main and live never drift apart;
- always: a git note under `refs/notes/eau` and a "verdict" line in the experiment's ledger.
A commit is judged once: the note marks it. History rewrites (main no longer descends from the
last judged commit) are refused the same way. One process judges at a time (a lock file).

`python -m orchestrator.gate --hook pre-commit|commit-msg` runs the same checks in the workspace's
git hooks, on the staged tree, so a bad write is refused before the commit exists. The
post-commit hook judges the new commit at once when no `orchestrator start` runs the experiment
(while one runs, its watcher judges within seconds, and a session's commits wait for the session
to end): a person's commit made between runs no longer waits, unjudged, for `orchestrator gate`.
"""
from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import sys
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

from orchestrator import gate_checks as checks
from orchestrator import gate_replay
from orchestrator import ledger
from orchestrator.errors import UserError
from orchestrator.gate_context import GateContext
from orchestrator.supervisor import pid_alive
from orchestrator.workspace import (JUDGED_REF, LIVE_REF, MAIN, CommitInfo, Workspace,
                                    author_kind, is_agent_author, parse_trailers)


@dataclass
class Verdict:
    commit: str
    parent: str | None
    author: str
    author_kind: str                   # "agent" | "orchestrator" | "person"
    agent: str | None
    session: str | None
    files: list[str]                   # paths the commit changes (against the live tree)
    knob_changes: list[dict]           # [{path, old, new}]
    verdict: str                       # "accepted" | "rejected"
    reasons: list[str] = field(default_factory=list)
    reverted_by: str | None = None
    file_status: dict[str, str] = field(default_factory=dict)   # path -> added|modified|deleted

    @property
    def accepted(self) -> bool:
        return self.verdict == "accepted"


def is_human(message: str, agent: bool) -> bool:
    """A widening schema edit needs `Eau-Author: human` from an identity that is not an agent's."""
    return parse_trailers(message).get("Eau-Author", "").lower() == "human" and not agent


def content_reasons(ws: Workspace, old: str, new: str, ctx: GateContext) -> tuple[list[str], list[dict], dict]:
    """Every check that needs only the two trees; returns (reasons, knob_changes, files)."""
    files = ws.changed_paths(old, new)
    reasons = checks.check_paths(ws, new, files)
    changes: list[dict] = []
    if any(p == checks.KNOBS or p.startswith(("schema/", "rewards/", "demonstrations/")) for p in files):
        knob_reasons, changes = checks.check_knobs(ws, old, new, ctx)
        reasons += knob_reasons
    for path, status in files.items():
        if status == "deleted":
            continue
        if path.startswith("rewards/") and path.endswith(".py") and not reasons:
            source = ws.read_file(new, path).decode(errors="replace")
            reasons += checks.check_reward_module(path, source, ctx)
        elif path.startswith("users/") and path.endswith("/rules.json"):
            reasons += checks.check_rules(ws, new, path, ctx)
        elif path == "control.json":
            reasons += checks.check_control(ws, new, ctx)
        elif path.startswith("demonstrations/") and path.endswith(".json"):
            reasons += checks.check_demonstrations(ws, new, path)
    if checks.DEMOS_SCHEMA in files:      # a changed schema re-checks every bench's examples
        for bench in checks.BENCH_DIRS:
            path = f"demonstrations/{bench}.json"
            if path not in files:
                reasons += checks.check_demonstrations(ws, new, path)
    if checks.RULES_SCHEMA in files:      # a changed rules schema re-checks every bench's rules
        for bench in checks.BENCH_DIRS:
            path = f"users/{bench}/rules.json"
            if path not in files:
                reasons += checks.check_rules(ws, new, path, ctx)
    return reasons, changes, files


def message_reasons(ws: Workspace, old: str, new: str, message: str, agent: bool,
                    files: dict | None = None, ctx: GateContext | None = None) -> list[str]:
    """The checks that need the commit's message: its rationale lines, schema widening (a
    person's only), and a reward module that cannot pay in the gym its Expect line names."""
    files = ws.changed_paths(old, new) if files is None else files
    reasons = checks.check_message(message) + checks.check_schema_widening(
        ws, old, new, files, is_human(message, agent))
    if not reasons and ctx is not None:
        reasons += gate_replay.check_expected_pay(ws, old, new, files, message, ctx)
    return reasons


def _verdict(info: CommitInfo, files, changes, reasons) -> Verdict:
    t = info.trailers()
    return Verdict(commit=info.sha, parent=info.parent, author=f"{info.author_name} <{info.author_email}>",
                   author_kind=author_kind(info), agent=t.get("Eau-Agent"),
                   session=t.get("Eau-Session"), files=list(files), knob_changes=changes,
                   verdict="rejected" if reasons else "accepted", reasons=reasons, file_status=dict(files))


def judge_commit(ws: Workspace, info: CommitInfo, live_tree: str, ctx: GateContext) -> tuple[Verdict, str | None]:
    """(verdict, the tree the trainer runs if accepted)."""
    if info.parent is None or ws.tree_of(info.parent) == live_tree:
        candidate = info.tree
    else:                             # an earlier commit of the burst was rejected
        candidate = ws.apply_change_on(live_tree, info.parent, info.sha)
    if candidate is None:
        reason = (f"commit {info.sha[:10]}: its change does not apply on the live tree (it builds on "
                  f"a rejected commit); redo it on top of main.")
        return _verdict(info, ws.changed_paths(info.parent, info.sha), [], [reason]), None
    reasons, changes, files = content_reasons(ws, live_tree, candidate, ctx)
    # a module's replay against its Expect line only for a commit every other check passed
    reasons += message_reasons(ws, live_tree, candidate, info.message, is_agent_author(info), files,
                               None if reasons else ctx)
    return _verdict(info, files, changes, reasons), candidate


def judge_or_refuse(ws: Workspace, info: CommitInfo, live_tree: str,
                    ctx: GateContext) -> tuple[Verdict, str | None]:
    """judge_commit, where any error while judging is the commit's rejection, with the error as
    its reason: the commit is noted, reverted and in the ledger like any other refusal, and the
    next commit is judged (a reward module's result that made the gate raise RecursionError
    once left that commit and every later one unjudged, the gate wedged:
    tests/faults/test_fault_os_walls.py)."""
    try:
        return judge_commit(ws, info, live_tree, ctx)
    except Exception as exc:          # a bug or a hostile input in a check, never the gate's end
        try:
            files = ws.changed_paths(live_tree, info.tree)
        except Exception:
            files = {}
        return _verdict(info, files, [], [_error_reason(info.sha, exc)]), None


def _error_reason(sha: str, exc: Exception) -> str:
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    text = text if len(text) <= 500 else text[:500] + "..."
    return (f"commit {sha[:10] if sha else '(staged)'}: the gate could not judge it ({text}); it is "
            f"refused until a commit the checks can judge replaces it.")


@contextmanager
def gate_lock(exp_dir: Path):
    """One judge at a time per experiment (the watcher, `orchestrator gate`, an agent session)."""
    exp_dir.mkdir(parents=True, exist_ok=True)
    with open(exp_dir / ".gate.lock", "w") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def pending_commits(ws: Workspace, head: str = MAIN) -> list[str]:
    """Commits on main (or up to `head`) without a verdict note, oldest first (first-parent walk
    back to a judged one)."""
    judged = ws.noted_commits()
    out = []
    for sha in ws.first_parent_history(head):
        if sha in judged:
            break
        out.append(sha)
    return out[::-1]


def judge_pending(exp_dir: Path, ws: Workspace | None = None,
                  ctx: GateContext | None = None) -> list[Verdict]:
    """Judge every commit on main not yet judged, in order; returns their verdicts."""
    exp_dir = Path(exp_dir)
    with gate_lock(exp_dir):
        ws = ws or open_experiment_workspace(exp_dir)
        finish_interrupted(exp_dir, ws)
        ctx = ctx or GateContext.for_experiment(exp_dir)
        for _ in range(10):           # main moved while we judged: judge again, nothing recorded yet
            verdicts = _judge_pass(ws, ctx, exp_dir)
            if verdicts is not None:
                return verdicts
        raise RuntimeError("main kept moving while the gate judged it; try again.")


def _judge_pass(ws: Workspace, ctx: GateContext, exp_dir: Path) -> list[Verdict] | None:
    head = ws.main()
    # up to the head read above, not main now: a commit landing in between would be judged in a
    # pass whose revert and judged ref stop at `head`, a rejection left on main unreverted
    # (found under commit load, benchmarks/commit_load_bench.py); the next pass judges it
    pending = pending_commits(ws, head) if head else []
    if not pending:
        return _restore_after_reset(ws, head)
    live = ws.rev(LIVE_REF)
    if live is None:
        raise UserError(f"{ws.path} has no {LIVE_REF}: it was not made by `orchestrator init` "
                        f"(or the ref was deleted); create the experiment again.")
    live_tree = ws.tree_of(live)
    last_judged = ws.rev(JUDGED_REF)
    rewritten = last_judged is not None and not ws.is_ancestor(last_judged, head)
    verdicts, new_live = [], live
    for sha in pending:
        info = ws.info(sha)
        if rewritten:
            v = _verdict(info, ws.changed_paths(live_tree, sha), [], [
                f"history rewrite: main no longer descends from {last_judged[:10]}, which the gate "
                f"already judged; add commits on top of main instead of amending, rebasing or resetting."])
            candidate = None
        else:
            v, candidate = judge_or_refuse(ws, info, live_tree, ctx)
        if v.accepted:
            new_live = sha if candidate == info.tree else None     # None: only a tree so far
            live_tree = candidate
        verdicts.append(v)
    revert = None
    if ws.tree_of(head) != live_tree:
        revert = ws.commit_tree(live_tree, head, _revert_message(verdicts))
    for v in verdicts:
        if not v.accepted:
            v.reverted_by = revert
    plan = {"head": head, "revert": revert, "live": new_live or revert or head,
            "verdicts": [asdict(v) for v in verdicts]}
    # Write-ahead: a judge killed between the writes below leaves this plan,
    # which the next judgement finishes before anything else, so every commit is judged once
    # and the live ref moves only after the notes that say its commit was judged.
    _write_journal(exp_dir, plan)
    if not _apply_plan(ws, exp_dir, plan):
        _journal_path(exp_dir).unlink(missing_ok=True)
        return None
    return verdicts


def _journal_path(exp_dir: Path) -> Path:
    return Path(exp_dir) / ".gate-journal.json"


def _write_journal(exp_dir: Path, plan: dict) -> None:
    tmp = _journal_path(exp_dir).with_suffix(".tmp")
    tmp.write_text(json.dumps(plan))
    os.replace(tmp, _journal_path(exp_dir))


def _apply_plan(ws: Workspace, exp_dir: Path, plan: dict) -> bool:
    """Carry out one judgement's writes; each is idempotent, so a replay after a crash is safe.
    False when main moved before the revert could land (nothing written: judge again)."""
    head, revert = plan["head"], plan["revert"]
    main = ws.main()
    if revert is not None and main != revert and not (main and ws.is_ancestor(revert, main)):
        if not ws.advance_main(revert, head):
            return False
    if revert is not None:
        ws.add_note(revert, json.dumps({"verdict": "accepted", "reasons": [],
                                        "note": "revert commit made by the gate"}))
    for v in plan["verdicts"]:
        ws.add_note(v["commit"], json.dumps({"verdict": v["verdict"], "reasons": v["reasons"],
                                             "reverted_by": v["reverted_by"]}))
    if ws.rev(LIVE_REF) != plan["live"]:
        ws.set_ref(LIVE_REF, plan["live"])
    ws.set_ref(JUDGED_REF, revert or head)
    recorded = {r.get("commit") for r in ledger.read_lines(exp_dir, "verdict")}
    for v in plan["verdicts"]:
        if v["commit"] not in recorded:
            ledger.append_line(exp_dir, {"type": "verdict", **v})
    _journal_path(exp_dir).unlink(missing_ok=True)
    return True


def finish_interrupted(exp_dir: Path, ws: Workspace) -> None:
    """Finish the writes of a judgement that was killed midway (call with the gate lock held)."""
    path = _journal_path(exp_dir)
    if not path.exists():
        return
    try:
        plan = json.loads(path.read_text())
    except ValueError:                # killed while writing the plan: nothing was applied yet
        path.unlink(missing_ok=True)
        return
    if not _apply_plan(ws, exp_dir, plan):
        path.unlink(missing_ok=True)  # main moved on without the revert: judge it afresh


def _restore_after_reset(ws: Workspace, head: str | None) -> list[Verdict] | None:
    """main moved back to an already judged commit (a reset or force-push with nothing new): no
    commit to judge, but main's tree left the live tree; put it back with a gate commit on top
    (a history rewrite is refused, so main and live never drift apart)."""
    live, last = ws.rev(LIVE_REF), ws.rev(JUDGED_REF)
    if not (head and live and last) or head == last or ws.is_ancestor(last, head) \
            or ws.tree_of(head) == ws.tree_of(live):
        return []
    message = "\n".join([
        "Restore main to the live tree: history rewrite refused by the EAU gate", "",
        f"main was moved back to {head[:10]} and no longer descends from {last[:10]}, which the "
        "gate already judged.", "",
        "Why: history on main is never rewritten; add commits on top of main instead.",
        "Expect: main's tree equals refs/eau/live again.", "Eau-Author: gate"])
    fix = ws.commit_tree(ws.tree_of(live), head, message)
    if not ws.advance_main(fix, head):
        return None
    ws.add_note(fix, json.dumps({"verdict": "accepted", "reasons": [],
                                 "note": "restore commit made by the gate after a history rewrite"}))
    ws.set_ref(JUDGED_REF, fix)
    return []


def _revert_message(verdicts: list[Verdict]) -> str:
    rejected = [v for v in verdicts if not v.accepted]
    lines = [f"Revert {', '.join(v.commit[:10] for v in rejected)}: refused by the EAU gate", ""]
    for v in rejected:
        lines.append(f"Reverts commit {v.commit}:")
        lines += [f"  - {r}" for r in v.reasons]
    lines += ["", "Why: the write gate refused the commit(s) above; main returns to the live tree.",
              "Expect: main's tree equals refs/eau/live again.", "Eau-Author: gate"]
    return "\n".join(lines)


def judged_verdict(ws: Workspace, sha: str) -> dict | None:
    """The verdict note of a judged commit, or None."""
    text = ws.note(sha)
    try:
        return json.loads(text) if text else None
    except ValueError:
        return {"verdict": "unknown", "reasons": [text]}


def open_experiment_workspace(exp_dir: Path) -> Workspace:
    """The workspace of an experiment: runs/NAME/workspace, or the path in workspace.link. An
    experiment made before a hook or setting existed gains it here (prepare_workspace)."""
    link = Path(exp_dir) / "workspace.link"
    ws = Workspace(Path(link.read_text().strip()) if link.exists() else Path(exp_dir) / "workspace")
    prepare_workspace(Path(exp_dir), ws, missing_only=True)
    return ws


# -- git hooks --------------------------------------------------------------------------------
def hook_scripts(exp_dir: Path) -> dict[str, str]:
    """pre-commit checks the staged files; commit-msg checks the message and schema widening;
    post-commit judges the commit when nothing else will soon (judge_after_commit). A session's
    CLI has EAU_SESSION set: the shell test spares each of its commits a Python start (the
    commit-load benchmark measured hooks at +7 % of a trainer step at 80 commits a minute)."""
    cmd = f'exec "{sys.executable}" -m orchestrator.gate --exp-dir "{exp_dir}"'
    head = "#!/bin/sh\n# EAU write gate (orchestrator.gate)\n"
    return {"pre-commit": f"{head}{cmd} --hook pre-commit\n",
            "commit-msg": f"{head}{cmd} --hook commit-msg \"$1\"\n",
            "post-commit": f'{head}[ -n "$EAU_SESSION" ] && exit 0\n{cmd} --hook post-commit\n'}


def prepare_workspace(exp_dir: Path, ws: Workspace, missing_only: bool = False) -> None:
    """The gate's hooks, and plain `git log` showing its verdict notes."""
    ws.install_hooks(hook_scripts(exp_dir), missing_only=missing_only)
    ws.show_notes_in_log()


def experiment_running(exp_dir: Path) -> bool:
    """Whether an `orchestrator start` of this experiment is alive (its pid in experiment.json)."""
    try:
        meta = json.loads((Path(exp_dir) / "experiment.json").read_text())
    except (OSError, ValueError):
        return False
    return meta.get("state") == "running" and pid_alive(meta.get("pid"))


def judge_after_commit(exp_dir: Path, ws: Workspace) -> int:
    """The post-commit hook: judge main's new commits now when no `orchestrator start` runs,
    and say what became of them. Never blocks a running experiment: its watcher judges, and a
    session holds the gate's lock until its commits carry their trailers."""
    if experiment_running(exp_dir) or ws.run("symbolic-ref", "-q", "HEAD", check=False) != MAIN:
        return 0
    for v in judge_pending(exp_dir, ws):
        if v.accepted:
            print(f"EAU gate: accepted {v.commit[:10]}: it is live; the next `orchestrator start "
                  f"{Path(exp_dir).name}` trains on it.", file=sys.stderr)
        else:
            print(f"EAU gate: rejected {v.commit[:10]} and reverted it on main"
                  f" ({v.reverted_by[:10] if v.reverted_by else 'nothing to revert'}):",
                  *[f"  - {r}" for r in v.reasons], sep="\n", file=sys.stderr)
    return 0


def hook_main(kind: str, exp_dir: str | None, msg_file: str | None) -> int:
    """A git hook's verdict, in sentences, never a traceback: an error while checking refuses
    the commit (pre-commit, commit-msg) with the error as its reason; after a commit, it says the
    gate will judge it later (a hostile module's result once crashed the pre-commit hook)."""
    try:
        return _hook(kind, exp_dir, msg_file)
    except Exception as exc:
        if kind == "post-commit":
            print(f"EAU gate: could not judge the new commit now ({type(exc).__name__}: {exc}); "
                  f"`orchestrator gate` judges it.", file=sys.stderr)
            return 0
        print("EAU gate: commit refused:", f"  - {_error_reason('', exc)}", sep="\n", file=sys.stderr)
        return 1


def _hook(kind: str, exp_dir: str | None, msg_file: str | None) -> int:
    ws = Workspace(Path.cwd())
    if kind == "post-commit":
        return judge_after_commit(Path(exp_dir), ws) if exp_dir else 0
    ctx = GateContext.for_experiment(Path(exp_dir)) if exp_dir else GateContext()
    old = ws.rev("HEAD") or ws.rev(LIVE_REF)
    old_tree = ws.tree_of(old) if old else ws.run("hash-object", "-t", "tree", "/dev/null")
    new_tree = ws.staged_tree()
    if kind == "pre-commit":
        reasons = content_reasons(ws, old_tree, new_tree, ctx)[0]
    else:
        message = Path(msg_file).read_text(errors="replace")
        message = "\n".join(line for line in message.splitlines() if not line.startswith("#"))
        ident = ws.run("var", "GIT_AUTHOR_IDENT")
        email = ident.split("<", 1)[-1].split(">", 1)[0]
        info = CommitInfo("", None, new_tree, message, ident.split("<")[0].strip(), email)
        reasons = message_reasons(ws, old_tree, new_tree, message, is_agent_author(info), ctx=ctx)
    if reasons:
        print("EAU gate: commit refused:", *[f"  - {r}" for r in reasons],
              back_out_hint(list(ws.changed_paths(old_tree, new_tree))), sep="\n", file=sys.stderr)
        return 1
    return 0


def back_out_hint(paths: list[str]) -> str:
    """What a refused commit leaves and how to undo it: git stops the commit, not the edit, so
    the change stays staged and in the files (README, "A commit of your own")."""
    quoted = " ".join(shlex.quote(p) for p in paths) or "."
    return (f"Nothing was committed and the change stays staged: fix it and commit again, or back "
            f"out with `git restore --source=HEAD --staged --worktree -- {quoted}`.")


def main(argv: list[str] | None = None) -> int:
    from orchestrator import priority
    priority.lower_this_thread("nice")   # a hook yields the CPU to the trainer (orchestrator/priority.py)
    p = argparse.ArgumentParser(prog="python -m orchestrator.gate")
    p.add_argument("--hook", choices=("pre-commit", "commit-msg", "post-commit"), required=True)
    p.add_argument("--exp-dir", default=os.environ.get("EAU_EXP_DIR"))
    p.add_argument("msg_file", nargs="?")
    args = p.parse_args(argv)
    return hook_main(args.hook, args.exp_dir, args.msg_file)


if __name__ == "__main__":
    sys.exit(main())
