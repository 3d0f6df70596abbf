"""The built-in agent: each diagnosed failure mode becomes the paper's intervention, committed
under the session's identity with Why/Expect and trailers, within the knobs' limits."""
import json
import subprocess
import sys
from pathlib import Path

from conftest import make_ctx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from runlogs import add_event, episode, write_run  # noqa: E402

from orchestrator import effects, experience, gitops  # noqa: E402
from orchestrator.agents import base  # noqa: E402


def knobs(exp):
    return json.loads((exp / "workspace" / "knobs.json").read_text())


def last_msg(exp):
    return subprocess.run(["git", "-C", str(exp / "workspace"), "log", "-1", "--format=%ae%n%B"],
                          capture_output=True, text=True).stdout


def fresh_run(exp, steps=20, **kw):
    run = exp / "run-001"
    (run / "metrics.jsonl").unlink()
    return write_run(run, steps, **kw)


def test_deadlock_lowers_min_questions_then_raises_max_steps(exp):
    deadlocked = lambda s, r: [episode("colbench", deadlock=True, first=f"q{i}") for i in range(8)]  # noqa: E731
    fresh_run(exp, episodes_fn=deadlocked)
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK and knobs(exp)["env"]["colbench"]["min_questions"] == 0
    msg = last_msg(exp)
    assert msg.startswith("builtin-s001@agents.eau") and "Why:" in msg and "Expect: success/colbench" in msg
    assert "Eau-Agent: builtin" in msg and "Eau-Session: s001" in msg
    # while min_questions is measured, colbench gets no second change (the two would share one
    # measured effect on success/colbench)
    res2 = base.run_session(make_ctx(exp, "builtin", session="s002"))
    assert res2.commits == [] and knobs(exp)["env"]["colbench"]["max_steps"] == 10
    # measured (success rose, the episodes still deadlock): the next session moves max_steps
    measured(exp, res.commits[0], lambda s, r: {"success/colbench": 0.0 if s < 10 else 0.3},
             episodes_fn=deadlocked)
    res = base.run_session(make_ctx(exp, "builtin", session="s003"))
    assert res.status == base.OK and knobs(exp)["env"]["colbench"]["max_steps"] == 13  # 10 + (60 - 3) / 20


def measured(exp, sha, metric_fn, **kw):
    """A fresh 20-step run in which `sha` was applied at step 10, its effect measured (W = 2)."""
    fresh_run(exp, metric_fn=metric_fn, **kw)
    add_event(exp / "run-001", event="applied", commit=sha, step=10)
    return effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)


def test_leak_withholds_the_leaking_kind(exp):
    fresh_run(exp, episodes_fn=lambda s, r: [episode("colbench", leak=True, first=f"q{i}") for i in range(6)])
    base.run_session(make_ctx(exp, "builtin"))
    assert knobs(exp)["user"]["colbench"]["withhold_kinds"] == ["return"]
    assert "Expect: user/leak_rate falls." in last_msg(exp)


def test_entropy_collapse_raises_entropy_coeff_within_delta(exp):
    fresh_run(exp, 30, metric_fn=lambda s, r: {"actor/entropy": 1.0 if s <= 10 else 0.2})
    base.run_session(make_ctx(exp, "builtin"))
    assert knobs(exp)["agent"]["entropy_coeff"] == 0.005       # 0.001 + the 0.004 delta


def test_zero_success_adds_an_intermediate_reward_module(exp):
    def disclosing(step, rng):         # a question the user answered: what the module would pay
        eps = [episode("colbench", first=f"[action] q{i}") for i in range(2)]
        for e in eps:
            e["turns"][1].update(revealed_facts=["a"], new_facts=["a"])
        return eps

    fresh_run(exp, metric_fn=lambda s, r: {"success/colbench": 0.0}, episodes_fn=disclosing)
    base.run_session(make_ctx(exp, "builtin"))
    assert knobs(exp)["reward"]["modules"]["eau_progress"] == {"enabled": True, "weight": 0.5}
    src = (exp / "workspace" / "rewards" / "eau_progress.py").read_text()
    ns: dict = {}
    exec(src, ns)
    assert ns["APPLIES_TO"] == ["colbench"]
    # credit for a fact disclosed for the first time; none for asking as such or for asking again
    # (the farmed version paid 0.1 a question and 0.1 a disclosure, repeats included)
    assert ns["turn_reward"]({"asked_question": True, "revealed_facts": ["a"], "new_facts": ["a"]}) == 0.1
    assert ns["turn_reward"]({"asked_question": True, "revealed_facts": ["a"], "new_facts": []}) == 0.0
    assert ns["turn_reward"]({"asked_question": True, "new_facts": ["a"], "repeated": True}) == 0.0
    assert "Expect: score/colbench rises" in last_msg(exp)


def test_high_success_makes_the_gym_harder(exp):
    fresh_run(exp, metric_fn=lambda s, r: {"success/colbench": 0.9})
    res = base.run_session(make_ctx(exp, "builtin"))
    k = knobs(exp)["env"]["colbench"]
    # one step along x-harder: the worked example goes first (help succeeding no longer needs)
    assert (k["demonstrations"], k["min_questions"], k["max_steps"]) == (0, 1, 10)
    # measured: success fell somewhat, as its Expect line says, and is still past 0.80
    assert [e.label for e in measured(exp, res.commits[0],
                                      lambda s, r: {"success/colbench": 0.95 if s < 10 else 0.85})] == ["helped"]
    base.run_session(make_ctx(exp, "builtin", session="s002"))
    k = knobs(exp)["env"]["colbench"]
    # then another knob (demonstrations is being measured), max_steps left for last (the
    # paper's 10 -> 6 harmed, A.2)
    assert (k["demonstrations"], k["min_questions"], k["max_steps"], k["human_response_char_limit"]) \
        == (0, 2, 10, 400)


def test_nan_asks_to_resume_from_the_last_good_checkpoint(exp):
    run = fresh_run(exp, 12)
    (run / "checkpoints" / "step-000010").mkdir(parents=True)
    write_run(run, 2, start=13, metric_fn=lambda s, r: {"actor/pg_loss": float("nan")})
    res = base.run_session(make_ctx(exp, "builtin"))
    control = json.loads((exp / "workspace" / "control.json").read_text())
    assert control["action"] == "resume" and control["from_checkpoint"] == "step-000010"
    assert res.control == control


def test_harmful_change_is_reverted_and_recorded_in_the_pool(exp):
    ws = exp / "workspace"
    k = knobs(exp)
    k["user"]["colbench"]["facts_per_reply"] = 3
    (ws / "knobs.json").write_text(json.dumps(k, indent=2))
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam",
                    "More facts\n\nWhy: faster\nExpect: success/colbench rises"], check=True)
    sha = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    fresh_run(exp, 30, metric_fn=lambda s, r: {"success/colbench": (0.5 if s < 15 else 0.1) + r.gauss(0, 0.01)})
    add_event(exp / "run-001", event="applied", commit=sha, step=15)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", ws)] == ["harmed"]
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK and knobs(exp)["user"]["colbench"]["facts_per_reply"] == 1
    assert f"Reverts: {sha}" in last_msg(exp)
    pool = experience.read_findings(exp.parent / "pool", "colbench")
    assert pool[0]["evidence"]["effect"] == "harmed" and pool[0]["change"] == "1 -> 3"
    # the harm is reverted: the next session has nothing to revert
    res = base.run_session(make_ctx(exp, "builtin", session="s002"))
    assert res.status == base.NO_CHANGE


def test_healthy_run_makes_no_commit(exp):
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.NO_CHANGE and res.commits == []


def test_leaking_rule_is_restricted_to_matched_facts(exp):
    ws = exp / "workspace"
    rules_path = ws / "users" / "colbench" / "rules.json"
    rules = json.loads(rules_path.read_text())
    rules["rules"].insert(0, {"id": "blurt", "gyms": ["colbench"], "when": {}, "reveal": "next",
                              "say": "By the way, {facts}"})
    rules_path.write_text(json.dumps(rules, indent=2))
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam",
                    "plant"], check=True)

    def leaky(s, r):
        eps = [episode("colbench", first=f"q{i}") for i in range(4)]
        for ep in eps:
            for t in ep["turns"]:
                t.update(leaked_facts=["task/f1"], revealed_facts=["task/f1"], rule_id="blurt")
        return eps

    fresh_run(exp, episodes_fn=leaky)
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK, res.reason
    rule = json.loads(rules_path.read_text())["rules"][0]
    assert rule["id"] == "blurt" and rule["reveal"] == "matched" and rule["when"] == {"matched": True}
    assert "Expect: user/leak_rate falls." in last_msg(exp)


def test_deadlock_at_the_trainers_turn_cap_is_left_alone(exp):
    fresh_run(exp, metric_fn=lambda s, r: {"success/colbench": 0.0},
              episodes_fn=lambda s, r: [episode("colbench", deadlock=True, turns=4, first=f"q{i}")
                                        for i in range(4)])
    (exp / "run-001" / "config.json").write_text(json.dumps({"rollout": {"max_turns": 4}}))
    res = base.run_session(make_ctx(exp, "builtin"))
    k = knobs(exp)
    assert k["env"]["colbench"]["min_questions"] == 1 and k["env"]["colbench"]["max_steps"] == 10
    # the next finding, success near zero, would add eau_progress; no colbench turn here had a
    # fact disclosed, so its replay pays nothing and it is not committed: the record says so
    assert "eau_progress" not in k["reward"]["modules"] and res.commits == []
    record = Path(res.transcript).read_text()
    assert "eau_progress would pay nothing in colbench" in record


def refused_episode(gym, turns=3, invalid=True, demos=1, i=0):
    """An episode whose agent turns the environment refused for their format (or accepted)."""
    ep = episode(gym, deadlock=invalid, turns=turns, first=f"Sure, here is my plan {i}")
    for t in ep["turns"]:
        t.update(invalid_action=invalid, asked_question=not invalid,
                 user="Invalid action: start your message with [action]." if invalid else "Ok.")
    ep["demonstrations"] = demos
    return ep


def commit_knob(exp, dotted, value):
    path = exp / "workspace" / "knobs.json"
    k = json.loads(path.read_text())
    node = k
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    path.write_text(json.dumps(k, indent=2) + "\n")
    subprocess.run(["git", "-C", str(exp / "workspace"), "-c", "user.name=p", "-c", "user.email=p@x",
                    "commit", "-qam", f"set {dotted}"], check=True)


def test_invalid_actions_show_one_more_worked_example(exp):
    """Most turns refused: one more demonstration for the gym (1 -> 2), with the numbers and the
    refused turns in the diagnosis; the commit carries Why/Expect."""
    from orchestrator import diagnostics

    fresh_run(exp, episodes_fn=lambda s, r: [refused_episode("colbench", i=i) for i in range(6)])
    found = [f for f in diagnostics.diagnose(exp / "run-001") if f.kind == "invalid_actions"]
    assert found and found[0].gym == "colbench" and found[0].evidence["rate"] == 1.0
    assert "100% of recent colbench agent turns (54 of 54)" in found[0].message   # 3 files
    assert found[0].evidence["examples"][0]["agent"].startswith("Sure, here is my plan")
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["env"]["colbench"]["demonstrations"] == 2
    msg = last_msg(exp)
    assert "Show one more worked example to colbench (1 -> 2)" in msg
    assert "Expect: episode/invalid_rate falls" in msg


def mostly_refused(step, rng):
    """colbench at its example limit, 3 turns of 4 refused: the format reward can pay the fourth."""
    eps = [refused_episode("colbench", turns=4, demos=3, i=i) for i in range(6)]
    for ep in eps:
        ep["turns"][-1].update(invalid_action=False, user="Ok.")
    return eps


def test_invalid_actions_at_the_examples_limit_switch_on_the_format_reward(exp):
    """The knob already shows every example the file holds (3 for colbench): the shipped format
    reward is switched on instead, and its turn reward credits accepted turns only."""
    commit_knob(exp, "env.colbench.demonstrations", 3)

    fresh_run(exp, episodes_fn=mostly_refused)
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK, res.reason
    k = knobs(exp)
    assert k["env"]["colbench"]["demonstrations"] == 3
    assert k["reward"]["modules"]["well_formed"] == {"enabled": True, "weight": 1.0}
    ns: dict = {}
    exec((exp / "workspace" / "rewards" / "well_formed.py").read_text(), ns)
    assert ns["turn_reward"]({"invalid_action": True}) == 0.0
    assert ns["turn_reward"]({"invalid_action": False}) > 0.0
    assert ns["turn_reward"]({"invalid_action": False, "repeated": True}) == 0.0   # no farm by repeats


def test_a_format_reward_a_revert_took_back_is_not_switched_on_again(exp):
    """Switched on, reverted as "no effect", and the same refusals seen again: the session leaves
    it off and says why, instead of looping on, off, on."""
    commit_knob(exp, "env.colbench.demonstrations", 3)
    commit_knob(exp, "reward.modules.well_formed.enabled", True)
    ws = exp / "workspace"
    sha = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True,
                         text=True).stdout.strip()
    k = knobs(exp)
    k["reward"]["modules"]["well_formed"]["enabled"] = False
    (ws / "knobs.json").write_text(json.dumps(k, indent=2))
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam",
                    f"Revert {sha[:10]}: no effect\n\nWhy: no effect\nExpect: nothing moves\n\n"
                    f"Reverts: {sha}"], check=True)

    fresh_run(exp, episodes_fn=mostly_refused)
    res = base.run_session(make_ctx(exp, "builtin"))
    assert knobs(exp)["reward"]["modules"]["well_formed"]["enabled"] is False
    assert "Enable the format reward" not in last_msg(exp)     # the session moves on to another finding
    assert "not switched on again" in Path(res.transcript).read_text()


def test_format_reward_is_withdrawn_once_the_format_is_learned(exp):
    """Help goes both ways: with at most 5% of turns refused, the format reward is switched off."""
    commit_knob(exp, "reward.modules.well_formed.enabled", True)
    fresh_run(exp, episodes_fn=lambda s, r: [refused_episode("colbench", invalid=False, i=i)
                                             for i in range(6)])
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["reward"]["modules"]["well_formed"]["enabled"] is False
    assert "the format is learned" in last_msg(exp)


def test_pooled_invalid_actions_raise_every_gym_of_the_run(tmp_path, monkeypatch):
    """A CPU demo's steps see one or two episodes per gym: the finding pools the gyms, and the
    remedy raises the demonstrations of every gym of the run in one commit (0 -> 1)."""
    from runlogs import make_workspace

    from orchestrator.agents.base import SessionContext
    from orchestrator import diagnostics

    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    make_workspace(exp / "workspace")
    gyms = ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy")
    for g in gyms:
        commit_knob(exp, f"env.{g}.demonstrations", 0)
    write_run(exp / "run-001", 10, gym="intention", episodes_fn=lambda s, r: [
        refused_episode(g, demos=0, i=i) for i, g in enumerate(gyms[:4])])
    (exp / "run-001" / "config.json").write_text('{"gyms": []}\n')
    found = [f for f in diagnostics.diagnose(exp / "run-001") if f.kind == "invalid_actions"]
    assert [f.gym for f in found] == [None] and found[0].evidence["by_gym"]["travel"] == 1.0
    ctx = SessionContext(agent="builtin", session_id="s001", exp_dir=exp, workspace=exp / "workspace",
                         run_dir=exp / "run-001", bench="usergym", experience_dir=tmp_path / "pool",
                         skill_path=Path(__file__).resolve().parents[3] / "skills/eau/SKILL.md")
    res = base.run_session(ctx)
    assert res.status == base.OK, res.reason
    # every gym the run trains on (config `gyms` empty: UserGym's five); the held-out two, which
    # the run never samples, are left alone
    assert {g: knobs(exp)["env"][g]["demonstrations"] for g in gyms} == \
        {g: 0 if g in ("intention", "telepathy") else 1 for g in gyms}


def test_an_example_for_an_unjudged_gym_does_not_quote_another_gyms_refusals(tmp_path, monkeypatch):
    """tau refuses but is at its example limit; function was not sampled lately, so no finding
    judged it, and it gets the example: the commit's Why says that, not tau's numbers (the H100
    rerun of 2026-12-05 justified a function example with tau's refusals)."""
    from runlogs import make_workspace

    from orchestrator.agents.base import SessionContext

    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    make_workspace(exp / "workspace")
    for g in ("travel", "persuade", "tau", "turtle"):
        commit_knob(exp, f"env.{g}.demonstrations", 3)             # the file holds 3 a gym
    commit_knob(exp, "env.function.demonstrations", 2)
    write_run(exp / "run-001", 10, gym="tau", episodes_fn=lambda s, r: [
        refused_episode("tau", demos=3, i=i) for i in range(6)])
    (exp / "run-001" / "config.json").write_text('{"gyms": []}\n')
    ctx = SessionContext(agent="builtin", session_id="s001", exp_dir=exp, workspace=exp / "workspace",
                         run_dir=exp / "run-001", bench="usergym", experience_dir=tmp_path / "pool",
                         skill_path=Path(__file__).resolve().parents[3] / "skills/eau/SKILL.md")
    res = base.run_session(ctx)
    assert res.status == base.OK, res.reason
    assert knobs(exp)["env"]["function"]["demonstrations"] == 3
    assert knobs(exp)["env"]["tau"]["demonstrations"] == 3
    # function's example is one gym's change, judged on its own refusals; tau's identification
    # example may follow in the same session, as another gym's
    msgs = [gitops.message(exp / "workspace", sha) for sha in res.commits]
    msg = next(m for m in msgs if "Show one more worked example to function (2 -> 3)" in m)
    why = msg.split("Why:", 1)[1].split("Expect:", 1)[0]
    assert "Expect: invalid/function falls" in msg
    assert "No finding judged the refusals of function" in why
    assert "tau agent turns" not in why


def test_findings_without_a_remedy_are_named_not_nothing_to_change(exp):
    """Success zero and every episode truncated at the trainer's own turn cap, with nothing in the
    workspace left to move: the session says so and what would help, not 'nothing to change'."""
    commit_knob(exp, "reward.modules.eau_progress", {"enabled": True, "weight": 0.5})
    (exp / "workspace" / "rewards" / "eau_progress.py").write_text(
        "APPLIES_TO = ['colbench']\n\ndef turn_reward(turn):\n    return 0.0\n")
    subprocess.run(["git", "-C", str(exp / "workspace"), "-c", "user.name=p", "-c", "user.email=p@x",
                    "add", "-A"], check=True)
    subprocess.run(["git", "-C", str(exp / "workspace"), "-c", "user.name=p", "-c", "user.email=p@x",
                    "commit", "-qm", "progress on"], check=True)
    fresh_run(exp, metric_fn=lambda s, r: {"success/colbench": 0.0},
              episodes_fn=lambda s, r: [episode("colbench", deadlock=True, turns=4, first=f"q{i}")
                                        for i in range(4)])
    (exp / "run-001" / "config.json").write_text(json.dumps({"rollout": {"max_turns": 4}}))
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.commits == []
    assert "nothing to change" not in res.reason
    assert "rollout.max_turns 4" in res.reason and "--set rollout.max_turns" in res.reason


def test_no_escalation_while_the_worked_examples_are_being_measured(exp):
    """Refusals right after the demonstrations were raised come from steps before the change:
    the session waits for its measurement instead of switching on the format reward too."""
    fresh_run(exp, episodes_fn=lambda s, r: [refused_episode("colbench", i=i) for i in range(6)])
    assert base.run_session(make_ctx(exp, "builtin")).status == base.OK
    assert knobs(exp)["env"]["colbench"]["demonstrations"] == 2
    res = base.run_session(make_ctx(exp, "builtin", session="s002"))
    assert res.commits == [] and "being measured" in res.reason
    assert knobs(exp)["reward"]["modules"]["well_formed"]["enabled"] is False


def farmed_episode(i, module="elicited_fact", repeats=3):
    """One question asked `repeats + 1` times, a reward module paying every disclosure of it."""
    ep = episode("colbench", deadlock=True, turns=repeats + 1, first=f"[action] What does f{i} return?")
    for k, t in enumerate(ep["turns"]):
        t.update(agent=ep["turns"][0]["agent"], revealed_facts=["return"], repeated=k > 0,
                 new_facts=[] if k else ["return"], module_rewards={module: 0.2})
    return ep


def run_module(src, turn):
    """A reward module's turn_reward on one turn, through the sandbox the trainer uses."""
    from training import rewards

    _, _, _, worker = rewards.start_module("m", src)
    try:
        return worker.call("turn_reward", [turn])
    finally:
        worker.close()


def test_a_farmed_module_pays_first_disclosures_only_then_the_loop_gets_a_cost(exp):
    """Measured on the H200 comparison: PPO farmed elicited_fact by asking again for a disclosed
    fact. The remedy guards the module's source; the next session (the guard being measured)
    switches on the shipped repeat cost for the loop that remains."""
    ws = exp / "workspace"
    before = (ws / "rewards" / "elicited_fact.py").read_text()
    fresh_run(exp, episodes_fn=lambda s, r: [farmed_episode(i) for i in range(4)])
    res = base.run_session(make_ctx(exp, "builtin"))
    assert res.status == base.OK
    msg = last_msg(exp)
    assert "Pay elicited_fact for first disclosures only" in msg and "Expect: episode/repeat_rate falls" in msg
    src = (ws / "rewards" / "elicited_fact.py").read_text()
    assert src.startswith(before.rstrip()) and "Guarded by the built-in meta-agent" in src
    asked = {"asked_question": True, "revealed_facts": ["a", "b"], "leaked_facts": []}
    assert run_module(src, {**asked, "new_facts": ["a", "b"]}).value == 0.4      # first time: paid
    assert run_module(src, {**asked, "new_facts": ["b"]}).value == 0.2            # "a" again: not
    assert run_module(src, {**asked, "new_facts": ["a"], "repeated": True}).value == 0.0
    res = base.run_session(make_ctx(exp, "builtin", session="s002"))
    assert res.status == base.OK and knobs(exp)["reward"]["modules"]["no_repeat"]["enabled"] is True
    assert "Expect: episode/repeat_rate falls" in last_msg(exp)
    assert run_module((ws / "rewards" / "no_repeat.py").read_text(), {"repeated": True}).value == -0.1


def test_a_guard_that_harmed_goes_back_with_its_commit(exp):
    ws = exp / "workspace"
    before = (ws / "rewards" / "elicited_fact.py").read_text()
    fresh_run(exp, episodes_fn=lambda s, r: [farmed_episode(i) for i in range(4)])
    base.run_session(make_ctx(exp, "builtin"))
    sha = subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    # after the guard, repeats rose: harm on the metric its Expect line named
    fresh_run(exp, 30, metric_fn=lambda s, r: {"episode/repeat_rate": (0.3 if s < 15 else 0.8) + r.gauss(0, 0.01)})
    add_event(exp / "run-001", event="applied", commit=sha, step=15)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", ws)] == ["harmed"]
    res = base.run_session(make_ctx(exp, "builtin", session="s002"))
    assert res.status == base.OK and f"Reverts: {sha}" in last_msg(exp)
    assert (ws / "rewards" / "elicited_fact.py").read_text() == before


def test_deadlock_never_raises_max_steps_past_the_runs_turn_cap(exp):
    """max_steps 10 -> 13 under a rollout.max_turns of 11 would change nothing (the gate refuses
    it): with min_questions at 0 already, the session names the finding instead."""
    commit_knob(exp, "env.colbench.min_questions", 0)
    fresh_run(exp, episodes_fn=lambda s, r: [episode("colbench", deadlock=True, first=f"q{i}") for i in range(8)])
    (exp / "run-001" / "config.json").write_text(json.dumps({"rollout": {"max_turns": 11}}))
    base.run_session(make_ctx(exp, "builtin"))
    assert knobs(exp)["env"]["colbench"]["max_steps"] == 10


def test_the_generic_skill_acts_only_on_what_the_curves_show(exp):
    """--skill generic (paper table 4): no EAU skill, so a deadlock (a diagnosis of the skill)
    is not acted on, while a collapsing entropy (read from the curves) still is."""
    generic = Path(__file__).resolve().parents[3] / "skills" / "generic" / "SKILL.md"
    fresh_run(exp, episodes_fn=lambda s, r: [episode("colbench", deadlock=True, first=f"q{i}") for i in range(8)])
    res = base.run_session(make_ctx(exp, "builtin", skill_path=generic))
    assert res.status == base.NO_CHANGE and res.commits == []
    assert knobs(exp)["env"]["colbench"]["min_questions"] == 1
    fresh_run(exp, 30, metric_fn=lambda s, r: {"actor/entropy": 1.0 if s <= 10 else 0.2})
    res = base.run_session(make_ctx(exp, "builtin", session="s002", skill_path=generic))
    assert knobs(exp)["agent"]["entropy_coeff"] == 0.005
