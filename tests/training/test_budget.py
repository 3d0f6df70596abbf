"""training.budget: a config under which a gym can never succeed is refused in one sentence, every
bench's cpu preset passes, and the orchestrator's tokenizer (no torch) counts as transformers does.
The tiny test model carries SmolLM2's real tokenizer, so the counts are the real ones."""
from __future__ import annotations

import copy
import dataclasses
import subprocess
import sys
from pathlib import Path

import pytest

from training import budget
from training.benches import get_bench
from training.config import ConfigError, resolve
from training.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[2]
WORKSPACE = Snapshot.from_dir(ROOT / "workspace")


@pytest.fixture(scope="module")
def tok(tiny_model_dir):
    return budget.ChatTokenizer(tiny_model_dir)


def check(tok, bench: str, overrides=None, env=None, preset="cpu"):
    """training.budget's check of resolve(bench, preset, overrides) against the project's
    workspace, with env = {gym: {knob: value}} set in its knobs."""
    cfg = resolve(bench, preset, overrides or {})
    snap = WORKSPACE
    if env:
        knobs = copy.deepcopy(snap.knobs)
        for gym, values in env.items():
            knobs["env"][gym].update(values)
        snap = dataclasses.replace(snap, knobs=knobs)
    b = get_bench(bench)
    tasks = b.load_tasks("train", gyms=list(cfg.gyms) or None)
    budget.check_run(cfg, b, tasks, snap, tok)


def one_sentence(exc: pytest.ExceptionInfo) -> str:
    msg = str(exc.value)
    assert msg.endswith(".") and "\n" not in msg and msg.count(": ") <= 2, msg
    return msg


def test_chat_tokenizer_counts_as_transformers(tiny_model_dir, tok):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(tiny_model_dir))
    task = get_bench("tau2").load_tasks("train", ["retail"])[0]
    messages = [{"role": "system", "content": get_bench("tau2").system_prompt(task)},
                {"role": "user", "content": task.prompt},
                {"role": "assistant", "content": '<tool_call>{"name": "x"}</tool_call>'},
                {"role": "user", "content": "TOOL RESULT (x): {\"é\": 1}\n"}]
    for generation in (True, False):
        ours = tok.apply_chat_template(messages, add_generation_prompt=generation)
        theirs = hf.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)
        assert ours == theirs
        assert tok.encode(ours) == hf.encode(theirs, add_special_tokens=False)
    assert budget.exchange_floor(tok) == budget.exchange_floor(hf) == 13


@pytest.mark.parametrize("bench", ["usergym", "colbench", "tau2"])
def test_every_bench_cpu_preset_can_succeed(tok, bench):
    check(tok, bench)


def test_prompt_over_the_episode_budget_is_refused(tok):
    with pytest.raises(ConfigError) as exc:
        check(tok, "tau2", {"gyms": ["telecom"], "rollout.max_episode_tokens": 1024})
    assert one_sentence(exc) == (
        "rollout.max_episode_tokens 1,024 is below the tau2 telecom prompt (system prompt and "
        "first message: 1,347 to 1,355 tokens) plus the 1 exchange(s) before its answer: raise it "
        "to at least 1,400.")
    check(tok, "tau2", {"gyms": ["telecom"], "rollout.max_episode_tokens": 1400})


def test_any_gym_of_the_run_over_the_budget_is_refused(tok):
    """Telecom fits 1,500 tokens, retail (1,913 at the least) does not: the run is refused."""
    with pytest.raises(ConfigError, match="below the tau2 retail prompt"):
        check(tok, "tau2", {"rollout.max_episode_tokens": 1500})


def test_a_turn_shorter_than_every_answer_is_refused(tok):
    with pytest.raises(ConfigError) as exc:
        check(tok, "colbench", {"rollout.response_length": 32})
    assert one_sentence(exc) == (
        'rollout.response_length 32 cannot hold any ColBench answer ("I WANT TO ANSWER:" and the '
        "reference solution): the shortest is 54 tokens, the median 110; raise it to at least 112.")
    check(tok, "colbench", {"rollout.response_length": 54})


def test_usergym_answers_are_checked_per_gym(tok):
    """Every gym of the run must be able to write its answer: 32 tokens hold six gyms' answers
    but not the tau gym's write call (39 at the shortest), so a run with the tau gym is refused
    at 32 and passes at the preset's 48; a run without it passes at 32."""
    with pytest.raises(ConfigError, match=r"UserGym tau answer \(write call\): the shortest is 39"):
        check(tok, "usergym", {"rollout.response_length": 32})
    check(tok, "usergym", {"rollout.response_length": 48})
    check(tok, "usergym", {"gyms": ["intention", "telepathy", "travel"], "rollout.response_length": 32})


def test_too_few_turns_are_refused(tok):
    with pytest.raises(ConfigError) as exc:
        check(tok, "colbench", {"rollout.max_turns": 3}, env={"colbench": {"min_questions": 3}})
    assert one_sentence(exc) == (
        "rollout.max_turns 3 leaves ColBench 3 turn(s), but a solved episode takes 4 "
        "(env.colbench.min_questions 3 answered questions, then the answer): raise "
        "rollout.max_turns to at least 4 or lower env.colbench.min_questions.")
    with pytest.raises(ConfigError, match=r"^env\.retail\.max_steps 1 leaves tau2 retail 1 turn"):
        check(tok, "tau2", env={"retail": {"max_steps": 1}})
    with pytest.raises(ConfigError, match=r"^rollout\.max_turns 1 leaves UserGym travel"):
        check(tok, "usergym", {"rollout.max_turns": 1})


def test_the_orchestrators_check_imports_no_torch(tiny_model_dir):
    code = ("import sys; from training.budget import check_start; from training.config import "
            f"resolve; check_start(resolve('tau2', 'cpu', {{'model.path': {str(tiny_model_dir)!r}}}), "
            f"{str(ROOT / 'workspace')!r}); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT,
                         timeout=60)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr


def test_the_trainer_refuses_at_start(tmp_path, tiny_model_dir, capsys):
    """The trainer checks too (a config.json written by hand, or a workspace whose knobs moved):
    toy_env's 6-token turns cannot hold any ColBench answer."""
    sys.path.insert(0, str(ROOT / "tests" / "training"))
    from toy_env import write_run

    from training import metrics
    from training.trainer import main

    write_run(tmp_path / "run", workspace_dir=ROOT / "workspace", model_dir=tiny_model_dir,
              bench="colbench")
    assert main(["--run", str(tmp_path / "run")]) == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]      # after the weights' progress bar
    assert last.startswith("trainer: rollout.response_length 6 cannot hold any ColBench answer")
    events = list(metrics.read_lines(tmp_path / "run" / "events.jsonl"))
    assert [e["event"] for e in events] == ["crashed"] and "Traceback" not in events[0]["error"]
