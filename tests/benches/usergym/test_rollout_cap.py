"""An episode the rollout's turn cap ends is closed by the environment, as at its own max_steps:
its score and success are what it achieved, not 0 (training logs score/* and success/* from
them, and the built-in agent judges reward modules by score/*)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from transformers import AutoTokenizer

from tests.benches.usergym.usergym_helpers import first_task, snapshot
from training import rollout as rollout_mod
from training.benches.usergym import BENCH


@pytest.fixture(scope="module")
def models(tiny_model_dir):
    return SimpleNamespace(tokenizer=AutoTokenizer.from_pretrained(tiny_model_dir), vllm=None)


def scripted(monkeypatch, models, texts):
    """The policy writes `texts[k]` at turn k, each closed by the end-of-turn token."""
    stop = rollout_mod.end_of_turn_ids(models.tokenizer)[-1]
    calls = iter(texts)

    def generate(_models, prompts, **_):
        text = next(calls)
        return [models.tokenizer.encode(text, add_special_tokens=False) + [stop] for _ in prompts]

    monkeypatch.setattr(rollout_mod, "generate", generate)


def test_a_capped_turtle_episode_keeps_the_score_of_its_partial_answer(monkeypatch, models):
    task = first_task("turtle")
    snap = snapshot()
    assert int(snap.knobs["env"]["turtle"]["max_steps"]) > 3         # the rollout's cap binds
    answer = "[answer] " + task.facts[0].text
    probe = BENCH.make_env(task, snap, seed=0)
    probe.reset()
    partial = probe.answer_score(task.facts[0].text)
    assert 0 < partial < float(snap.knobs["env"]["turtle"]["success_threshold"])

    scripted(monkeypatch, models, [answer, "[action] Did it happen at night?",
                                   "[action] Was anyone hurt?"])
    env = BENCH.make_env(task, snap, seed=0)
    ep = rollout_mod.start_episode(models, env, BENCH.system_prompt(task), seed=0)
    rollout_mod.rollout(models, [ep], max_turns=3, response_length=64, temperature=1.0, top_p=1.0,
                        max_episode_tokens=4096)
    assert len(ep.turns) == 3 and ep.truncated and not ep.success
    assert ep.score == pytest.approx(partial)
    assert ep.record()["score"] == pytest.approx(partial)
    assert env.max_steps == 3 and env.done


def test_an_episode_the_token_budget_ends_keeps_its_score_too(monkeypatch, models):
    """The rollout's token budget ends an episode between turns, before the environment would:
    it is scored from the environment's closing record all the same."""
    task = first_task("turtle")
    snap = snapshot()
    answer = "[answer] " + task.facts[0].text
    scripted(monkeypatch, models, [answer, "[action] Did it happen at night?"])
    env = BENCH.make_env(task, snap, seed=0)
    ep = rollout_mod.start_episode(models, env, BENCH.system_prompt(task), seed=0)
    # the first turn's answer fits; with the reply appended the episode is at its budget
    budget = len(ep.tokens) + len(models.tokenizer.encode(answer, add_special_tokens=False)) + 8
    rollout_mod.rollout(models, [ep], max_turns=5, response_length=64, temperature=1.0, top_p=1.0,
                        max_episode_tokens=budget)
    assert len(ep.turns) == 1 and ep.truncated and not env.done    # the rollout ended it
    partial = env.answer_score(task.facts[0].text)
    assert partial > 0 and ep.score == pytest.approx(partial)


def test_without_a_cap_the_knob_is_the_limit():
    task = first_task("turtle")
    env = BENCH.make_env(task, snapshot(env={"turtle": {"max_steps": 5}}), seed=0)
    assert env.max_steps == 5
    env.turn_cap = 8                       # a cap above the knob changes nothing
    assert env.max_steps == 5
