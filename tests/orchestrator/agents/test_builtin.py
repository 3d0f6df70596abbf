"""The built-in agent: each diagnosed failure mode becomes the paper's intervention, committed
under the session's identity with Why/Expect and trailers, within the knobs' limits."""
import json
import subprocess
import sys
from pathlib import Path

from conftest import make_ctx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from runlogs import add_event, episode, write_run  # noqa: E402

from orchestrator import effects, experience  # noqa: E402
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
    # min_questions is now being measured (busy): the next session moves max_steps instead
    res = base.run_session(make_ctx(exp, "builtin", session="s002"))
    assert res.status == base.OK and knobs(exp)["env"]["colbench"]["max_steps"] == 13  # 10 + (60 - 3) / 20


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
    fresh_run(exp, metric_fn=lambda s, r: {"success/colbench": 0.0})
    base.run_session(make_ctx(exp, "builtin"))
    assert knobs(exp)["reward"]["modules"]["eau_progress"] == {"enabled": True, "weight": 0.5}
    src = (exp / "workspace" / "rewards" / "eau_progress.py").read_text()
    ns: dict = {}
    exec(src, ns)
    assert ns["APPLIES_TO"] == ["colbench"]
    assert ns["turn_reward"]({"asked_question": True, "revealed_facts": ["a"]}) == 0.2


def test_high_success_makes_the_gym_harder(exp):
    fresh_run(exp, metric_fn=lambda s, r: {"success/colbench": 0.9})
    base.run_session(make_ctx(exp, "builtin"))
    k = knobs(exp)["env"]["colbench"]
    # one step along x-harder, max_steps left for last (the paper's 10 -> 6 harmed, A.2)
    assert (k["min_questions"], k["max_steps"], k["human_response_char_limit"]) == (2, 10, 400)


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
    base.run_session(make_ctx(exp, "builtin"))
    k = knobs(exp)
    assert k["env"]["colbench"]["min_questions"] == 1 and k["env"]["colbench"]["max_steps"] == 10
    assert k["reward"]["modules"]["eau_progress"]["enabled"]      # the next finding: success near zero
