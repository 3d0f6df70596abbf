"""The steps a gym's success needs, read from hand-written turn records, and the `first_steps`
mark the trainer writes before any reward module runs."""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from episodes import (colbench_chatting, ep, function_guess, retail_read_first, retail_write_first,  # noqa: E402
                      tau_identified, tau_unidentified, travel_blind, travel_searching, turn)

from training import rewards, steps  # noqa: E402


def test_each_gym_needs_its_steps_before_its_answer():
    assert not steps.took_before_answer("travel", travel_blind()["turns"], "search")
    assert steps.took_before_answer("travel", travel_searching()["turns"], "search")
    # TauGym: a write call ends the episode; the read tools before it must include finding the user
    assert not steps.took_before_answer("tau", tau_unidentified()["turns"], "identify")
    identified = tau_identified()["turns"]
    assert steps.took_before_answer("tau", identified, "identify")
    assert steps.took_before_answer("tau", identified, "lookup")
    assert not steps.took_before_answer("colbench", colbench_chatting()["turns"], "submit")
    assert not steps.took_before_answer("retail", retail_write_first()["turns"], "read")
    assert steps.took_before_answer("retail", retail_read_first()["turns"], "read")
    assert not steps.took_before_answer("function", function_guess()["turns"], "probe")


def test_a_failed_lookup_is_no_step_and_a_refused_answer_is_still_a_submission():
    miss = {"name": "find_user_id_by_name_zip", "arguments": {}, "result": "Error: user not found",
            "error": None}
    assert "identify" not in steps.turn_steps("tau", turn('[answer] {"name": "x"}', tool_calls=[miss]))
    # ColBench refuses an answer before min_questions: it was still written, and is what counts
    refused = turn("I WANT TO ANSWER:\ndef f(x):\n    return x", "Ask 1 more question first.")
    assert "submit" in steps.turn_steps("colbench", refused)
    assert steps.turn_steps("function", turn("[action] 1, 2, 3, 4")) == ["probe"]
    assert "probe" not in steps.turn_steps("function", turn("[action] 1 2 3"))


def test_a_worked_examples_text_shows_its_steps():
    assert steps.text_steps("tau", '[answer] {"name": "find_user_id_by_name_zip", "arguments": {}}') == \
        ["identify"]
    assert steps.text_steps("airline", '<tool_call>{"name": "get_flight_status"}</tool_call>') == ["read"]
    assert steps.text_steps("colbench", "How much per day?") == []


def test_the_trainer_marks_first_steps_before_the_modules_run():
    """score_episode writes `first_steps` on every turn, so a module sees at which turn a step
    was first taken (and a second search of the episode is not a first one)."""
    episode = {"gym": "travel", "turns": [
        turn("[action] Do you need parking?", revealed_facts=["hotel.parking"]),
        turn("[search] hotel Osaka"), turn("[search] hotel Osaka"),
        turn("[answer] H1", answered=True)]}
    rewards.score_episode(episode, [], {}, rewards.ScoreStats())
    assert [t["first_steps"] for t in episode["turns"]] == \
        [["ask", "disclosed"], ["search"], [], ["answer"]]


def test_the_trainer_logs_the_share_of_each_gyms_episodes_that_took_each_needed_step():
    """`took/<gym>/<step>` per step: what a worked example or a step reward changes first, while
    score/<gym> of a small policy stays 0; judged by training.steps, as the diagnosis judges it."""
    from training.trainer import episode_metrics

    records = [travel_searching(), travel_blind(), tau_identified(), tau_unidentified()]
    m = episode_metrics([r | {"return": 0.0} for r in records])
    assert m["took/travel/search"] == 0.5
    # tau identifies by a find_user_id_by_name_zip call that found the user (tau_identified's),
    # not by listing the tools that name it (tau_unidentified's `[search] tools`)
    assert m["took/tau/identify"] == 0.5 and m["took/tau/lookup"] == 0.5
    assert not any(k.startswith(("took/travel/probe", "took/colbench")) for k in m)
    missed = tau_identified()
    missed["turns"][0]["tool_calls"][0]["result"] = "Error: user not found"
    missed["turns"][1]["tool_calls"] = []
    assert episode_metrics([missed | {"return": 0.0}])["took/tau/identify"] == 0.0


def test_the_trainer_logs_the_share_of_each_gyms_tasks_whose_episodes_all_returned_alike():
    """`tied/<gym>`: a task's rollout.n episodes that all returned the same give grpo and infopo
    no advantage; per gym, so that a gym that teaches nothing under them shows."""
    from training.trainer import episode_metrics

    def rec(gym, task, ret):
        return ep(gym, [turn("[action] Hello?")], task=task) | {"return": ret}
    m = episode_metrics([rec("travel", "a", 0.0), rec("travel", "a", 0.0),
                         rec("travel", "b", 0.0), rec("travel", "b", 0.2),
                         rec("tau", "c", 0.2), rec("tau", "c", 0.2), rec("tau", "c", 0.2),
                         rec("turtle", "d", 0.0)])
    assert (m["tied/travel"], m["tied/tau"]) == (0.5, 1.0)
    assert "tied/turtle" not in m          # one episode of its task: no group to judge
