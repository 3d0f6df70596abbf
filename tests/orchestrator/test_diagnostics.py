"""Diagnostics over synthetic run folders: each failure mode of the paper's record is found from the
trainer's own file formats, and a healthy run yields no findings."""
import json
import math
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runlogs import ROOT, episode, write_run  # noqa: E402

from orchestrator import diagnostics, progress_findings  # noqa: E402


def kinds(run):
    return {(f.kind, f.gym) for f in diagnostics.diagnose(run)}


def _disclosing(ep):
    """The episode's second turn got a fact disclosed: its answer came after learning something."""
    ep["turns"][1].update(revealed_facts=["f1"], new_facts=["f1"], user="It returns a list.")
    return ep


def test_healthy_run_has_no_findings(tmp_path):
    run = write_run(tmp_path / "run-001", 30, episodes_fn=lambda s, r: [
        _disclosing(episode("colbench", first=f"[action] hello {i} {s}", task=f"t{i}")) for i in range(8)])
    assert diagnostics.diagnose(run) == []


def test_deadlock_found_from_truncated_unanswered_episodes(tmp_path):
    run = write_run(tmp_path / "run-001", 20, episodes_fn=lambda s, r: [
        episode("colbench", deadlock=i < 5, first=f"[action] q{i}", task=f"t{i}") for i in range(10)])
    found = [f for f in diagnostics.diagnose(run) if f.kind == "deadlock"]
    assert found and found[0].gym == "colbench" and found[0].evidence["frac"] == 0.5


def test_leak_found_with_the_leaking_fact_kind(tmp_path):
    run = write_run(tmp_path / "run-001", 20, episodes_fn=lambda s, r: [
        episode("colbench", leak=True, first=f"[action] q{i}") for i in range(6)])
    leak = [f for f in diagnostics.diagnose(run) if f.kind == "leak"][0]
    assert leak.evidence["kinds"] == {"return": 36}  # 3 newest files x 6 episodes x 2 leaky turns
    assert leak.evidence["rate"] == 0.5


def _with_searches(ep, table: str):
    """Each user turn followed by a search the environment answers itself (no user reply)."""
    turns = []
    for t in ep["turns"]:
        turns += [{**t, "user_replied": True},
                  {**t, "agent": "[search] hotel", "user": table, "revealed_facts": [],
                   "leaked_facts": [], "asked_question": False, "rule_id": None,
                   "user_replied": False}]
    return {**ep, "turns": turns}


def test_user_findings_read_the_users_replies_not_the_environments_tables(tmp_path):
    """A policy that learns to search sees longer observations (a search's table), which are no
    user replies: they neither make "replies grew" nor dilute the share of replies that leak."""
    grow = lambda s, r: [_with_searches(episode("travel", leak=True, first=f"[action] q{i}"),
                                        "H1 | Vista | $318\n" * (1 if s < 20 else 8))
                         for i in range(6)]
    run = write_run(tmp_path / "run-001", 20, gym="travel", episodes_fn=grow)
    found = {f.kind: f for f in diagnostics.diagnose(run) if f.gym == "travel"}
    assert "reply_growth" not in found
    assert found["leak"].evidence["rate"] == 0.5 and found["leak"].evidence["turns"] == 72

    def talkative(s, r):      # the user's own replies grow: still found
        eps = [episode("travel", first=f"[action] q{i}") for i in range(6)]
        for ep in eps:
            for t in ep["turns"]:
                t["user"] = "Hmm." if s < 20 else "Hmm. " + "By the way, I also like pools. " * 4
        return [_with_searches(ep, "H1 | Vista | $318") for ep in eps]
    run = write_run(tmp_path / "run-002", 20, gym="travel", episodes_fn=talkative)
    assert ("reply_growth", "travel") in kinds(run)


def test_entropy_collapse_low_success_and_nan(tmp_path):
    run = write_run(tmp_path / "run-001", 30, metric_fn=lambda s, r: {
        "actor/entropy": 1.0 if s <= 10 else 0.1, "success/colbench": 0.0})
    assert {("entropy_collapse", None), ("low_success", "colbench")} <= kinds(run)
    write_run(run, 1, start=31, metric_fn=lambda s, r: {"actor/pg_loss": float("nan")})
    found = diagnostics.diagnose(run)
    assert found[0].kind == "nan" and found[0].irreversible
    assert found[0].evidence["first_step"] == {"actor/pg_loss": 31}


def test_high_success_and_template_collapse(tmp_path):
    run = write_run(tmp_path / "run-001", 20, metric_fn=lambda s, r: {"success/colbench": 0.9},
                    episodes_fn=lambda s, r: [episode("colbench", success=True) for _ in range(10)])
    assert {("high_success", "colbench"), ("template_collapse", None)} <= kinds(run)


def test_half_written_line_is_skipped(tmp_path):
    run = write_run(tmp_path / "run-001", 3)
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write('{"step": 4, "reward/me')
    assert [r["step"] for r in diagnostics.read_metrics(run)] == [1, 2, 3]


def test_knob_table_has_schema_limits_and_current_values(tmp_path):
    rows = {r["knob"]: r for r in diagnostics.knob_table(ROOT / "workspace", gyms=["colbench"])}
    ent = rows["agent.entropy_coeff"]
    assert ent["x-max-delta"] == 0.004 and ent["maximum"] == 0.05
    assert rows["env.colbench.max_steps"]["x-harder"] == "down"
    assert "env.travel.max_steps" not in rows
    knobs = json.loads((ROOT / "workspace" / "knobs.json").read_text())
    assert rows["env.colbench.max_steps"]["value"] == knobs["env"]["colbench"]["max_steps"]


def test_summary_reports_trends_and_samples(tmp_path):
    run = write_run(tmp_path / "run-001", 20, metric_fn=lambda s, r: {"reward/mean": s / 20,
                                                                     "took/colbench/submit": 0.25},
                    episodes_fn=lambda s, r: [episode("colbench", task=f"t{i}", first=f"a{i}")
                                              for i in range(4)])
    summary = diagnostics.summarize(run, window=5)
    assert summary["steps"] == 20
    # the share of episodes taking a needed step, which a missing step's remedy is judged by
    assert summary["trends"]["took/colbench/submit"]["latest"] == 0.25
    assert summary["trends"]["reward/mean"]["first"] < summary["trends"]["reward/mean"]["last"]
    assert len(summary["sample_failures"]) == 2 and math.isclose(summary["trends"]["reward/mean"]["latest"], 1.0)


def test_skill_scripts_print_what_the_builtin_agent_sees(tmp_path):
    import subprocess
    run = write_run(tmp_path / "run-001", 20, episodes_fn=lambda s, r: [
        episode("colbench", deadlock=True, first=f"q{i}") for i in range(4)])
    scripts = ROOT / "skills" / "eau" / "scripts"
    out = subprocess.run([sys.executable, str(scripts / "diagnose.py"), str(run)], capture_output=True,
                         text=True, check=True, cwd=tmp_path).stdout
    assert [f["kind"] for f in json.loads(out)] == [f.kind for f in diagnostics.diagnose(run)] == ["deadlock"]
    out = subprocess.run([sys.executable, str(scripts / "knobs.py"), str(ROOT / "workspace"), "--json",
                          "--gym", "colbench"], capture_output=True, text=True, check=True).stdout
    assert {r["knob"] for r in json.loads(out)} >= {"env.colbench.min_questions", "agent.entropy_coeff"}
    out = subprocess.run([sys.executable, str(scripts / "summarize.py"), str(run)], capture_output=True,
                         text=True, check=True).stdout
    assert json.loads(out)["steps"] == 20


def test_skill_file_has_frontmatter_and_names_the_gate_rules():
    text = (ROOT / "skills" / "eau" / "SKILL.md").read_text()
    head = text.split("---")[1]
    assert "name: eau" in head and "description:" in head
    for needle in ("Why:", "Expect:", "x-max-delta", "0.80", "control.json", "experience", "eval/"):
        assert needle in text


def test_deadlock_at_the_trainers_turn_cap_is_marked(tmp_path):
    run = write_run(tmp_path / "run-001", 10, episodes_fn=lambda s, r: [
        episode("colbench", deadlock=True, turns=3, first=f"q{i}") for i in range(4)])
    (run / "config.json").write_text(json.dumps({"rollout": {"max_turns": 3}}))
    assert diagnostics.diagnose(run)[0].evidence["at_rollout_cap"] is True
    (run / "config.json").write_text(json.dumps({"rollout": {"max_turns": 16}}))
    assert diagnostics.diagnose(run)[0].evidence["at_rollout_cap"] is False


def test_success_mean_is_not_a_gym_and_gyms_come_from_every_step(tmp_path):
    run = write_run(tmp_path / "run-001", 12, gym="travel",
                    metric_fn=lambda s, r: {"success/mean": 0.0, "success/travel": 0.0}
                    if s < 12 else {"success/mean": 0.0, "success/tau": 0.0})
    assert diagnostics.metric_gyms(diagnostics.read_metrics(run)) == ["tau", "travel"]
    assert {f.gym for f in diagnostics.diagnose(run) if f.kind == "low_success"} == {"travel"}
    short = write_run(tmp_path / "run-002", 4, gym="travel",
                      metric_fn=lambda s, r: {"success/mean": 0.0, "success/travel": 0.0})
    found = [f for f in diagnostics.diagnose(short, window=4) if f.kind == "low_success"]
    assert [f.gym for f in found] == ["travel"]
    sparse = write_run(tmp_path / "run-003", 4, gym="travel", metric_fn=lambda s, r: {
        "success/mean": 0.0, "success/travel": 0.0} if s == 1 else {"success/mean": 0.0, "success/tau": 0.0})
    found = [f for f in diagnostics.diagnose(sparse, window=4) if f.kind == "low_success"]
    assert [(f.gym, f.evidence["mean"]) for f in found] == [(None, 0.0)]   # the all-gym mean speaks


def _farmed(gym, repeats, paid_on_repeat=0.2, first_pay=0.2, marked=True):
    """An episode asking one question `repeats + 1` times; the module pays each disclosure."""
    turns = []
    for i in range(repeats + 1):
        t = {"turn": i + 1, "agent": "[action] What does it return?", "user": "A list.",
             "revealed_facts": ["return"], "leaked_facts": [], "asked_question": True,
             "answered": False, "module_rewards": {"elicited_fact": paid_on_repeat if i else first_pay}}
        if marked:
            t["repeated"] = i > 0
        turns.append(t)
    return {"gym": gym, "task_id": "t", "turns": turns, "success": False, "truncated": True}


def test_a_module_paid_for_repeated_turns_is_a_reward_hack_and_the_loop_is_named():
    # 4 episodes of 1 question + 3 repeats: 75% of turns repeat, 75% of the credit on them
    eps = [_farmed("travel", 3) for _ in range(4)]
    hacks = progress_findings.find_farmed_credit(eps)
    assert [(f.kind, f.evidence["module"], f.evidence["share"], f.evidence["gyms"]) for f in hacks] == \
        [("reward_hack", "elicited_fact", 0.75, ["travel"])]
    loops = diagnostics.find_loops(eps)
    assert [(f.kind, f.gym, f.evidence["rate"]) for f in loops] == [("loop", "travel", 0.75)]
    # trajectories written before the rollout marked repeats are judged from the text alike
    assert progress_findings.find_farmed_credit([_farmed("travel", 3, marked=False) for _ in range(4)])[0] \
        .evidence["share"] == 0.75


def test_a_module_paying_first_disclosures_only_is_not_a_hack():
    # the same looping episodes, but the module pays the first disclosure alone (new_facts)
    eps = [_farmed("travel", 3, paid_on_repeat=0.0) for _ in range(4)]
    assert progress_findings.find_farmed_credit(eps) == []
    # the untrained SmolLM2's level of repeats (18-48% per gym) is not a loop: 1 repeat in 3 turns
    assert diagnostics.find_loops([_farmed("travel", 1) | {"turns": _farmed("travel", 1)["turns"] + [
        {"agent": "[answer] H1", "revealed_facts": [], "repeated": False}]} for _ in range(4)]) == []


def test_diagnose_puts_a_farmed_reward_before_the_deadlock_it_causes(tmp_path):
    run = write_run(tmp_path / "run", 10, episodes_fn=lambda s, r: [_farmed("colbench", 3) for _ in range(4)])
    kinds = [f.kind for f in diagnostics.diagnose(run, window=5)]
    assert kinds.index("reward_hack") < kinds.index("loop") < kinds.index("deadlock")


def test_rollouts_of_weights_older_than_the_last_update_are_found(tmp_path):
    """The GPU engine's weight copy took nothing after updates (the H200 runs up to 2026-12-06):
    found from the trainer's own metrics; a copy taken after every update, or a CPU run that logs
    no copy, gives nothing."""
    def run_with(copied):
        return write_run(tmp_path / f"run-{copied}", 12, metric_fn=lambda s, r: {
            "actor/updates": 1, **({} if copied is None else {"rollout/weights_copied": 1 if s == 1 else copied})})
    stale = [f for f in diagnostics.diagnose(run_with(0), window=5) if f.kind == "stale_rollouts"]
    assert len(stale) == 1 and stale[0].gym is None
    assert stale[0].evidence["steps"] == [8, 9, 10, 11, 12]
    assert "At 5 of 5 recent steps" in stale[0].message
    for copied in (1, None):
        assert not [f for f in diagnostics.diagnose(run_with(copied), window=5) if f.kind == "stale_rollouts"]


def _asked(gym, rule, agent="[action] Do you need parking at the hotel?",
           user="I'm not sure; could you ask about something more specific?"):
    return {"turn": 1, "agent": agent, "user": user, "reward": 0.0, "revealed_facts": [],
            "leaked_facts": [], "asked_question": True, "answered": False, "rule_id": rule,
            "tool_calls": [], "user_replied": True}


def test_questions_the_users_catch_all_rule_answers_are_found_per_gym(tmp_path):
    """A gym whose questions mostly get the user's catch-all reply (a rule for every gym that
    discloses nothing, whatever was asked) is found, naming the rule; a guessing game's "No."
    (a rule of some gyms, which answers what was asked) is not; a run without a snapshot of its
    workspace's rules says nothing."""
    def eps(s, r):
        travel = [{"gym": "travel", "task_id": f"t{i}", "user_arm": "symbolic", "score": 0.0,
                   "success": False, "truncated": True,
                   "turns": [_asked("travel", "unknown")] * 4 + [_asked("travel", "answer-matched")]}
                  for i in range(3)]
        turtle = [{"gym": "turtle", "task_id": f"k{i}", "user_arm": "symbolic", "score": 0.0,
                   "success": False, "truncated": True,
                   "turns": [_asked("turtle", "yesno-no", "[action] Did he drown?", "No.")] * 5}
                  for i in range(3)]
        return travel + turtle
    run = write_run(tmp_path / "run-001", 20, gym="travel", episodes_fn=eps)
    assert not [f for f in diagnostics.diagnose(run) if f.kind == "uninformative_user"]
    snap = run / "snapshots" / "abc123" / "users" / "usergym"
    snap.mkdir(parents=True)
    shutil.copy(ROOT / "workspace" / "users" / "usergym" / "rules.json", snap / "rules.json")
    assert diagnostics.catchall_rules(run) == {"unknown", "fallback"}
    found = [f for f in diagnostics.diagnose(run) if f.kind == "uninformative_user"]
    assert [f.gym for f in found] == ["travel"]
    assert found[0].evidence["rules"] == {"unknown": 36} and found[0].evidence["questions"] == 45
    assert found[0].message.startswith("36 of 45 recent travel questions (80%) got the user's "
                                       "catch-all reply")
    assert '"[action] Do you need parking at the hotel?" -> "I\'m not sure;' in found[0].message
