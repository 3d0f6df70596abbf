"""Where an experiment lives on disk (one place, so every command agrees).

runs/_experience/           the experience pool (orchestrator/experience.py; no experiment name
                            starts with "_")
runs/NAME/                  an experiment
  workspace/                its git workspace (or a file `workspace.link` naming --workspace PATH)
  experiment.json           name, bench, runs so far, cap, state
  ledger.jsonl              the intervention ledger (verdicts, applied, effects, sessions, control)
  run-001/, run-002/ ...    trainer run folders (DESIGN.md, "The trainer subprocess")
  agents/                   meta-agent session folders (prompt, transcript, result)
  eval/                     evaluation results: never given to a meta-agent session
"""
from __future__ import annotations

import os
from pathlib import Path


def runs_dir(override: str | None = None) -> Path:
    return Path(override or os.environ.get("EAU_RUNS_DIR") or "runs").resolve()


def exp_dir(name: str, override: str | None = None) -> Path:
    return runs_dir(override) / name


def project_root() -> Path:
    return Path(__file__).resolve().parents[1]


def cache_dir() -> Path:
    """Caches of this machine, never in the project's source tree: $EAU_CACHE, else
    $XDG_CACHE_HOME/eau, else ~/.cache/eau (where training/smollm2.py also builds the model)."""
    if os.environ.get("EAU_CACHE"):
        return Path(os.environ["EAU_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "eau"
