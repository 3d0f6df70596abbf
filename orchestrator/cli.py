"""The `orchestrator` command: train user-centric agents while a meta-agent co-evolves the
training system (paper section 4), one command per step of an experiment's life.

    orchestrator start demo --agent builtin --bench usergym --preset cpu   # create runs/demo, train
    orchestrator status demo        # the run's step and metrics, the sessions and their cost
    orchestrator log demo           # every judged commit: who made it, the verdict, its effect
    orchestrator stop demo          # checkpoint and stop; `start demo` resumes
    orchestrator report demo        # runs/demo/report/index.html with the curves
    orchestrator eval demo          # the final checkpoint on the bench's held-out protocol
    orchestrator fork demo --control inter-run   # demo's history continued as a new experiment
    orchestrator replay-session demo s003   # this checkout's built-in agent at a past session
    orchestrator prune demo         # free disk: old checkpoints, resume state nothing will read
    orchestrator warmstart --bench usergym --out models/warm   # SFT on worked examples first
    orchestrator COMMAND --help     # every argument of one command

What happens on every call, and why:
1. `build_parser` adds the subcommands of the command modules below, each through its
   `register(subparsers)`. They are imported by name at the top of this module, so a missing or
   broken module stops the command with its ImportError instead of its subcommands silently
   vanishing from `--help`.
2. argparse reads the arguments; each subcommand set `func=<function(args) -> int>` (one function
   per subcommand, as pre-commit dispatches its own), and no subcommand prints the help (exit 2).
3. `main` runs the function and returns its exit code. A `UserError` (orchestrator.errors: a bad
   name, a missing file, a bad JSON) becomes one sentence on stderr and its exit code, never a
   traceback (STYLE.md point 10); Ctrl-C exits 130 as a shell would.
"""
from __future__ import annotations

import argparse
import sys

from orchestrator.commands import (compare_cmds, eval_cmds, fork_cmds, prune_cmds, replay_cmds,
                                   run_cmds, warmstart_cmds, workspace_cmds)
from orchestrator.errors import UserError

# each module and the subcommands it registers, in the order --help lists them
COMMAND_MODULES = (
    workspace_cmds,     # init, gate, log, diff
    run_cmds,           # start, status, stop, agents
    eval_cmds,          # eval, report
    prune_cmds,         # prune
    compare_cmds,       # compare, compare-merge
    fork_cmds,          # fork
    replay_cmds,        # replay-session
    warmstart_cmds,     # warmstart
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestrator",
        description="EAU: train user-centric agents while a meta-agent co-evolves the training system.")
    parser.add_argument("--runs-dir", default=None,
                        help="folder holding experiments (default: ./runs or $EAU_RUNS_DIR)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        module.register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except UserError as exc:
        print(f"orchestrator: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("orchestrator: interrupted.", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
