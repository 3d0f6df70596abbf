"""Can an episode of this run succeed? The bench's prompts and answers, in tokens, against the
rollout's budgets.

Checked twice: by `orchestrator start` before it launches the trainer (orchestrator.experiment,
with `ChatTokenizer`, so the orchestrator never imports torch) and by the trainer at start
(training.trainer, with the policy's own tokenizer). Either refuses a config under which an episode
cannot succeed with one sentence (training.config.ConfigError), instead of a run that trains on
truncated episodes for hours: under the old one-size CPU preset every ColBench turn was cut at 32
tokens, shorter than any reference function (54 to 153 tokens), and tau2's 1,024-token budget was
spent by its policy prompt (1,347 to 1,933 tokens), so every episode ended truncated after turn 1.

Measured per gym of the run, over its tasks, with the run's tokenizer (benchmarks/bench_budgets.py
prints the same figures and the token count of whole solved episodes):
  prompt   system prompt and first observation, chat-templated, as training.rollout.start_episode
           builds them
  answer   the longest turn a solved episode must write (`solving_turns`)
  turns    the fewest agent turns of a solved episode (`turns_needed`): 2 everywhere (the benches
           hide what an answer needs, ColBench's details, tau2's ids and confirmations, UserGym's
           preferences, test case or clues, so a solved episode hears at least one reply first);
           ColBench min_questions + 1 (that many answered questions, then the answer)

Refused:
  - a gym whose turns needed exceed the turns it gets (rollout.max_turns, env.<gym>.max_steps);
  - a gym whose prompt and the exchanges before its answer reach rollout.max_episode_tokens, even
    for its shortest prompt: the rollout ends an episode whose tokens reach the budget after a
    reply (training.rollout._finish_turn), so such a gym never gets to answer;
  - rollout.response_length below every answer of a gym of the run: none of that gym's tasks
    can have its solving turn written (UserGym's tau gym: its write call takes 39 to 75 tokens,
    ten-digit ids are ten tokens, which the README demo's old 32-token turns never held).
A config that can succeed passes silently.
"""
from __future__ import annotations

import json
import math
import statistics
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from training.benches.base import Task
from training.config import Config, ConfigError

ANSWER_MARKER = "I WANT TO ANSWER:"        # training/benches/colbench/env.py MARKER
_USERGYM_ANSWERS = {                       # what each UserGym gym's solving turn says
    "travel": "option id", "function": "number", "persuade": "one counter-argument",
    "tau": "write call", "turtle": "story", "intention": "question", "telepathy": "guess"}


# -- a tokenizer without torch -----------------------------------------------------------------
class ChatTokenizer:
    """The two calls of a Hugging Face tokenizer this module makes (`encode`,
    `apply_chat_template`), read from a model folder's tokenizer.json and chat template with
    `tokenizers` and jinja2: transformers 5 imports torch with AutoTokenizer (3 s here), and the
    orchestrator never imports torch. Renders as transformers does (a sandboxed jinja2 with
    trim_blocks and lstrip_blocks); tests/training/test_budget.py compares the two."""

    def __init__(self, folder: Path | str):
        from jinja2.ext import loopcontrols
        from jinja2.sandbox import ImmutableSandboxedEnvironment
        from tokenizers import Tokenizer

        folder = Path(folder)
        self._tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
        config = json.loads((folder / "tokenizer_config.json").read_text()) \
            if (folder / "tokenizer_config.json").is_file() else {}
        template = (folder / "chat_template.jinja").read_text() \
            if (folder / "chat_template.jinja").is_file() else config.get("chat_template")
        if not isinstance(template, str):
            raise FileNotFoundError(f"{folder} has no chat template")
        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                            extensions=[loopcontrols])
        env.filters["tojson"] = lambda x, **kw: json.dumps(x, **kw)
        self._template = env.from_string(template)
        self._special = {k: _token_text(config.get(k)) for k in ("bos_token", "eos_token")}

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        return self._tok.encode(text, add_special_tokens=add_special_tokens).ids

    def apply_chat_template(self, messages: list[dict[str, str]], tokenize: bool = False,
                            add_generation_prompt: bool = False) -> str:
        assert not tokenize, "ChatTokenizer renders text; encode it with encode()"
        return self._template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                                     **self._special)


def _token_text(value: Any) -> str:
    return value.get("content", "") if isinstance(value, dict) else (value or "")


def tokenizer_folder(model_path: str) -> Path | None:
    """A folder holding the policy's tokenizer.json, or None when none is at hand without loading
    the model (the trainer then checks with the model's own tokenizer)."""
    if not model_path:            # the packaged SmolLM2: its tokenizer is cached on first use
        from training.smollm2 import cache_root

        for name in ("smollm2-135m-instruct", "smollm2-tokenizer"):
            if (cache_root() / name / "tokenizer.json").is_file():
                return cache_root() / name
        return _build_smollm2_tokenizer()
    if Path(model_path).is_dir():
        return Path(model_path) if (Path(model_path) / "tokenizer.json").is_file() else None
    try:                          # a hub id: its cached snapshot folder
        from huggingface_hub import try_to_load_from_cache
    except ImportError:
        return None
    found = try_to_load_from_cache(model_path, "tokenizer.json")
    return Path(found).parent if isinstance(found, str) else None


def _build_smollm2_tokenizer() -> Path | None:
    """Parse the GGUF's tokenizer once (~12 s) in a child process: transformers imports torch."""
    import subprocess
    import sys

    code = "from training.smollm2 import tokenizer_dir; print(tokenizer_dir())"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=Path(__file__).resolve().parents[1])
    folder = Path(out.stdout.strip()) if out.returncode == 0 else None
    return folder if folder is not None and (folder / "tokenizer.json").is_file() else None


# -- what a solved episode needs ----------------------------------------------------------------
def prompt_tokens(tok, system: str, observation: str) -> int:
    """Tokens of the first prompt, rendered as training.rollout.start_episode renders it."""
    messages = [{"role": "system", "content": system}, {"role": "user", "content": observation}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    return len(tok.encode(text, add_special_tokens=False))


def exchange_floor(tok) -> int:
    """Tokens one exchange adds at the least: a one-token turn, its end, a one-token reply and the
    template around them (12 with SmolLM2's ChatML)."""
    base = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    more = base + [{"role": "assistant", "content": "?"}, {"role": "user", "content": "."}]
    n = [len(tok.encode(tok.apply_chat_template(m, tokenize=False, add_generation_prompt=True),
                        add_special_tokens=False)) for m in (base, more)]
    return n[1] - n[0]


def turns_needed(bench: str, gym: str, knobs: dict[str, Any]) -> int:
    """Fewest agent turns of a solved episode (module docstring)."""
    if bench == "colbench":
        return max(2, int(knobs.get("env", {}).get(gym, {}).get("min_questions", 0)) + 1)
    return 2


def solving_turns(bench: str, task: Task, knobs: dict[str, Any]) -> list[str]:
    """The turns a solved episode of `task` must write whole (each must fit one turn); [] for a
    bench not of ours (a custom bench: its answers are unknown here).

    ColBench: the answer marker and the reference solution. tau2: the longest of the task's gold
    tool calls as `<tool_call>{...}</tool_call>`, its requests for the user's gold phone actions
    (telecom; "Please toggle airplane mode.") and the message that says what must be said.
    UserGym: the gym's solving turn (`_usergym_answer`)."""
    if bench == "colbench":
        return [f"{ANSWER_MARKER}\n{task.data['ground_truth'].rstrip()}"]
    if bench == "tau2":
        turns = ["Please " + a["name"].replace("_", " ") + "." if a.get("requestor") == "user"
                 else "<tool_call>" + json.dumps({"name": a["name"], "arguments": a["arguments"]})
                 + "</tool_call>" for a in task.data.get("actions", ())]
        said = task.data.get("communicate_info") or []
        return turns + (["Here is what you asked: " + ", ".join(said) + "."] if said else [])
    if bench == "usergym":
        return [_usergym_answer(task, knobs)]
    return []


def _usergym_answer(task: Task, knobs: dict[str, Any]) -> str:
    """UserGym's solving turns (training/benches/usergym/*.py): an option id, the test case's
    output, one counter-argument (a concern's words), the write call's JSON, the story's key
    points up to env.turtle.success_threshold, one clarifying question, the entity's name."""
    d, facts = task.data, task.facts
    if task.gym == "travel":
        return "[answer] H3"
    if task.gym == "function":
        return f"[answer] {float(d['expected']):g}"
    if task.gym == "persuade":
        return "[answer] " + facts[0].text
    if task.gym == "tau":
        return "[answer] " + json.dumps(d["goal"])
    if task.gym == "turtle":
        share = float(knobs.get("env", {}).get("turtle", {}).get("success_threshold", 0.8))
        return "[answer] " + " ".join(f.text for f in facts[:math.ceil(share * len(facts))])
    if task.gym == "intention":
        return f"[action] What is your {facts[0].keywords[0]}?"
    return "[answer] " + str(d.get("entity", ""))


@dataclass(frozen=True)
class GymNeeds:
    """What a solved episode of one gym needs, over the run's tasks of that gym."""

    gym: str
    prompts: tuple[int, ...]
    """Per task: tokens of system prompt + first observation, chat-templated."""
    answers: tuple[int, ...]
    """Per task: tokens of the longest turn its solved episode writes (() for a custom bench)."""
    turns: int
    """Fewest agent turns of a solved episode."""
    answer_what: str
    """What the answer is, for the sentence ('answer (write call)', ...)."""


def measure(bench_name: str, bench, tasks: Iterable[Task], snapshot, tok) -> dict[str, GymNeeds]:
    """GymNeeds per gym of `tasks`: every task's environment is reset (symbolic user, no LLM) to
    read its first observation, as the trainer's episodes start (0.1-0.9 s per bench here)."""
    prompts: dict[str, list[int]] = {}
    answers: dict[str, list[int]] = {}
    for i, task in enumerate(tasks):
        env = bench.make_env(task, snapshot, seed=i, llm=None)
        obs, _ = env.reset(seed=i)
        prompts.setdefault(task.gym, []).append(prompt_tokens(tok, bench.system_prompt(task), str(obs)))
        turns = solving_turns(bench_name, task, snapshot.knobs)
        if turns:
            answers.setdefault(task.gym, []).append(
                max(len(tok.encode(t, add_special_tokens=False)) for t in turns))
    return {gym: GymNeeds(gym, tuple(p), tuple(answers.get(gym, ())),
                          turns_needed(bench_name, gym, snapshot.knobs),
                          _answer_what(bench_name, gym)) for gym, p in prompts.items()}


def _answer_what(bench: str, gym: str) -> str:
    if bench == "colbench":
        return f'answer ("{ANSWER_MARKER}" and the reference solution)'
    if bench == "tau2":
        return "solving turn (its longest gold tool call or request)"
    return f"answer ({_USERGYM_ANSWERS.get(gym, 'a solving turn')})"


# -- the check ----------------------------------------------------------------------------------
def check(cfg: Config, needs: dict[str, GymNeeds], knobs: dict[str, Any], floor: int) -> None:
    """Raise ConfigError (one sentence) when a gym of the run cannot succeed (module docstring);
    `floor` is `exchange_floor(tokenizer)`."""
    bench = _bench_label(cfg.bench)
    for gym, need in needs.items():
        _check_turns(cfg, bench, need, knobs)
        _check_budget(cfg.rollout.max_episode_tokens, bench, need, floor)
    _check_answers(cfg.rollout.response_length, bench, needs)


def _check_turns(cfg: Config, bench: str, need: GymNeeds, knobs: dict[str, Any]) -> None:
    gym, turns, limit = need.gym, cfg.rollout.max_turns, "rollout.max_turns"
    steps = knobs.get("env", {}).get(gym, {}).get("max_steps")
    if steps is not None and int(steps) < turns:
        turns, limit = int(steps), f"env.{gym}.max_steps"
    if turns >= need.turns:
        return
    questions = need.turns > 2 and cfg.bench == "colbench"
    why = (f"env.{gym}.min_questions {need.turns - 1} answered questions, then the answer"
           if questions else "one reply to learn what the answer needs, then the answer")
    raise ConfigError(f"{limit} {turns} leaves {_where(bench, gym)} {turns} turn(s), but a solved "
                      f"episode takes {need.turns} ({why}): raise {limit} to at least "
                      f"{need.turns}" + (f" or lower env.{gym}.min_questions." if questions else "."))


def _check_budget(max_episode_tokens: int, bench: str, need: GymNeeds, floor: int) -> None:
    before = (need.turns - 1) * floor + 1     # the exchanges before the answer, and rollout's `+ 1`
    if max_episode_tokens > min(need.prompts) + before:
        return
    enough = _round_up(max(need.prompts) + before, 100)
    raise ConfigError(f"rollout.max_episode_tokens {max_episode_tokens:,} is below the "
                      f"{_where(bench, need.gym)} prompt (system prompt and first message: "
                      f"{min(need.prompts):,} to {max(need.prompts):,} tokens) plus the "
                      f"{need.turns - 1} exchange(s) before its answer: raise it to at least "
                      f"{enough:,}.")


def _check_answers(response_length: int, bench: str, needs: dict[str, GymNeeds]) -> None:
    shortest = [(min(n.answers), n) for n in needs.values() if n.answers]
    short = [(tokens, n) for tokens, n in shortest if response_length < tokens]
    if not short:
        return
    tokens, need = max(short, key=lambda pair: pair[0])
    median = statistics.median(need.answers)
    raise ConfigError(f"rollout.response_length {response_length} cannot hold any "
                      f"{_where(bench, need.gym)} {need.answer_what}: the shortest is {tokens} "
                      f"tokens, the median {median:.0f}; raise it to at least "
                      f"{_round_up(median, 16)}.")


def _bench_label(bench: str) -> str:
    return {"colbench": "ColBench", "tau2": "tau2", "usergym": "UserGym"}.get(bench, bench)


def _where(bench: str, gym: str) -> str:
    """"ColBench", "tau2 retail"; a custom bench ("module:ATTR") by its gym alone."""
    if ":" in bench or gym.lower() == bench.lower():
        return gym if ":" in bench else bench
    return f"{bench} {gym}"


def _why_turns(bench: str, gym: str, need: GymNeeds) -> str:
    if bench == "colbench" and need.turns > 2:
        return f"env.{gym}.min_questions {need.turns - 1} answered questions, then the answer"
    return "one reply to learn what the answer needs, then the answer"


def _round_up(x: float, step: int) -> int:
    return int(math.ceil(x / step) * step)


def check_run(cfg: Config, bench, tasks: list[Task], snapshot, tok) -> None:
    """The trainer's check at start: its bench, tasks, live snapshot and the policy's tokenizer."""
    check(cfg, measure(cfg.bench, bench, tasks, snapshot, tok), snapshot.knobs, exchange_floor(tok))


def check_start(cfg: Config, workspace: Path | str, knobs: dict[str, Any] | None = None) -> None:
    """`orchestrator start`'s check before the trainer is launched: the config against the
    workspace folder's users and knobs (or `knobs`: the live commit's, which the trainer will
    run) and the policy's tokenizer read without torch. Skipped for a custom bench or a model
    whose tokenizer.json is not at hand; the trainer checks those."""
    import dataclasses

    from training.benches import BENCH_NAMES, TaskDataError, get_bench, load_bench_tasks, train_gyms
    from training.snapshot import Snapshot

    folder = tokenizer_folder(cfg.model.path)
    if cfg.bench not in BENCH_NAMES or folder is None:
        return
    bench = get_bench(cfg.bench)
    try:
        tasks = load_bench_tasks(bench, cfg.data.split, list(cfg.gyms) or list(train_gyms(bench)),
                                 cfg.data.data_dir)
    except TaskDataError as exc:
        raise ConfigError(str(exc)) from None
    snapshot = Snapshot.from_dir(workspace)
    if knobs is not None:
        snapshot = dataclasses.replace(snapshot, knobs=knobs)
    tok = ChatTokenizer(folder)
    try:
        needs = measure(cfg.bench, bench, tasks, snapshot, tok)
    except Exception:       # a workspace the environments cannot start from: not this check's
        return              # verdict to give; the trainer fails on it with the environment's error
    check(cfg, needs, snapshot.knobs, exchange_floor(tok))
