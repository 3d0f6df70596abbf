"""`orchestrator compare`: prompting, PPO and EAU from the same start, several seeds, held-out
evaluation, one table (orchestrator/compare.py says what it runs and why); `orchestrator
compare-merge`: several sessions' results as one table (orchestrator/compare_merge.py)."""
from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path

from orchestrator.compare import METHODS, CompareSpec, run_compare
from orchestrator.compare_merge import write_merged
from orchestrator.errors import UserError
from orchestrator.paths import runs_dir


def register(sub) -> None:
    p = sub.add_parser(
        "compare", help="compare prompting, PPO and EAU over seeds on the held-out split",
        description="Train one experiment per method and seed from the same workspace, config and "
                    "seeds (PPO: --agent none; EAU: the built-in agent), evaluate every final "
                    "checkpoint and the untrained model with the walled evaluation, and write "
                    "runs/NAME/RESULTS.md, results.json and report/.")
    p.add_argument("--bench", required=True, help="usergym, colbench or tau2")
    p.add_argument("--methods", default="prompting,ppo,eau",
                   help=f"comma-separated, from {', '.join(METHODS)} (default prompting,ppo,eau; "
                        "grpo-eau: GRPO with the built-in agent; generic: table 4's generic "
                        "meta-agent between runs; react, reflexion: table 1's prompting rows; "
                        "METHOD@llm, @symbolic or @hybrid: trained against that user, the paper's "
                        "user table, e.g. eau@llm,eau@hybrid side by side)")
    p.add_argument("--seeds", type=int, default=3, help="seeds 0..N-1: training and evaluation seed (default 3)")
    p.add_argument("--first-seed", type=int, default=0, metavar="K",
                   help="seeds K..K+N-1 instead: another session's seeds, merged later with "
                        "compare-merge (default 0)")
    p.add_argument("--steps", type=int, default=None, help="PPO steps of every run")
    p.add_argument("--name", default=None, help="the comparison's name (default compare-BENCH)")
    p.add_argument("--preset", default=None, choices=("cpu", "usergym", "colbench", "tau2", "qwen3-4b"),
                   help="config preset of every run")
    p.add_argument("--model", default=None, help="policy of every run and of prompting (default: SmolLM2-135M)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override of every run (e.g. --set data.train_batch_size=16)")
    p.add_argument("--knob", action="append", default=[], metavar="KEY=VALUE",
                   help="starting knob of every experiment (e.g. --knob env.*.demonstrations=0)")
    p.add_argument("--every", type=int, default=None, help="EAU: a session every K steps")
    p.add_argument("--max-runs", type=int, default=None, metavar="N",
                   help="runs per experiment, restarts included (default 5; generic's inter-run "
                        "loop trains up to N runs)")
    p.add_argument("--window", type=int, default=None, help="W of measured effects")
    p.add_argument("--max-lag", type=int, default=None, metavar="N",
                   help="EAU: the trainer waits for a session N steps behind (see start)")
    p.add_argument("--parallel", type=int, default=1,
                   help="runs (then evaluations) at once (default 1). On one H200, four 135M "
                        "runs side by side train 1.34x the episodes a second of one run alone "
                        "(benchmarks/RESULTS-gpu.md: a step is a chain of small kernels, which "
                        "other runs fill in); each run holds ~27 GB, so at most five fit")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (training and evaluation)")
    p.add_argument("--eval-episodes", type=int, default=None, metavar="N",
                   help="evaluate the first N test tasks of each gym (a deviation, recorded)")
    p.add_argument("--eval-batch-size", type=int, default=None, metavar="N", help="evaluation batch size")
    p.add_argument("--eval-max-turns", type=int, default=None, metavar="N",
                   help="evaluation turn limit (a deviation from the protocol, recorded)")
    p.add_argument("--eval-max-new-tokens", type=int, default=None, metavar="N",
                   help="evaluation tokens a turn (a deviation from the protocol, recorded)")
    p.add_argument("--eval-demonstrations", type=int, default=None, metavar="N",
                   help="worked examples before each evaluation task (default: the shipped 1; 0: "
                        "the paper's protocol; RESULTS.md says which)")
    p.add_argument("--user-mode", default=None, choices=("llm", "symbolic", "hybrid"),
                   help="who answers in every trained run (see start --user-mode; paper table 3)")
    p.add_argument("--data-dir", default=None, metavar="FOLDER",
                   help="train and evaluate on the bench's original files instead of the shipped tasks")
    p.add_argument("--eval-data-dir", default=None, metavar="FOLDER",
                   help="train on the shipped tasks, and evaluate every final checkpoint and the "
                        "untrained model on the bench's original test files too (e.g. UserRL's "
                        "folder); RESULTS.md reports them apart from the held-out split")
    p.add_argument("--no-untrained", action="store_true",
                   help="with --eval-data-dir and without prompting among --methods: leave out the "
                        "untrained model's evaluation on those files, where another session's "
                        "results (merged with compare-merge) hold it for the same seeds")
    p.add_argument("--user-llm", default=None,
                   help="evaluation LLM user: default, a model folder, or none (symbolic arm only)")
    p.set_defaults(func=cmd_compare)
    register_merge(sub)


def register_merge(sub) -> None:
    p = sub.add_parser(
        "compare-merge", help="merge several compare sessions' results.json into one table",
        description="Merge the raw results.json of several `orchestrator compare` sessions (other "
                    "seeds, other methods or steps; the same bench, evaluation protocol and "
                    "training setup) into OUT/results.json and OUT/RESULTS.md, with the intervals "
                    "and paired differences recomputed over every seed.")
    p.add_argument("out", metavar="OUT", help="folder for the merged results.json and RESULTS.md")
    p.add_argument("results", nargs="+", metavar="RESULTS",
                   help="each session's results.json, or the folder holding it (runs/NAME)")
    p.add_argument("--by-user-mode", action="store_true",
                   help="merge sessions that differ in --user-mode (the paper's user table): each "
                        "trained method is named with its user (eau@hybrid) and paired against "
                        "the same method with the LLM user alone (eau@llm)")
    p.set_defaults(func=cmd_compare_merge)


def cmd_compare_merge(args) -> int:
    command = "orchestrator " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    out = write_merged(Path(args.out), [Path(r) for r in args.results], command, args.by_user_mode)
    print((out / "RESULTS.md").read_text())
    print(f"results: {out}/RESULTS.md, {out}/results.json")
    return 0


def _folder(flag: str, value: str) -> Path:
    folder = Path(value).expanduser().resolve()
    if not folder.is_dir():
        raise UserError(f"{flag} {value} is not a folder: give the folder of the bench's original "
                        f"files.")
    return folder


def cmd_compare(args) -> int:
    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    if not methods:
        raise UserError("--methods names no method: e.g. --methods prompting,ppo,eau.")
    eval_args: list[str] = []
    for flag in ("episodes", "batch_size", "max_turns", "max_new_tokens"):
        value = getattr(args, f"eval_{flag}")
        if value is not None:
            if value < 1:
                raise UserError(f"--eval-{flag.replace('_', '-')} must be at least 1.")
            eval_args += [f"--{flag.replace('_', '-')}", str(value)]
    if args.eval_demonstrations is not None:
        if not 0 <= args.eval_demonstrations <= 3:
            raise UserError(f"--eval-demonstrations {args.eval_demonstrations}: give 0 to 3 "
                            f"worked examples (0 is the paper's protocol).")
        eval_args += ["--demonstrations", str(args.eval_demonstrations)]
    if args.user_llm:
        eval_args += ["--user-llm", args.user_llm]
    sets = list(args.set)
    if args.data_dir and args.eval_data_dir:
        raise UserError("--data-dir already trains and evaluates on the original files; "
                        "--eval-data-dir is for training on the shipped tasks and evaluating on both.")
    if args.no_untrained and not args.eval_data_dir:
        raise UserError("--no-untrained leaves out the untrained model's evaluation on "
                        "--eval-data-dir: give --eval-data-dir too, or drop it.")
    if args.data_dir:                  # the same task files for training and for evaluation
        folder = _folder("--data-dir", args.data_dir)
        sets.append(f"data.data_dir={json.dumps(str(folder))}")
        eval_args += ["--data-dir", str(folder)]
    root = runs_dir(args.runs_dir)
    spec = CompareSpec(name=args.name or f"compare-{args.bench}", bench=args.bench, methods=methods,
                       seeds=args.seeds, steps=args.steps, preset=args.preset, model=args.model,
                       sets=tuple(sets), knobs=tuple(args.knob), every=args.every,
                       window=args.window, max_lag=args.max_lag, user_mode=args.user_mode,
                       max_runs=args.max_runs,
                       parallel=args.parallel,
                       device=args.device, eval_args=tuple(eval_args), runs_dir=Path(root),
                       first_seed=args.first_seed, eval_data_dir=(
                           _folder("--eval-data-dir", args.eval_data_dir) if args.eval_data_dir else None),
                       untrained_data_eval=not args.no_untrained)
    command = "orchestrator " + " ".join(shlex.quote(a) for a in sys.argv[1:])
    out = run_compare(spec, command, say=lambda line: print(line, flush=True))
    print((out / "RESULTS.md").read_text())
    print(f"results: {out}/RESULTS.md, {out}/results.json, {out}/report/index.html")
    return 0
