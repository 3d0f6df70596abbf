"""algorithm.name grpo and infopo in the real trainer with the tiny model: no critic anywhere,
the counterfactual of InfoPO's information gain, exact resume per algorithm, and a hot reload
(knobs, a reward module, a broken module refused) under each algorithm."""
from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from toy_env import KNOBS, ToyEnv, load_tasks, write_run, write_workspace
from training import checkpoint, metrics
from training.config import ConfigError
from training.trainer import Trainer

# the tiny model never answers the toy task, so every episode scores 0 and every group ties; a
# module paying by the length of a turn's text (mod 7: its 6 tokens always make over 12
# characters) and by the episode's user arm (drawn per episode: greedy rollouts repeat the same
# text) gives the groups something to rank
CHARS = ("APPLIES_TO = ['toy']\n\ndef turn_reward(turn):\n"
         "    return len(turn['agent']) % 7 / 6 + 0.5 * (turn['user_arm'] == 'llm')\n")


def knobs_with_chars(enabled: bool = True) -> dict:
    knobs = json.loads(json.dumps(KNOBS))
    knobs["reward"]["modules"] = {"chars": {"enabled": enabled, "weight": 1.0}}
    return knobs


def chars_workspace(folder: Path) -> Path:
    write_workspace(folder, knobs_with_chars())
    (folder / "rewards").mkdir(exist_ok=True)
    (folder / "rewards" / "chars.py").write_text(CHARS)
    return folder


def test_counterfactual_replaces_only_the_reply(tiny_model_dir):
    """The counterfactual context is the episode's own text with reply k swapped for the
    placeholder; turn k+1's tokens follow it unchanged; the reply that ended the episode (no
    next turn) gives nothing, and an empty one is counted as skipped."""
    from training.infogain import counterfactuals
    from training.policy import load_tokenizer
    from training.rollout import _append, _append_observation, start_episode

    tok = load_tokenizer(str(tiny_model_dir))
    models = SimpleNamespace(tokenizer=tok)
    task = load_tasks("train")[0]
    env = ToyEnv(task, KNOBS, user=None, seed=0)
    ep = start_episode(models, env, "Ask, then answer.", seed=0)
    replies = ["The number is 42.", "", "Thanks."]
    for k, (text, reply) in enumerate(zip(["What is it?", "Is it big?", "[answer] 42"], replies)):
        _append(ep, tok.encode(text, add_special_tokens=False) + [tok.convert_tokens_to_ids(
            "<|im_end|>")], True, k)
        if k < 2:
            ep.messages.append({"role": "assistant", "content": text})
            _append_observation(models, ep, reply)
    assert ep.observations() == replies[:2]
    found, skipped = counterfactuals(tok, 0, ep.tokens, ep.turn_ids, ep.observations(),
                                     "No information found.")
    assert skipped == 1 and [c.turn for c in found] == [0]
    cf = found[0]
    text = tok.decode(cf.ids[:cf.start])
    original = tok.decode(ep.tokens[:cf.orig_start])
    assert text == original.replace("The number is 42.", "No information found.")
    assert cf.ids[cf.start:] == ep.tokens[cf.orig_start:cf.orig_start + cf.length]
    assert [ep.turn_ids[p] for p in range(cf.orig_start, cf.orig_start + cf.length)] == \
        [1] * cf.length


def test_gain_is_zero_for_a_reply_replaced_by_itself(tmp_path, tiny_model_dir):
    """With the placeholder equal to every reply the counterfactual is the episode itself, so
    the measured gain is 0 (to float noise of a different padding); with InfoPO's placeholder
    it is not, and it sits on the turn that drew the reply, never on an episode's last turn."""
    from training.infogain import information_gain
    from training.update import collate, score_batch

    write_run(tmp_path / "r", workspace_dir=write_workspace(tmp_path / "ws"),
              model_dir=tiny_model_dir, overrides={"algorithm.name": "infopo",
                                                   "trainer.total_steps": 0})
    trainer = Trainer(tmp_path / "r")
    episodes = trainer.make_episodes(1)
    trainer._rollout(episodes)
    _, turn_rewards, _ = trainer._score(episodes)
    batch = collate(episodes, turn_rewards, trainer.models.tokenizer.pad_token_id,
                    [ep.observations() for ep in episodes])
    score_batch(trainer.models, batch, trainer.cfg)
    K = batch.turn_rewards.shape[1]
    args = (trainer.models, batch.input_ids, batch.turn_ids, batch.lengths, batch.old_logprobs)
    gain_self, has_self, _ = information_gain(*args, batch.observations, K,
                                              placeholder="Please ask me a question.",
                                              temperature=0.7, micro=4)
    gain, has, _ = information_gain(*args, batch.observations, K,
                                    placeholder="No information found.", temperature=0.7, micro=4)
    # the toy user answers "Please ask me a question." to a turn without "?": that reply is its
    # own placeholder there; elsewhere the reply differs from the placeholder
    checked = 0
    for b, ep in enumerate(episodes):
        last = len(ep.turns) - 1
        assert has[b, last] == 0                               # nothing after the last reply
        for k, obs in enumerate(ep.observations()):
            if has_self[b, k] and obs == "Please ask me a question.":
                assert abs(float(gain_self[b, k])) < 1e-4
                checked += 1
    assert checked > 0
    assert has.sum() > 0 and gain[has > 0].abs().max() > 1e-3
    trainer.live.close()


@pytest.mark.parametrize("algorithm", ["grpo", "infopo"])
def test_resume_is_exact_and_no_critic_exists(tmp_path, tiny_model_dir, algorithm):
    """Stop after step 2, resume to 3 == run straight to 3, parameter for parameter (CPU, fp32,
    every step reseeded); no critic is built or saved; the advantages were not all zero (the
    chars module gives the groups something to rank); a resume under another algorithm is
    refused in one sentence."""
    ws = chars_workspace(tmp_path / "ws")
    over = {"algorithm.name": algorithm, "trainer.total_steps": 3, "trainer.save_freq": 0}
    write_run(tmp_path / "a", workspace_dir=ws, model_dir=tiny_model_dir, overrides=over)
    write_run(tmp_path / "b", workspace_dir=ws, model_dir=tiny_model_dir, overrides=over)
    a = Trainer(tmp_path / "a")
    assert a.models.critic is None and a.critic_opt is None
    assert a.run() == 0
    assert Trainer(tmp_path / "b").run(stop_at=2) == 0
    resumed = Trainer(tmp_path / "b", resume=True)
    assert resumed.step == 2 and resumed.run() == 0
    ca, cb = (checkpoint.latest(tmp_path / r / "checkpoints") for r in "ab")
    assert sorted(p.name for p in ca.iterdir()) == ["actor_optim.pt", "policy.pt", "rng.pt",
                                                    "state.json"]
    assert checkpoint.read_meta(ca)["algorithm"] == algorithm
    pa, pb = torch.load(ca / "policy.pt"), torch.load(cb / "policy.pt")
    assert all(torch.equal(pa[k], pb[k]) for k in pa)
    oa, ob = (checkpoint.load(c, ["actor_optim"])[0]["actor_optim"] for c in (ca, cb))
    assert all(torch.equal(oa["state"][i]["exp_avg_sq"], ob["state"][i]["exp_avg_sq"])
               for i in oa["state"])
    rows_a = list(metrics.read_lines(tmp_path / "a" / "metrics.jsonl"))
    rows_b = list(metrics.read_lines(tmp_path / "b" / "metrics.jsonl"))
    assert [r["step"] for r in rows_b] == [1, 2, 3]
    for ra, rb in zip(rows_a, rows_b):
        assert not any(k.startswith("critic/") for k in ra)
        for key in ("reward/mean", "actor/pg_loss", "actor/entropy", "grpo/group_std_mean"):
            assert ra[key] == rb[key], key
    assert min(r["grpo/tied_frac"] for r in rows_a) < 1.0
    assert any(abs(r["actor/pg_loss"]) > 0 for r in rows_a)
    if algorithm == "infopo":
        assert all(r["infopo/gain_turns"] > 0 for r in rows_a)
        assert all(r["infopo/gain_mean"] == rb["infopo/gain_mean"] for r, rb in zip(rows_a, rows_b))
    cfg = json.loads((tmp_path / "b" / "config.json").read_text())
    cfg["algorithm"]["name"] = "ppo"
    (tmp_path / "b" / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(ConfigError, match=f"trained with algorithm {algorithm} but config.json "
                                          "says ppo: resume with"):
        Trainer(tmp_path / "b", resume=True)


@pytest.mark.parametrize("algorithm", ["ppo", "grpo", "infopo"])
def test_hot_reload_under_each_algorithm(tmp_path, tiny_model_dir, algorithm):
    """A promoted commit (a larger entropy bonus, the chars module switched on) applies at the
    next step boundary and its coefficient is the one in the loss; a commit whose module fails to
    import is refused and the run keeps the previous one."""
    import git

    from test_live import commit_knobs, promote

    repo = git.Repo.init(tmp_path / "ws")
    knobs = knobs_with_chars(enabled=False)
    first = commit_knobs(repo, knobs, "start", {"rewards/chars.py": CHARS})
    promote(repo, first)
    write_run(tmp_path / "run", repo=tmp_path / "ws", model_dir=tiny_model_dir,
              overrides={"algorithm.name": algorithm, "trainer.total_steps": 2})
    trainer = Trainer(tmp_path / "run")
    try:
        before = trainer.run_step(1)
        assert before["workspace/commit"] == first.hexsha and "reward/module/chars" not in before
        knobs["agent"]["entropy_coeff"] = 0.003
        knobs["reward"]["modules"]["chars"]["enabled"] = True
        good = commit_knobs(repo, knobs, "entropy and the chars module")
        promote(repo, good)
        trainer.maybe_reload()
        after = trainer.run_step(2)
        assert after["workspace/commit"] == good.hexsha
        assert after["actor/entropy_coeff"] == 0.003 and "reward/module/chars" in after
        assert after["actor/loss"] == pytest.approx(
            after["actor/pg_loss"] - 0.003 * after["actor/entropy"]
            + after["actor/kl_loss_coef"] * after["kl/ref"], abs=1e-6)
        assert ("critic/value_loss" in after) == (algorithm == "ppo")
        knobs["reward"]["modules"]["broken"] = {"enabled": True, "weight": 1.0}
        bad = commit_knobs(repo, knobs, "broken module",
                           {"rewards/broken.py": "APPLIES_TO = ['toy']\nimport no_such_module\n"})
        promote(repo, bad)
        trainer.maybe_reload()
        failed = [e for e in metrics.read_lines(tmp_path / "run" / "events.jsonl")
                  if e["event"] == "reload_failed"]
        assert failed and failed[-1]["commit"] == bad.hexsha
        assert trainer.live.commit == good.hexsha
    finally:
        trainer.live.close()


@pytest.mark.parametrize("overrides,words", [
    ({"algorithm.name": "sac"}, "algorithm.name must be one of ppo, grpo, infopo."),
    ({"algorithm.name": "grpo", "rollout.n": 1},
     "algorithm.name grpo needs rollout.n of at least 2"),
    ({"algorithm.name": "infopo", "algorithm.turn_credit": "sum"},
     "algorithm.turn_credit must be equalized, r2g or em."),
    ({"algorithm.trajectory_score": "median"},
     "algorithm.trajectory_score must be sum, mean or r2g."),
    ({"algorithm.info_gate_temperature": 0}, "algorithm.info_gate_temperature must be above 0."),
])
def test_bad_algorithm_settings_are_one_sentence(overrides, words):
    from training.config import resolve

    with pytest.raises(ConfigError) as err:
        resolve("usergym", "cpu", overrides)
    assert words in str(err.value) and str(err.value).count(". ") == 0
