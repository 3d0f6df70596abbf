"""Whole-or-nothing checkpoints: checkpoints/step-NNNNNN/ holds policy, critic, both optimisers,
RNG states, the step, the live commit and the algorithm (DESIGN.md, "The trainer subprocess");
under grpo and infopo there is no critic, so neither critic.pt nor critic_optim.pt.

A checkpoint is written into a hidden temporary sibling folder, `state.json` last, then renamed
into place, so a crash leaves either no folder or a whole one; `latest` only accepts folders that
have `state.json`. The frozen reference model is not saved: it is rebuilt from `model.path`.
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
            torch.save(sd, tmp / f"{name}.pt")
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
    """(state dicts by name, meta from state.json, RNG state) of one checkpoint folder."""
    tensors = {n: torch.load(folder / f"{n}.pt", map_location="cpu", weights_only=False)
               for n in names}
    meta = read_meta(folder)
    rng = torch.load(folder / "rng.pt", weights_only=False)
    return tensors, meta, rng


def read_meta(folder: Path) -> dict[str, Any]:
    """state.json of one whole checkpoint folder (step, commit, algorithm, ...)."""
    return json.loads((folder / STATE).read_text())
