"""Demonstrations: worked example exchanges shown before a task, counted by env.<gym>.demonstrations,
checked by the gate against each gym's own action parser, and hot-reloaded by the trainer.

What a user depends on: the policy's context holds exactly the number of examples the knob says
(the examples before the task, the task last, nothing prefixed to the policy's own turn); an
example the gym would refuse never reaches the policy (the gate reverts its commit); a commit that
changes the examples reaches the next step's episodes.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from orchestrator.paths import project_root
from training import demonstrations
from training.benches import get_bench
from training.snapshot import Snapshot

SHIPPED = project_root() / "workspace"


def _workspace(tmp_path: Path, **knobs) -> Path:
    ws = tmp_path / "ws"
    shutil.copytree(SHIPPED, ws)
    data = json.loads((ws / "knobs.json").read_text())
    for dotted, value in knobs.items():
        gym, key = dotted.split("__")
        data["env"][gym][key] = value
    (ws / "knobs.json").write_text(json.dumps(data))
    return ws


@pytest.mark.parametrize("bench", ["usergym", "colbench", "tau2"])
def test_shipped_demonstrations_parse_and_cover_every_gym(bench):
    """Every gym of every bench ships at least one example, each assistant turn a valid action of
    that gym; the default knob asks for no more than the file holds."""
    data = demonstrations.load_dir(SHIPPED)[bench]
    b = get_bench(bench)
    assert demonstrations.problems(b, bench, data) == []
    knobs = json.loads((SHIPPED / "knobs.json").read_text())
    for gym in b.gyms:
        assert len(data[gym]) >= 1, gym
        assert 1 <= demonstrations.knob(knobs, gym) <= len(data[gym]), gym


def test_parser_refusals_name_the_example_and_the_reason():
    b = get_bench("usergym")
    bad = {"intention": [{"id": "x", "messages": [{"role": "user", "content": "Plan my trip."},
                                                  {"role": "assistant", "content": "What is your budget?"}]}],
           "telepathy": [{"id": "y", "messages": [{"role": "user", "content": "Guess."},
                                                  {"role": "assistant", "content": "[search] animals"}]}],
           "turtle": [{"id": "z", "messages": [{"role": "assistant", "content": "[action] Is it a fish?"},
                                               {"role": "user", "content": "Yes."}]}]}
    reasons = demonstrations.problems(b, "usergym", bad)
    text = "\n".join(reasons)
    assert "intention[0] (x)" in text and "does not start with [action]" in text
    assert "telepathy[0] (y)" in text and "[search] is not a tool of telepathy" in text
    assert "turtle[0] (z)" in text and "roles must alternate" in text
    assert demonstrations.problems(get_bench("colbench"), "colbench", {"colbench": [
        {"id": "c", "messages": [{"role": "user", "content": "Write f."},
                                 {"role": "assistant", "content": "I WANT TO ANSWER:\ndef f(:\n  pass"}]}]}) \
        and "does not parse" in demonstrations.problems(get_bench("colbench"), "colbench", {"colbench": [
            {"id": "c", "messages": [{"role": "user", "content": "Write f."},
                                     {"role": "assistant", "content": "I WANT TO ANSWER:\ndef f(:\n"}]}]})[0]


@pytest.mark.parametrize("count", [0, 1, 2])
def test_knob_counts_the_examples_rendered_before_the_task(tmp_path, tiny_model_dir, count):
    """The trainer's episodes: system prompt, `count` examples as earlier chat turns, then the task;
    the trajectory records how many and keeps the task as its prompt; the tokens the policy is
    trained on start after all of it (mask 0 throughout the context)."""
    from training.rollout import render, start_episode
    from training.policy import load_tokenizer

    ws = _workspace(tmp_path, intention__demonstrations=count)
    snap = Snapshot.from_dir(ws)
    bench = get_bench("usergym")
    task = bench.load_tasks("train", gyms=["intention"])[0]
    env = bench.make_env(task, snap, seed=3)
    demos, n = snap.demos_for("usergym", "intention")
    assert n == count
    tok = load_tokenizer(str(tiny_model_dir))
    models = type("M", (), {"tokenizer": tok})()
    ep = start_episode(models, env, bench.system_prompt(task), seed=3, demos=demos, n_demos=n)
    shipped = demonstrations.load_dir(SHIPPED)["usergym"]["intention"]
    want = [m["content"] for ex in shipped[:count] for m in ex["messages"]]
    assert [m["content"] for m in ep.messages[1:-1]] == want
    assert ep.messages[-1]["role"] == "user" and task.prompt in ep.messages[-1]["content"]
    rec = ep.record()
    assert rec["demonstrations"] == count and rec["prompt"] == ep.messages[-1]["content"]
    text = render(tok, ep.messages)
    assert tok.decode(ep.tokens) == text and set(ep.mask) == {0}
    if count:       # the policy's own turn is not prefixed: the context ends with the template
        assert text.rstrip().endswith("assistant") and "[action]" in text


def test_trainer_hot_reloads_changed_examples(tmp_path, tiny_model_dir):
    """A commit that rewrites an example reaches the next step's episodes; a snapshot whose
    examples the gym's parser refuses is not applied (reload_failed) and the old ones stay."""
    import git

    from test_live import promote
    from toy_env import write_run
    from training import metrics
    from training.trainer import Trainer

    ws = tmp_path / "ws"
    shutil.copytree(SHIPPED, ws)
    repo = git.Repo.init(ws)
    repo.git.add(A=True)
    first = repo.index.commit("seed")
    promote(repo, first)
    run = tmp_path / "run"
    write_run(run, repo=ws, model_dir=tiny_model_dir, bench="usergym",
              overrides={"data.train_batch_size": 2, "rollout.n": 1, "trainer.total_steps": 1,
                         "gyms": ["intention"], "rollout.response_length": 16})
    trainer = Trainer(run)
    before = trainer.make_episodes(1)[0]
    path = ws / "demonstrations" / "usergym.json"
    data = json.loads(path.read_text())
    data["intention"][0]["messages"][1]["content"] = "[action] Which city are you leaving from?"
    path.write_text(json.dumps(data, indent=2))
    repo.git.add(A=True)
    good = repo.index.commit("another first question")
    promote(repo, good)
    trainer.maybe_reload()
    after = trainer.make_episodes(2)[0]
    assert "[action] Which city are you leaving from?" in [m["content"] for m in after.messages]
    assert "[action] Which city are you leaving from?" not in [m["content"] for m in before.messages]
    data["intention"][0]["messages"][1]["content"] = "Which city?"
    path.write_text(json.dumps(data, indent=2))
    repo.git.add(A=True)
    bad = repo.index.commit("an example without its tool prefix (the gate would refuse it)")
    promote(repo, bad)
    trainer.maybe_reload()
    failed = [e for e in metrics.read_lines(run / "events.jsonl") if e["event"] == "reload_failed"]
    assert failed and failed[-1]["commit"] == bad.hexsha and "intention[0]" in failed[-1]["error"]
    assert trainer.live.commit == good.hexsha


@pytest.mark.parametrize("bench,gym,text,invalid", [
    ("usergym", "intention", "What is your budget?", True),                  # no tool prefix
    ("usergym", "intention", "[search] budget", True),                       # not an intention tool
    ("usergym", "intention", "[action] What is your budget?", False),
    ("colbench", "colbench", "```python\ndef f(x):\n    return x\n```", True),   # code, no marker
    ("colbench", "colbench", "I WANT TO ANSWER:\ndef f(x):\n    return x", False),
    ("colbench", "colbench", "What should f return for an empty list?", False),
    ("tau2", "retail", '<tool_call>{"name": get}</tool_call>', True),          # malformed call
    ("tau2", "retail", "Could you tell me your email?", False),
])
def test_environments_mark_turns_refused_for_their_format(bench, gym, text, invalid):
    """`invalid_action` in a step's info (what episode/invalid_rate counts) agrees with the
    bench's own check_action, the demonstrations' gate check."""
    b = get_bench(bench)
    snap = Snapshot.from_dir(SHIPPED)
    task = b.load_tasks("train", gyms=[gym])[0]
    env = b.make_env(task, snap, seed=1)
    env.reset(seed=1)
    info = env.step(text)[4]
    assert info["invalid_action"] is invalid
    assert (b.check_action(gym, text) is not None) is invalid
