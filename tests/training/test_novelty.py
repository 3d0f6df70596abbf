"""The rollout's marks on every turn record (`new_facts`, `repeated`) and the metrics built on them:
what a reward module reads so that asking again does not pay again."""
from training.novelty import novelty, same_action
from training.trainer import episode_metrics


def turn(agent, revealed=(), repeated=False, new=()):
    return {"agent": agent, "user": "", "revealed_facts": list(revealed), "leaked_facts": [],
            "asked_question": agent.endswith("?"), "repeated": repeated, "new_facts": list(new)}


def test_a_fact_is_new_once_and_a_repeated_text_is_marked():
    earlier = [turn("[action] What does it return?", ["return"])]
    # the same question, case and spacing aside: the same fact again is not new, the turn repeats
    assert novelty(earlier, turn("[ACTION]  what does it return?", ["return"])) == ([], True)
    # another question disclosing the old fact and a new one: only the new one counts, once
    assert novelty(earlier, turn("[action] Any special cases?", ["edge", "return", "edge"])) == (["edge"], False)
    # an empty turn is not a repeat of an empty turn (nothing was asked twice)
    assert novelty([turn("")], turn("  ")) == ([], False)
    assert same_action(" A\n b ") == "a b"


def test_metrics_count_repeats_and_the_environments_own_score():
    looping = {"gym": "travel", "user_arm": "symbolic", "return": 0.8, "success": False, "score": 0.0,
               "truncated": True, "turns": [turn("[action] Price?", ["p"], new=["p"]),
                                            turn("[action] Price?", ["p"], repeated=True),
                                            turn("[action] Price?", ["p"], repeated=True),
                                            turn("[answer] H1")]}
    solved = {"gym": "travel", "user_arm": "symbolic", "return": 1.0, "success": True, "score": 1.0,
              "truncated": False, "turns": [turn("[action] Price?", ["p"], new=["p"]), turn("[answer] H2")]}
    m = episode_metrics([looping, solved])
    assert m["episode/repeat_rate"] == 2 / 6 and m["repeat/travel"] == 2 / 6
    # reward/* holds the shaped return (0.8 for the loop); score/* only what the environment scored
    assert m["reward/travel"] == 0.9 and m["score/travel"] == 0.5 and m["score/mean"] == 0.5
