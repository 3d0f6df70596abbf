"""Checkpoints keep what can still be read: the resume state only where a resume can happen.

A whole checkpoint (training/checkpoint.py) of the CPU demo, SmolLM2-135M under PPO, holds
policy.pt (513 MiB), critic.pt (513), actor_optim.pt (1,026: AdamW's two fp32 moments), a
critic_optim.pt whose zero rows are not stored (about 815), and rng.pt (14 KiB). A bit-exact
resume reads all of it (tests/training/test_trainer.py compares every parameter), so a run that
may resume keeps its checkpoints whole. Only a resume reads the critic, the optimisers and the
RNG states; the other reader of a checkpoint, `orchestrator eval`, loads policy.pt alone
(training.evaluate).

A run the experiment never resumes keeps only policy.pt and state.json in each checkpoint:
`Experiment.pick_run` continues the newest run alone, and only when it did not finish, crash or
restart (a restart with `from_checkpoint` first copies that checkpoint into the new run, as hard
links). The loop slims such runs as they end (`slim_ended_runs`); `orchestrator prune` (`prune`)
also removes all but the newest `keep` checkpoints of every run. README, "Disk", has the sizes.
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path

# what only a resume reads (training/checkpoint.py writes them; training.trainer `_read_checkpoint`)
RESUME_FILES = ("critic.pt", "actor_optim.pt", "critic_optim.pt", "rng.pt")
STATE = "state.json"
ENDED = ("finished", "restarted", "crashed", "abandoned")


def disk_bytes(path: Path, unshared: bool = False) -> int:
    """Bytes the files under `path` (a folder or a file) take on disk, a file with several hard
    links counted once; `unshared`: only files no other link holds, what removing them frees."""
    path = Path(path)
    files = [path] if path.is_file() else [Path(root) / name for root, _dirs, names in os.walk(path)
                                           for name in names]
    seen, total = set(), 0
    for f in files:
        try:
            st = os.lstat(f)
        except OSError:
            continue
        if (st.st_dev, st.st_ino) not in seen and not (unshared and st.st_nlink > 1):
            seen.add((st.st_dev, st.st_ino))
            total += st.st_blocks * 512
    return total


def whole_checkpoints(run_dir: Path) -> list[Path]:
    """Whole checkpoint folders of a run (a state.json), oldest first."""
    found = [p for p in (run_dir / "checkpoints").glob("step-*")
             if p.is_dir() and (p / STATE).exists()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def resumable_run(meta: dict) -> str | None:
    """The run `Experiment.pick_run` would continue: the newest, unless it has ended."""
    runs = meta.get("runs") or []
    return runs[-1]["name"] if runs and runs[-1].get("state") not in ENDED else None


def slim(folder: Path) -> int:
    """Remove a checkpoint's resume state (RESUME_FILES), keeping policy.pt and state.json, which
    says so (`policy_only`: training.checkpoint refuses to resume from it in one sentence);
    returns the bytes freed."""
    freed = 0
    for name in RESUME_FILES:
        path = folder / name
        if path.exists():
            freed += disk_bytes(path, unshared=True)
            path.unlink()
    state = json.loads((folder / STATE).read_text())
    if not state.get("policy_only"):
        state["policy_only"] = True
        tmp = folder / (STATE + ".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        os.replace(tmp, folder / STATE)
    return freed


def slim_ended_runs(exp_dir: Path, meta: dict) -> int:
    """Slim every checkpoint of every run but the resumable one; returns the bytes freed."""
    keep = resumable_run(meta)
    return sum(slim(c) for r in meta.get("runs") or [] if r["name"] != keep
               for c in whole_checkpoints(Path(exp_dir) / r["name"]))


@dataclass
class Pruned:
    removed: list[str] = field(default_factory=list)     # "run-001/step-000004"
    slimmed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)        # "run-002/step-000008 (whole)"
    freed: int = 0


def prune(exp_dir: Path, meta: dict, keep: int) -> Pruned:
    """All but the newest `keep` checkpoints of every run removed (half-written ones too), and
    the resume state of every run that will not resume."""
    out = Pruned()
    resumable = resumable_run(meta)
    for r in meta.get("runs") or []:
        run_dir = Path(exp_dir) / r["name"]
        for partial in (run_dir / "checkpoints").glob(".tmp-step-*"):
            out.freed += disk_bytes(partial, unshared=True)
            shutil.rmtree(partial, ignore_errors=True)
        found = whole_checkpoints(run_dir)
        for old in found[:-keep]:
            out.freed += disk_bytes(old, unshared=True)
            shutil.rmtree(old)
            out.removed.append(f"{r['name']}/{old.name}")
        for ckpt in found[-keep:]:
            if r["name"] == resumable:
                out.kept.append(f"{r['name']}/{ckpt.name} (whole: the run may resume)")
                continue
            freed = slim(ckpt)
            out.freed += freed
            if freed:
                out.slimmed.append(f"{r['name']}/{ckpt.name}")
            out.kept.append(f"{r['name']}/{ckpt.name} (the policy, for eval)")
    return out
