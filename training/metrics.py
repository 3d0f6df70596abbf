"""Append-only JSON-lines files of a run: metrics.jsonl, events.jsonl, trajectories/*.jsonl.

Each record is written as one whole line (write, flush, fsync), so a reader never sees half an
object except after a crash mid-write; readers skip any line that does not parse (DESIGN.md, "The
trainer subprocess"). `truncate_after_step` drops metric lines past a checkpoint on --resume, so no
step appears twice.
"""
from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Iterable, Iterator


def _clean(value: Any) -> Any:
    """JSON has no NaN/inf: write them as null so every reader can parse the line."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value


def append_lines(path: Path, records: Iterable[dict[str, Any]]) -> None:
    """Append records as whole JSON lines and fsync, so a crash never leaves a torn file behind."""
    text = "".join(json.dumps(_clean(r), ensure_ascii=False) + "\n" for r in records)
    if not text:
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())


def append_line(path: Path, record: dict[str, Any]) -> None:
    append_lines(path, [record])


def read_lines(path: Path) -> Iterator[dict[str, Any]]:
    """Objects of a JSON-lines file, skipping lines that are torn or not objects."""
    try:
        f = open(path, encoding="utf-8")
    except FileNotFoundError:
        return
    with f:
        for line in f:
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                yield obj


def truncate_after_step(path: Path, step: int) -> int:
    """Rewrite `path` keeping only whole lines whose "step" is <= step; returns lines dropped."""
    if not path.exists():
        return 0
    kept, dropped = [], 0
    for obj in read_lines(path):
        if int(obj.get("step", 0)) <= step:
            kept.append(obj)
        else:
            dropped += 1
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(o, ensure_ascii=False) + "\n" for o in kept))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return dropped


class RunFiles:
    """Paths of one run folder and the writers the trainer uses (DESIGN.md layout)."""

    def __init__(self, run_dir: Path | str):
        self.dir = Path(run_dir)
        self.config = self.dir / "config.json"
        self.metrics = self.dir / "metrics.jsonl"
        self.events = self.dir / "events.jsonl"
        self.trajectories = self.dir / "trajectories"
        self.checkpoints = self.dir / "checkpoints"
        self.heartbeat = self.dir / "heartbeat"
        self.snapshots = self.dir / "snapshots"

    def event(self, kind: str, **fields: Any) -> None:
        append_line(self.events, {"event": kind, "time": time.time(), **fields})

    def metric(self, record: dict[str, Any]) -> None:
        append_line(self.metrics, record)

    def trajectory_path(self, step: int) -> Path:
        return self.trajectories / f"step-{step:06d}.jsonl"

    def touch_heartbeat(self) -> None:
        self.heartbeat.write_text(f"{time.time():.3f}\n")
