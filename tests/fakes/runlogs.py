"""Helpers for the meta-agent tests: a real temporary workspace repository and synthetic run logs
in the trainer's formats (DESIGN.md, "The trainer subprocess": its metric and episode keys)."""
from __future__ import annotations

import json
import random
import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FAKES = Path(__file__).resolve().parent


def make_workspace(path: Path) -> Path:
    """A git repository seeded from the project's workspace/, one commit on main, live ref set."""
    shutil.copytree(ROOT / "workspace", path)
    env = ["-c", "user.name=seed", "-c", "user.email=seed@eau.local"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    subprocess.run(["git", "-C", str(path), "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(path), *env, "commit", "-q", "-m", "seed"], check=True)
    subprocess.run(["git", "-C", str(path), "update-ref", "refs/eau/live", "HEAD"], check=True)
    return path


def episode(gym: str, *, deadlock: bool = False, leak: bool = False, success: bool = False,
            turns: int = 4, first: str = "[action] what do you need?", task: str = "t0") -> dict:
    """A deadlocked episode tries to answer on its last turn and is refused (the min_questions
    counter of the paper's A.2: `I WANT TO ANSWER:` written, `answered` false)."""
    ts = []
    tried = "I WANT TO ANSWER: def f(x): return []" if gym == "colbench" else "[answer] my answer"
    for i in range(turns):
        leaked = [{"kind": "return", "text": "returns a list"}] if leak and i % 2 == 0 else []
        text = first if i == 0 else tried if deadlock and i == turns - 1 else f"[action] question {i}"
        ts.append({"turn": i + 1, "agent": text,
                   "user": "It should return a list." if leaked else "Hmm.", "reward": 0.0,
                   "revealed_facts": leaked, "leaked_facts": leaked, "asked_question": True,
                   "answered": (not deadlock) and i == turns - 1, "rule_id": "r", "tool_calls": []})
    return {"gym": gym, "task_id": task, "user_arm": "symbolic", "turns": ts,
            "score": 1.0 if success else 0.0, "success": success, "truncated": deadlock}


def write_run(run_dir: Path, steps: int, *, gym: str = "colbench", metric_fn=None,
              episodes_fn=None, seed: int = 0, start: int = 1) -> Path:
    """Append `steps` metric lines (and a trajectory file every 5 steps) to a run folder."""
    rng = random.Random(seed)
    (run_dir / "trajectories").mkdir(parents=True, exist_ok=True)
    with open(run_dir / "metrics.jsonl", "a") as fh:
        for step in range(start, start + steps):
            row = {"step": step, "reward/mean": 0.1 + rng.gauss(0, 0.01), f"success/{gym}": 0.3,
                   f"reward/{gym}": 0.1, "episode/turns": 4.0, "user/leak_rate": 0.0,
                   "actor/entropy": 1.0 + rng.gauss(0, 0.01), "critic/value_loss": 0.5}
            if metric_fn:
                row.update(metric_fn(step, rng))
            fh.write(json.dumps(row) + "\n")
            if episodes_fn and step % 5 == 0:
                eps = episodes_fn(step, rng)
                (run_dir / "trajectories" / f"step-{step:06d}.jsonl").write_text(
                    "".join(json.dumps(e) + "\n" for e in eps))
    return run_dir


def add_event(run_dir: Path, **event) -> None:
    with open(run_dir / "events.jsonl", "a") as fh:
        fh.write(json.dumps(event) + "\n")
