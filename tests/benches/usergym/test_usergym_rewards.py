"""Each gym's reward rule (UserGym semantics, documented in each gym's module) on hand-made tasks
and transcripts."""
from __future__ import annotations

import pytest

from training.benches.base import Fact, Task
from training.benches.usergym.travel import TravelEnv
from usergym_helpers import make, run, snapshot


def rewards(env, actions):
    return [env.step(a)[1] for a in actions]


def test_intention_pays_by_importance_and_penalises_extra_details():
    facts = (Fact("d0", "detail", "Budget: 500.", ("budget",), importance=3),
             Fact("d1", "detail", "Dates: May.", ("date",), importance=2),
             Fact("d2", "detail", "Who: alone.", ("companion",), importance=1))
    task = Task("i1", "intention", "train", "Plan a trip.", facts, {"category": "Travel", "task": "Plan a trip."})
    env = make(task)
    assert rewards(env, ["[action] What is your budget?"]) == [pytest.approx(1.0)]
    assert rewards(env, ["[action] What is your budget?"]) == [0.0]           # already covered
    # two new details in one question: 0.7 + 0.4 - 0.2 for the extra one, and the episode ends
    obs, r, terminated, _, info = env.step("[action] Which date, and any companion?")
    assert r == pytest.approx(0.9) and terminated and info["success"] and info["score"] == 1.0


def test_telepathy_pays_improvement_over_best_guess():
    task = Task("t1", "telepathy", "train", "Guess.", (Fact("category", "category", "It is a fruit.", ("fruit",)),),
                {"entity": "Kiwi", "aliases": ["kiwifruit"], "category": "fruit"})
    env = make(task)
    assert rewards(env, ["[action] Is it a fruit?", "[answer] apple", "[answer] It is a kiwi!"]) == [0.0, 0.0, 1.0]
    assert env.done and env.score() == 1.0


def _turtle_task():
    facts = tuple(Fact(f"k{i}", "clue", t, kw) for i, (t, kw) in
                  enumerate([("hiccups", ("hiccup",)), ("a scare", ("scare",)), ("cured", ("cured",)), ("water", ("water",))]))
    return Task("u1", "turtle", "train", "A man asks for water.", facts, {"title": "T", "surface": "S", "bottom": "B"})


def test_turtle_pays_improvement_and_stops_at_success_threshold():
    env = make(_turtle_task(), env={"turtle": {"success_threshold": 0.8}})
    r = rewards(env, ["[answer] He had hiccups.", "[answer] He had hiccups and got a scare.",
                      "[answer] hiccups only"])
    assert r == [pytest.approx(0.25), pytest.approx(0.25), 0.0]             # gains over the best so far
    _, r4, terminated, _, info = env.step("[answer] hiccups, a scare cured them, no water needed")
    assert r4 == pytest.approx(0.5) and terminated and info["success"]


def test_persuade_pays_levels_moved_over_six():
    facts = (Fact("c0", "concern", "It is cheap.", ("cheap",)), Fact("c1", "concern", "It is fast.", ("fast",)))
    task = Task("p1", "persuade", "train", "Persuade me.", facts,
                {"claim": "Cars are good", "start_level": 6, "levels_per_concern": 2})
    env = make(task)
    assert rewards(env, ["[answer] They are not cheap at all.", "[answer] Not cheap, I said.",
                         "[answer] Nor are they fast."]) == [pytest.approx(2 / 6), 0.0, pytest.approx(2 / 6)]
    assert env.stance == 2 and env.success()


def _function_task():
    return Task("f1", "function", "train", "Guess.", (Fact("op0", "hint", "It multiplies.", ("multipl",)),),
                {"rule": "a * b + c - d", "test_case": [2, 3, 4, 5], "expected": 5.0})


@pytest.mark.parametrize("answer, paid", [("[answer] 5", 1.0), ("[answer] 5.001", 1.0), ("[answer] 6", 0.0),
                                          ("[answer] no idea", 0.0)])
def test_function_pays_one_or_zero_on_the_answer(answer, paid):
    env = make(_function_task())
    obs, r, _, _ = env.step("[action] 1 1 1 1")[:4]
    assert "Output for 1 1 1 1: 1" in obs and r == 0.0
    _, r, terminated, _, info = env.step(answer)
    assert r == paid and terminated and info["success"] == bool(paid)


def _tau_task():
    data = {"user": {"user_id": "ann_lee_1", "first_name": "Ann", "last_name": "Lee", "zip": "12345"},
            "orders": {"#W1": {"status": "pending", "items": [{"item_id": "9", "name": "mouse", "price": 9.0}]}},
            "goal": {"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "no longer needed"}}}
    facts = (Fact("name", "identity", "My name is Ann Lee.", ("name",)),)
    return Task("a1", "tau", "train", "Help me with an order.", facts, data)


@pytest.mark.parametrize("call, paid", [
    ('{"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "no longer needed"}}', 1.0),
    ('{"name": "cancel_pending_order", "arguments": {"order_id": "#W1", "reason": "ordered by mistake"}}', 0.0),
    ('{"name": "return_delivered_order_items", "arguments": {"order_id": "#W1", "item_ids": ["9"]}}', 0.0)])
def test_tau_pays_one_or_zero_on_the_write_call(call, paid):
    env = make(_tau_task())
    _, r, terminated, _, info = env.step('[answer] {"name": "find_user_id_by_name_zip", "arguments": '
                                         '{"first_name": "Ann", "last_name": "Lee", "zip": "12345"}}')
    assert r == 0.0 and not terminated and info["tool_calls"][0]["result"] == "ann_lee_1"
    _, r, terminated, _, info = env.step("[answer] " + call)
    assert r == paid and terminated and info["success"] == bool(paid)


def _travel_task(aspects=("hotel", "car")):
    prefs = {"hotel": {"parking": "yes", "pool": "no"}, "car": {"size": "suv", "gps": "yes"}}
    facts = tuple(Fact(f"{a}.{k}", "preference", f"For the {a}, I want {k}: {v}.", (k, f"{a} {k}"))
                  for a in aspects for k, v in prefs[a].items())
    return Task("v1", "travel", "train", "I need a hotel and a car.", facts,
                {"aspects": [{"aspect": a, "city": "Porto", "date": "March 3", "preferences": prefs[a]} for a in aspects]})


def _ids(env: TravelEnv, aspect: str, label: str) -> list[str]:
    return [o["id"] for o in env.options[aspect] if o["label"] == label]


def test_travel_scores_best_answer_per_aspect_averaged():
    env = make(_travel_task(), env={"travel": {"search_failure_interval": 0}})
    acc, best = _ids(env, "hotel", "acceptable")[0], _ids(env, "hotel", "best")[0]
    wrong = _ids(env, "car", "wrong")[0]
    r = rewards(env, [f"[answer] {acc}", f"[answer] {best}", f"[answer] {acc}", f"[answer] {wrong}"])
    assert r == [pytest.approx(0.4), pytest.approx(0.1), 0.0, 0.0]      # (0.8 + 0) / 2, then 1.0 / 2
    _, r, terminated, _, info = env.step(f"[answer] {_ids(env, 'car', 'best')[0]}")
    assert r == pytest.approx(0.5) and terminated and info["success"] and info["score"] == 1.0


def test_travel_rewards_preference_elicitation_once():
    """Elicitation names the aspect and the attribute; the aspect alone, a word of the prompt,
    earns nothing and is told nothing."""
    env = make(_travel_task())
    steps = run(env, ["[action] What do you need from the hotel?", "[action] Do you need parking at the hotel?",
                      "[action] Parking at the hotel, again?", "[action] Hi."])
    assert [s[1] for s in steps] == [0.0, pytest.approx(0.1), 0.0, 0.0]
    assert steps[0][4]["revealed_facts"] == [] and steps[1][4]["revealed_facts"] == ["hotel.parking"]


def test_function_predicate_weight_adds_probe_shaping():
    plain = make(_function_task())
    shaped = make(_function_task(), reward={"predicate_weight": 0.3})
    probe = "[action] 1 2 3 4"
    assert plain.step(probe)[1] == 0.0
    _, r, _, _, info = shaped.step(probe)
    assert set(info["predicates"]) == {"probe_new", "probe_small"} and r == pytest.approx(0.3 * 2 / 3)
    _, r, _, _, info = shaped.step(probe)                            # repeat: -1, small: +1
    assert "probe_repeat" in info["predicates"] and r == pytest.approx(0.0)
    _, r, _, _, info = shaped.step("[action] 1 2 3")                  # malformed
    assert info["predicates"] == ["probe_invalid"] and r == pytest.approx(-0.1)


def test_a_reason_given_when_asked_why_is_no_leak_but_a_volunteered_one_is():
    facts = (Fact("c0", "concern", "It is cheap.", ("cheap",)),)
    task = Task("p1", "persuade", "train", "Persuade me.", facts,
                {"claim": "Cars are good", "start_level": 6, "levels_per_concern": 2})
    env = make(task)
    info = env.step("[action] Why do you believe that?")[4]
    assert info["revealed_facts"] == ["c0"] and info["leaked_facts"] == []
    env = make(task, user={"persuade": {"volunteer_interval": 1}})
    info = env.step("[action] Nice day today.")[4]
    assert info["rule_id"] == "volunteer" and info["leaked_facts"] == ["c0"]
