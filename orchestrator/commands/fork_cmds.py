"""`orchestrator fork`: one experiment's history continued as a new experiment, an arm of the
paper's Figure 7 (orchestrator/fork.py says what is copied and why)."""
from __future__ import annotations

from orchestrator.commands.common import add_experiment_args, experiment_arg
from orchestrator.errors import UserError
from orchestrator.fork import CONTROLS, fork_experiment
from orchestrator.paths import runs_dir


def register(sub) -> None:
    p = sub.add_parser(
        "fork", help="continue an experiment's history as a new experiment (paper Figure 7)",
        description="Copy an experiment's workspace history, runs, ledger and experience pool "
                    "into a new experiment whose next run resumes from the same checkpoint; "
                    "`orchestrator start NEW` trains it with the control given here. Fork twice, "
                    "--control intra-run and --control inter-run, for Figure 7's two arms.")
    add_experiment_args(p, "the experiment to fork", dest="source", metavar="EXP")
    p.add_argument("--control", required=True, choices=CONTROLS,
                   help="when the arm's sessions run (see start --control)")
    p.add_argument("--name", default=None, help="the new experiment (default EXP-CONTROL)")
    p.add_argument("--run", default=None, help="fork after this run (default: the last)")
    p.add_argument("--checkpoint", default=None, metavar="step-NNNNNN",
                   help="the checkpoint the arm resumes from (default: the run's newest)")
    p.add_argument("--steps", type=int, default=None,
                   help="steps of the forked run past the checkpoint (default: the run's length)")
    p.add_argument("--max-runs", type=int, default=None,
                   help="the arm's cap of runs (default: its runs so far and the forked one)")
    p.set_defaults(func=cmd_fork)


def cmd_fork(args) -> int:
    source = experiment_arg(args, dest="source")
    if not source:
        raise UserError("name the experiment to fork: `orchestrator fork EXP --control intra-run`.")
    dest = fork_experiment(source, args.control, runs_dir(args.runs_dir), name=args.name,
                           run=args.run, checkpoint=args.checkpoint, steps=args.steps,
                           max_runs=args.max_runs)
    print(f"forked {source} into {dest.name} ({args.control}); train it with "
          f"`orchestrator start {dest.name} --agent AGENT`.")
    return 0
