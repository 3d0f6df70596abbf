"""Worked example exchanges shown to the policy before its task: part of the environment.

Why: SmolLM2-135M-Instruct never opens a turn with `[action]` by itself. Probed on the same
IntentionGym prompt, 16 samples each: 0 of 16 turns were valid actions as prompted (T 1.0 and
0.7); with one worked exchange (a task, then `[action] <question>`) before the task, 8 of 16
(T 1.0) and 10 of 16 (T 0.7). With every turn refused as an invalid action, PPO has no signal at
all, so a small model learns nothing until it has seen the format once. A prefilled `[action]` tag
made all 16 "valid" and taught nothing (0 of 16 first lines were questions), so the policy still
writes every action itself: a demonstration is context, never a prefix of its turn.

Where they live: `demonstrations/<bench>.json` in the workspace (schema in
`schema/demonstrations.schema.json`), so the meta-agent can add, fix or thin them out like any
workspace file, the gate checks them (the schema, and every assistant turn parses under that gym's
own action parser: `BENCH.check_action(gym, text)`), and the trainer hot-reloads them. How many a
gym shows is the knob `env.<gym>.demonstrations` (0-3; fewer is harder, so lowering it needs the
gym's recent success at 0.80, as every harder write does):

    {"<gym>": [{"id": "...", "messages": [{"role": "user", "content": "<a task>"},
                                          {"role": "assistant", "content": "[action] ..."},
                                          {"role": "user", "content": "<the reply>"}, ...]}]}

Each example starts with the user's task and ends with an assistant turn; roles alternate. They are
rendered as earlier chat turns between the system prompt and the task (`messages_for`), which is
how the probe above showed them. Examples are invented for this file, never taken from a split, so
no evaluation answer is shown.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

FOLDER = "demonstrations"
SCHEMA = "schema/demonstrations.schema.json"
MAX_PER_GYM = 3            # the knob's maximum (workspace/schema/knobs.schema.json)


class DemonstrationError(ValueError):
    """A demonstrations file the trainer cannot use; the message names the file and the example."""


def knob(knobs: dict[str, Any], gym: str) -> int:
    """`env.<gym>.demonstrations`, 0 where a workspace predates the knob."""
    try:
        return max(0, int(knobs.get("env", {}).get(gym, {}).get("demonstrations", 0)))
    except (TypeError, ValueError):
        return 0


def load_dir(root: Path) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """bench -> gym -> examples, from `root/demonstrations/<bench>.json` (absent: {})."""
    out: dict[str, dict[str, list[dict[str, Any]]]] = {}
    folder = Path(root) / FOLDER
    if not folder.is_dir():
        return out
    for path in sorted(folder.glob("*.json")):
        try:
            data = json.loads(path.read_text())
        except ValueError as exc:
            raise DemonstrationError(f"{FOLDER}/{path.name}: not valid JSON ({exc}).") from None
        if not isinstance(data, dict):
            raise DemonstrationError(f"{FOLDER}/{path.name}: must map gym names to lists of examples.")
        out[path.stem] = data
    return out


def messages_for(examples: list[dict[str, Any]] | None, count: int) -> list[dict[str, str]]:
    """The chat messages of the first `count` examples, in order (what the policy sees)."""
    msgs: list[dict[str, str]] = []
    for ex in (examples or [])[:max(0, count)]:
        msgs += [{"role": m["role"], "content": m["content"]} for m in ex["messages"]]
    return msgs


def problems(bench, name: str, data: Any) -> list[str]:
    """Reasons a bench's demonstrations cannot be used: structure beyond the JSON schema (roles
    alternate, user first, assistant last), unknown gyms, and assistant turns the gym's own parser
    refuses (`bench.check_action(gym, text)` -> reason or None). Empty list: usable."""
    where = f"{FOLDER}/{name}.json"
    if not isinstance(data, dict):
        return [f"{where}: must map gym names to lists of examples."]
    reasons = []
    for gym, examples in data.items():
        if gym not in bench.gyms:
            reasons.append(f"{where}: {gym!r} is not a gym of {name} ({', '.join(bench.gyms)}).")
            continue
        if not isinstance(examples, list):
            reasons.append(f"{where}: {gym} must be a list of examples.")
            continue
        for i, ex in enumerate(examples):
            label = f"{where}: {gym}[{i}]" + (f" ({ex.get('id')})" if isinstance(ex, dict) and ex.get("id") else "")
            msgs = ex.get("messages") if isinstance(ex, dict) else None
            if not isinstance(msgs, list) or len(msgs) < 2:
                reasons.append(f"{label}: needs a `messages` list of at least a user task and an assistant turn.")
                continue
            roles = [m.get("role") if isinstance(m, dict) else None for m in msgs]
            want = ["user" if k % 2 == 0 else "assistant" for k in range(len(msgs))]
            if roles != want or roles[-1] != "assistant":
                reasons.append(f"{label}: roles must alternate user, assistant, ... and end with the "
                               f"assistant (got {', '.join(map(str, roles))}).")
                continue
            for k, m in enumerate(msgs):
                if not isinstance(m.get("content"), str) or not m["content"].strip():
                    reasons.append(f"{label}: message {k} has no text.")
                elif m["role"] == "assistant":
                    why = bench.check_action(gym, m["content"])
                    if why:
                        reasons.append(f"{label}: assistant turn {k // 2 + 1} {m['content'][:60]!r} "
                                       f"does not parse as a {gym} action: {why}.")
    return reasons
