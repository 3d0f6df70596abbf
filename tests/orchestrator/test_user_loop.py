"""An LLM user that says one sentence over and over: the detector (`looped_reply`), the trainer's
share (`looped/<gym>`, `user/looped_rate`), the diagnosis (`user_loop`, LLM replies only) and the
built-in agent's remedy, more episodes to the symbolic user where the run's mixture may move. The
135M reference user of the H100 run of 2026-12-08 looped in 17-26% of its replies, and the
policy copied its loops into its own answers."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
sys.path.insert(0, str(Path(__file__).resolve().parent / "agents"))
from episodes import ep, turn  # noqa: E402
from test_builtin_progress import ctx, knobs, last_msg, record, usergym_exp  # noqa: E402

from orchestrator import diagnostics, effects, gitops  # noqa: E402
from orchestrator.agents import base  # noqa: E402
from training.users.leak import looped_reply  # noqa: E402

LOOP = "I'm sorry. I'm sorry. I'm sorry. I'm sorry."
ASK = "[action] Why do you hold this claim?"


def persuade(looping: int, plain: int, arm: str = "llm") -> dict:
    """A persuade episode whose user (of `arm`) loops in `looping` replies and answers in `plain`."""
    turns = [turn(ASK, LOOP, user_replied=True, user_arm=arm) for _ in range(looping)]
    turns += [turn(ASK, "Cost matters to me.", user_replied=True, user_arm=arm) for _ in range(plain)]
    return ep("persuade", turns) | {"user_arm": arm}


def test_a_reply_loops_when_one_sentence_comes_three_times():
    assert looped_reply(LOOP)
    assert looped_reply("No.\nNo.\nno.   ")                       # case and spacing aside
    assert looped_reply("Yes, I agree. You're right! You're right! You're   right!")
    assert not looped_reply("I'm sorry. I'm sorry. Let me think.")  # twice may be emphasis
    assert not looped_reply("Budget: 500 dollars. I prefer trains. I'm sorry.")
    assert not looped_reply("") and not looped_reply("I'm sorry I'm sorry I'm sorry")   # one sentence


def test_the_trainer_logs_the_share_of_user_replies_that_loop():
    from training.trainer import episode_metrics
    rec = persuade(1, 3) | {"return": 0.0}
    quiet = ep("travel", [turn("[search] hotel", "H1 | Vista", user_replied=False)]) | {"return": 0.0}
    m = episode_metrics([rec, quiet])
    assert m["looped/persuade"] == 0.25 and m["user/looped_rate"] == 0.25
    assert "looped/travel" not in m          # no user reply there: no share


def test_the_diagnosis_names_an_llm_user_that_loops_and_only_the_llm_arm():
    found = diagnostics.find_user_loops([persuade(3, 7), persuade(2, 8)])
    assert [(f.kind, f.gym) for f in found] == [("user_loop", "persuade")]
    f = found[0]
    assert (f.evidence["looped"], f.evidence["replies"]) == (5, 20)
    assert f.message.startswith("5 of 20 recent persuade replies of the LLM user (25%) say one "
                                "sentence three times or more; e.g. \"I'm sorry.")
    # under the threshold's share, under its count, or the symbolic arm's: no finding
    assert diagnostics.find_user_loops([persuade(5, 30)]) == []
    assert diagnostics.find_user_loops([persuade(4, 0)]) == []
    assert diagnostics.find_user_loops([persuade(5, 5, arm="symbolic")]) == []


def _exp(tmp_path, monkeypatch, user_llm="reference"):
    exp = usergym_exp(tmp_path, monkeypatch, {s: [persuade(3, 5), persuade(3, 5)] for s in (4, 5, 6)})
    (exp / "run-001" / "config.json").write_text(
        json.dumps({"gyms": [], "rollout": {"user_llm": user_llm}}))
    return exp


def _pin_mixture(exp):
    """strategy_mix's schema range narrowed to its value, as `start --user-mode` narrows it."""
    schema_path = exp / "workspace" / "schema" / "knobs.schema.json"
    schema = json.loads(schema_path.read_text())
    mix = schema["properties"]["user"]["properties"]["persuade"]["properties"]["strategy_mix"]
    mix["minimum"] = mix["maximum"] = 0.5
    schema_path.write_text(json.dumps(schema))
    gitops.git(exp / "workspace", "commit", "-qam", "Pin the user mode (test)")


def test_the_builtin_agent_answers_more_episodes_with_the_symbolic_user(tmp_path, monkeypatch):
    exp = _exp(tmp_path, monkeypatch)
    assert knobs(exp)["user"]["persuade"]["strategy_mix"] == 0.5
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["user"]["persuade"]["strategy_mix"] == 0.75
    msg = last_msg(exp)
    assert msg.startswith("Answer more persuade episodes with the symbolic user "
                          "(user.persuade.strategy_mix 0.5 -> 0.75)")
    assert "18 of 48 recent persuade replies of the LLM user (38%)" in msg
    assert "Expect: looped/persuade falls." in msg
    assert effects.target_of(msg, {}, ["persuade"]) == ("looped/persuade", "down")


def test_a_pinned_user_mode_keeps_its_mixture_and_the_llm_user_gets_a_penalty(tmp_path, monkeypatch):
    """A --user-mode run narrows strategy_mix's schema range to its value (the user trained
    against is what the run measures): the mixture stays, and the LLM user's repetition penalty
    goes up one step instead; at the schema's maximum nothing is left to do, and the session
    says which finding it left."""
    exp = _exp(tmp_path, monkeypatch)
    _pin_mixture(exp)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["user"]["persuade"]["strategy_mix"] == 0.5
    assert knobs(exp)["user"]["persuade"]["repetition_penalty"] == 1.3
    msg = last_msg(exp)
    assert msg.startswith("Raise the persuade LLM user's repetition penalty "
                          "(user.persuade.repetition_penalty 1.0 -> 1.3)")
    assert effects.target_of(msg, {}, ["persuade"]) == ("looped/persuade", "down")
    k = knobs(exp)
    k["user"]["persuade"]["repetition_penalty"] = 2.0
    (exp / "workspace" / "knobs.json").write_text(json.dumps(k))
    gitops.git(exp / "workspace", "commit", "-qam", "At the maximum (test)")
    again = base.run_session(ctx(exp, "s002"))
    k = knobs(exp)["user"]["persuade"]
    assert (k["strategy_mix"], k["repetition_penalty"]) == (0.5, 2.0)
    assert "left alone: No remedy within the knobs' limits, or its knobs are still being " \
           "measured: 18 of 48 recent persuade replies of the LLM user (38%)" in record(again)


def test_a_user_behind_vllm_or_a_server_gets_no_penalty_and_the_session_says_why(tmp_path,
                                                                                  monkeypatch):
    """Their repetition penalty would fall on the hidden facts of the user's prompt too: the
    gate refuses the write, and the agent, asking first, commits nothing and says so."""
    exp = _exp(tmp_path, monkeypatch)
    cfg = {"gyms": [], "model": {"lora_rank": 8},
           "rollout": {"user_llm": "reference", "backend": "vllm"}}
    (exp / "run-001" / "config.json").write_text(json.dumps(cfg))
    (exp / "experiment.json").write_text(json.dumps({"bench": "usergym"}))   # the gate knows the run
    _pin_mixture(exp)
    res = base.run_session(ctx(exp))
    assert knobs(exp)["user"]["persuade"]["repetition_penalty"] == 1.0
    assert "user.persuade.repetition_penalty 1.0 -> 1.3 cannot act: the run answers persuade's " \
           "LLM user ('default') through the vLLM engine" in record(res)


def test_a_workspace_older_than_the_penalty_is_told_where_to_get_it(tmp_path, monkeypatch):
    """An experiment made before user.<gym>.repetition_penalty existed (the H100 runs of
    2026-12-08): with the mixture pinned, the session says the knob is missing and where it is."""
    exp = _exp(tmp_path, monkeypatch)
    k = knobs(exp)
    for gym in k["user"].values():
        gym.pop("repetition_penalty")
    (exp / "workspace" / "knobs.json").write_text(json.dumps(k))
    _pin_mixture(exp)
    res = base.run_session(ctx(exp))
    assert "repetition_penalty" not in knobs(exp)["user"]["persuade"]
    assert "this workspace has no user.persuade.repetition_penalty (it was made before the knob " \
           "existed)" in record(res)
