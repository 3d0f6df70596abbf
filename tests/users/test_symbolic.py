"""The symbolic user: rule order, determinism, the knobs, and the two defects of the paper's run
(appendix A.2, table 7) being absent."""
from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

from training.benches.base import Fact, Task, UserState
from training.users.symbolic import (RuleError, SymbolicUser, UnknownFactKind, check_kinds,
                                     compile_rules, match_facts, parse_act)

ROOT = Path(__file__).resolve().parents[2]
FACTS = (
    Fact("budget", "preference", "My budget is 200 dollars a night.", ("budget", "price", "cost")),
    Fact("pool", "preference", "The hotel must have a pool.", ("pool", "swim")),
    Fact("ret", "return", "It returns a list of ints.", ("return", "output")),
    Fact("shape", "shape", "The list has length n.", ("length", "shape")),
)
TASK = Task(id="t1", gym="travel", split="train", prompt="Book me a hotel.", facts=FACTS)
KNOBS = {"facts_per_reply": 1, "match_threshold": 0.5, "volunteer_interval": 0, "max_reveals": 8,
         "withhold_kinds": []}
KINDS = {"preference", "return", "shape", "concern", "category", "attribute"}


def state(msg, turn=1, revealed=None, act="action", **knobs):
    return UserState(gym="travel", task=TASK, turn=turn, agent_message=msg, history=[],
                     revealed=dict(revealed or {}), questions_asked=turn, knobs={**KNOBS, **knobs},
                     extra={"act": act})


def user(rules=None):
    doc = rules or json.loads((ROOT / "workspace/users/usergym/rules.json").read_text())
    return SymbolicUser(compile_rules(doc, KINDS))


def test_shipped_rules_follow_the_schema():
    schema = json.loads((ROOT / "workspace/schema/rules.schema.json").read_text())
    jsonschema.validate(json.loads((ROOT / "workspace/users/usergym/rules.json").read_text()), schema)


def test_matched_question_reveals_the_fact_and_is_deterministic():
    u = user()
    replies = [u.respond(state("What is your budget?")) for _ in range(3)]
    assert replies[0] == replies[1] == replies[2]
    assert replies[0].revealed_facts == ("budget",)
    assert replies[0].rule_id == "answer-matched" and "200 dollars" in replies[0].text


def test_unmatched_question_reveals_nothing():
    r = user().respond(state("Where do you want to go?"))
    assert r.revealed_facts == () and r.rule_id == "unknown"


def test_rules_are_evaluated_in_order():
    rules = {"version": 1, "rules": [
        {"id": "first", "when": {"regex": "budget"}, "reveal": "none", "say": "first"},
        {"id": "second", "when": {"act": ["question"], "matched": True}, "reveal": "matched", "say": "{facts}"}]}
    assert user(rules).respond(state("What is your budget?")).rule_id == "first"
    rules["rules"].reverse()
    assert user(rules).respond(state("What is your budget?")).rule_id == "second"


def test_facts_per_reply_bounds_one_reply():
    msg = "What is your budget and do you need a pool? What should it return?"
    assert len(user().respond(state(msg, facts_per_reply=1)).revealed_facts) == 1
    assert len(user().respond(state(msg, facts_per_reply=3)).revealed_facts) == 3


def test_match_threshold_changes_what_matches():
    # one keyword of three touched: similarity 0.5
    assert user().respond(state("Any price limit?", match_threshold=0.5)).revealed_facts == ("budget",)
    assert user().respond(state("Any price limit?", match_threshold=0.9)).revealed_facts == ()
    assert user().respond(state("Any price or budget limit?", match_threshold=0.9)).revealed_facts == ("budget",)


def test_volunteer_interval_offers_a_fact_unasked():
    r = user().respond(state("I will look for hotels now.", turn=3, volunteer_interval=3))
    assert r.rule_id == "volunteer" and len(r.revealed_facts) == 1
    assert user().respond(state("I will look for hotels now.", turn=3, volunteer_interval=0)).revealed_facts == ()
    assert user().respond(state("I will look for hotels now.", turn=4, volunteer_interval=3)).revealed_facts == ()


def test_max_reveals_bounds_repeated_disclosure_of_a_known_fact():
    """Defect 1 of table 7: re-disclosing an already revealed fact must consume the budget."""
    u = user()
    revealed = {"budget": 1}
    first = u.respond(state("What is your budget?", revealed=revealed, max_reveals=2))
    assert first.revealed_facts == ("budget",)            # a repeat, within budget (1 of 2 used)
    revealed["budget"] += 1
    second = u.respond(state("What is your budget again?", revealed=revealed, max_reveals=2))
    assert second.revealed_facts == () and second.rule_id == "budget-spent"


def test_withhold_kinds_filters_the_kind_the_data_has():
    """Defect 2 of table 7: the kind filter must apply to the kinds that leak (here 'return')."""
    assert user().respond(state("What does it return?")).revealed_facts == ("ret",)
    assert user().respond(state("What does it return?", withhold_kinds=["return"])).revealed_facts == ()


def test_withholding_a_kind_no_task_has_is_refused():
    with pytest.raises(UnknownFactKind, match="'colour'"):
        user().respond(state("What does it return?", withhold_kinds=["colour"]))
    with pytest.raises(UnknownFactKind, match="no task"):
        check_kinds(["colour"], [TASK])
    check_kinds(["return", "shape"], [TASK])


@pytest.mark.parametrize("rule, field", [
    ({"id": "r1", "when": {"regex": "(unclosed"}}, "when.regex"),
    ({"id": "r2", "when": {"every": {"knob": "no_such_knob"}}}, "when.every"),
    ({"id": "r3", "kinds": ["colour"]}, "kinds"),
    ({"id": "r4", "when": {"act": ["shout"]}}, "when.act"),
    ({"id": "r5", "say": "{secret}"}, "say"),
])
def test_bad_rules_name_rule_field_and_value(rule, field):
    with pytest.raises(RuleError) as err:
        compile_rules({"version": 1, "rules": [rule]}, KINDS)
    assert rule["id"] in str(err.value) and field in str(err.value)


def test_acts_and_matching():
    assert parse_act(state("what now", act="action")) == "question"
    assert parse_act(state("I booked it.", act="action")) == "action"
    assert parse_act(state("H3", act="answer")) == "answer"
    assert [f.id for f, _ in match_facts("need a swimming pool", FACTS, 0.5)] == ["pool"]


def test_turn_counters_and_knob_references():
    rules = {"version": 1, "rules": [
        {"id": "late", "when": {"min_turn": {"knob": "max_reveals"}}, "reveal": "none", "say": "late"},
        {"id": "asked-twice", "when": {"min_questions": 2, "max_turn": 5}, "reveal": "none", "say": "again"},
        {"id": "known", "when": {"matched_revealed": True}, "reveal": "none", "say": "I told you"},
        {"id": "rest", "reveal": "none", "say": "rest"}]}
    u = user(rules)
    assert u.respond(state("What is your budget?", turn=1)).rule_id == "rest"
    assert u.respond(state("What is your budget?", turn=1, revealed={"budget": 1})).rule_id == "known"
    assert u.respond(state("Hi?", turn=3)).rule_id == "asked-twice"      # questions_asked = turn here
    assert u.respond(state("Hi?", turn=4, max_reveals=4)).rule_id == "late"


# Telepathy's prompt says "I am thinking of a musical instrument": that is stated, the rest hidden.
PIANO = Task(id="t2", gym="telepathy", split="train", prompt="I am thinking of a musical instrument.",
             facts=(Fact("keys", "attribute", "It has keys.", ("keys",)),),
             stated=(Fact("category", "category", "It is a musical instrument.", ("musical", "instrument")),))


def ask(msg, revealed=None, **knobs):
    s = UserState(gym="telepathy", task=PIANO, turn=1, agent_message=msg, history=[],
                  revealed=dict(revealed or {}), questions_asked=1, knobs={**KNOBS, **knobs},
                  extra={"act": "action"})
    return user().respond(s)


def test_a_stated_fact_is_confirmed_but_never_disclosed():
    """The user answers what its prompt says truthfully (before, with the category hidden fact
    dropped, "Is it an instrument?" got "No."), and the answer discloses nothing: no fact in
    revealed_facts, so elicited_fact pays nothing and max_reveals is not spent."""
    r = ask("Is it an instrument?")
    assert (r.text, r.revealed_facts, r.rule_id) == ("Yes.", (), "yesno-bare")
    assert ask("Is it a fruit?").text == "No."
    both = ask("Is it an instrument with keys?")          # the hidden fact it also touches is told
    assert both.text == "Yes. It has keys." and both.revealed_facts == ("keys",)
    assert ask("Is it an instrument?", max_reveals=0).text == "Yes."


def test_any_word_of_a_stated_fact_confirms_it_whatever_the_threshold():
    """match_threshold sets how precisely a question must ask to be told a hidden fact; one word of
    the prompt's "musical instrument" at 1.0 still gets a yes, a hidden fact's half match does not."""
    assert ask("Is it musical?", match_threshold=1.0).text == "Yes."
    assert ask("Does it have keys?", match_threshold=1.0).text == "Yes. It has keys."


def test_withholding_a_stated_kind_leaves_the_prompts_word_confirmed():
    """withhold_kinds hides facts; a stated one was never hidden, so withholding its kind changes
    no answer, while withholding a hidden kind still silences it."""
    assert ask("Is it an instrument?", withhold_kinds=["category"]).text == "Yes."
    assert ask("Does it have keys?", withhold_kinds=["attribute"]).revealed_facts == ()
