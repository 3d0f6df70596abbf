"""What the worked-example probes share (benchmarks/tau_example_probe.py and
benchmarks/travel_example_probe.py). Each variant gets a copy of the project's tracked files,
and the variant edits that copy's workspace. The untrained policy is then evaluated walled
(`orchestrator eval --model default`) on one gym's held-out tasks in the copy, and each
variant's counts are printed as one table. The walled evaluation reads only the project's own
workspace, hence the copy; nothing is written into the source tree.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]


def project_copy(dest: Path) -> Path:
    """The project's tracked files as they are in the working tree, copied to dest (without git,
    as on the lent GPU machine, whose copy of the tree has no .git: every file but hidden
    folders, runs/ and caches)."""
    try:
        files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True,
                               check=True, text=True).stdout.split("\0")
    except (OSError, subprocess.CalledProcessError):
        files = []
        for folder, dirs, names in os.walk(ROOT):     # pruned: .venv alone holds ~10^4 files
            dirs[:] = [d for d in dirs if not d.startswith(".") and d not in ("runs", "__pycache__")]
            files += [str(Path(folder, n).relative_to(ROOT)) for n in names if not n.startswith(".")]
    for rel in filter(None, files):
        src = ROOT / rel
        if src.is_file():
            (dest / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / rel)
    return dest


def parser(doc: str, variants: tuple[str, ...], gym: str, max_turns: int) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--variants", default=",".join(variants),
                   help=f"comma-separated, of {', '.join(variants)} (default: all)")
    p.add_argument("--episodes", type=int, default=30, help=f"held-out {gym} tasks (the split has 30)")
    p.add_argument("--max-turns", type=int, default=max_turns)
    p.add_argument("--max-new-tokens", type=int, default=64)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None, help="also write the counts as JSON here")
    p.add_argument("--keep", default=None,
                   help="copy each variant's episodes.jsonl into this folder, to read what the policy wrote")
    return p


def chosen(p: argparse.ArgumentParser, a: argparse.Namespace, variants: tuple[str, ...]) -> list[str]:
    picked = [v.strip() for v in a.variants.split(",") if v.strip()]
    bad = [v for v in picked if v not in variants]
    if bad:
        p.error(f"no variant {', '.join(bad)}: give {' or '.join(variants)}")
    return picked


def run(a: argparse.Namespace, variants: list[str], gym: str, edit: Callable[[Path, str], None],
        count: Callable[[Path, Path], dict[str, int]]) -> dict[str, dict[str, int]]:
    """variant -> count(its episodes.jsonl, its copy), each variant evaluated in its own copy."""
    rows = {}
    with tempfile.TemporaryDirectory(prefix=f"{gym}-probe-") as tmp:
        for v in variants:
            copy = project_copy(Path(tmp) / v)
            edit(copy, v)
            cmd = [sys.executable, "-m", "orchestrator.cli", "eval", "--model", "default",
                   "--bench", "usergym", "--gyms", gym, "--episodes", str(a.episodes),
                   "--max-turns", str(a.max_turns), "--max-new-tokens", str(a.max_new_tokens),
                   "--batch-size", str(a.episodes), "--seed", str(a.seed), "--device", a.device]
            env = {**os.environ, "PYTHONPATH": os.pathsep.join(
                filter(None, [str(copy), os.environ.get("PYTHONPATH", "")]))}
            print(f"{v}: {' '.join(cmd[1:])}", file=sys.stderr, flush=True)
            subprocess.run(cmd, cwd=copy, env=env, check=True)
            found = sorted((copy / "runs").glob("*/eval/*/episodes.jsonl"))
            rows[v] = count(found[-1], copy)
            if a.keep:
                Path(a.keep).mkdir(parents=True, exist_ok=True)
                shutil.copy2(found[-1], Path(a.keep) / f"{v}-episodes.jsonl")
    return rows


def report(a: argparse.Namespace, rows: dict[str, dict[str, int]]) -> None:
    keys = list(next(iter(rows.values())))
    print("| variant | " + " | ".join(keys) + " |")
    print("| --- | " + " | ".join("---:" for _ in keys) + " |")
    for v, r in rows.items():
        print(f"| {v} | " + " | ".join(str(r[k]) for k in keys) + " |")
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "counts": rows}, indent=1) + "\n")
