"""Does a repetition penalty stop an LLM user's loops? The user's replies of a real run, asked again.

The 135M reference user of the H100 run of 2026-12-08 (EAU against the LLM user alone) said one
sentence three times or more in 17-26% of its replies. This probe rebuilds the user's state at
each LLM-arm reply of a run's last trajectory steps (the recorded agent turns replayed through a
fresh environment, the recorded replies fed back), then has the LLM user answer each state again
under every repetition penalty given (`user.<gym>.repetition_penalty`, the knob the built-in agent
raises on a `user_loop` finding), through the user's own code path (training.users.llm:
LocalLLMUser, the KV engine). It prints, per penalty: replies that loop
(training.users.leak.looped_reply), replies that disclose a hidden fact (by word overlap,
training.users.leak.detect_revealed) and the mean reply length in characters.

    python benchmarks/user_loop_probe.py RUN_DIR [--states 96] [--penalties 1.0,1.15,1.3,1.5]
        [--device cuda] [--out counts.json]

RUN_DIR is a run folder (`runs/<exp>/run-NNN`) of UserGym with an LLM user; its newest workspace
snapshot gives the knobs and the persona. Nothing is written but --out.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from training.benches.base import UserReply, UserState  # noqa: E402
from training.users.leak import detect_revealed, looped_reply  # noqa: E402


class ProbeError(ValueError):
    """A run folder the probe cannot read (the message says what is missing)."""


def _snapshot(run: Path):
    """The workspace the run's trainer loaded last, else the project's own."""
    from orchestrator.diagnostics import _newest_snapshot
    from training.snapshot import Snapshot
    return Snapshot.from_dir(_newest_snapshot(run) or ROOT / "workspace")


def llm_states(run: Path, steps: int) -> list[tuple[UserState, str]]:
    """(the user's state, its recorded reply) at every LLM-arm reply of the run's last `steps`
    trajectory files, rebuilt by replaying each episode's recorded agent turns."""
    from training.benches.usergym import ENVS, UserGymBench

    files = sorted((run / "trajectories").glob("step-*.jsonl"))[-steps:]
    if not files:
        raise ProbeError(f"{run} has no trajectories/step-*.jsonl: give a run folder (runs/<exp>/run-NNN).")
    snap = _snapshot(run)
    bench = UserGymBench()
    tasks = {t.id: t for split in ("train", "test") for t in bench.load_tasks(split)}
    persona = snap.personas.get("usergym", "")
    out = []
    for f in files:
        for line in f.read_text().splitlines():
            rec = json.loads(line)
            task = tasks.get(rec.get("task_id"))
            if task is None or rec.get("gym") not in ENVS:
                continue
            env = ENVS[rec["gym"]](task, snap.knobs, object(), seed=rec.get("seed", 0),
                                   user_arm="llm", persona=persona)
            env.reset(seed=rec.get("seed", 0))
            for t in rec["turns"]:
                state = env.prepare(t["agent"])
                if state is None:
                    env.complete(None)
                    continue
                if t.get("user_replied") and t.get("user_arm") == "llm":
                    out.append((state, t.get("user") or ""))
                env.complete(UserReply(text=t.get("user") or "", arm="llm"))
    if not out:
        raise ProbeError(f"no reply of an LLM user in {run}'s last {steps} steps: probe a run "
                         f"trained with one (--user-mode llm or hybrid).")
    return out


def probe(user, states: list[UserState], penalties: list[float], batch: int) -> dict[str, dict]:
    rows = {}
    for p in penalties:
        t0 = time.perf_counter()
        texts = []
        for i in range(0, len(states), batch):
            chunk = [dataclasses.replace(s, knobs={**s.knobs, "repetition_penalty": p})
                     for s in states[i:i + batch]]
            texts += [r.text for r in user.respond_batch(chunk)]
        rows[f"{p:g}"] = {
            "looped": sum(looped_reply(t) for t in texts),
            # the words of the prompt the agent read are no evidence (as the environments read it)
            "disclosed a fact": sum(bool(detect_revealed(t, s.task.facts, known=s.task.prompt))
                                    for t, s in zip(texts, states)),
            "mean characters": round(sum(len(t) for t in texts) / len(texts), 1),
            "seconds": round(time.perf_counter() - t0, 1),
            "examples": [t[:120] for t in texts[:3]],
        }
    return rows


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run", help="a run folder with trajectories/ (runs/<exp>/run-NNN)")
    p.add_argument("--steps", type=int, default=6, help="the last N trajectory steps (default 6)")
    p.add_argument("--states", type=int, default=96, help="LLM-user replies drawn at random")
    p.add_argument("--penalties", default="1.0,1.15,1.3,1.5")
    p.add_argument("--model", default="default", help="the user's model folder (default: SmolLM2-135M)")
    p.add_argument("--max-new-tokens", type=int, default=96, help="the run's rollout.user_response_length")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--device", default="cpu")
    p.add_argument("--out", default=None, help="also write the counts as JSON here")
    a = p.parse_args(argv)
    try:
        penalties = [float(x) for x in a.penalties.split(",") if x.strip()]
    except ValueError:
        p.error(f"--penalties takes numbers separated by commas (got {a.penalties!r})")
    if not penalties or min(penalties) <= 0:
        p.error("every penalty must be above 0 (1.0 is none)")
    try:
        found = llm_states(Path(a.run), a.steps)
    except ProbeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    random.Random(a.seed).shuffle(found)
    found = found[:a.states]
    from training.smollm2 import model_dir
    from training.users.llm import LocalLLMUser
    model = str(model_dir()) if a.model == "default" else a.model
    user = LocalLLMUser.from_dir(model, device=a.device, max_new_tokens=a.max_new_tokens, seed=a.seed)
    rows = probe(user, [s for s, _ in found], penalties, a.batch)
    recorded = sum(looped_reply(r) for _, r in found)
    print(f"{len(found)} LLM-user replies of {a.run}; as recorded, {recorded} looped")
    keys = [k for k in next(iter(rows.values())) if k != "examples"]
    print("| repetition penalty | " + " | ".join(keys) + " |")
    print("| ---: | " + " | ".join("---:" for _ in keys) + " |")
    for pen, r in rows.items():
        print(f"| {pen} | " + " | ".join(str(r[k]) for k in keys) + " |")
    if a.out:
        Path(a.out).write_text(json.dumps({"args": vars(a), "states": len(found),
                                           "recorded_looped": recorded, "rows": rows}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
