"""Every env knob of paper table 8 that UserGym owns changes what the gym does."""
from __future__ import annotations

from test_usergym_rewards import _function_task, _travel_task, _turtle_task
from usergym_helpers import make


def test_search_failure_interval_fails_every_nth_search():
    env = make(_travel_task(), env={"travel": {"search_failure_interval": 2}})
    failed = [bool(env.step("[search] hotel")[4].get("search_failed")) for _ in range(4)]
    assert failed == [False, True, False, True]
    env = make(_travel_task(), env={"travel": {"search_failure_interval": 0}})
    assert not any(env.step("[search] hotel")[4].get("search_failed") for _ in range(4))


def test_noise_and_wrong_choice_numbers_set_the_options_a_search_shows():
    env = make(_travel_task(), env={"travel": {"noise_choice_number": 7, "wrong_choice_number": 4,
                                               "search_failure_interval": 0}})
    labels = [o["label"] for o in env.options["hotel"]]
    assert labels.count("noise") == 7 and labels.count("wrong") == 4 and labels.count("best") == 1
    obs = env.step("[search] hotel")[0]
    assert len(obs.splitlines()) == 7 + 4 + 3
    env = make(_travel_task(), env={"travel": {"noise_choice_number": 0, "wrong_choice_number": 0}})
    assert {o["label"] for o in env.options["hotel"]} == {"best", "acceptable"}


def test_wrong_choices_break_exactly_one_preference_and_noise_is_elsewhere():
    env = make(_travel_task(), env={"travel": {"noise_choice_number": 3, "wrong_choice_number": 3}})
    prefs = {"parking": "yes", "pool": "no"}
    for o in env.options["hotel"]:
        broken = sum(o["attrs"][k] != v for k, v in prefs.items())
        if o["label"] == "wrong":
            assert broken == 1 and o["city"] == "Porto"
        if o["label"] == "noise":
            assert o["city"] != "Porto"


def test_elicitation_interval_nudges_after_turns_without_questions():
    def nudges(interval):
        env = make(_travel_task(), env={"travel": {"elicitation_interval": interval, "search_failure_interval": 0}})
        return [bool(env.step("[search] hotel")[4].get("nudged")) for _ in range(6)]
    assert nudges(3) == [False, False, True, False, False, True]
    assert nudges(2) == [False, True, False, True, False, True]
    assert not any(nudges(0))


def test_turtle_success_threshold_decides_when_an_answer_solves_the_puzzle():
    answer = "[answer] He had hiccups and got a scare that cured them."           # 3 of 4 key points
    strict = make(_turtle_task(), env={"turtle": {"success_threshold": 0.9}})
    _, _, terminated, _, _ = strict.step(answer)
    assert not terminated
    lenient = make(_turtle_task(), env={"turtle": {"success_threshold": 0.7}})
    _, _, terminated, _, info = lenient.step(answer)
    assert terminated and info["success"]


def test_max_repeated_probes_refuses_inputs_probed_too_often():
    def outputs(limit):
        env = make(_function_task(), env={"function": {"max_repeated_probes": limit}})
        return ["Output" in env.step("[action] 2 2 2 2")[0] for _ in range(4)]
    assert outputs(0) == [True, False, False, False]
    assert outputs(2) == [True, True, True, False]
