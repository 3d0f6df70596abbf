"""What several subcommands share: naming the experiment they act on.

Every subcommand that acts on one experiment takes its name either way, `orchestrator status demo`
or `orchestrator status --exp demo` (a person who just ran `start --exp demo` types the second;
one who read `log demo` in the README types the first). Both at once must agree.
"""
from __future__ import annotations

import argparse

from orchestrator.errors import UserError
from orchestrator.paths import runs_dir


def add_experiment_args(p: argparse.ArgumentParser, help: str, *, dest: str = "name",
                        metavar: str = "NAME") -> None:
    """A positional NAME (optional) and `--exp NAME`, read back with `experiment_arg`."""
    p.add_argument(dest, nargs="?", default=None, metavar=metavar, help=help)
    p.add_argument("--exp", default=None, metavar="NAME", help=f"the same as {metavar}")


def experiment_arg(args: argparse.Namespace, *, dest: str = "name") -> str | None:
    """The experiment named positionally or with --exp (None when neither)."""
    positional, option = getattr(args, dest), args.exp
    if positional and option and positional != option:
        raise UserError(f"the experiment is named twice, {positional!r} and --exp {option!r}: "
                        f"give it once.")
    return positional or option


def only_experiment(override: str | None) -> str:
    """The name of the one experiment under the runs folder; a sentence when there are 0 or 2+."""
    root = runs_dir(override)
    names = sorted(p.parent.name for p in root.glob("*/experiment.json"))
    if len(names) == 1:
        return names[0]
    if not names:
        raise UserError(f"no experiments in {root}: create one with `orchestrator init --exp NAME --bench B`.")
    raise UserError(f"several experiments in {root} ({', '.join(names)}): name one.")
