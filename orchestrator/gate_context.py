"""What the write gate reads from the running experiment: recent success, recent trajectories,
and the fact kinds of the bench's tasks.

- Recent success (DESIGN.md, "Gate checks"; paper appendix A, "Write checks"): the mean of the
  last W=10 values of `success/<gym>` in the current run's metrics.jsonl (the newest run-NNN).
- Reward modules are replayed on episodes of the newest trajectories file of that run, or, before
  any exists, on a small built-in set of synthetic turns (one short episode per gym).
- Fact kinds come from the tasks the run trains on: the bench's shipped tasks, or those of the
  run's `data.data_dir` (`--data-dir`), whose users may hold kinds the shipped ones lack. They are
  asked once per folder in a child process (the bench package may import heavy modules; the
  orchestrator never imports torch) and cached in `runs/NAME/.gate-cache/`.
"""
from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH_GYMS = {"usergym": ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy"),
              "colbench": ("colbench",), "tau2": ("retail", "airline", "telecom")}
ALL_GYMS = tuple(g for gyms in BENCH_GYMS.values() for g in gyms)
# the gyms a run trains on when its config names none (training.benches: UserGym holds Intention
# and Telepathy out of training, as the paper does; they are evaluated only)
TRAIN_GYMS = {**BENCH_GYMS, "usergym": ("travel", "function", "persuade", "tau", "turtle")}
GYM_BENCH = {g: b for b, gyms in BENCH_GYMS.items() for g in gyms}
SUCCESS_BAR = 0.80
WINDOW = 10
MAX_REPLAY_EPISODES = 16
MAX_REPLAY_TURNS = 64

_KINDS_PROGRAM = """
import json, sys
from training.benches import get_bench, load_bench_tasks
kinds = {}
for t in load_bench_tasks(get_bench(sys.argv[1]), "train", None, sys.argv[2], strict=False):
    kinds.setdefault(t.gym, set()).update(t.fact_kinds())
print(json.dumps({g: sorted(k) for g, k in kinds.items()}))
"""


def synthetic_episode(gym: str) -> dict[str, Any]:
    """A short, plausible episode in the trajectory format (the trainer's trajectories/*.jsonl)."""
    def turn(i, agent, user, asked, answered, revealed, tools=()):
        return {"turn": i, "agent": agent, "user": user, "reward": 0.0, "revealed_facts": list(revealed),
                "leaked_facts": [], "new_facts": list(revealed), "repeated": False,
                "asked_question": asked, "answered": answered,
                "rule_id": "ask-matched" if revealed else None, "tool_calls": list(tools)}
    read = {"name": "get_order_details", "arguments": {"order_id": "#W1"}, "result": "{}", "error": None}
    write = {"name": "cancel_pending_order", "arguments": {"order_id": "#W1"}, "result": "ok", "error": None}
    turns = [turn(1, "[action] What matters most to you here?", "Mostly the price.", True, False,
                  [f"{gym}-f1"], [read] if GYM_BENCH[gym] == "tau2" else []),
             turn(2, "[action] Anything else I should know?", "", True, False, []),
             turn(3, "[answer] Here is my proposal.", "Thanks.", False, True, [],
                  [write] if GYM_BENCH[gym] == "tau2" else [])]
    return {"gym": gym, "task_id": f"{gym}-synthetic-1", "user_arm": "symbolic", "turns": turns,
            "score": 0.5, "success": False}


def _finite(value: Any) -> Any:
    """Replace non-finite floats (they have no Python literal) so the replay can be repr'd."""
    if isinstance(value, float) and not math.isfinite(value):
        return 0.0
    if isinstance(value, dict):
        return {str(k): _finite(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_finite(v) for v in value]
    return value


def replay_pairs(episodes: list[dict]) -> tuple[list, list]:
    """(gym, turn) and (gym, episode) pairs: the real episodes, plus a synthetic one per gym that
    has none, so every module is exercised on every gym it claims."""
    real = [_finite(e) for e in episodes if isinstance(e, dict) and e.get("gym") in ALL_GYMS]
    real = real[:MAX_REPLAY_EPISODES]
    have = {e["gym"] for e in real}
    synth = [synthetic_episode(g) for g in ALL_GYMS if g not in have]

    def turns_of(eps):
        return [(e["gym"], t) for e in eps for t in e.get("turns", []) if isinstance(t, dict)]
    return (turns_of(real)[:MAX_REPLAY_TURNS] + turns_of(synth),
            [(e["gym"], e) for e in real + synth])


@dataclass
class GateContext:
    """The experiment around a judged change. Without an experiment folder (a bare workspace, a
    test), nothing is known: harder writes are refused and synthetic turns are replayed."""

    exp_dir: Path | None = None
    bench: str | None = None
    fact_kinds: dict[str, dict[str, set[str]]] = field(default_factory=dict)  # bench -> gym -> kinds
    _success: dict[str, tuple[float | None, str]] = field(default_factory=dict)

    @classmethod
    def for_experiment(cls, exp_dir: Path) -> "GateContext":
        bench = None
        meta = Path(exp_dir) / "experiment.json"
        if meta.exists():
            try:
                bench = json.loads(meta.read_text()).get("bench")
            except ValueError:
                warnings.warn(f"{meta}: not valid JSON; the bench is unknown to the gate")
        return cls(exp_dir=Path(exp_dir), bench=bench)

    def bench_gyms(self) -> tuple[str, ...]:
        """The bench's gyms, held-out ones included: before its first run an experiment's config
        is not known, and a run may name any of the bench's gyms in `gyms`."""
        return BENCH_GYMS.get(self.bench or "", ALL_GYMS)

    def run_dir(self) -> Path | None:
        """The current (newest) run folder, run-NNN, or None before the first run."""
        if self.exp_dir is None:
            return None
        runs = sorted(p for p in self.exp_dir.glob("run-[0-9][0-9][0-9]*") if p.is_dir())
        return runs[-1] if runs else None

    def recent_success(self, gym: str) -> tuple[float | None, str]:
        """(mean of the last W success/<gym> values, where it came from) or (None, why not)."""
        if gym not in self._success:
            self._success[gym] = self._read_success(gym)
        return self._success[gym]

    def _read_success(self, gym: str) -> tuple[float | None, str]:
        run = self.run_dir()
        path = run / "metrics.jsonl" if run else None
        if path is None or not path.exists():
            return None, "no metrics exist yet (no run has written metrics.jsonl)"
        key, values = f"success/{gym}", []
        for n, raw in enumerate(path.read_text(errors="replace").splitlines(), 1):
            if not raw.strip():
                continue
            try:
                rec = json.loads(raw)
            except ValueError:
                warnings.warn(f"{path}: line {n} skipped (not JSON)")
                continue
            v = rec.get(key) if isinstance(rec, dict) else None
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                values.append(float(v))
        if not values:
            return None, f"{run.name}/metrics.jsonl has no {key} values yet"
        last = values[-WINDOW:]
        return sum(last) / len(last), f"mean of the last {len(last)} steps of {run.name}"

    def _config(self) -> tuple[dict | None, str]:
        """(the current run's config.json, the run's name), or (None, "") before a run or where
        it cannot be read."""
        run = self.run_dir()
        try:
            cfg = json.loads((run / "config.json").read_text()) if run else None
        except (OSError, ValueError):
            return None, ""
        return (cfg, run.name) if isinstance(cfg, dict) else (None, "")

    def _rollout(self) -> tuple[dict | None, str]:
        """(the current run's config.json `rollout` section, the run's name), or (None, "")."""
        cfg, run = self._config()
        rollout = (cfg or {}).get("rollout")
        return (rollout, run) if isinstance(rollout, dict) else (None, "")

    def llm_user_kind(self, name: str) -> str | None:
        """How the current run answers its LLM user `name` (a gym's user.<gym>.llm): "local"
        (a model in the trainer, the KV engine), "vllm" (the vLLM engine's base model: rollout
        backend vllm with a LoRA policy) or "http" (an OpenAI-compatible server); None before a
        run or for a name the run does not define."""
        cfg, _ = self._config()
        rollout, model = (cfg or {}).get("rollout"), (cfg or {}).get("model") or {}
        if not isinstance(rollout, dict):
            return None
        if name == "default":
            if rollout.get("user_llm", "none") == "none":
                return None
            lora = (model.get("lora_rank") or 0) > 0
            return "vllm" if rollout.get("backend") == "vllm" and lora else "local"
        kind = ((rollout.get("user_llms") or {}).get(name) or {}).get("kind")
        if kind == "reference":
            return self.llm_user_kind("default") or "local"
        return {"local": "local", "http": "http"}.get(kind)

    def turn_cap(self) -> tuple[int | None, str]:
        """(the current run's rollout.max_turns, the run's name): the rollout ends every episode
        there, whatever an environment's max_steps knob allows. (None, "") before a run."""
        rollout, run = self._rollout()
        cap = (rollout or {}).get("max_turns")
        return (cap, run) if isinstance(cap, int) and not isinstance(cap, bool) else (None, "")

    def user_llm_names(self) -> tuple[list[str] | None, str]:
        """(the LLM users the current run defines: "default" where rollout.user_llm gives one, and
        rollout.user_llms' names; the run's name), or (None, "") before a run."""
        rollout, run = self._rollout()
        if rollout is None:
            return None, ""
        names = (["default"] if rollout.get("user_llm", "none") != "none" else []) + \
            sorted(rollout.get("user_llms") or {})
        return names, run

    def trajectory_episodes(self) -> list[dict]:
        """Episodes of the newest trajectories/*.jsonl of the current run ([] when none)."""
        run = self.run_dir()
        files = sorted((run / "trajectories").glob("*.jsonl")) if run else []
        if not files:
            return []
        out = []
        for raw in files[-1].read_text(errors="replace").splitlines():
            try:
                ep = json.loads(raw)
            except ValueError:
                continue
            if isinstance(ep, dict) and isinstance(ep.get("turns"), list):
                out.append(ep)
            if len(out) >= MAX_REPLAY_EPISODES:
                break
        return out

    def bench_fact_kinds(self, bench: str) -> set[str] | None:
        kinds = self._kinds(bench)
        return None if kinds is None else set().union(*kinds.values()) if kinds else set()

    def gym_fact_kinds(self, gym: str) -> set[str] | None:
        kinds = self._kinds(GYM_BENCH.get(gym, ""))
        return None if kinds is None else kinds.get(gym, set())

    def data_dir(self) -> str:
        """The current run's `data.data_dir` ("" : the shipped tasks, also before any run)."""
        run = self.run_dir()
        try:
            folder = json.loads((run / "config.json").read_text())["data"].get("data_dir") if run else ""
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return ""
        return folder if isinstance(folder, str) else ""

    def _kinds(self, bench: str) -> dict[str, set[str]] | None:
        """gym -> fact kinds of the training tasks the run reads (the shipped ones or its data
        folder's); None when the bench cannot say."""
        if bench in self.fact_kinds:
            return self.fact_kinds[bench]
        folder = self.data_dir() if bench == self.bench else ""
        tag = hashlib.sha256(folder.encode()).hexdigest()[:12] if folder else "shipped"
        cache = (self.exp_dir / ".gate-cache" / f"fact_kinds-{bench}-{tag}.json"
                 if self.exp_dir else None)
        if cache is not None and cache.exists():
            kinds = {g: set(k) for g, k in json.loads(cache.read_text()).items()}
        else:
            proc = subprocess.run([sys.executable, "-c", _KINDS_PROGRAM, bench, folder],
                                  capture_output=True, text=True, timeout=120)
            if proc.returncode != 0:
                where = f" from {folder}" if folder else ""
                warnings.warn(f"bench {bench!r} could not list its fact kinds{where}; "
                              "fact-kind checks skipped")
                self.fact_kinds[bench] = None
                return None
            kinds = {g: set(k) for g, k in json.loads(proc.stdout.strip().splitlines()[-1]).items()}
            if cache is not None:
                cache.parent.mkdir(parents=True, exist_ok=True)
                cache.write_text(json.dumps({g: sorted(k) for g, k in kinds.items()}))
        self.fact_kinds[bench] = kinds
        return kinds
