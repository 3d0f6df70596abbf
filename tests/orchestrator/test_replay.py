"""Replaying a reward module or the symbolic user's knobs on recorded episodes, before a change
is committed: what it would have paid, and what the user would have disclosed."""
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from episodes import ep, function_guess, travel_blind, travel_searching, turn  # noqa: E402

from orchestrator import replay  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
PROGRESS = ("APPLIES_TO = ['travel', 'function']\n\n"
            "def turn_reward(turn):\n    return 0.1 * len(turn.get('new_facts') or [])\n")
SEARCH_STEP = ("APPLIES_TO = ['travel']\n\n"
               "def turn_reward(turn):\n    return 0.1 if 'search' in (turn.get('first_steps') or []) else 0.0\n")


def test_a_module_is_replayed_per_gym_on_the_recent_episodes():
    pay, err = replay.module_pay(PROGRESS, [travel_blind(), travel_blind(), function_guess(), function_guess()])
    assert err is None
    assert (pay["travel"].paid_turns, pay["travel"].turns, pay["travel"].paid_episodes) == (2, 4, 2)
    assert round(pay["travel"].total, 6) == 0.2
    # no function turn had a first disclosure: it could never pay there
    assert pay["function"].turns == 2 and not pay["function"].pays


def test_the_replay_marks_first_steps_as_the_trainer_does():
    """Trajectory records written before `first_steps` existed are marked on the way in, so a
    step reward pays at the first search of an episode and only there."""
    searched = travel_searching()
    searched["turns"].insert(1, turn("[search] hotel Osaka", "H1 | Vista | Osaka | $120"))
    pay, _ = replay.module_pay(SEARCH_STEP, [searched, travel_blind()])
    assert (pay["travel"].paid_turns, pay["travel"].paid_episodes, pay["travel"].episodes) == (1, 1, 2)
    assert "first_steps" not in searched["turns"][0]        # the caller's records are untouched


def test_a_module_that_fails_is_named_not_counted_as_paying_nothing():
    pay, err = replay.module_pay("APPLIES_TO = ['travel']\n\ndef turn_reward(turn):\n    return 1 / 0\n",
                                 [travel_blind()])
    assert pay == {} and "ZeroDivisionError" in err


def test_the_symbolic_user_discloses_more_with_more_facts_per_reply():
    """TauGym's first training task: one question for name and zip code gets one fact per reply
    at facts_per_reply 1, two at 2 (the shipped rules, the shipped task)."""
    rules = json.loads((ROOT / "workspace" / "users" / "usergym" / "rules.json").read_text())
    knobs = json.loads((ROOT / "workspace" / "knobs.json").read_text())["user"]
    asked = ep("tau", [turn("[action] Could you tell me your first name, last name and zip code?")],
               task="tau-train-0000")
    one = replay.user_disclosures("usergym", rules, knobs, [asked])
    knobs["tau"]["facts_per_reply"] = 2
    two = replay.user_disclosures("usergym", rules, knobs, [asked])
    assert (one, two) == ({"tau": 1}, {"tau": 2})
    # an episode whose task the bench does not have is not replayed at all (not "0 disclosed")
    assert replay.user_disclosures("usergym", rules, knobs, [ep("tau", [turn("[action] hi?")], task="nope")]) == {}


def test_the_skill_names_the_findings_and_its_replay_script_runs(tmp_path):
    """What the built-in agent acts on, an LLM session reads in the skill and can run by hand."""
    import subprocess

    text = (ROOT / "skills" / "eau" / "SKILL.md").read_text()
    for kind in ("missing_step", "early_answer", "restated_prompt", "idle_module", "reward_hack",
                 "no_effect", "first_steps", "replay.py",
                 "Expect: took/<gym>/<step> rises, then score/<gym>."):
        assert kind in text, kind
    from episodes import write_steps
    write_steps(tmp_path / "run-001", {1: [travel_blind(), function_guess()], 2: [travel_blind()]})
    module = tmp_path / "progress.py"
    module.write_text(PROGRESS)
    out = subprocess.run([sys.executable, str(ROOT / "skills" / "eau" / "scripts" / "replay.py"),
                          str(tmp_path / "run-001"), "--module", str(module)],
                         capture_output=True, text=True, check=True).stdout
    got = json.loads(out)["module"]
    assert (got["travel"]["paid_turns"], got["function"]["pays"]) == (2, False)
