"""`orchestrator prune`: free an experiment's disk, keeping what eval and a resume read.

prune   every run keeps its newest --keep checkpoints (default 1, the one `eval` and a resume
        take); a run the experiment will not resume keeps only each one's policy
        (orchestrator/prune.py says what reads which file)
"""
from __future__ import annotations

from orchestrator import gate, prune
from orchestrator.commands.common import add_experiment_args, experiment_arg, only_experiment
from orchestrator.errors import UserError
from orchestrator.experiment_init import load_experiment
from orchestrator.paths import runs_dir


def register(sub) -> None:
    p = sub.add_parser("prune", help="free an experiment's disk: old checkpoints, unused resume state",
                       description="Remove all but the newest --keep checkpoints of every run of "
                                   "an experiment, and the critic, optimiser and RNG states of "
                                   "every run it will not resume (finished, restarted, crashed): "
                                   "`eval` reads only the policy. A stopped run keeps its newest "
                                   "checkpoints whole, so `start` still resumes it.")
    add_experiment_args(p, "experiment (default: the only one)")
    p.add_argument("--keep", type=int, default=1, metavar="N",
                   help="checkpoints kept per run, newest first (default 1)")
    p.set_defaults(func=cmd_prune)


def _gib(n: int) -> str:
    return f"{n / 2**30:.2f} GiB"


def cmd_prune(args) -> int:
    if args.keep < 1:
        raise UserError(f"--keep {args.keep} would remove the checkpoint eval and a resume read: "
                        "keep 1 or more.")
    root = runs_dir(args.runs_dir)
    name = experiment_arg(args) or only_experiment(args.runs_dir)
    exp_dir = root / name
    meta = load_experiment(exp_dir)
    if gate.experiment_running(exp_dir):
        raise UserError(f"experiment {name} is running (its trainer writes checkpoints): "
                        f"`orchestrator stop {name}` first, then prune.")
    before = prune.disk_bytes(exp_dir)
    out = prune.prune(exp_dir, meta, args.keep)
    for what in out.removed:
        print(f"removed {what}")
    for what in out.slimmed:
        print(f"removed the resume state of {what}")
    for what in out.kept:
        print(f"kept {what}")
    print(f"experiment {name}: {_gib(before)} -> {_gib(prune.disk_bytes(exp_dir))} on disk.")
    return 0
