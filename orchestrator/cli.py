"""The `orchestrator` command: one module per group of subcommands, one function per subcommand.

Each command module exposes `register(subparsers)`, which adds its subcommands and sets
`func=<function(args) -> int>` on each; `main` dispatches and turns a `UserError` (or a missing
file, a bad JSON) into one sentence on stderr and a non-zero exit code.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from orchestrator.errors import UserError

# module -> the subcommands it registers (documentation only; the module is the authority)
COMMAND_MODULES = {
    "orchestrator.commands.workspace_cmds": ("init", "gate", "log", "diff"),
    "orchestrator.commands.run_cmds": ("start", "status", "stop", "agents"),
    "orchestrator.commands.eval_cmds": ("eval", "report"),
    "orchestrator.commands.compare_cmds": ("compare",),
}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="orchestrator",
        description="EAU: train user-centric agents while a meta-agent co-evolves the training system.")
    parser.add_argument("--runs-dir", default=None,
                        help="folder holding experiments (default: ./runs or $EAU_RUNS_DIR)")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMAND_MODULES:
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:      # a real import error inside the module: show it
                raise
            continue
        mod.register(sub)
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
