"""Findings about episodes that make no progress, each with counts and two quoted turns, on
hand-written trajectories (tests/fakes/episodes.py): a needed step never taken, answers before
any disclosure, restated prompts, reward modules that never pay in a gym, and farmed credit."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from episodes import (colbench_chatting, ep, farmed_travel, function_bad_probes, function_guess,  # noqa: E402
                      honest_travel, retail_read_first, retail_write_first, tau_identified,
                      tau_unidentified, tau_wrong_tool, travel_blind, travel_searching, turn,
                      turtle_restating, write_steps)

from orchestrator import diagnostics  # noqa: E402
from orchestrator import progress_findings as P  # noqa: E402


def by_kind(findings, kind):
    return [f for f in findings if f.kind == kind]


def test_a_needed_step_never_taken_is_found_per_gym_with_counts_and_two_quotes():
    eps = [travel_blind("H5"), travel_blind("H2"), travel_blind("H7"), travel_searching(),
           tau_unidentified(), tau_unidentified(), colbench_chatting(0), colbench_chatting(1),
           retail_write_first(), retail_write_first()]
    found = {(f.gym, f.evidence["step"]): f for f in P.find_missing_steps(eps)}
    assert set(found) == {("travel", "search"), ("tau", "identify"), ("tau", "lookup"),
                          ("colbench", "submit"), ("retail", "read")}
    travel = found[("travel", "search")]
    assert (travel.evidence["without"], travel.evidence["episodes"], travel.evidence["took_at_all"]) == (3, 4, 1)
    # the trainer's metric of the same count (1 of 4), which a remedy's Expect names
    assert travel.evidence["metric"] == "took/travel/search"
    # the turns quoted are the blind answers themselves
    assert travel.evidence["examples"] == ['"[answer] H5"', '"[answer] H2"']
    assert travel.message.startswith("3 of 4 recent travel episodes never used [search] before answering")
    assert found[("colbench", "submit")].evidence["without"] == 2


def test_a_gym_that_takes_its_steps_or_has_one_episode_is_not_named():
    eps = [tau_identified(), tau_identified(), travel_searching(), travel_searching(),
           retail_read_first(), retail_read_first(), colbench_chatting()]      # one colbench episode
    assert P.find_missing_steps(eps) == []


def test_calls_the_environment_rejects_for_their_arguments_are_found_per_gym():
    """Right tag, wrong arguments: refused turns do not count them. Function's are marked by the
    gym; tau's, in records written before the mark, by their tool call's error."""
    eps = [function_bad_probes(), function_bad_probes(), tau_wrong_tool(), tau_wrong_tool(),
           travel_searching(), travel_searching()]
    found = {f.gym: f for f in P.find_rejected_calls(eps)}
    assert set(found) == {"function", "tau"}
    fn = found["function"]
    assert (fn.evidence["rejected"], fn.evidence["turns"], fn.evidence["step"]) == (4, 8, "probe")
    assert fn.evidence["metric"] == "rejected/function"
    assert fn.message.startswith(
        '4 of 8 recent function agent turns (50%) were calls the environment rejected for their '
        'arguments, most on the way to a probe ([action] and four integers); e.g. "[action] 7 9" '
        '-> "A probe needs exactly four integers." and "[action] 8 9" -> ')
    assert (found["tau"].evidence["step"], found["tau"].evidence["rejected"]) == ("identify", 2)
    # one rejected probe among five well-formed ones is under the share that makes a finding
    few = ep("function", [turn("[action] 7 9", "A probe needs exactly four integers.", rejected="probe")]
             + [turn(f"[action] {i} 2 3 4", "Output: 1") for i in range(5)])
    assert P.find_rejected_calls([few, few]) == []
    # a tool call's error marks a rejected call in TauGym's older records only: tau2's failed
    # calls are the domain's answers (an order that cannot be cancelled), read by other findings
    failed = {"name": "cancel_pending_order", "arguments": {}, "result": None, "error": "not pending"}
    retail = ep("retail", [turn('<tool_call>{"name": "cancel_pending_order"}</tool_call>', "Error: not pending",
                                tool_calls=[failed]) for _ in range(3)])
    assert P.find_rejected_calls([retail, retail]) == []


def test_the_trainer_logs_the_share_of_turns_rejected_for_their_arguments():
    from training.trainer import episode_metrics
    fake = function_bad_probes()
    rec = {"gym": "function", "return": 0.0, "success": False, "truncated": True, "score": 0.0,
           "user_arm": "symbolic", "turns": fake["turns"]}
    m = episode_metrics([rec])
    assert (m["rejected/function"], m["episode/rejected_rate"], m["invalid/function"]) == (0.5, 0.5, 0.0)


def test_answers_before_any_disclosure_are_guesses():
    eps = [function_guess("[answer] 7 2 0 10"), function_guess("[answer] 1 1 1 1 11"),
           function_guess("[answer] 3")]
    f = P.find_early_answers(eps)
    assert [(x.gym, x.evidence["early"], x.evidence["answering"]) for x in f] == [("function", 3, 3)]
    assert f[0].evidence["examples"] == ['"[answer] 7 2 0 10"', '"[answer] 1 1 1 1 11"']
    # travel asked first and was told a preference: its (blind) answers came after a disclosure
    assert P.find_early_answers([travel_blind(), travel_blind()]) == []


def test_turns_that_restate_the_prompt_are_found_and_questions_of_its_own_are_not():
    eps = [turtle_restating(), turtle_restating()]
    f = P.find_restated_prompts(eps)
    assert [(x.gym, x.evidence["restated"], x.evidence["turns"]) for x in f] == [("turtle", 4, 6)]
    assert f[0].evidence["examples"][0].startswith('"[action] Two bodies lie on the floor')
    assert not P.restates("[action] Were they fish?", eps[0]["prompt"])
    # a search naming the prompt's aspect is what a search is for
    assert P.find_restated_prompts([travel_searching(), travel_searching()]) == []


def test_a_module_that_never_pays_in_a_gym_says_what_it_waits_for():
    src = "APPLIES_TO = ['function']\n\ndef turn_reward(turn):\n    return 0.1 * len(turn.get('new_facts') or [])\n"
    eps = [function_guess() for _ in range(3)] + [ep("function", [turn("[action] 1 2 3 4", "Output: 3"),
                                                                   turn("[search] test", "Test case: 1 1 1 1")])]
    for e in eps:
        for t in e["turns"]:
            t["module_rewards"] = {"eau_progress": 0.0}
    assert P.find_idle_modules(eps[:2], {"eau_progress": src}) == []     # 2 turns say nothing yet
    idle = P.find_idle_modules(eps + eps, {"eau_progress": src})
    assert [(f.gym, f.evidence["module"], f.evidence["turns"]) for f in idle] == [("function", "eau_progress", 10)]
    assert "no function turn had new_facts" in idle[0].message
    # a cost that charged somewhere is not idle where nothing repeated
    cost = [ep("travel", [turn("[action] a?", module_rewards={"no_repeat": 0.0}) for _ in range(4)]),
            ep("travel", [turn("[action] b?", module_rewards={"no_repeat": -0.1}) for _ in range(4)])]
    assert P.find_idle_modules(cost) == []


def test_credit_farmed_by_repeats_shows_from_the_second_step():
    """The CPU demo's step 7: 0.4 of the step's 0.8 paid to one question asked three times. Two
    steps of trajectories, one farmed episode among honest ones, are enough to flag it."""
    eps = [honest_travel(1), honest_travel(1), honest_travel(2), farmed_travel(2)]
    hack = P.find_farmed_credit(eps)
    assert len(hack) == 1 and hack[0].kind == "reward_hack" and hack[0].gym == "travel"
    ev = hack[0].evidence
    assert ev["module"] == "elicited_fact" and ev["repeated_paid_turns"] == 2 and ev["farmed_steps"] == [2]
    assert ev["steps"] == {1: 0.0, 2: 0.4}
    assert "40% at step 2" in hack[0].message and '"[action] What do you need from the hotel?" (0.2)' in hack[0].message
    assert P.find_farmed_credit([honest_travel(1), honest_travel(2)]) == []


def test_diagnose_reads_the_progress_findings_from_a_run_and_its_snapshot(tmp_path):
    run = tmp_path / "run-001"
    (run / "snapshots" / "abc" / "rewards").mkdir(parents=True)
    (run / "snapshots" / "abc" / "rewards" / "elicited_fact.py").write_text(
        "APPLIES_TO = ['travel']\n\ndef turn_reward(turn):\n    return 0.2 * len(turn.get('revealed_facts') or [])\n")
    write_steps(run, {1: [travel_blind(), honest_travel(1)], 2: [travel_blind(), farmed_travel(2)]})
    (run / "metrics.jsonl").write_text("".join(json.dumps({"step": s, "reward/mean": 0.1}) + "\n" for s in (1, 2)))
    kinds = [(f.kind, f.gym) for f in diagnostics.diagnose(run, window=2)]
    assert kinds.index(("reward_hack", "travel")) < kinds.index(("missing_step", "travel"))


def test_a_leaking_user_comes_before_the_steps_the_policy_misses(tmp_path):
    """Hidden facts disclosed unasked corrupt every signal: the user is repaired first."""
    leaky = [colbench_chatting(i) for i in range(4)]
    for e in leaky:
        for t in e["turns"]:
            t.update(leaked_facts=["f1"], revealed_facts=["f1"], rule_id="blurt")
    run = tmp_path / "run-001"
    write_steps(run, {1: leaky})
    kinds = [(f.kind, f.gym) for f in diagnostics.diagnose(run, window=2)]
    assert kinds.index(("leak", "colbench")) < kinds.index(("missing_step", "colbench"))
