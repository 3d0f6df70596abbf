"""`orchestrator warmstart`: supervised fine-tuning of the policy on the bench's worked examples
(and earlier runs' successful episodes) with TRL, writing a model folder a run starts from.

The orchestrator never imports torch, so the work runs in `python -m training.warmstart`, which
says what it does and why; its exit code and its one-sentence errors come back unchanged.
"""
from __future__ import annotations

import subprocess
import sys

from orchestrator.errors import UserError


def register(sub) -> None:
    p = sub.add_parser(
        "warmstart", help="fine-tune the policy on worked examples before RL (TRL's SFTTrainer)",
        description="Supervised warm start: each worked exchange of the workspace's "
                    "demonstrations (and, with --from-runs, each successful training episode) "
                    "becomes prompt-completion examples; TRL's SFTTrainer trains on them and the "
                    "model is saved to --out, for `orchestrator start --model OUT`.")
    p.add_argument("--bench", required=True, help="usergym, colbench or tau2")
    p.add_argument("--out", required=True, help="the new model folder")
    p.add_argument("--model", default="", help="start model (default: the packaged SmolLM2)")
    p.add_argument("--workspace", default=None, help="workspace folder whose demonstrations/ "
                   "to use (default: the project's workspace/)")
    p.add_argument("--gyms", default="", help="comma-separated (default: the gyms runs train on)")
    p.add_argument("--from-runs", nargs="+", default=[], metavar="FOLDER",
                   help="also the successful episodes of these run or experiment folders")
    p.add_argument("--no-demonstrations", action="store_true", help="only the runs' episodes")
    p.add_argument("--epochs", type=float, default=3.0, help="passes over the examples (default 3)")
    p.add_argument("--lr", type=float, default=2e-5, help="learning rate (default 2e-5)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.set_defaults(func=cmd_warmstart)


def cmd_warmstart(args) -> int:
    if args.epochs <= 0 or args.lr <= 0 or args.batch_size < 1:
        raise UserError("--epochs and --lr must be positive and --batch-size at least 1.")
    argv = [sys.executable, "-m", "training.warmstart", "--bench", args.bench, "--out", args.out,
            "--model", args.model, "--gyms", args.gyms, "--epochs", str(args.epochs),
            "--lr", str(args.lr), "--batch-size", str(args.batch_size), "--seed", str(args.seed),
            "--device", args.device]
    if args.workspace:
        argv += ["--workspace", args.workspace]
    if args.from_runs:
        argv += ["--from-runs", *args.from_runs]
    if args.no_demonstrations:
        argv.append("--no-demonstrations")
    return subprocess.run(argv).returncode
