"""Environment patches: small per-gym hook modules in the workspace that replace a piece of an
environment's own code, run in the sandbox, never in the trainer's process.

Why: the paper's meta-agent also repairs the environment's implementation (appendix A.2: the
ColBench counter behind `min_questions` left out turns that both asked and answered, deadlocking
41% of episodes). Knobs, rules and reward modules cannot reach such code; a patch can, for the
pieces named below, and nothing else of the environment.

A patch is `env_patches/<gym>.py` in the workspace, defining one or more of the gym's hooks:

| hook | gyms | argument | returns | replaces |
| --- | --- | --- | --- | --- |
| `count_question(turn)` | colbench, UserGym's seven | `turn` below | bool | the question counter (`min_questions`, `questions_asked`, `asked_question`) |
| `parse_answer(text)` | colbench | the agent's turn text | `[message, code or None]` | the answer parser (`I WANT TO ANSWER:`) |

`turn` is a plain dict: `turn` (1-based), `text` (the agent's whole turn), `message` (what it
said to the user: ColBench's text before the answer marker, UserGym's `[action]` content, else
""), `answer` (ColBench's code, UserGym's `[answer]` content, else None), `asked_question` (the
built-in counter's verdict), `questions` (turns counted before this one) and `knobs`
(`env.<gym>` of the live knobs). tau2's domains have no hooks yet.

The gate imports a patch in the sandbox and replays every hook it defines on recent turns (the
run's newest trajectories, or a synthetic episode per gym); each must return its type within
`CALL_TIMEOUT_S` (orchestrator/gate_patches.py). The trainer starts one sandboxed worker per
patch when it loads a snapshot (training/live.py, shared across hot reloads like reward modules)
and the environment calls it at each turn; a call that fails, times out or returns the wrong type
falls back to the built-in code for that turn and is counted (`EnvPatches.errors`). Evaluation
never runs patches: its pristine snapshot has none (paper section 5.1: training-side changes do
not alter the evaluation protocol).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from training.sandbox import Limits, ModuleWorker, run_calls

FOLDER = "env_patches"
USERGYM_GYMS = ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy")
HOOKS: dict[str, tuple[str, ...]] = {
    "count_question": ("colbench", *USERGYM_GYMS),
    "parse_answer": ("colbench",),
}
LIMITS = Limits(wall_s=5.0, cpu_s=60.0, memory_mb=512)
CALL_TIMEOUT_S = 1.0


class EnvPatchError(ValueError):
    """A patch that cannot be used (fails to import, defines none of its gym's hooks)."""


def gym_hooks(gym: str) -> tuple[str, ...]:
    """The hooks a patch of `gym` may define."""
    return tuple(h for h, gyms in HOOKS.items() if gym in gyms)


def value_problem(hook: str, value: Any) -> str | None:
    """Why `value` is not what `hook` returns (None: it is)."""
    if hook == "count_question":
        return None if isinstance(value, bool) else f"returned {value!r:.60}, not a bool"
    if hook == "parse_answer":
        ok = isinstance(value, (list, tuple)) and len(value) == 2 and isinstance(value[0], str) \
            and (value[1] is None or isinstance(value[1], str))
        return None if ok else f"returned {value!r:.60}, not [message, code or None]"
    return f"{hook} is not a hook"


def turn_input(number: int, text: str, message: str, answer: str | None, asked: bool,
               questions: int, knobs: dict[str, Any]) -> dict[str, Any]:
    """count_question's argument (module docstring)."""
    return {"turn": number, "text": text, "message": message, "answer": answer,
            "asked_question": bool(asked), "questions": int(questions), "knobs": dict(knobs)}


def probe(gym: str, source: str) -> tuple[str, ...]:
    """The hooks a patch's source defines, imported in a sandbox; EnvPatchError when it cannot
    be used."""
    known = gym_hooks(gym)
    if not known:
        raise EnvPatchError(f"{FOLDER}/{gym}.py: {gym} has no hooks a patch can replace.")
    res = run_calls(source, [f"[n for n in {list(known)!r} if callable(globals().get(n))]"], LIMITS)[0]
    if not res.ok:
        lines = (res.error or res.kind).strip().splitlines()
        raise EnvPatchError(f"{FOLDER}/{gym}.py fails to load: {lines[-1] if lines else res.kind}.")
    hooks = tuple(h for h in (res.value if isinstance(res.value, list) else []) if h in known)
    if not hooks:
        raise EnvPatchError(f"{FOLDER}/{gym}.py defines none of {gym}'s hooks ({', '.join(known)}).")
    return hooks


def start_patch(gym: str, source: str) -> tuple[tuple[str, ...], Any]:
    """(hooks defined, started worker) of one patch; the worker has `call` and `close`."""
    hooks = probe(gym, source)
    worker = ModuleWorker(source, LIMITS)
    if not worker.load_result.ok:
        worker.close()
        raise EnvPatchError(f"{FOLDER}/{gym}.py fails to load: {worker.load_result.error}.")
    return hooks, worker


@dataclass
class EnvPatches:
    """The started patches of one snapshot: gym -> (hooks, worker)."""

    patches: dict[str, tuple[tuple[str, ...], Any]] = field(default_factory=dict)
    errors: int = 0
    calls: int = 0

    def has(self, gym: str, hook: str) -> bool:
        return hook in self.patches.get(gym, ((), None))[0]

    def call(self, gym: str, hook: str, arg: Any, default: Any) -> Any:
        """The patch's answer for `hook`, or `default` (the built-in code's) when the gym has no
        such hook or the call fails in any way (counted in `errors`)."""
        if not self.has(gym, hook):
            return default
        self.calls += 1
        try:
            res = self.patches[gym][1].call(hook, [arg], timeout_s=CALL_TIMEOUT_S)
        except Exception:            # the sandbox failing: the built-in code answers this turn
            self.errors += 1
            return default
        if not res.ok or value_problem(hook, res.value) is not None:
            self.errors += 1
            return default
        return res.value

    def close(self) -> None:
        for _, worker in self.patches.values():
            worker.close()


def load_patches(files: dict[str, Path],
                 start: Callable[[str, str], tuple] = start_patch) -> EnvPatches | None:
    """Start a worker for every patch file (gym -> path); None when there are none. Raises
    EnvPatchError on the first that cannot be used (the caller fails the snapshot)."""
    if not files:
        return None
    out = EnvPatches()
    try:
        for gym, path in sorted(files.items()):
            try:
                out.patches[gym] = start(gym, path.read_text())
            except EnvPatchError:
                raise
            except Exception as exc:     # the sandbox could not start it: a failed snapshot
                raise EnvPatchError(f"{FOLDER}/{gym}.py cannot be started in the sandbox "
                                    f"({type(exc).__name__}: {exc}).") from None
    except BaseException:
        out.close()
        raise
    return out


def patch_files(root: Path) -> dict[str, Path]:
    """gym -> env_patches/<gym>.py of a snapshot folder."""
    folder = Path(root) / FOLDER
    return {p.stem: p for p in sorted(folder.glob("*.py"))} if folder.is_dir() else {}


def replay_inputs(gym: str, episodes: list[dict[str, Any]],
                  knobs: dict[str, Any]) -> dict[str, list[Any]]:
    """hook -> the arguments the environment would have passed on the agent turns of `episodes`
    (trajectory records of `gym`), parsed by the gym's built-in code: what the gate replays a
    patch on."""
    if gym == "colbench":
        from training.benches.colbench.env import split_action as parse
    else:
        from training.benches.usergym.common import parse_action

        def parse(text: str) -> tuple[str, str | None]:
            act, content = parse_action(text)
            return (content if act == "action" else ""), (content if act == "answer" else None)
    texts, counts = [], []
    for ep in episodes:
        questions = 0
        for t in ep.get("turns", []):
            if not isinstance(t, dict):
                continue
            text = str(t.get("agent", ""))
            message, answer = parse(text)
            asked = bool(t.get("asked_question"))
            texts.append(text)
            # trajectory turns count from 0, the environment's from 1
            counts.append(turn_input(int(t.get("turn") or 0) + 1, text, message, answer, asked,
                                     questions, knobs))
            questions += int(asked)
    out = {"count_question": counts, "parse_answer": texts}
    return {h: out[h] for h in gym_hooks(gym)}
