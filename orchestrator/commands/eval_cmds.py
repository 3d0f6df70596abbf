"""`orchestrator eval` and `orchestrator report`.

eval: evaluates a checkpoint (the final checkpoint of the final run of an experiment by default, no
selection on test results: paper section 5.1) or an untrained model (`--model PATH|default`, the
paper's "prompting" rows) under the bench's own fixed protocol. The orchestrator never imports
torch, so the work happens in a subprocess, `python -m training.evaluate`, which is told which
paths it must refuse to open (the experiment's workspace, its ledger, its agent sessions, its other
runs) and writes per-episode records and a summary to `runs/NAME/eval/<id>/` (DESIGN.md,
"Evaluation is walled off"). Before the model loads it says how much work the protocol is (on
the CPU: how long, and a quicker setting), then prints progress lines (episodes, tokens/s, time
left) whether or not stderr is a terminal. SIGTERM and SIGINT to `orchestrator eval` reach that
subprocess too: without that, SIGTERM ended the command and left the evaluation running. Settings
that make it quicker (`--episodes`, `--max-turns`, `--max-new-tokens`) are not the protocol: the
summary lists them as deviations.

report: the HTML page of orchestrator.report for one or more experiments.
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator import paths
from orchestrator.commands.common import add_experiment_args, experiment_arg
from orchestrator.errors import UserError

_RUN_RE = re.compile(r"^run-(\d+)$")
_STEP_RE = re.compile(r"^step-(\d+)$")
BENCHES = ("usergym", "colbench", "tau2")


@dataclass(frozen=True)
class EvalTarget:
    """What to evaluate and where its results go."""

    exp_root: Path                  # the experiment folder (results go to exp_root/eval/)
    checkpoint: Path | None         # run-NNN/checkpoints/step-NNNNNN, or None with a model
    model: str | None               # "default" or a model folder, for the prompting rows
    run: str | None = None          # "run-002"
    step: int | None = None


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "eval", help="evaluate a checkpoint (or an untrained model) on the bench's test protocol",
        description="Evaluate the final checkpoint of an experiment's final run (or the run or "
                    "checkpoint named) under the bench's fixed protocol; results go to "
                    "runs/NAME/eval/, which meta-agent sessions never see.")
    add_experiment_args(p, "experiment name or folder, a run folder (NAME/run-002) or a "
                           "checkpoint folder; optional with --model", dest="target", metavar="TARGET")
    p.add_argument("--bench", default=None, help="usergym, colbench or tau2 (default: the "
                   "experiment's bench)")
    p.add_argument("--split", default="test", help="task split (default: test)")
    p.add_argument("--episodes", type=int, default=None,
                   help="evaluate only the first N tasks of each gym (default: all; fewer is a "
                        "deviation from the protocol, recorded in the summary)")
    p.add_argument("--batch-size", type=int, default=None, metavar="N",
                   help="episodes advanced together, one generate call per turn (default 16)")
    p.add_argument("--max-turns", type=int, default=None, metavar="N",
                   help="override the protocol's turn limit: quicker on a CPU, recorded in the "
                        "summary as a deviation from the protocol")
    p.add_argument("--max-new-tokens", type=int, default=None, metavar="N",
                   help="override the protocol's new tokens a turn: quicker on a CPU, recorded "
                        "in the summary as a deviation from the protocol")
    p.add_argument("--prompting", default="plain", choices=("plain", "react", "reflexion"),
                   help="prompting method under the same protocol (paper table 1): plain, react "
                        "(a thought, then the action) or reflexion (a verbal self-reflection after "
                        "each failed attempt, carried into the next; see training/prompting.py)")
    p.add_argument("--attempts", type=int, default=None, metavar="N",
                   help="reflexion: attempts per task, stopping at the first success (default 3)")
    p.add_argument("--demonstrations", type=int, default=None, metavar="N",
                   help="worked examples shown before each task (default: the shipped 1, which "
                        "the summary records as a deviation; 0 is the paper's protocol)")
    p.add_argument("--gyms", default=None, metavar="G1,G2",
                   help="evaluate only these gyms of the bench (default: all the protocol's; "
                        "fewer is a deviation, recorded in the summary)")
    p.add_argument("--seed", type=int, default=0, help="seed of the evaluation (default: 0)")
    p.add_argument("--model", default=None,
                   help="evaluate an untrained model instead of a checkpoint: 'default' (the "
                        "packaged SmolLM2) or a model folder")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda")
    p.add_argument("--user-url", default=None, metavar="URL",
                   help="the paper's protocol: an OpenAI-compatible endpoint answers as the user in "
                        "every gym (e.g. GPT-4o-mini's); results are kept apart from the offline ones")
    p.add_argument("--user-model", default=None, metavar="NAME", help="the endpoint's model name")
    p.add_argument("--user-key-env", default=None, metavar="VAR",
                   help="the environment variable holding the endpoint's key (never stored)")
    p.add_argument("--data-dir", default=None, metavar="FOLDER",
                   help="evaluate on the bench's original files (UserRL's repository, ColBench's "
                        "JSONL, tau2-bench's repository) instead of the tasks shipped here")
    p.add_argument("--user-llm", default="default",
                   help="the LLM user where the bench's protocol has an LLM arm: 'default' (the "
                        "packaged SmolLM2), a model folder, or 'none' (symbolic arm only)")
    p.set_defaults(func=cmd_eval)

    r = subparsers.add_parser("report", help="HTML report with the results table and figures",
                              description="Write an HTML page (figures beside it) for one or "
                                          "more experiments.")
    r.add_argument("experiments", nargs="*", metavar="NAME", help="experiment names or folders")
    r.add_argument("--exp", action="append", default=[], metavar="NAME",
                   help="the same as NAME (repeat it for several experiments)")
    r.add_argument("--out", default=None,
                   help="output folder (default: runs/NAME/report, or runs/report-A-B for several)")
    r.set_defaults(func=cmd_report)


def _exp_folder(name: str, runs_dir: str | None) -> Path:
    as_path = Path(name)
    if as_path.is_dir():
        return as_path.resolve()
    folder = paths.exp_dir(name, runs_dir)
    if not folder.is_dir():
        raise UserError(f"no experiment {name!r} in {paths.runs_dir(runs_dir)}: "
                        "check the name with `ls runs/` or give a folder path.")
    return folder


def _runs(exp_root: Path) -> list[Path]:
    runs = [d for d in exp_root.iterdir() if d.is_dir() and _RUN_RE.match(d.name)]
    return sorted(runs, key=lambda d: int(_RUN_RE.match(d.name).group(1)))


def _final_checkpoint(run_dir: Path) -> Path:
    """The newest whole checkpoint of a run (the trainer writes a temporary folder, then renames
    it to step-NNNNNN, so a folder by that name is complete)."""
    ckpts = [d for d in (run_dir / "checkpoints").glob("step-*")
             if d.is_dir() and _STEP_RE.match(d.name)]
    if not ckpts:
        raise UserError(f"{run_dir} has no checkpoint yet: let the run reach a save step "
                        "(trainer.save_freq) or stop it with `orchestrator stop`, which saves one.")
    return max(ckpts, key=lambda d: int(_STEP_RE.match(d.name).group(1)))


def resolve_target(target: str | None, model: str | None, runs_dir: str | None) -> EvalTarget:
    """Experiment -> its final run's final checkpoint; run folder -> its final checkpoint;
    checkpoint folder -> itself; no target with --model -> runs/prompting/."""
    if target is None:
        if model is None:
            raise UserError("name what to evaluate: an experiment, run or checkpoint, "
                            "or --model default for the untrained policy.")
        root = paths.runs_dir(runs_dir) / "prompting"
        return EvalTarget(exp_root=root, checkpoint=None, model=model)
    path = Path(target)
    if not path.is_dir():
        path = paths.runs_dir(runs_dir) / target
    if not path.is_dir():
        raise UserError(f"nothing to evaluate at {target!r}: give an experiment name, a run "
                        "folder (NAME/run-002) or a checkpoint folder.")
    path = path.resolve()
    if model is not None:               # the untrained model's row, filed with this experiment
        if path.parent.name == "checkpoints":
            exp_root = path.parents[2]
        elif _RUN_RE.match(path.name):
            exp_root = path.parent
        else:
            exp_root = path
        return EvalTarget(exp_root=exp_root, checkpoint=None, model=model)
    if _STEP_RE.match(path.name) and path.parent.name == "checkpoints":
        ckpt, run_dir = path, path.parent.parent
    elif _RUN_RE.match(path.name):
        run_dir = path
        ckpt = _final_checkpoint(run_dir)
    else:
        runs = _runs(path)
        if not runs:
            raise UserError(f"experiment {path.name!r} has no runs yet: start one with "
                            "`orchestrator start`, or evaluate a model with --model.")
        run_dir = runs[-1]
        ckpt = _final_checkpoint(run_dir)
    exp_root = run_dir.parent
    return EvalTarget(exp_root=exp_root, checkpoint=ckpt, model=None, run=run_dir.name,
                      step=int(_STEP_RE.match(ckpt.name).group(1)))


def _bench_of(exp_root: Path, given: str | None) -> str:
    if given and ":" in given:          # "module:ATTR" of an object with the BENCH API (tests)
        return given
    if given:
        bench = given.strip().lower().replace("-", "").replace("_", "")
        bench = {"usergym": "usergym", "colbench": "colbench", "tau2": "tau2",
                 "tau2bench": "tau2"}.get(bench)
        if bench is None:
            raise UserError(f"unknown bench {given!r}: choose one of {', '.join(BENCHES)}.")
        return bench
    try:
        meta = json.loads((exp_root / "experiment.json").read_text())
    except (OSError, ValueError):
        meta = {}
    if meta.get("bench") in BENCHES:
        return meta["bench"]
    raise UserError("say which bench to evaluate on with --bench usergym|colbench|tau2.")


def walled_paths(exp_root: Path) -> list[Path]:
    """What the evaluation must never open: the workspace (also one linked with --workspace),
    the ledger, the agent sessions, the experience pool (a fork's own too); runs are walled off
    except the checkpoint being evaluated (training/evaluate.py enforces this with an audit
    hook)."""
    walls = [exp_root / "workspace", exp_root / "ledger.jsonl", exp_root / "agents",
             paths.project_root() / "experience"]
    link = exp_root / "workspace.link"
    if link.is_file():
        walls.append(Path(link.read_text().strip()))
    try:                                   # experiment.json names the workspace it uses
        meta = json.loads((exp_root / "experiment.json").read_text())
        named, pool = meta.get("workspace"), meta.get("experience_dir")
    except (OSError, ValueError, AttributeError):
        named = pool = None
    if named:
        walls.append(Path(named))
    if pool:                               # a fork's own copy of the experience pool
        walls.append(Path(pool))
    walls += _runs(exp_root) if exp_root.is_dir() else []
    return walls


def eval_command(t: EvalTarget, bench: str, args) -> list[str]:
    """The subprocess command line of one evaluation."""
    cmd = [sys.executable, "-m", "training.evaluate", "--bench", bench, "--split", args.split,
           "--seed", str(args.seed), "--out-root", str(t.exp_root / "eval"),
           "--device", args.device, "--user-llm", args.user_llm]
    for flag in ("episodes", "batch_size", "max_turns", "max_new_tokens", "demonstrations",
                 "attempts"):
        if getattr(args, flag, None) is not None:
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if getattr(args, "prompting", "plain") != "plain":
        cmd += ["--prompting", args.prompting]
    if getattr(args, "gyms", None):
        cmd += ["--gyms", args.gyms]
    for flag in ("user_url", "user_model", "user_key_env"):
        if getattr(args, flag, None):
            cmd += [f"--{flag.replace('_', '-')}", str(getattr(args, flag))]
    if getattr(args, "data_dir", None):
        cmd += ["--data-dir", str(Path(args.data_dir).expanduser().resolve())]
    if t.checkpoint is not None:
        cmd += ["--checkpoint", str(t.checkpoint), "--run", str(t.run), "--step", str(t.step)]
    else:
        cmd += ["--model", str(t.model)]
    for wall in walled_paths(t.exp_root):
        cmd += ["--wall", str(wall)]
    return cmd


def cmd_eval(args) -> int:
    for flag in ("episodes", "batch_size", "max_turns", "max_new_tokens"):
        if getattr(args, flag) is not None and getattr(args, flag) < 1:
            raise UserError(f"--{flag.replace('_', '-')} must be at least 1.")
    if args.attempts is not None and (args.prompting != "reflexion" or args.attempts < 1):
        raise UserError(f"--attempts {args.attempts}: give at least 1 attempt, with --prompting "
                        f"reflexion (the only method that tries a task again).")
    if args.demonstrations is not None and not 0 <= args.demonstrations <= 3:
        raise UserError(f"--demonstrations {args.demonstrations}: give 0 to 3 worked examples "
                        f"(0 is the paper's protocol).")
    if bool(args.user_url) != bool(args.user_model):
        raise UserError("--user-url and --user-model go together: the endpoint and its model name.")
    t = resolve_target(experiment_arg(args, dest="target"), args.model, args.runs_dir)
    bench = _bench_of(t.exp_root, args.bench)
    t.exp_root.mkdir(parents=True, exist_ok=True)
    if t.checkpoint is None and not (t.exp_root / "experiment.json").exists():
        (t.exp_root / "experiment.json").write_text(json.dumps(
            {"name": t.exp_root.name, "bench": bench, "kind": "prompting"}, indent=1) + "\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("EAU_WORKSPACE")}
    rc, stopped_by = run_forwarding_signals(eval_command(t, bench, args), cwd=paths.project_root(),
                                            env=env)
    if stopped_by is not None:
        print(f"orchestrator: the evaluation was stopped ({signal.Signals(stopped_by).name}); "
              "no results were written.", file=sys.stderr)
        return 128 + stopped_by
    if rc != 0:
        raise UserError(f"the evaluation failed (exit {rc}); its message is above.")
    return 0


def run_forwarding_signals(cmd: list[str], grace_s: float = 30.0, **popen) -> tuple[int, int | None]:
    """Run `cmd` to its end, passing SIGTERM and SIGINT on to it; returns (exit code, the signal
    that stopped it or None). A child still running `grace_s` after a signal is killed."""
    proc = subprocess.Popen(cmd, **popen)
    got: list[int] = []

    def forward(signum, frame) -> None:
        got.append(signum)
        if proc.poll() is None:
            proc.send_signal(signum)

    previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        deadline = None
        while True:
            try:
                rc = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if got and deadline is None:
                    deadline = time.monotonic() + grace_s
                if deadline is not None and time.monotonic() > deadline:
                    proc.kill()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        if proc.poll() is None:        # an exception of ours: never leave the evaluation behind
            proc.kill()
            proc.wait()
    return rc, (got[0] if got else None)


def cmd_report(args) -> int:
    from orchestrator.report import build_report

    names = list(dict.fromkeys(args.experiments + args.exp))
    if not names:
        raise UserError("name the experiments to report on: `orchestrator report NAME [NAME ...]`.")
    folders = [_exp_folder(name, args.runs_dir) for name in names]
    if args.out:
        out = Path(args.out)
    elif len(folders) == 1:
        out = folders[0] / "report"
    else:
        out = paths.runs_dir(args.runs_dir) / ("report-" + "-".join(f.name for f in folders))
    index = build_report(folders, out)
    print(f"report written to {index}")
    return 0
