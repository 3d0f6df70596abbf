"""Whole-or-nothing checkpoints: checkpoints/step-NNNNNN/ holds policy, critic, both optimisers,
RNG states, the step, the live commit and the algorithm (DESIGN.md, "The trainer subprocess");
under grpo and infopo there is no critic, so neither critic.pt nor critic_optim.pt.

A checkpoint is written into a hidden temporary sibling folder, `state.json` last, then renamed
into place, so a crash leaves either no folder or a whole one; `latest` only accepts folders that
have `state.json`. The frozen reference model is not saved: it is rebuilt from `model.path`.

What a bit-exact resume needs, and no more: the CPU demo's checkpoint (SmolLM2-135M, PPO) was
3,079 MiB, policy and critic 513 each and each AdamW state 1,026 (two fp32 moments a parameter).
The critic's token embedding gets a gradient only on the rows of the tokens it has read, 773 of
49,152 after the demo's 8 steps, so 212 MiB of its moments were zeros: an optimiser moment
whose rows are mostly zero is stored as its other rows and their indices (`_pack`), and `load`
rebuilds it bit for bit. The policy's embedding is tied to its output layer, whose gradient
reaches every row, so its moments stay dense. A checkpoint whose run ended may keep only its
policy (orchestrator/prune.py); `load` refuses it for a resume.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import torch

from training.config import ConfigError

STATE = "state.json"


def step_dir(root: Path, step: int) -> Path:
    return root / f"step-{step:06d}"


def rng_state() -> dict[str, Any]:
    state = {"python": random.getstate(), "numpy": np.random.get_state(),
             "torch": torch.get_rng_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


_PACKED = "__zero_rows_packed__"


def _pack(t: Any) -> Any:
    """A 2-D fp32 tensor with at least half its rows +0.0 throughout, as {index, rows, shape};
    anything else as it is. Only +0.0 counts (its bits are all 0), so a -0.0 is kept as data."""
    if not (torch.is_tensor(t) and t.dim() == 2 and t.dtype == torch.float32):
        return t
    kept = (t.view(torch.int32) != 0).any(dim=1)                    # (rows,)
    if 2 * int(kept.sum()) > t.shape[0]:
        return t
    index = kept.nonzero().squeeze(1)                                # (n,)
    return {_PACKED: True, "shape": list(t.shape), "index": index.cpu(), "rows": t[index].cpu()}


def _unpack(v: Any) -> Any:
    if isinstance(v, dict) and v.get(_PACKED):
        out = torch.zeros(v["shape"], dtype=v["rows"].dtype)
        out[v["index"]] = v["rows"]
        return out
    return v


def _map_optim_state(sd: dict, fn) -> dict:
    """An optimiser state dict with `fn` applied to each per-parameter value, in new dicts (the
    optimiser's own state dicts are shared with `state_dict()`'s result and stay untouched)."""
    return {**sd, "state": {pid: {k: fn(v) for k, v in entry.items()}
                            for pid, entry in sd.get("state", {}).items()}}


def save(root: Path, step: int, tensors: dict[str, dict], meta: dict[str, Any],
         keep: int = 0) -> Path:
    """Write `tensors` (name -> state dict) and `meta` as checkpoint `step`; returns its folder.

    keep > 0 deletes all but the newest `keep` whole checkpoints afterwards.
    """
    root.mkdir(parents=True, exist_ok=True)
    dest = step_dir(root, step)
    tmp = Path(tempfile.mkdtemp(prefix=f".tmp-{dest.name}-", dir=root))
    try:
        for name, sd in tensors.items():
            torch.save(_map_optim_state(sd, _pack) if name.endswith("_optim") else sd,
                       tmp / f"{name}.pt")
        torch.save(rng_state(), tmp / "rng.pt")
        (tmp / STATE).write_text(json.dumps({"step": step, **meta}, indent=1))
        if dest.exists():          # the same step saved again (SIGTERM right after a save)
            shutil.rmtree(dest)
        os.rename(tmp, dest)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if keep > 0:
        for old in list_whole(root)[:-keep]:
            shutil.rmtree(old, ignore_errors=True)
    return dest


def remove_partial(root: Path) -> int:
    """Delete temporary folders a killed process left mid-save; returns how many."""
    found = list(root.glob(".tmp-step-*")) if root.is_dir() else []
    for p in found:
        shutil.rmtree(p, ignore_errors=True)
    return len(found)


def list_whole(root: Path) -> list[Path]:
    """Whole checkpoint folders, oldest first."""
    if not root.is_dir():
        return []
    found = [p for p in root.glob("step-*") if p.is_dir() and (p / STATE).exists()]
    return sorted(found, key=lambda p: int(p.name.split("-")[1]))


def latest(root: Path) -> Path | None:
    whole = list_whole(root)
    return whole[-1] if whole else None


def load(folder: Path, names: list[str]) -> tuple[dict[str, dict], dict[str, Any], dict]:
    """(state dicts by name, meta from state.json, RNG state) of one checkpoint folder.

    A checkpoint of a run that ended keeps only policy.pt (orchestrator/prune.py), which a resume
    cannot use: refused in one sentence."""
    meta = read_meta(folder)
    if meta.get("policy_only"):
        raise ConfigError(f"{folder} keeps only the policy (its run ended, and the critic, "
                          "optimiser and RNG states were removed): evaluate it with "
                          "`orchestrator eval`, or start a new run.")
    tensors = {n: torch.load(folder / f"{n}.pt", map_location="cpu", weights_only=False)
               for n in names}
    tensors = {n: _map_optim_state(sd, _unpack) if n.endswith("_optim") else sd
               for n, sd in tensors.items()}
    rng = torch.load(folder / "rng.pt", weights_only=False)
    return tensors, meta, rng


def read_meta(folder: Path) -> dict[str, Any]:
    """state.json of one whole checkpoint folder (step, commit, algorithm, ...)."""
    return json.loads((folder / STATE).read_text())


# ---- a run's checkpoints: what training/trainer.py saves and resumes from ------------------------
def run_state(models, actor_opt, critic_opt) -> dict[str, Any]:
    """What a run's checkpoint holds: name -> module or optimiser (no critic under grpo and
    infopo, whose critic_opt is None)."""
    parts = {"policy": models.policy, "actor_optim": actor_opt}
    if critic_opt is not None:
        parts.update({"critic": models.critic, "critic_optim": critic_opt})
    return parts


def whole_state(parts: dict[str, Any], dist) -> dict[str, dict] | None:
    """The state dicts of `parts`, in the one-process format (same names, integer optimiser
    ids). Under several processes they are gathered whole from every process (collective: every
    rank calls this) and only rank 0 gets them; the others get None."""
    from training import distributed as D

    if not dist.active:
        return {name: obj.state_dict() for name, obj in parts.items()}
    tensors = {name: D.full_optim_state_dict(obj, dist) if name.endswith("_optim")
               else D.full_state_dict(obj, dist) for name, obj in parts.items()}
    return tensors if dist.is_main else None


def save_run(files, step: int, tensors: dict[str, dict], meta: dict[str, Any], *, keep: int,
             reason: str) -> Path | None:
    """Save checkpoint `step` of a run and record it in events.jsonl; a failure to write (a full
    disk: torch.save reports it as a RuntimeError) is said on stderr and in events.jsonl, and the
    run trains on: `save` removed its temporary folder, so the previous whole checkpoint is still
    the one a resume uses (tests/faults/test_fault_disk_data.py fills the disk)."""
    import sys

    try:
        folder = save(files.checkpoints, step, tensors, meta, keep=keep)
    except (OSError, RuntimeError) as exc:
        prev = latest(files.checkpoints)
        usable = prev.name if prev is not None else None
        free_mb = shutil.disk_usage(files.checkpoints).free / 2**20
        error = f"{exc}; {free_mb:.0f} MB free on the checkpoint disk"
        print(f"trainer: checkpoint step-{step:06d} could not be written ({error}); "
              + (f"{usable} is still usable." if usable else "no earlier checkpoint exists."),
              file=sys.stderr, flush=True)
        try:
            files.event("checkpoint_failed", step=step, error=error, usable=usable, reason=reason)
        except OSError:
            pass                  # the disk is full for events.jsonl too: stderr said it
        return None
    files.event("checkpoint", step=step, path=str(folder.relative_to(files.dir)), reason=reason)
    return folder


def read_for_resume(root: Path, algorithm: str, with_critic: bool
                    ) -> tuple[dict, dict, dict] | None:
    """(state dicts, meta, RNG state) of the newest whole checkpoint under `root`, or None; a
    checkpoint of another algorithm is refused in one sentence (checkpoints from before
    algorithm.name existed are all PPO's)."""
    folder = latest(root)
    if folder is None:
        return None
    was = read_meta(folder).get("algorithm", "ppo")
    if was != algorithm:
        raise ConfigError(f"{folder.name} was trained with algorithm {was} but config.json "
                          f"says {algorithm}: resume with {was}, or start a new run.")
    names = ["policy", "actor_optim"] + (["critic", "critic_optim"] if with_critic else [])
    return load(folder, names)


def restore_optimizers(optimizers: dict[str, Any], tensors: dict[str, dict], dist) -> None:
    """Load each optimiser's saved state (None: an optimiser the run does not have); under
    FSDP each whole state tensor is split like its parameter."""
    from training import distributed as D

    for name, opt in optimizers.items():
        if opt is None:
            continue
        if dist.active:
            D.load_full_optim_state_dict(opt, tensors[name], dist)
        else:
            opt.load_state_dict(tensors[name])
