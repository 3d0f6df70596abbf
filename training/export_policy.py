"""`python -m training.export_policy CHECKPOINT OUT`: a checkpoint's policy as a Hugging Face model
folder (weights and tokenizer), which `model.path` takes.

Why: a run that ended keeps only policy.pt in its checkpoints (orchestrator/prune.py), which no
resume can use; `orchestrator fork` starts its arm's run from that policy instead, through this
folder (orchestrator/fork.py). The policy loads as the evaluation loads it (training.evaluate:
the base model its run's config.json names, the checkpoint's weights on it; LoRA adapters are
merged in), so the folder holds exactly the weights `orchestrator eval` would evaluate.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path


def export(checkpoint: Path, out: Path) -> Path:
    from training.evaluate import load_policy

    models = load_policy(Path(checkpoint), None, "cpu")
    policy = models.policy
    if hasattr(policy, "merge_and_unload"):       # a LoRA checkpoint: one plain model folder
        policy = policy.merge_and_unload()
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    policy.save_pretrained(out)
    models.tokenizer.save_pretrained(out)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m training.export_policy", description=__doc__.split("\n")[0])
    p.add_argument("checkpoint")
    p.add_argument("out")
    a = p.parse_args(argv)
    try:
        print(export(Path(a.checkpoint), Path(a.out)))
    except (OSError, ValueError) as exc:
        print(f"export_policy: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
