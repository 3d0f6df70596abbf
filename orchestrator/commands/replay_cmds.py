"""`orchestrator replay-session`: the built-in agent of this checkout at one past session of an
experiment, on what that session read (orchestrator/session_replay.py)."""
from __future__ import annotations

from pathlib import Path

from orchestrator.commands.common import add_experiment_args, experiment_arg
from orchestrator.errors import UserError
from orchestrator.paths import runs_dir


def register(sub) -> None:
    p = sub.add_parser(
        "replay-session", help="what the built-in agent would do now at a past session",
        description="Copy an experiment as it stood when one of its sessions began (workspace, "
                    "ledger, metrics and trajectories cut there) into a new folder, and run the "
                    "built-in agent's session on it through the gate; prints its record. The "
                    "experiment itself is only read.")
    add_experiment_args(p, "the experiment whose session is replayed", dest="source", metavar="EXP")
    p.add_argument("session", metavar="SESSION", help="the session to replay, as its ledger names it (s003)")
    p.add_argument("--out", default=None, help="the copy's folder (default: RUNS/EXP-replay-SESSION)")
    p.add_argument("--run", default=None, help="the run the session read (default: the last one begun before it)")
    p.add_argument("--window", type=int, default=10, help="the experiment's W (`start --window`; default 10)")
    p.add_argument("--skill", default="eau", help="eau or generic (default eau)")
    p.set_defaults(func=cmd_replay_session)


def cmd_replay_session(args) -> int:
    from orchestrator.session_replay import replay_session

    source = experiment_arg(args, dest="source")
    if not source:
        raise UserError("name the experiment: `orchestrator replay-session EXP SESSION`.")
    root = runs_dir(args.runs_dir)
    out = Path(args.out) if args.out else root / f"{source}-replay-{args.session}"
    copy, result = replay_session(root / source, args.session, out, run=args.run,
                                  window=args.window, skill=args.skill)
    if result.transcript and Path(result.transcript).exists():
        print(Path(result.transcript).read_text(), end="")
    print(f"replayed {source} {args.session} in {copy}: {result.status}; "
          f"{len(result.commits)} commit(s); `git -C {copy / 'workspace'} log` shows them.")
    return 0
