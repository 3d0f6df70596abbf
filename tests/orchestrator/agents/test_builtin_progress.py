"""The built-in agent's remedies for episodes that make no progress, on hand-written trajectories:
a worked example that shows the missing step, a reward for it paid at its first occurrence,
easier disclosure while a gym is stuck at the turn cap (and harder again past 0.80), taking back
what had no effect; and nothing committed that its own replay shows cannot work."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from episodes import (ep, farmed_travel, function_bad_probes, function_guess, honest_travel,  # noqa: E402
                      tau_calling, tau_unidentified, travel_blind, travel_searching, turn, write_steps)
from runlogs import ROOT, add_event, make_workspace, write_run  # noqa: E402

from orchestrator import effects, gitops  # noqa: E402
from orchestrator.agents import base  # noqa: E402
from orchestrator.agents.base import SessionContext  # noqa: E402


def usergym_exp(tmp_path, monkeypatch, by_step, metrics=None, steps=6, max_turns=None):
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    make_workspace(exp / "workspace")
    run = write_run(exp / "run-001", steps, gym="travel", metric_fn=metrics)
    write_steps(run, by_step)
    config = {"gyms": []} | ({"rollout": {"max_turns": max_turns}} if max_turns else {})
    (run / "config.json").write_text(json.dumps(config))
    return exp


def ctx(exp, session="s001"):
    return SessionContext(agent="builtin", session_id=session, exp_dir=exp, workspace=exp / "workspace",
                          run_dir=exp / "run-001", bench="usergym", experience_dir=exp.parent / "pool",
                          skill_path=ROOT / "skills" / "eau" / "SKILL.md", window=2)


def knobs(exp):
    return json.loads((exp / "workspace" / "knobs.json").read_text())


def last_msg(exp):
    return gitops.message(exp / "workspace", "HEAD")


def messages(exp, n):
    """The workspace's last `n` commit messages, newest first."""
    return [gitops.message(exp / "workspace", f"HEAD~{i}") for i in range(n)]


def record(res):
    return Path(res.transcript).read_text()


def test_tau_is_shown_a_worked_example_that_identifies_the_user_first(tmp_path, monkeypatch):
    """No shipped TauGym example calls find_user_id_by_name_zip: an invented one that does is put
    first among the examples, so the one example shown takes the missing step."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    demos = json.loads((exp / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"]
    assert demos[0]["id"] == "eau-tau-identify-then-lookup" and len(demos) == 4
    assert any("find_user_id_by_name_zip" in m["content"] for m in demos[0]["messages"])
    assert knobs(exp)["env"]["tau"]["demonstrations"] == 1         # one shown: now this one
    msg = last_msg(exp)
    assert msg.startswith("Show tau a worked example that uses find_user_id_by_name_zip first")
    assert "6 of 6 recent tau episodes never used find_user_id_by_name_zip" in msg
    # judged by the share of tau episodes that identify the user, which the example changes
    # first (score/tau of a small policy stays 0 for many steps), then by the score
    assert "Expect: took/tau/identify rises, then score/tau." in msg
    assert effects.target_of(msg, {}, ["tau", "travel"]) == ("took/tau/identify", "up")


def step_example_shown(exp):
    """The workspace as the agent leaves it after tau's step example (it first, one shown),
    committed, and the trainer's snapshot of that tree, from which diagnosis reads the examples
    the policy is shown."""
    import shutil

    from orchestrator.agents import remedies
    ws = exp / "workspace"
    demos_file = ws / "demonstrations" / "usergym.json"
    demos = json.loads(demos_file.read_text())
    remedies.step_example_first(demos, "tau", "identify", 1)
    demos_file.write_text(json.dumps(demos, indent=2, ensure_ascii=False) + "\n")
    k = knobs(exp)
    k["env"]["tau"]["demonstrations"] = 1
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    sha = gitops.commit_all(ws, "Show tau a worked example that uses find_user_id_by_name_zip first "
                                "(eau-tau-identify-then-lookup)\n\nWhy: a test.\nExpect: "
                                "took/tau/identify rises, then score/tau.\n", "builtin", "s000")
    subprocess.run(["git", "-C", str(ws), "update-ref", "refs/eau/live", "HEAD"], check=True)
    shutil.copytree(ws, exp / "run-001" / "snapshots" / sha, ignore=shutil.ignore_patterns(".git"))
    return sha


def test_calls_with_the_examples_customer_get_a_second_example_with_another(tmp_path, monkeypatch):
    """Told Lena Khan's name and zip code, most episodes call find_user_id_by_name_zip with the
    shown example's Ana Souza: the same exchange with another customer is shown after it, one
    more shown, judged by the share of episodes that identify the user."""
    copying = [tau_calling("Ana", "Souza", "30301"), tau_calling("Ana", "Souza", "30301")]
    exp = usergym_exp(tmp_path, monkeypatch, {4: copying, 5: copying,
                                              6: [*copying, tau_calling("Lena", "Khan", "94402")]})
    step_example_shown(exp)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    demos = json.loads((exp / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"]
    assert [d["id"] for d in demos[:2]] == ["eau-tau-identify-then-lookup", "eau-tau-identify-then-lookup-2"]
    assert knobs(exp)["env"]["tau"]["demonstrations"] == 2
    msg = last_msg(exp)
    assert msg.startswith("Show tau a second worked example with another customer "
                          "(eau-tau-identify-then-lookup-2, 1 -> 2)"), msg
    assert "6 of 7 recent tau episodes that called a tool called it with the shown worked " \
           "example's own values" in msg and "'Souza'" in msg
    assert "Expect: took/tau/identify rises, then score/tau." in msg
    # the second example's customer differs in every value the first one's calls carry
    from orchestrator.agents.remedies import SECOND_EXAMPLES, STEP_EXAMPLES
    from orchestrator.progress_findings import call_values
    first, second = (call_values([x[("tau", "identify")]]) for x in (STEP_EXAMPLES, SECOND_EXAMPLES))
    assert first and second and not set(first) & set(second)


def test_an_example_whose_customer_is_copied_is_not_taken_back_as_no_effect(tmp_path, monkeypatch):
    """The H100 run of seed 2 (2026-12-07) took tau's step example back as "no effect" (0 -> 0
    on took/tau/identify) while most of its calls copied the example's customer: the policy was
    following it. Such an example stays, and the second customer's goes in after it."""
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    write_run(exp / "run-001", 12, gym="tau", metric_fn=lambda s, r: {"took/tau/identify": 0.0})
    sha = step_example_shown(exp)
    copying = [tau_calling("Ana", "Souza", "30301"), tau_calling("Ana", "Souza", "30301")]
    write_steps(exp / "run-001", {10: copying, 11: copying, 12: copying})
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    labels = [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)]
    assert labels == ["inconclusive"]
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert not any(m.startswith(f"Revert {sha[:10]}") for m in messages(exp, len(res.commits)))
    assert last_msg(exp).startswith("Show tau a second worked example with another customer")
    demos = json.loads((exp / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"]
    assert [d["id"] for d in demos[:2]] == ["eau-tau-identify-then-lookup", "eau-tau-identify-then-lookup-2"]
    assert f"Revert {sha[:10]}: not committed, because the policy follows the worked example" in record(res)
    # the next session, the second example shown and its effect not yet measured, takes
    # neither example back
    res = base.run_session(ctx(exp, "s002"))
    subjects = [m.split("\n")[0] for m in messages(exp, len(res.commits))] if res.commits else []
    assert not any(m.startswith("Revert") for m in subjects), subjects
    demos = json.loads((exp / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"]
    assert [d["id"] for d in demos[:2]] == ["eau-tau-identify-then-lookup", "eau-tau-identify-then-lookup-2"]


def test_an_example_without_copies_is_taken_back_as_no_effect(tmp_path, monkeypatch):
    """The same example, its calls made with each user's own facts (or none made): "no effect"
    takes it back as before."""
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    write_run(exp / "run-001", 12, gym="tau", metric_fn=lambda s, r: {"took/tau/identify": 0.0})
    sha = step_example_shown(exp)
    write_steps(exp / "run-001", {s: [tau_unidentified(), tau_unidentified()] for s in (10, 11, 12)})
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert any(m.startswith(f"Revert {sha[:10]}: no effect on took/tau/identify")
               for m in messages(exp, len(res.commits)))


def test_calls_with_the_users_own_facts_are_not_copies(tmp_path):
    """An episode whose user is the example's customer, or that calls with what its user told,
    copies nothing; below half of the calling episodes there is no finding."""
    from orchestrator.agents import remedies
    from orchestrator.progress_findings import call_values, find_copied_examples
    shown = {"tau": call_values([remedies.STEP_EXAMPLES[("tau", "identify")]])}
    own = [tau_calling("Lena", "Khan", "94402") for _ in range(3)]
    same_customer = [tau_calling("Ana", "Souza", "30301", told=("Ana", "Souza", "30301"))] * 2
    assert find_copied_examples(own + same_customer, shown) == []
    assert find_copied_examples(own + [tau_calling("Ana", "Souza", "30301")] * 2, shown) == []
    found = find_copied_examples(own + [tau_calling("Ana", "Souza", "30301")] * 3, shown)
    assert [(f.kind, f.evidence["copied"], f.evidence["episodes"], f.evidence["step"]) for f in found] \
        == [("copied_example", 3, 6, "identify")]
    assert find_copied_examples(own + [tau_calling("Ana", "Souza", "30301")] * 3, {}) == []


def test_the_tau_example_is_what_the_symbolic_user_and_the_tools_answer(tmp_path):
    """The example asks for name and zip code at once, as the shipped example does (the policies
    trained with it asked its question word for word), and goes on to the tool call the shipped
    one never shows (the untrained SmolLM2 called find_user_id_by_name_zip in 11 of 30 tau
    episodes with it, 0 with the shipped one). In shipped
    tasks, with the user telling two facts a reply (what the stale_disclosure remedy sets), the
    question gets the reply the example shows, "[search] tools" gets the example's tool list
    exactly, and the call the example then makes with those facts finds the user."""
    import copy
    import dataclasses

    from orchestrator.agents.remedies import STEP_EXAMPLES
    from training.benches.usergym import BENCH
    from training.snapshot import Snapshot
    msgs = STEP_EXAMPLES[("tau", "identify")]["messages"]
    ask, told, search, tools, call = (m["content"] for m in msgs[1:6])
    assert "first name, last name and zip code" in ask and search == "[search] tools"
    assert call.startswith('[answer] {"name": "find_user_id_by_name_zip"')
    snap = Snapshot.from_dir(ROOT / "workspace")
    knobs_ = copy.deepcopy(snap.knobs)
    knobs_["user"]["tau"]["facts_per_reply"] = 2
    snap = dataclasses.replace(snap, knobs=knobs_)
    for task in BENCH.load_tasks("train", ["tau"])[:5]:
        env = BENCH.make_env(task, snap, seed=0)
        env.reset()
        user = task.data["user"]
        obs = env.step(ask)[0]
        assert obs == f"My name is {user['first_name']} {user['last_name']}. My zip code is {user['zip']}."
        assert told.startswith("My name is ") and " My zip code is " in told
        assert env.step(search)[0] == tools
        real = {"name": "find_user_id_by_name_zip",
                "arguments": {k: user[k] for k in ("first_name", "last_name", "zip")}}
        assert user["user_id"] in env.step("[answer] " + json.dumps(real))[0]


def _run_module(src, turn_):
    from training import rewards

    _, _, _, worker = rewards.start_module("m", src)
    try:
        return worker.call("turn_reward", [turn_]).value
    finally:
        worker.close()


def test_probes_rejected_for_their_arguments_get_one_more_example_judged_by_the_rejected_share(
        tmp_path, monkeypatch):
    """The example shown probes with four integers already, so one more that does is shown, and
    the change is judged by the share of function's turns the gym rejects."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [function_bad_probes(), function_bad_probes()]
                                              for s in (4, 5, 6)})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["env"]["function"]["demonstrations"] == 2
    msg = last_msg(exp)
    assert msg.startswith("Show function one more worked example that uses a probe ([action] and "
                          "four integers) (1 -> 2)")
    assert "12 of 24 recent function agent turns (50%) were calls the environment rejected" in msg
    assert "Expect: rejected/function falls, then score/function rises." in msg
    assert effects.target_of(msg, {}, ["function"]) == ("rejected/function", "down")


def test_a_step_some_episodes_take_is_rewarded_once_at_its_first_occurrence(tmp_path, monkeypatch):
    eps = {4: [travel_blind(), travel_blind()], 5: [travel_blind(), travel_searching()],
           6: [travel_blind(), travel_blind()]}
    exp = usergym_exp(tmp_path, monkeypatch, eps)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["reward"]["modules"]["eau_step_travel_search"] == {"enabled": True, "weight": 1.0}
    msg = last_msg(exp)
    assert msg.startswith("Add step reward eau_step_travel_search: 0.1 at a travel episode's first [search]")
    assert "Before committing: replayed on the recent trajectories, eau_step_travel_search pays " \
           "1 of 12 recent travel turns (1 of 6 episodes)" in msg
    assert "Expect: took/travel/search rises, then score/travel." in msg
    src = (exp / "workspace" / "rewards" / "eau_step_travel_search.py").read_text()
    assert _run_module(src, {"first_steps": ["search"]}) == 0.1
    assert _run_module(src, {"agent": "[search] hotel", "first_steps": []}) == 0.0   # a second search


def test_a_step_no_episode_takes_gets_no_reward_that_cannot_pay(tmp_path, monkeypatch):
    """No travel episode searched: a reward for the first search would pay nothing, so it is not
    committed (the record says why), and one more example that searches is shown instead."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [travel_blind(), travel_blind()] for s in (4, 5, 6)})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert "eau_step_travel_search" not in knobs(exp)["reward"]["modules"]
    assert "eau_step_travel_search would pay nothing in travel (0 of 12 recent travel turns" in record(res)
    assert knobs(exp)["env"]["travel"]["demonstrations"] == 2
    assert last_msg(exp).startswith("Show travel one more worked example that uses [search] (1 -> 2)")
    assert "Expect: took/travel/search rises, then score/travel." in last_msg(exp)


def test_a_progress_reward_that_could_never_pay_in_function_is_not_committed(tmp_path, monkeypatch):
    """The CPU demo's step-8 commit: eau_progress 'for function', which pays first disclosures,
    while no function turn had one. Replayed, it pays nothing there: not committed."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [function_guess(), function_guess()] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"success/function": 0.0})
    agent_commit(exp, "env.function.demonstrations", 3, "score/function rises.")   # all shown
    res = base.run_session(ctx(exp))
    assert "eau_progress" not in knobs(exp)["reward"]["modules"]
    assert "eau_progress would pay nothing in function" in record(res)


@pytest.mark.parametrize("older", [False, True])
def test_a_progress_reward_is_replayed_on_older_steps_of_its_gym_or_not_committed(tmp_path, monkeypatch, older):
    """The CPU run of 24 steps (2026-12-05): s009 added eau_progress "for function" because no
    function episode was in the newest 3 trajectory files ("had no recent function episodes to be
    replayed on"). Older steps of the gym are replayed then; with none, nothing is committed."""
    told = ep("function", [turn("[action] Which inputs matter?", "The first one.",
                                revealed_facts=["f1"], new_facts=["f1"])])
    by_step = {s: [travel_searching()] for s in (8, 9, 10)} | ({3: [told]} if older else {})
    exp = usergym_exp(tmp_path, monkeypatch, by_step, steps=10,
                      metrics=lambda s, r: {"success/function": 0.0, "success/travel": 0.5})
    agent_commit(exp, "env.function.demonstrations", 3, "score/function rises.")   # all shown
    res = base.run_session(ctx(exp))
    added = "eau_progress" in knobs(exp)["reward"]["modules"]
    assert added == older, record(res)
    if older:
        assert "Before committing: replayed on the recent trajectories, eau_progress pays 1 of 1 recent " \
               "function turns" in last_msg(exp)
    else:
        assert ("not committed, because no function episode of the last 15 steps' trajectories could "
                "be replayed to show that eau_progress would pay there") in record(res)


def asking_persuade(step):
    """PersuadeGym's first training task, asked why three times, cut at the turn cap of 3."""
    return ep("persuade", [turn("[action] Why do you believe that video games are good?"),
                           turn("[action] What else makes you believe it?"),
                           turn("[action] Why else?")], task="persuade-train-0000", step=step)


def test_disclosure_is_eased_while_success_is_zero_at_the_cap_and_made_harder_past_080(tmp_path, monkeypatch):
    exp = usergym_exp(tmp_path, monkeypatch, {s: [asking_persuade(s), asking_persuade(s)] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"success/persuade": 0.0, "score/persuade": 0.0}, max_turns=3)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["user"]["persuade"]["facts_per_reply"] == 2
    msg = last_msg(exp)
    assert msg.startswith("Ease disclosure in persuade: user.persuade.facts_per_reply 1 -> 2")
    # three "why?" turns get the three concerns either way, two of them a turn sooner at two per
    # reply: facts known after each turn, summed over 6 episodes, 1+2+3 -> 2+3+3
    assert "the facts the symbolic user has disclosed, summed over the turns, go 36 -> 48" in msg
    # past 0.80 (the gate's bar for a harder write): the worked example goes first, then the
    # eased disclosure, one step per session (each once the one before it is measured)
    with open(exp / "run-001" / "metrics.jsonl", "a") as fh:
        for s in range(7, 17):
            fh.write(json.dumps({"step": s, "success/persuade": 0.9, "score/persuade": 0.9}) + "\n")
    add_event(exp / "run-001", event="applied", commit=res.commits[0], step=7)
    effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)
    res = base.run_session(ctx(exp, "s002"))
    assert knobs(exp)["env"]["persuade"]["demonstrations"] == 0
    assert base.run_session(ctx(exp, "s003")).commits == []      # that one is measured first
    with open(exp / "run-001" / "metrics.jsonl", "a") as fh:   # success falls somewhat, as expected
        for s in range(17, 27):
            fh.write(json.dumps({"step": s, "success/persuade": 0.85, "score/persuade": 0.85}) + "\n")
    add_event(exp / "run-001", event="applied", commit=res.commits[0], step=17)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)] == ["helped"]
    base.run_session(ctx(exp, "s004"))
    assert knobs(exp)["user"]["persuade"]["facts_per_reply"] == 1
    assert last_msg(exp).startswith("Make persuade harder: user.persuade.facts_per_reply 2 -> 1")


def test_easing_disclosure_that_would_disclose_nothing_more_is_not_committed(tmp_path, monkeypatch):
    """The same stuck gym, but its turns ask nothing the user could answer ("Okay."): one more
    fact per reply changes nothing, and the record says so."""
    said = lambda s: ep("persuade", [turn("[action] Games are fun.") for _ in range(3)],  # noqa: E731
                        task="persuade-train-0000", step=s)
    exp = usergym_exp(tmp_path, monkeypatch, {s: [said(s), said(s)] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"success/persuade": 0.0}, max_turns=3)
    res = base.run_session(ctx(exp))
    assert knobs(exp)["user"]["persuade"]["facts_per_reply"] == 1
    assert "discloses no more with it than without it (0 fact-turns known either way)" in record(res)


def agent_commit(exp, dotted, value, expect):
    ws = exp / "workspace"
    k = knobs(exp)
    node = k
    *parents, leaf = dotted.split(".")
    for p in parents:
        node = node[p]
    node[leaf] = value
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    return gitops.commit_all(ws, f"Set {dotted}\n\nWhy: a test.\nExpect: {expect}\n", "builtin", "s000")


def test_a_change_measured_no_effect_is_reverted_by_a_commit_that_says_so(tmp_path, monkeypatch):
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    sha = agent_commit(exp, "user.travel.match_threshold", 0.45, "score/travel rises.")
    write_run(exp / "run-001", 12, gym="travel",
              metric_fn=lambda s, r: {"score/travel": 0.2 + r.gauss(0, 0.01)})
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)] == ["inconclusive"]
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    msg = last_msg(exp)
    assert msg.startswith(f"Revert {sha[:10]}: no effect on score/travel within 2 steps\n")
    assert f"Reverts: {sha}" in msg
    # the verdict says which window it covers: a later rise is not ruled out by it
    assert "over the 2 steps after it, within the noise floor" in msg
    assert knobs(exp)["user"]["travel"]["match_threshold"] == 0.5
    # taken back once: the next session neither reverts again nor makes the change again
    res = base.run_session(ctx(exp, "s002"))
    assert res.commits == []


def test_a_persons_change_without_effect_stays(tmp_path, monkeypatch):
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    ws = exp / "workspace"
    k = knobs(exp)
    k["user"]["travel"]["match_threshold"] = 0.45
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=p", "-c", "user.email=p@x", "commit", "-qam",
                    "Mine\n\nWhy: a test\nExpect: score/travel rises"], check=True)
    sha = gitops.head(ws)
    write_run(exp / "run-001", 12, gym="travel", metric_fn=lambda s, r: {"score/travel": 0.2 + r.gauss(0, 0.01)})
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    effects.update_effects(exp, exp / "run-001", ws, 2)
    res = base.run_session(ctx(exp))
    assert res.commits == [] and knobs(exp)["user"]["travel"]["match_threshold"] == 0.45


def test_a_second_worked_example_is_not_added_once_refusals_have_fallen(tmp_path, monkeypatch):
    """The CPU demo's step 6: the three steps pooled showed refusals, the newest had none."""
    refused = lambda: ep("travel", [turn("Sure, here is my plan", "Invalid action: start your message "  # noqa: E731
                                         "with [search], [action] or [answer].", invalid_action=True)
                                    for _ in range(3)])
    exp = usergym_exp(tmp_path, monkeypatch, {4: [refused(), refused()], 5: [refused(), refused()],
                                              6: [travel_searching(), travel_searching()]},
                      metrics=lambda s, r: {"episode/invalid_rate": 1.0 if s < 6 else 0.0})
    res = base.run_session(ctx(exp))
    assert knobs(exp)["env"]["travel"]["demonstrations"] == 1
    assert "Refusals fell to 0.00 at step 6" in record(res)


def test_a_session_waiting_on_its_worked_example_says_so_first(tmp_path, monkeypatch):
    """The CPU demo's s002: refusals still pooled from before the example was applied; the
    session line (whose first sentences are all `status` keeps) leads with why nothing is added."""
    refused = lambda: ep("travel", [turn("Sure, here is my plan", "Invalid action: start your message "  # noqa: E731
                                         "with [search], [action] or [answer].", invalid_action=True)
                                    for _ in range(3)])
    exp = usergym_exp(tmp_path, monkeypatch, {s: [refused(), refused()] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"episode/invalid_rate": 1.0})
    first = base.run_session(ctx(exp))
    assert first.commits and knobs(exp)["env"]["travel"]["demonstrations"] == 2
    second = base.run_session(ctx(exp, "s002"))
    assert second.commits == [] and knobs(exp)["env"]["travel"]["demonstrations"] == 2
    assert second.reason.startswith("left alone: The worked examples just shown to travel"), second.reason
    assert "are still being measured, so none is added meanwhile: 100% of recent travel" in second.reason


@pytest.mark.parametrize("success,taken_back", [(0.0, False), (0.9, True)])
def test_a_revert_the_gate_would_refuse_as_harder_is_not_committed(tmp_path, monkeypatch, success, taken_back):
    """The CPU run of 2026-12-05: a second worked example measured "no effect" was taken back
    (2 -> 1, harder) at two sessions running, the gate refusing it each time while success was 0.
    The session asks the gate's own knob checks first: below success 0.80 the example stays and
    the record says why; past it the revert is committed."""
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    (exp / "experiment.json").write_text(json.dumps({"bench": "usergym"}))
    before = knobs(exp)["env"]["travel"]["demonstrations"]
    sha = agent_commit(exp, "env.travel.demonstrations", before + 1, "episode/invalid_rate falls.")
    write_run(exp / "run-001", 12, gym="travel",
              metric_fn=lambda s, r: {"episode/invalid_rate": 0.1 + r.gauss(0, 0.01),
                                      "success/travel": success})
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)] == ["inconclusive"]
    res = base.run_session(ctx(exp))
    if taken_back:
        assert knobs(exp)["env"]["travel"]["demonstrations"] == before and f"Reverts: {sha}" in last_msg(exp)
    else:
        assert knobs(exp)["env"]["travel"]["demonstrations"] == before + 1
        assert all("Reverts:" not in gitops.message(exp / "workspace", c) for c in res.commits)
        assert (f"not committed, because the gate would refuse it: env.travel.demonstrations "
                f"{before + 1} -> {before} makes travel harder") in record(res)


def guard_commit(exp):
    """The farm guard on elicited_fact, committed as the built-in agent commits it."""
    from orchestrator.agents.builtin import GUARD_MARK, GUARD_SOURCE

    ws = exp / "workspace"
    rel = ws / "rewards" / "elicited_fact.py"
    rel.write_text(rel.read_text().rstrip() + "\n" + GUARD_SOURCE.format(mark=GUARD_MARK, why="a test."))
    return gitops.commit_all(ws, "Pay elicited_fact for first disclosures only\n\nWhy: a test.\n"
                             "Expect: episode/repeat_rate falls; score/mean does not fall.\n", "builtin", "s000")


def guarded_farm(step):
    """The farmed question under the guard: its repeats are asked, and paid nothing."""
    e = farmed_travel(step)
    for t in e["turns"]:
        if t["repeated"]:
            t["module_rewards"] = {"elicited_fact": 0.0}
    return e


@pytest.mark.parametrize("repeats", [True, False])
def test_a_farm_guard_measured_no_effect_stays(tmp_path, monkeypatch, repeats):
    """CPU runs of 16 and 24 steps (2026-12-05): s004 guarded elicited_fact against repeated tau
    questions; a later session took the guard back as "no effect on episode/repeat_rate", once
    while recent turns still repeated and once when none did. A guard's effect is the credit it
    no longer pays: it stays either way, and the record says why."""
    eps = ({s: [guarded_farm(s), honest_travel(s)] for s in (10, 11, 12)} if repeats
           else {s: [honest_travel(s), honest_travel(s)] for s in (10, 11, 12)})
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    sha = guard_commit(exp)
    write_run(exp / "run-001", 12, gym="travel",
              metric_fn=lambda s, r: {"episode/repeat_rate": 0.3 + r.gauss(0, 0.01)})
    write_steps(exp / "run-001", eps)
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)] == ["inconclusive"]
    res = base.run_session(ctx(exp))
    assert "_unguarded_turn_reward" in (exp / "workspace" / "rewards" / "elicited_fact.py").read_text()
    assert not any(f"Reverts: {sha}" in gitops.message(exp / "workspace", c) for c in res.commits)
    assert (f"Revert {sha[:10]}: not committed, because it guards elicited_fact against farmed "
            f"credit") in record(res)


def test_a_revert_that_would_pay_repeated_turns_again_is_not_committed(tmp_path, monkeypatch):
    """Any revert that restores a reward module is replayed first: a module that paid once per
    fact, put back where recent turns repeat questions, would pay the repeats again."""
    from orchestrator.agents.remedies import revert
    from orchestrator.agents.builtin import Planner
    from orchestrator.finding import Finding

    exp = usergym_exp(tmp_path, monkeypatch, {s: [farmed_travel(s)] for s in (10, 11, 12)}, steps=0)
    ws = exp / "workspace"
    rel = ws / "rewards" / "elicited_fact.py"
    rel.write_text(rel.read_text().replace("    if not turn.get(\"asked_question\"):",
                                           "    if turn.get(\"repeated\") or not turn.get(\"asked_question\"):"))
    sha = gitops.commit_all(ws, "Skip repeats\n\nWhy: a test.\nExpect: score/travel rises.\n", "builtin", "s000")
    planner = Planner(knobs(exp), None, ws, ["travel"], set(), set(), bench="usergym",
                      episodes=replay_episodes(exp), window=2)
    act = revert(planner, sha, Finding("no_effect", None, "a test.", {"commit": sha, "metric": "score/travel"}))
    assert act is not None and "rewards/elicited_fact.py" in act.files
    assert planner.vetted([act]) is None
    assert ("would pay 6 turns repeating an earlier turn of their episode (+1.20 in all) where it "
            "pays 0 now (+0.00): taking it back would pay repeats again.") in planner.unremedied[-1]


def replay_episodes(exp):
    from orchestrator import replay

    return replay.recent_episodes(exp / "run-001")


def test_a_farmed_module_is_guarded_before_refused_turns_get_more_examples(tmp_path, monkeypatch):
    """The H200 comparison of 2026-12-05: at step 20 elicited_fact paid 47% of its credit to
    repeated turns while a third of the turns were refused, and every EAU session acted on the
    refusals (more examples, a format reward and its revert): the farm was never guarded."""
    refused = lambda: ep("travel", [turn("Sure, here is my plan", "Invalid action: start your message "  # noqa: E731
                                         "with [search], [action] or [answer].", invalid_action=True)
                                    for _ in range(3)])
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [refused(), refused(), farmed_travel(s)] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"episode/invalid_rate": 0.67})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert last_msg(exp).startswith("Pay elicited_fact for first disclosures only")
    assert knobs(exp)["env"]["travel"]["demonstrations"] == 1          # the examples wait


def test_two_gyms_missing_a_step_each_get_their_own_commit_in_one_session(tmp_path, monkeypatch):
    """Tau never identifies the user and travel never searches: one session commits a worked
    example for each, one commit per gym, each judged on its own gym's metric (the H100 rerun
    committed one a session and tau's remedy never came in 24 steps)."""
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [tau_unidentified(), tau_unidentified(), travel_blind(), travel_blind()]
                       for s in (4, 5, 6)})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert len(res.commits) == 2, record(res)
    ws = exp / "workspace"
    msgs = [gitops.message(ws, c) for c in res.commits]
    targets = sorted(effects.target_of(m, {}, ["tau", "travel"]) for m in msgs)
    assert targets == [("took/tau/identify", "up"), ("took/travel/search", "up")], msgs
    demos = json.loads((ws / "demonstrations" / "usergym.json").read_text())
    assert demos["tau"][0]["id"] == "eau-tau-identify-then-lookup"
    assert any("[search]" in m["content"] for m in demos["travel"][0]["messages"] if m["role"] == "assistant")
    assert " ; " not in res.reason and res.reason.count("Show ") == 2


def test_a_change_that_reaches_every_gym_goes_alone(tmp_path, monkeypatch):
    """A shared remedy (the repeat cost, switched on for every gym) is the session's only commit,
    even when another gym has a finding of its own: its effect must have one cause."""
    from orchestrator.agents import remedies
    from orchestrator.agents.remedies import Intervention

    gyms = ["tau", "travel"]
    shared = Intervention("Enable the repeat cost", "why", "repeat/tau falls.",
                          knobs={"reward.modules.no_repeat.enabled": True})
    assert remedies.gym_scope(shared, gyms) is None
    step = Intervention("Add step reward", "why", "took/tau/identify rises, then score/tau.",
                        knobs={"reward.modules.eau_step_tau_identify": {"enabled": True}},
                        files={"rewards/eau_step_tau_identify.py": "x"})
    assert remedies.gym_scope(step, gyms) == "tau"
    # a file of another gym's step reward, or a knob of another gym, makes it reach further
    assert remedies.gym_scope(Intervention("x", "why", "score/tau rises.",
                                           knobs={"env.travel.max_steps": 8}), gyms) is None
    assert remedies.gym_scope(Intervention("x", "why", "score/tau rises.",
                                           files={"rewards/eau_step_travel_search.py": "x"}), gyms) is None


def test_a_guard_on_a_shared_module_is_the_sessions_only_commit(tmp_path, monkeypatch):
    """elicited_fact pays in every gym: guarding it changes what every gym is paid, so tau's
    missing identification waits for the next session (two changes at once would share one
    measured effect)."""
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [farmed_travel(s), tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert len(res.commits) == 1
    assert last_msg(exp).startswith("Pay elicited_fact for first disclosures only")
    assert json.loads((exp / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"][0]["id"] \
        != "eau-tau-identify-then-lookup"


def test_a_worked_example_still_measured_in_one_gym_does_not_hold_back_another_gyms(tmp_path, monkeypatch):
    """Both gyms' examples live in demonstrations/usergym.json: tau's, not yet measured, makes
    that file busy for tau alone, and the next session shows travel its own example."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)})
    first = base.run_session(ctx(exp))
    assert len(first.commits) == 1 and last_msg(exp).startswith("Show tau")
    write_steps(exp / "run-001", {s: [tau_unidentified(), travel_blind(), travel_blind()] for s in (4, 5, 6)})
    second = base.run_session(ctx(exp, "s002"))
    assert len(second.commits) == 1, record(second)
    assert last_msg(exp).startswith("Show travel one more worked example that uses [search]")
    from orchestrator.agents.builtin import _busy_knobs
    busy = _busy_knobs(ctx(exp, "s003"))
    assert {"demonstrations/usergym.json#tau", "env.travel.demonstrations"} <= busy
    assert "demonstrations/usergym.json" not in busy


def test_a_gym_gets_no_second_change_while_its_first_is_measured(tmp_path, monkeypatch):
    """The CPU demo of 2026-12-06: a step reward for function's probe at step 6, then at step 8 a
    second worked example for the same probe before the reward's effect was measured: the two
    would share one measured effect on took/function/probe. The second waits, and says so."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)})
    assert last_msg(exp) and base.run_session(ctx(exp)).commits
    assert last_msg(exp).startswith("Show tau")
    again = base.run_session(ctx(exp, "s002"))
    assert again.commits == []
    assert "the last change to tau is still being measured on tau's metric" in record(again)


def test_after_a_change_to_every_gym_a_gyms_own_finding_goes_first(tmp_path, monkeypatch):
    """The H100 rerun: the format reward (every gym's) ranked first at every session, on, off and
    on again, and tau's curriculum never came. After a session whose change reached every gym,
    a gym's own remedy goes first; the shared one still goes when no gym's own can."""
    from orchestrator.agents.builtin import Planner, last_change_reached_every_gym
    from orchestrator.agents.remedies import Intervention
    from orchestrator.finding import Finding

    exp = usergym_exp(tmp_path, monkeypatch, {s: [tau_unidentified()] for s in (4, 5, 6)})
    ws = exp / "workspace"
    findings = [Finding("invalid_actions", None, "refused.", {}), Finding("deadlock", "tau", "at the cap.", {})]
    shared = Intervention("Enable the format reward", "why", "episode/invalid_rate falls.",
                          knobs={"reward.modules.well_formed.enabled": True})
    own = Intervention("Ease disclosure in tau", "why", "score/tau rises.", knobs={"user.tau.facts_per_reply": 2})

    def planner(deadlock_remedy):
        p = Planner(knobs(exp), None, ws, ["tau", "travel"], set(), set(), bench="usergym", window=2)
        p._vetted |= {id(shared): shared, id(own): own}
        monkeypatch.setattr(p, "on_invalid_actions", lambda f, r: shared)
        monkeypatch.setattr(p, "on_deadlock", lambda f, r: deadlock_remedy)
        return p

    p = planner(own)
    assert p.plan(findings, exp / "run-001") is shared            # the usual order
    p = planner(own)
    p.defer_global = True
    assert p.plan(findings, exp / "run-001") is own
    p = planner(None)
    p.defer_global = True
    assert p.plan(findings, exp / "run-001") is shared
    assert "as the last session's change reached every gym" in p.unremedied[-1]

    # which sessions count: the newest one that committed, by the gym its Expect line names
    assert not last_change_reached_every_gym(ctx(exp), ["tau", "travel"])      # none yet
    for subject, expect, session in (("Shared", "episode/invalid_rate falls.", "s001"),
                                     ("Tau's", "took/tau/identify rises, then score/tau.", "s002")):
        (ws / "note.txt").write_text(subject)
        sha = gitops.commit_all(ws, f"{subject}\n\nWhy: a test.\nExpect: {expect}\n", "builtin", session)
        effects.ledger_append(exp, {"type": "session", "agent": "builtin", "session_id": session,
                                    "status": "ok", "commits": [sha]})
        effects.ledger_append(exp, {"type": "session", "agent": "builtin", "session_id": session + "b",
                                    "status": "ok", "commits": []})
        assert last_change_reached_every_gym(ctx(exp), ["tau", "travel"]) == (session == "s001")


def travel_example_being_measured(exp):
    """A session s000 that showed travel one more example, its effect not measured yet."""
    ws = exp / "workspace"
    k = knobs(exp)
    k["env"]["travel"]["demonstrations"] += 1
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    sha = gitops.commit_all(ws, "Show travel one more worked example\n\nWhy: a test.\n"
                            "Expect: episode/invalid_rate falls.\n", "builtin", "s000")
    effects.ledger_append(exp, {"type": "session", "agent": "builtin", "session_id": "s000",
                                "status": "ok", "commits": [sha]})


def test_refusals_waiting_on_one_gyms_examples_do_not_hold_back_another_gyms_remedy(tmp_path, monkeypatch):
    """The CPU run of 16 steps (2026-12-06): sessions s006 and s007 waited on travel's newest
    example being measured, and committed nothing for any gym. The wait is travel's alone: tau's
    missing identification gets its example in the same session."""
    refused = lambda: ep("travel", [turn("Sure, here is my plan", "Invalid action: start your message "  # noqa: E731
                                         "with [search], [action] or [answer].", invalid_action=True)
                                    for _ in range(3)])
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [refused(), refused(), tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"episode/invalid_rate": 0.5})
    travel_example_being_measured(exp)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert len(res.commits) == 1 and last_msg(exp).startswith("Show tau a worked example"), record(res)
    assert "The worked examples just shown to travel are still being measured" in record(res)


def test_reverts_of_two_gyms_changes_and_a_third_gyms_remedy_go_in_one_session(tmp_path, monkeypatch):
    """The H100 run of 2026-12-06: its last session (step 20) reverted persuade's harmful step
    reward alone, while travel's step reward and tau's example, both measured "no effect", and
    turtle's early answers waited for a session that never came. A revert is the change of the
    gym it takes back: each gym's goes in its own commit, beside another gym's remedy."""
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    tau = agent_commit(exp, "user.tau.match_threshold", 0.45, "score/tau rises.")
    travel = agent_commit(exp, "user.travel.match_threshold", 0.45, "score/travel rises.")
    write_run(exp / "run-001", 12, gym="travel",
              metric_fn=lambda s, r: {"score/tau": (0.3 if s < 4 else 0.02) + r.gauss(0, 0.01),
                                      "score/travel": 0.2 + r.gauss(0, 0.01)})
    write_steps(exp / "run-001", {s: [function_guess(), function_guess()] for s in (10, 11, 12)})
    add_event(exp / "run-001", event="applied", commit=tau, step=4)
    add_event(exp / "run-001", event="applied", commit=travel, step=6)
    got = effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)
    measured = {e.commit: e.label for e in got}
    assert measured == {tau: "harmed", travel: "inconclusive"}
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    ws = exp / "workspace"
    msgs = [gitops.message(ws, c) for c in res.commits]
    assert len(msgs) == 3, record(res)
    assert msgs[0].startswith(f"Revert {tau[:10]}: it harmed score/tau") and f"Reverts: {tau}" in msgs[0]
    assert msgs[1].startswith(f"Revert {travel[:10]}: no effect on score/travel")
    assert "function" in msgs[2].split("\n")[0], msgs[2]
    assert knobs(exp)["user"]["tau"]["match_threshold"] == knobs(exp)["user"]["travel"]["match_threshold"] == 0.5


def test_a_revert_of_a_demonstrations_file_that_other_gyms_changed_since_reaches_them_too(tmp_path, monkeypatch):
    """A revert puts back a whole earlier file: where that would also change another gym's
    examples, it is not one gym's change, and goes alone."""
    from orchestrator.agents import remedies
    from orchestrator.agents.remedies import Intervention

    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    ws = exp / "workspace"
    rel = "demonstrations/usergym.json"
    demos = json.loads((ws / rel).read_text())
    only_tau = json.dumps(demos | {"tau": demos["tau"][1:]})
    both = json.dumps(demos | {"tau": demos["tau"][1:], "travel": demos["travel"][1:]})
    revert = lambda text: Intervention("Revert abc", "why", "took/tau/identify stays.",  # noqa: E731
                                       files={rel: text}, reverts="abc")
    assert remedies.gym_scope(revert(only_tau), ["tau", "travel"], ws) == "tau"
    assert remedies.gym_scope(revert(both), ["tau", "travel"], ws) is None
    assert remedies.gym_scope(revert(only_tau), ["tau", "travel"]) is None       # nothing to compare


def test_a_gym_refusing_actions_gets_its_own_example_beside_another_gyms_revert(tmp_path, monkeypatch):
    """The same run's next session (step 24, replayed here): one more example for every refusing
    gym was left for later, as tau's and travel's reverts had gone in, and turtle, refusing 43%
    of its turns, got nothing. Each refusing gym's own example goes beside them, judged on that
    gym's refused share (invalid/<gym>)."""
    refused = lambda gym: ep(gym, [turn("Sure, here is my plan", "Invalid action: start your "  # noqa: E731
                                        "message with [search], [action] or [answer].", invalid_action=True)
                                   for _ in range(3)])
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    tau = agent_commit(exp, "user.tau.match_threshold", 0.45, "score/tau rises.")
    write_run(exp / "run-001", 12, gym="travel",
              metric_fn=lambda s, r: {"score/tau": (0.3 if s < 4 else 0.02) + r.gauss(0, 0.01),
                                      "episode/invalid_rate": 0.6})
    write_steps(exp / "run-001", {s: [refused("turtle"), refused("travel")] for s in (10, 11, 12)})
    add_event(exp / "run-001", event="applied", commit=tau, step=4)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)] == ["harmed"]
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    msgs = [gitops.message(exp / "workspace", c) for c in res.commits]
    assert [m.split("\n")[0] for m in msgs] == [
        f"Revert {tau[:10]}: it harmed score/tau",
        "Show one more worked example to travel (1 -> 2)", "Show one more worked example to turtle (1 -> 2)"]
    assert "Expect: invalid/turtle falls, then score/turtle rises." in msgs[2]
    assert effects.target_of(msgs[2], {}, ["turtle", "travel"]) == ("invalid/turtle", "down")
    k = knobs(exp)["env"]
    assert (k["turtle"]["demonstrations"], k["travel"]["demonstrations"], k["tau"]["demonstrations"]) == (2, 2, 1)


def test_a_step_reward_its_revert_switched_off_is_not_switched_on_again(tmp_path, monkeypatch):
    """The step reward a commit added for persuade, reverted as "harmed", is the same change when
    a later finding (success near zero) would switch it on again: it stays off."""
    from orchestrator.agents import remedies
    from orchestrator.agents.builtin import Planner
    from orchestrator.finding import Finding

    exp = usergym_exp(tmp_path, monkeypatch, {s: [ep("persuade", [turn("[answer] Yes.", "Heard.", answered=True)])]
                                              for s in (4, 5, 6)}, steps=0)
    ws = exp / "workspace"
    name = "eau_step_persuade_disclosed"
    (ws / "rewards" / f"{name}.py").write_text(
        "def turn_reward(turn):\n    return 0.1 if 'disclosed' in turn.get('first_steps', []) and 'persuade' == 'persuade' else 0.0\n")
    k = knobs(exp)
    k["reward"]["modules"][name] = {"enabled": True, "weight": 1.0}
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    added = gitops.commit_all(ws, f"Add step reward {name}\n\nWhy: a test.\nExpect: score/persuade rises.\n",
                              "builtin", "s000")
    k["reward"]["modules"][name]["enabled"] = False
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    gitops.commit_all(ws, f"Revert {added[:10]}: it harmed score/persuade\n\nWhy: a test.\n"
                      f"Expect: score/persuade back.\nReverts: {added}\n", "builtin", "s001")
    undone, files = remedies.taken_back(ws)
    assert (f"reward.modules.{name}.enabled", "False -> True") in undone
    planner = Planner(knobs(exp), None, ws, ["persuade"], undone, set(), avoid_files=files,
                      bench="usergym", episodes=replay_episodes(exp), window=2)
    act = planner.on_low_success(Finding("low_success", "persuade", "success/persuade averages 0.00.", {}),
                                 exp / "run-001")
    assert act is None or name not in act.subject, act.subject


def test_pooled_refusals_wait_only_for_the_gyms_whose_examples_are_measured(tmp_path, monkeypatch):
    """Gyms with too few recent turns to judge alone are judged together (one finding naming each
    gym's rate). The CPU run of 16 steps (2026-12-06) held persuade's example two sessions on
    travel's, which that finding named beside it: while travel's newest example is measured,
    travel waits, persuade gets one more example and tau, which does not refuse, its
    identification example, each gym in its own commit."""
    refused = lambda gym: ep(gym, [turn("Sure, here is my plan", "Invalid action: start your message "  # noqa: E731
                                        "with [search], [action] or [answer].", invalid_action=True)
                                   for _ in range(2)])
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [refused("travel"), refused("persuade"), tau_unidentified(), tau_unidentified()]
                       for s in (4, 5, 6)},
                      metrics=lambda s, r: {"episode/invalid_rate": 0.5})
    travel_example_being_measured(exp)
    before = knobs(exp)["env"]
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert "gyms) were refused for their format" in record(res)          # the pooled finding
    assert "The worked examples just shown to travel are still being measured" in record(res)
    subjects = [m.split("\n")[0] for m in messages(exp, len(res.commits))]
    assert len(res.commits) == 2, subjects
    assert any(s.startswith("Show one more worked example to persuade (1 -> 2)") for s in subjects), subjects
    assert any(s.startswith("Show tau a worked example") for s in subjects), subjects
    persuade = next(m for m in messages(exp, 2) if "to persuade" in m.split("\n")[0])
    assert "Expect: invalid/persuade falls, then score/persuade rises." in persuade   # its own metric
    after = knobs(exp)["env"]
    assert after["persuade"]["demonstrations"] == before["persuade"]["demonstrations"] + 1
    assert after["travel"]["demonstrations"] == before["travel"]["demonstrations"]


def test_a_refusal_example_for_a_gym_missing_a_step_shows_the_step_first(tmp_path, monkeypatch):
    """The H100 run of 2026-12-06 (seed 0, second run): tau refused half its turns and never
    identified the user; its refusals got examples that ask but never identify (steps 12 and 20)
    and the identification example came at step 24, too late to be measured. The example a
    refusing gym gets now is the one that takes its missing step, in the same commit."""
    refused = lambda: ep("tau", [turn("I'm sorry. I'm unable to assist you with your order.",  # noqa: E731
                                      "Invalid action: start your message with [search], [action] or "
                                      "[answer].", invalid_action=True) for _ in range(3)])
    exp = usergym_exp(tmp_path, monkeypatch,
                      {s: [refused(), refused(), tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"episode/invalid_rate": 0.6})
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert "recent tau agent turns" in record(res) and "were refused for their format" in record(res)
    msg = last_msg(exp)
    # the gyms no finding judged get one too (the run samples them too seldom to judge)
    assert msg.startswith("Show one more worked example to ") and "tau" in msg.split("\n")[0], msg
    assert "tau's first example is now eau-tau-identify-then-lookup" in msg
    demos = json.loads((exp / "workspace" / "demonstrations" / "usergym.json").read_text())
    assert demos["tau"][0]["id"] == "eau-tau-identify-then-lookup"
    assert knobs(exp)["env"]["tau"]["demonstrations"] == 2
    # the other gyms' examples are as shipped
    shipped = json.loads((ROOT / "workspace" / "demonstrations" / "usergym.json").read_text())
    assert {g: v for g, v in demos.items() if g != "tau"} == {g: v for g, v in shipped.items() if g != "tau"}


def test_a_reverted_example_of_one_gym_leaves_the_other_gyms_examples_free(tmp_path, monkeypatch):
    """Every gym's examples live in one file: taking back tau's example (no effect) keeps tau's
    from being changed again, not travel's, whose own missing search still gets its example."""
    from orchestrator.agents import remedies

    exp = usergym_exp(tmp_path, monkeypatch, {s: [tau_unidentified(), tau_unidentified()] for s in (4, 5, 6)})
    assert base.run_session(ctx(exp)).commits and last_msg(exp).startswith("Show tau")
    ws, rel = exp / "workspace", "demonstrations/usergym.json"
    added = gitops.git(ws, "rev-parse", "HEAD").strip()
    (ws / rel).write_text(gitops.git(ws, "show", f"{added}^:{rel}"))
    gitops.commit_all(ws, f"Revert {added[:10]}: no effect on took/tau/identify\n\nWhy: a test.\n"
                      f"Expect: took/tau/identify stays within its noise floor.\nReverts: {added}\n",
                      "builtin", "s002")
    assert remedies.taken_back(ws)[1] == {f"{rel}#tau"}
    write_steps(exp / "run-001", {s: [tau_unidentified(), travel_blind(), travel_blind()] for s in (7, 8, 9)})
    res = base.run_session(ctx(exp, "s003"))
    assert len(res.commits) == 1, record(res)
    assert last_msg(exp).startswith("Show travel"), record(res)
    assert json.loads((ws / rel).read_text())["tau"][0]["id"] != "eau-tau-identify-then-lookup"


@pytest.mark.parametrize("busy, waits", [({"gym:tau"}, True), ({"gym:travel"}, False)])
def test_a_shared_module_for_a_gym_waits_while_that_gyms_change_is_measured(tmp_path, monkeypatch, busy, waits):
    """The second CPU run of 16 steps (2026-12-06): eau_progress "for tau" (a module every gym
    shares, judged on score/tau) went in two steps after tau's identification example, so the
    effects of the two could not be told apart and tau waited two sessions on both. A change
    judged on one gym's metric waits while that gym's last change is measured, whatever it
    writes."""
    from orchestrator.agents.builtin import Planner
    from orchestrator.agents.remedies import Intervention
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    ws = exp / "workspace"
    p = Planner(knobs(exp), None, ws, ["tau", "travel"], set(), set(busy), bench="usergym", window=2)
    act = Intervention("Add intermediate reward eau_progress for tau", "a test.",
                       "score/tau rises, then success/tau.",
                       knobs={"reward.modules.eau_progress.enabled": True},
                       files={"rewards/eau_progress.py": "def turn_reward(turn):\n    return 0.0\n"})
    p.vetted([act])
    said = " ".join(p.unremedied)
    assert ("the last change to tau is still being measured on tau's metric" in said) == waits, said


def looping_tau() -> dict:
    """Asks the same question to the turn cap and never identifies the user."""
    q = "I'm not sure; could you tell me more about what you need?"
    return ep("tau", [turn(q, "I need to return an order.", repeated=i > 0) for i in range(5)])


def test_a_repeat_cost_its_revert_switched_off_is_not_switched_on_again_and_the_gym_gets_its_step(
        tmp_path, monkeypatch):
    """The H200 run of 2026-12-06 (seeds 1 and 2): no_repeat went on for tau's loops, off after its
    window measured no effect, and on again, four sessions running; each was a change to every gym,
    so tau's identification example never came. Taken back once, it stays off, and tau's own
    finding gets the session."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [looping_tau() for _ in range(4)] for s in (4, 5, 6)})
    path = "reward.modules.no_repeat.enabled"
    assert knobs(exp)["reward"]["modules"]["no_repeat"]["enabled"] is False
    on = agent_commit(exp, path, True, "episode/repeat_rate falls.")
    ws = exp / "workspace"
    k = knobs(exp)
    k["reward"]["modules"]["no_repeat"]["enabled"] = False
    (ws / "knobs.json").write_text(json.dumps(k, indent=2) + "\n")
    gitops.commit_all(ws, f"Revert {on[:10]}: no effect on episode/repeat_rate\n\nWhy: a test.\n"
                      f"Expect: episode/repeat_rate back.\nReverts: {on}\n", "builtin", "s001")
    res = base.run_session(ctx(exp, "s002"))
    assert res.status == base.OK, res.reason
    text = record(res)
    assert "[loop/tau]" in text                       # the finding is still there
    assert knobs(exp)["reward"]["modules"]["no_repeat"]["enabled"] is False
    assert "no_repeat.enabled False -> True) was taken back before" in text
    assert res.commits and "find_user_id_by_name_zip" in last_msg(exp), text


def test_a_revert_of_a_change_without_effect_leaves_room_for_the_gyms_own_changes(tmp_path, monkeypatch):
    """A change to every gym goes alone, as its effect must have one cause; but taking back one
    measured "no effect" is expected to change nothing, so the same session goes on to the gyms'
    own findings. The H200 run of 2026-12-06 spent its step-12 session on such a revert alone."""
    exp = usergym_exp(tmp_path, monkeypatch, {}, steps=0)
    sha = agent_commit(exp, "reward.modules.no_repeat.enabled", True, "episode/repeat_rate falls.")
    write_run(exp / "run-001", 12, gym="tau", metric_fn=lambda s, r: {"episode/repeat_rate": 0.45 + r.gauss(0, 0.01)})
    write_steps(exp / "run-001", {s: [looping_tau() for _ in range(4)] for s in (10, 11, 12)})
    add_event(exp / "run-001", event="applied", commit=sha, step=6)
    assert [e.label for e in effects.update_effects(exp, exp / "run-001", exp / "workspace", 2)] == ["inconclusive"]
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert len(res.commits) == 2, record(res)
    revert, own = messages(exp, 2)[::-1]
    assert revert.startswith(f"Revert {sha[:10]}: no effect on episode/repeat_rate") and f"Reverts: {sha}" in revert
    assert knobs(exp)["reward"]["modules"]["no_repeat"]["enabled"] is False
    assert "find_user_id_by_name_zip" in own and "score/tau" in own


def test_questions_the_catch_all_rule_answers_are_left_to_a_person_and_said_why(tmp_path, monkeypatch):
    """The built-in agent has no remedy for a user that answers most questions with its catch-all
    rule (a hint at what may be asked would leak in the guessing games): the session commits
    nothing for it and says so, naming the gym and the rule file to edit."""
    caught = lambda i: ep("travel", [  # noqa: E731
        turn("[search] hotel in Lisbon", "H1 | Vista | Lisbon | parking: no | $318",
             user_replied=False, first_steps=["search"])] + [
        turn(f"[action] Do you need parking at the hotel {i}?",
             "I'm not sure; could you ask about something more specific?", rule_id="unknown",
             user_replied=True) for _ in range(3)], task=f"t{i}", truncated=False)
    exp = usergym_exp(tmp_path, monkeypatch, {s: [caught(1), caught(2)] for s in (4, 5, 6)},
                      metrics=lambda s, r: {"success/travel": 0.3})
    snap = exp / "run-001" / "snapshots" / "seed" / "users" / "usergym"
    snap.mkdir(parents=True)
    (snap / "rules.json").write_text((exp / "workspace" / "users" / "usergym" / "rules.json").read_text())
    res = base.run_session(ctx(exp))
    assert res.commits == [], res.reason
    said = record(res)
    assert "No remedy of the built-in agent's kinds targets it: a user that names what it may be " \
           "asked about would leak" in said
    assert "the rule to add, for travel alone, is for a person or a Claude Code or Codex session " \
           "(users/<bench>/rules.json): 18 of 18 recent travel questions (100%) got the user's " \
           "catch-all reply" in said


PARKING = "[action] Do you need parking at the hotel?"   # the shipped first travel example's question
CATCH_ALL = "I'm not sure; could you ask about something more specific?"


def travel_copying(i: int, fits: bool = False) -> dict:
    """Asks the shown example's hotel question in a flight task (the user's catch-all answers
    it), or in a hotel task whose user wants parking (`fits`: a rule that discloses answers)."""
    asked = turn(PARKING, "For the hotel, I want parking: yes." if fits else CATCH_ALL,
                 rule_id="answer-matched" if fits else "unknown", user_replied=True)
    return ep("travel", [asked, turn("[search] flight Lisbon", "F1 | SkyJet | Lisbon | $120",
                                     user_replied=False, first_steps=["search"])],
              prompt="I need a hotel in Lisbon." if fits else "I need a flight to Lisbon.", task=f"t{i}")


def test_a_copied_example_question_answered_by_the_catch_all_is_found_per_gym():
    """Episodes asking the shown example's own question, word for word, where the user's
    catch-all answers it: a finding at 3 such episodes and 15% of the gym's; the same question
    where it fits (a rule that discloses) is no copy, nor is a question of the policy's own, and
    without the catch-all rule's id nothing is judged."""
    from orchestrator.progress_findings import example_questions, find_copied_questions
    demos = json.loads((ROOT / "workspace" / "demonstrations" / "usergym.json").read_text())["travel"]
    shown = {"travel": example_questions(demos[:1])}
    assert shown["travel"] == {"[action] do you need parking at the hotel?": "travel-hotel-denver"}
    fitting = [travel_copying(i, fits=True) for i in range(6)]
    assert find_copied_questions(fitting + [travel_copying(i) for i in range(2)], shown, {"unknown"}) == []
    own = ep("travel", [turn("[action] Do you mind a stop on the way?", CATCH_ALL, rule_id="unknown")])
    assert find_copied_questions(fitting + [own] * 3, shown, {"unknown"}) == []
    eps = fitting + [travel_copying(i) for i in range(3)]
    found = find_copied_questions(eps, shown, {"unknown"})
    assert [(f.kind, f.gym, f.evidence["copied"], f.evidence["episodes"], f.evidence["from"])
            for f in found] == [("copied_question", "travel", 3, 9, ["travel-hotel-denver"])]
    assert found[0].message.startswith("3 of 9 recent travel episodes (33%) asked a shown worked "
                                       "example's own question word for word and got the user's "
                                       "catch-all reply")
    assert find_copied_questions(eps, shown, set()) == []
    assert find_copied_questions(eps + fitting * 3, shown, {"unknown"}) == []      # 3 of 27: 11%


def snapshot_workspace(exp):
    """The run's snapshot of the workspace it loaded (the trainer copies each tree it loads)."""
    shutil.copytree(exp / "workspace", exp / "run-001" / "snapshots" / "seed",
                    ignore=shutil.ignore_patterns(".git"))


def test_a_copied_question_gets_one_more_example_that_asks_another(tmp_path, monkeypatch):
    """Travel asks its one shown example's hotel question in flight tasks: the second shipped
    example (a flight, asking about departure and stops) is shown too, judged by the share of
    travel episodes that search. Where the next example asks the same question, nothing is
    committed for it."""
    exp = usergym_exp(tmp_path, monkeypatch, {s: [travel_copying(1), travel_copying(2, fits=True)]
                                              for s in (4, 5, 6)})
    snapshot_workspace(exp)
    res = base.run_session(ctx(exp))
    assert res.status == base.OK, res.reason
    assert knobs(exp)["env"]["travel"]["demonstrations"] == 2
    msg = last_msg(exp)
    assert msg.startswith("Show travel one more worked example, whose questions differ from the one "
                          "it copies (1 -> 2)")
    assert "3 of 6 recent travel episodes (50%) asked a shown worked example's own question word " \
           "for word and got the user's catch-all reply" in msg
    assert '"[action] Do you need parking at the hotel?" -> "I\'m not sure;' in msg
    assert "Expect: took/travel/search rises, then score/travel." in msg

    from orchestrator.agents import remedies
    agent = type("P", (), {"ws": exp / "workspace", "busy": set(),
                           "value": lambda self, k: 1, "step": lambda self, k, d: 2})()
    demos_file = exp / "workspace" / "demonstrations" / "usergym.json"
    demos = json.loads(demos_file.read_text())
    demos["travel"][1]["messages"][1]["content"] = PARKING
    demos_file.write_text(json.dumps(demos))
    assert remedies.other_example(agent, "travel", [PARKING.lower()], "why") is None
