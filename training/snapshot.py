"""A workspace snapshot: the files of one workspace commit, parsed, as the trainer runs them.

The trainer never reads the workspace's working tree: `training.live` exports the tree of the
live commit into a folder and builds a `Snapshot` from it, so a half-edited file is never seen.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Snapshot:
    commit: str                                  # workspace commit hex ("" for a plain folder)
    root: Path                                   # folder holding the exported tree
    knobs: dict[str, Any]                        # knobs.json
    rules: dict[str, dict[str, Any]] = field(default_factory=dict)   # bench -> rules.json
    personas: dict[str, str] = field(default_factory=dict)           # bench -> persona.md text
    reward_files: dict[str, Path] = field(default_factory=dict)      # module name -> path
    demonstrations: dict[str, dict[str, list]] = field(default_factory=dict)  # bench -> gym -> examples
    env_patch_files: dict[str, Path] = field(default_factory=dict)   # gym -> env_patches/<gym>.py
    # the started patches (training.env_patches.EnvPatches) the environments call; set by
    # training.live for the trainer's snapshot, None elsewhere (evaluation runs no patch)
    patches: Any = None

    @classmethod
    def from_dir(cls, root: Path | str, commit: str = "") -> "Snapshot":
        root = Path(root)
        knobs = json.loads((root / "knobs.json").read_text())
        rules, personas = {}, {}
        users = root / "users"
        if users.is_dir():
            for bench_dir in sorted(p for p in users.iterdir() if p.is_dir()):
                if (bench_dir / "rules.json").exists():
                    rules[bench_dir.name] = json.loads((bench_dir / "rules.json").read_text())
                if (bench_dir / "persona.md").exists():
                    personas[bench_dir.name] = (bench_dir / "persona.md").read_text()
        rewards = {p.stem: p for p in sorted((root / "rewards").glob("*.py"))} \
            if (root / "rewards").is_dir() else {}
        from training import demonstrations, env_patches

        return cls(commit=commit, root=root, knobs=knobs, rules=rules, personas=personas,
                   reward_files=rewards, demonstrations=demonstrations.load_dir(root),
                   env_patch_files=env_patches.patch_files(root))

    def demos_for(self, bench: str, gym: str) -> tuple[list[dict[str, str]], int]:
        """(chat messages, number of examples) to show before a `gym` task: the first
        `env.<gym>.demonstrations` examples of demonstrations/<bench>.json."""
        from training import demonstrations

        examples = self.demonstrations.get(bench, {}).get(gym) or []
        n = min(demonstrations.knob(self.knobs, gym), len(examples))
        return demonstrations.messages_for(examples, n), n
