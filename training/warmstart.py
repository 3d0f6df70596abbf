"""`python -m training.warmstart --bench B --out DIR`: a supervised warm start before RL.

    orchestrator warmstart --bench usergym --out models/smollm2-warm          # the usual way
    orchestrator warmstart --bench usergym --out models/warm2 --from-runs runs/demo --epochs 2
    orchestrator start demo --bench usergym --model models/smollm2-warm       # RL from it

Why: an untrained SmolLM2-135M refuses the gyms' action format in most turns (training/
demonstrations.py: 0 of 16 valid actions without an example in context), and a turn the gym
refuses gives PPO nothing to learn from. In-context examples fix part of that per episode; a warm
start puts the format in the weights, so the context is free for the task.

What happens, and why:
1. Examples (`examples_from_demonstrations`): each worked exchange of the workspace's
   `demonstrations/<bench>.json` becomes one example per assistant turn: prompt = the gym's
   system prompt and the exchange up to that turn, completion = the turn. Only the gyms the runs
   train on (`--gyms`; UserGym's default leaves Intention and Telepathy out, as the paper holds
   them out), so the held-out gyms stay unseen.
2. With `--from-runs`, the successful episodes of earlier runs are added the same way
   (`examples_from_runs`: trajectories of the train split, success true, no error), so the
   model also imitates what already worked; never an evaluation episode (those live under
   eval/, which this never reads).
3. TRL's SFTTrainer trains on them (loss on the completion only: its prompt-completion format),
   then the model and tokenizer are saved to `--out` with `warmstart.json` (what went in, the
   final loss), a folder `model.path` / `--model` accepts.
TRL is the optional extra `trl` (`pip install -e '.[trl]'`; scripts/setup.sh installs it).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]


class WarmstartError(ValueError):
    """Bad input for a warm start; the message says what to do."""


def _split(system: str, messages: list[dict[str, str]]) -> list[dict[str, Any]]:
    """One prompt-completion example per assistant message of a chat."""
    out = []
    for k, m in enumerate(messages):
        if m["role"] == "assistant" and m["content"].strip():
            out.append({"prompt": [{"role": "system", "content": system}, *messages[:k]],
                        "completion": [{"role": "assistant", "content": m["content"]}]})
    return out


def examples_from_demonstrations(bench, demonstrations: dict[str, list[dict[str, Any]]],
                                 gyms: list[str]) -> list[dict[str, Any]]:
    """Prompt-completion examples of each gym's worked exchanges (module docstring, 1)."""
    out = []
    for gym in gyms:
        examples = demonstrations.get(gym) or []
        if not examples:
            continue
        tasks = bench.load_tasks("train", gyms=[gym])
        if not tasks:
            raise WarmstartError(f"gym {gym} has no train tasks to take its system prompt from.")
        system = bench.system_prompt(tasks[0])
        for ex in examples:
            out += _split(system, [{"role": m["role"], "content": m["content"]}
                                   for m in ex["messages"]])
    return out


def examples_from_runs(folders: list[Path], gyms: list[str]) -> list[dict[str, Any]]:
    """Prompt-completion examples of the successful training episodes under `folders` (run
    folders, or experiment folders holding run-NNN/), one per agent turn, duplicates dropped."""
    out, seen = [], set()
    for folder in folders:
        files = sorted(Path(folder).glob("trajectories/step-*.jsonl")) + \
            sorted(Path(folder).glob("run-*/trajectories/step-*.jsonl"))
        if not files:
            raise WarmstartError(f"{folder} holds no trajectories: name a run folder "
                                 "(EXP/run-001) or an experiment folder.")
        for path in files:
            for line in path.read_text().splitlines():
                try:
                    ep = json.loads(line)
                except ValueError:
                    continue                 # a torn last line of a killed run
                if not ep.get("success") or ep.get("error") or ep.get("gym") not in gyms:
                    continue
                messages = [{"role": "user", "content": ep["prompt"]}]
                for turn in ep["turns"]:
                    messages.append({"role": "assistant", "content": turn["agent"]})
                    if turn.get("user"):
                        messages.append({"role": "user", "content": turn["user"]})
                key = json.dumps([ep["system"], messages[:-1] if messages[-1]["role"] == "user"
                                  else messages])
                if key not in seen:
                    seen.add(key)
                    out += _split(ep["system"], messages)
    return out


def sft(model: str, examples: list[dict[str, Any]], out: Path, *, epochs: float, lr: float,
        batch_size: int, max_length: int, seed: int, device: str) -> dict[str, Any]:
    """TRL's SFTTrainer on the examples; the model and tokenizer saved to `out`."""
    try:
        from datasets import Dataset
        from trl import SFTConfig, SFTTrainer
    except ImportError:
        raise WarmstartError("the warm start needs TRL: pip install -e '.[trl]' (or run "
                             "scripts/setup.sh).") from None
    import tempfile

    import torch

    from training.policy import load_tokenizer

    cpu = device == "cpu" or (device == "auto" and not torch.cuda.is_available())
    tok = load_tokenizer(model)
    tok.padding_side = "right"                       # training, not generation
    with tempfile.TemporaryDirectory() as tmp:
        conf = SFTConfig(output_dir=tmp, num_train_epochs=epochs, learning_rate=lr,
                         per_device_train_batch_size=batch_size, max_length=max_length,
                         lr_scheduler_type="constant", seed=seed, use_cpu=cpu, bf16=not cpu,
                         report_to=[], save_strategy="no", logging_steps=1, disable_tqdm=True)
        trainer = SFTTrainer(model=model, args=conf, train_dataset=Dataset.from_list(examples),
                             processing_class=tok)
        result = trainer.train()
        trainer.save_model(str(out))
    tok.padding_side = "left"                        # as training.policy loads it
    tok.save_pretrained(str(out))
    return {"train_loss": float(result.training_loss), "steps": int(result.global_step)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m training.warmstart",
                                     description="Supervised warm start on worked examples.")
    parser.add_argument("--bench", required=True, help="usergym, colbench or tau2")
    parser.add_argument("--out", required=True, help="new model folder")
    parser.add_argument("--model", default="", help="start model (default: the packaged SmolLM2)")
    parser.add_argument("--workspace", default=str(PROJECT / "workspace"),
                        help="workspace whose demonstrations/ to use (default: the project's)")
    parser.add_argument("--gyms", default="", help="comma-separated (default: the training gyms)")
    parser.add_argument("--from-runs", nargs="*", default=[], metavar="FOLDER",
                        help="also the successful episodes of these runs or experiments")
    parser.add_argument("--no-demonstrations", action="store_true",
                        help="only the runs' episodes")
    parser.add_argument("--epochs", type=float, default=3.0)
    parser.add_argument("--lr", type=float, default=2e-5)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--max-length", type=int, default=2048, help="tokens of an example at most")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--device", default="auto", help="auto, cpu or cuda")
    args = parser.parse_args(argv)
    try:
        return run(args)
    except WarmstartError as exc:
        print(f"warmstart: {exc}", file=sys.stderr)
        return 2


def run(args) -> int:
    from training import demonstrations
    from training.benches import UnknownBench, get_bench
    from training.policy import ModelLoadError, resolve_model_path
    from training.benches import train_gyms

    out = Path(args.out)
    if out.exists() and any(out.iterdir()):
        raise WarmstartError(f"{out} exists and is not empty: name a new folder.")
    try:
        bench = get_bench(args.bench)
        model = resolve_model_path(args.model)
    except (UnknownBench, ModelLoadError) as exc:
        raise WarmstartError(str(exc)) from None
    gyms = [g.strip() for g in args.gyms.split(",") if g.strip()] or list(train_gyms(bench))
    unknown = [g for g in gyms if g not in bench.gyms]
    if unknown:
        raise WarmstartError(f"{unknown[0]!r} is not a gym of {bench.name} "
                             f"({', '.join(bench.gyms)}).")
    examples, counts = [], {}
    if not args.no_demonstrations:
        try:
            demos = demonstrations.load_dir(Path(args.workspace)).get(bench.name, {})
        except demonstrations.DemonstrationError as exc:
            raise WarmstartError(str(exc)) from None
        found = examples_from_demonstrations(bench, demos, gyms)
        examples += found
        counts["demonstrations"] = len(found)
    if args.from_runs:
        found = examples_from_runs([Path(f) for f in args.from_runs], gyms)
        examples += found
        counts["runs"] = len(found)
    if not examples:
        raise WarmstartError(f"no examples for gyms {', '.join(gyms)}: the workspace has no "
                             "demonstrations for them and no run had a successful episode.")
    print(f"warmstart: {len(examples)} examples ({counts}) for {', '.join(gyms)}; training "
          f"{args.epochs:g} epochs from {model}", file=sys.stderr, flush=True)
    t0 = time.monotonic()
    result = sft(model, examples, out, epochs=args.epochs, lr=args.lr,
                 batch_size=args.batch_size, max_length=args.max_length, seed=args.seed,
                 device=args.device)
    record = {"bench": bench.name, "gyms": gyms, "model": model, "examples": counts,
              "from_runs": [str(f) for f in args.from_runs], "epochs": args.epochs, "lr": args.lr,
              "batch_size": args.batch_size, "seed": args.seed,
              "seconds": round(time.monotonic() - t0, 1), **result}
    (out / "warmstart.json").write_text(json.dumps(record, indent=1) + "\n")
    print(f"warmstart: wrote {out} (final loss {result['train_loss']:.3f}); start a run from it "
          f"with --model {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
