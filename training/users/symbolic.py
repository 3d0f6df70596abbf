"""The symbolic user: an ordered list of rules over a parsed state of the interaction.

Why: the paper's co-evolution (section 4.2) lets a meta-agent edit the simulated user. A rule file it
can read, diff and edit (`users/<bench>/rules.json` in the workspace) is that user's symbolic arm;
it is deterministic, so a changed reply is always explained by a changed rule, knob or state.
The engine is bench-neutral: UserGym, ColBench and tau2 all use it with their own rules and Facts.

Rule file format (JSON; schema in `workspace/schema/rules.schema.json`)::

    {"version": 1,
     "rules": [
       {"id": "ask-matched",                 # unique, named in logs (info["rule_id"]) and errors
        "gyms": ["intention", "travel"],     # optional: the rule applies only to these gyms
        "when": {...conditions, all must hold; an empty object always holds...},
        "reveal": "matched" | "next" | "none",   # which hidden facts this reply discloses
        "kinds": ["preference"],             # optional: only facts of these kinds are revealed
        "say": "text with {facts}, {turn}"}  # the reply; {facts} joins the disclosed facts' text
     ]}

Rules are evaluated IN ORDER; the first rule whose conditions hold and which can do what it says
fires. A rule with reveal "matched"/"next" that would disclose nothing (no candidate, or the reveal
budget is spent) does not fire, and evaluation goes on to the next rule. No rule firing gives an
empty reply with rule_id None.

Conditions (`when`); a number may be written as {"knob": NAME}, read from `user.<gym>.NAME`:
  act: [..]            the agent's act: "question" (an [action] that asks something), "action",
                       "answer", "search", "other"
  matched: bool        the message matches a revealable fact (similarity >= match_threshold) or
                       touches a fact the task states (any of its keywords; see below)
  matched_revealed: bool  it matches a fact already disclosed
  regex / not_regex    regex searched (case-insensitive) in the agent's message, on RE2: Python's
                       syntax without backreferences or lookaround (training/users/rule_regex.py)
  min_turn, max_turn   bounds on the turn number (1-based)
  min_questions        questions asked so far, this one included
  every                turn % n == 0 (n <= 0 never holds); e.g. {"knob": "volunteer_interval"}
  reveals_left: bool   disclosures so far < max_reveals
  unrevealed_left: bool  some revealable fact was never disclosed

Knobs (`user.<gym>`, workspace/knobs.json): facts_per_reply (most facts in one reply),
match_threshold (similarity a question needs to match a fact), volunteer_interval (used through
`every`), max_reveals (budget of disclosures per episode), withhold_kinds (fact kinds never revealed).

A stated fact (Task.stated: Telepathy's "I am thinking of a fruit") is what the agent's prompt
already says. A message touching it counts as `matched`, but "reveal": "matched" discloses only the
hidden facts, so a rule that would disclose nothing else does not fire and a "none" rule answers it
(UserGym's yesno-bare: "Yes."): the user confirms its prompt instead of denying it, and tells
nothing, so nothing is paid or counted. Any one keyword confirms it: match_threshold sets how
precisely a question must ask to be told a hidden fact, and confirming a stated one tells nothing.
withhold_kinds never applies to a stated fact (the prompt has already said it).

The two defects of the paper's run (appendix A.2, table 7) do not exist here:
- max_reveals counts EVERY disclosure, a repeated disclosure of a fact already revealed included;
- withhold_kinds names kinds the data has: `compile_rules` is given the data's kinds, `check_kinds`
  refuses a kind no task has, and `SymbolicUser.respond` refuses a withheld kind the data lacks.

Similarity of a message to a fact: each of the fact's keywords (a word or a short phrase) counts as
hit when each of its words appears in the message (a word matches when one is a prefix of the
other, both at least 4 letters, or they are equal); similarity = hits / min(2, number of keywords),
capped at 1. So one keyword gives 0.5 and two give 1.0 for a fact with several keywords.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Iterable

from training.benches.base import Fact, Task, UserReply, UserState
from training.users.rule_regex import LinearRegex, RuleRegexError, compile_pattern

ACTS = ("question", "action", "answer", "search", "other")
REVEALS = ("matched", "next", "none")
USER_KNOBS = ("strategy_mix", "temperature", "llm", "facts_per_reply", "match_threshold",
              "volunteer_interval", "max_reveals", "withhold_kinds")
_NUMBER_CONDS = ("min_turn", "max_turn", "min_questions", "every")
_BOOL_CONDS = ("matched", "matched_revealed", "reveals_left", "unrevealed_left")
_REGEX_CONDS = ("regex", "not_regex")
_QUESTION_START = re.compile(
    r"^\s*(what|which|who|whom|whose|where|when|why|how|do|does|did|is|are|was|were|can|could|"
    r"would|will|should|shall|may|might|have|has|had|am|any|tell me|please tell)\b", re.I)
_WORD = re.compile(r"[a-z0-9]+")


class RuleError(ValueError):
    """A rules file that cannot be used; the message names the rule id, the field and the value."""


class UnknownFactKind(RuleError):
    """A fact kind (in a rule or in withhold_kinds) that no task of the data has."""


# ---------------------------------------------------------------- matching

def words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


def word_hit(word: str, bag: set[str]) -> bool:
    if word in bag:
        return True
    if len(word) < 4:
        return False
    return any(len(w) >= 4 and (w.startswith(word) or word.startswith(w)) for w in bag)


def key_hit(keyword: str, bag: set[str]) -> bool:
    """Whether a message whose words are `bag` touches `keyword` (a word or a short phrase): each
    of its words is a `word_hit`."""
    ws = words(keyword)
    return bool(ws) and all(word_hit(w, bag) for w in ws)


def similarity(message: str, fact: Fact) -> float:
    """How well `message` touches `fact`'s keywords, in [0, 1] (see the module docstring)."""
    keywords = fact.keywords or tuple(w for w in words(fact.text) if len(w) >= 4)[:4]
    if not keywords:
        return 0.0
    bag = set(words(message))
    hits = sum(1 for kw in keywords if key_hit(kw, bag))
    return min(1.0, hits / min(2, len(keywords)))


def match_facts(message: str, facts: Iterable[Fact], threshold: float) -> list[tuple[Fact, float]]:
    """Facts whose similarity reaches `threshold` (> 0), best first (then importance, then id)."""
    scored = [(f, similarity(message, f)) for f in facts]
    hits = [(f, s) for f, s in scored if s > 0 and s >= threshold]
    return sorted(hits, key=lambda fs: (-fs[1], -fs[0].importance, fs[0].id))


def is_question(text: str) -> bool:
    return "?" in text or bool(_QUESTION_START.match(text))


def parse_act(state: UserState) -> str:
    """The agent's act this turn: the tool it used (state.extra["act"]), "question" when an
    [action] (or a plain message) asks something."""
    act = state.extra.get("act")
    if act in ("answer", "search"):
        return act
    if act in ("action", None, "message"):
        return "question" if is_question(state.agent_message) else ("action" if act else "other")
    return "other"


# ---------------------------------------------------------------- compiling

@dataclass(frozen=True)
class Rule:
    id: str
    when: dict[str, Any]
    reveal: str
    say: str
    gyms: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    regex: LinearRegex | None = None
    not_regex: LinearRegex | None = None


@dataclass(frozen=True)
class CompiledRules:
    rules: tuple[Rule, ...]
    fact_kinds: frozenset[str]          # the kinds the data has (what withhold_kinds may name)


def _fail(rule_id: str, field: str, value: Any, why: str) -> RuleError:
    return RuleError(f"rule {rule_id!r}: field {field!r} has value {value!r}: {why}.")


def _check_number(rid: str, field: str, value: Any, knob_names: Iterable[str]) -> None:
    if isinstance(value, dict):
        if set(value) != {"knob"} or value["knob"] not in knob_names:
            raise _fail(rid, field, value, f"a knob reference must be {{\"knob\": NAME}} with NAME one "
                        f"of {', '.join(sorted(knob_names))}")
    elif isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _fail(rid, field, value, "expected a number or {\"knob\": NAME}")


def _compile_one(raw: Any, index: int, fact_kinds: set[str], knob_names: tuple[str, ...]) -> Rule:
    if not isinstance(raw, dict):
        raise RuleError(f"rule #{index}: expected an object, got {raw!r}.")
    rid = raw.get("id")
    if not isinstance(rid, str) or not rid:
        raise RuleError(f"rule #{index}: field 'id' has value {rid!r}: every rule needs a non-empty id.")
    unknown = set(raw) - {"id", "gyms", "when", "reveal", "kinds", "say", "note"}
    if unknown:
        raise _fail(rid, sorted(unknown)[0], raw[sorted(unknown)[0]], "unknown field")
    when = raw.get("when", {})
    if not isinstance(when, dict):
        raise _fail(rid, "when", when, "expected an object of conditions")
    compiled: dict[str, LinearRegex] = {}
    for key, value in when.items():
        field = f"when.{key}"
        if key == "act":
            if not isinstance(value, list) or not value or any(a not in ACTS for a in value):
                raise _fail(rid, field, value, f"expected a list of {', '.join(ACTS)}")
        elif key in _BOOL_CONDS:
            if not isinstance(value, bool):
                raise _fail(rid, field, value, "expected true or false")
        elif key in _NUMBER_CONDS:
            _check_number(rid, field, value, knob_names)
        elif key in _REGEX_CONDS:
            try:
                compiled[key] = compile_pattern(value)
            except RuleRegexError as exc:
                raise _fail(rid, field, value, str(exc)) from None
        else:
            raise _fail(rid, field, value, "unknown condition")
    reveal = raw.get("reveal", "none")
    if reveal not in REVEALS:
        raise _fail(rid, "reveal", reveal, f"expected one of {', '.join(REVEALS)}")
    kinds = raw.get("kinds", [])
    if not isinstance(kinds, list):
        raise _fail(rid, "kinds", kinds, "expected a list of fact kinds")
    for kind in kinds:
        if kind not in fact_kinds:
            raise UnknownFactKind(f"rule {rid!r}: field 'kinds' has value {kind!r}: no task has facts of "
                                  f"that kind (kinds in the data: {', '.join(sorted(fact_kinds)) or 'none'}).")
    say = raw.get("say", "")
    if not isinstance(say, str):
        raise _fail(rid, "say", say, "expected a string")
    try:
        say.format(facts="", turn=0, n_facts=0)
    except (KeyError, IndexError, ValueError) as exc:
        raise _fail(rid, "say", say, f"bad placeholder {exc} (use {{facts}}, {{turn}}, {{n_facts}})") from None
    gyms = raw.get("gyms", [])
    if not isinstance(gyms, list) or not all(isinstance(g, str) for g in gyms):
        raise _fail(rid, "gyms", gyms, "expected a list of gym names")
    return Rule(id=rid, when=dict(when), reveal=reveal, say=say, gyms=tuple(gyms), kinds=tuple(kinds),
                regex=compiled.get("regex"), not_regex=compiled.get("not_regex"))


def compile_rules(rules: dict, fact_kinds: set[str], knob_names: Iterable[str] = USER_KNOBS) -> CompiledRules:
    """Check and compile a rules.json document against the kinds of facts the data has.

    Raises RuleError (a ValueError) naming the rule id, the field and the value on a bad regex, an
    unknown condition, a reference to a knob that does not exist or to a fact kind no task has.
    """
    if not isinstance(rules, dict) or not isinstance(rules.get("rules"), list):
        raise RuleError("rules file: expected an object with a list under 'rules'.")
    knob_names = tuple(knob_names)
    out, seen = [], set()
    for i, raw in enumerate(rules["rules"]):
        rule = _compile_one(raw, i, set(fact_kinds), knob_names)
        if rule.id in seen:
            raise _fail(rule.id, "id", rule.id, "duplicate rule id")
        seen.add(rule.id)
        out.append(rule)
    return CompiledRules(rules=tuple(out), fact_kinds=frozenset(fact_kinds))


def check_kinds(kinds: Iterable[str], tasks: Iterable[Task]) -> None:
    """Refuse a fact kind that no task has (the reveal_return_shape defect, paper table 7)."""
    have = set().union(*(t.fact_kinds() for t in tasks)) if tasks else set()
    for kind in kinds:
        if kind not in have:
            raise UnknownFactKind(f"fact kind {kind!r} appears in no task (kinds in the data: "
                                  f"{', '.join(sorted(have)) or 'none'}): name one of those.")


# ---------------------------------------------------------------- responding

def _knob_number(value: Any, knobs: dict[str, Any]) -> float:
    if isinstance(value, dict):
        return float(knobs.get(value["knob"], 0) or 0)
    return float(value)


class SymbolicUser:
    """Deterministic user: `respond(state)` evaluates the compiled rules in order."""

    arm = "symbolic"

    def __init__(self, compiled: CompiledRules):
        self.compiled = compiled

    def check_knobs(self, knobs: dict[str, Any]) -> list[str]:
        """The withheld kinds of `knobs` (user.<gym>); raises UnknownFactKind for a kind the data
        lacks (called when an environment is made, so a bad snapshot fails at load, not mid-rollout)."""
        withheld = list(knobs.get("withhold_kinds", []) or [])
        for kind in withheld:
            if kind not in self.compiled.fact_kinds:
                raise UnknownFactKind(f"withhold_kinds names {kind!r}, but no task has facts of that kind "
                                      f"(kinds in the data: {', '.join(sorted(self.compiled.fact_kinds))}).")
        return withheld

    def respond(self, state: UserState) -> UserReply:
        ctx = _Context(state, self.check_knobs(state.knobs))
        for rule in self.compiled.rules:
            if rule.gyms and state.gym not in rule.gyms:
                continue
            if not ctx.holds(rule):
                continue
            facts = ctx.to_reveal(rule)
            if rule.reveal != "none" and not facts:
                continue
            text = rule.say.format(facts=" ".join(f.text for f in facts), turn=state.turn,
                                   n_facts=len(facts)).strip()
            return UserReply(text=text, revealed_facts=tuple(f.id for f in facts), rule_id=rule.id,
                             arm="symbolic")
        return UserReply(text="", rule_id=None, arm="symbolic")


class _Context:
    """The parsed state one reply is decided on: act, matched facts, counters, reveal budget."""

    def __init__(self, state: UserState, withheld: list[str]):
        k = state.knobs
        self.state = state
        self.act = parse_act(state)
        self.revealable = [f for f in state.task.facts if f.kind not in withheld]
        threshold = float(k.get("match_threshold", 0.5))
        # only a message that speaks to the user (a question, a plain action) can match a fact
        speaks = self.act not in ("answer", "search")
        self.matches = match_facts(state.agent_message, self.revealable, threshold) if speaks else []
        # stated facts the message touches: confirmed, never disclosed (module docstring)
        self.confirmed = [f for f in state.task.stated if similarity(state.agent_message, f) > 0] \
            if speaks else []
        self.per_reply = max(0, int(k.get("facts_per_reply", 1)))
        # every disclosure counts, repeats included (paper table 7, max_reveals defect)
        self.budget = max(0, int(k.get("max_reveals", 8)) - sum(state.revealed.values()))

    def holds(self, rule: Rule) -> bool:
        w, s = rule.when, self.state
        knobs = s.knobs
        if "act" in w and self.act not in w["act"]:
            return False
        matched = self._matched(rule)
        if "matched" in w and bool(matched) != w["matched"]:
            return False
        if "matched_revealed" in w and any(s.revealed.get(f.id) for f in matched) != w["matched_revealed"]:
            return False
        if rule.regex is not None and not rule.regex.search(s.agent_message):
            return False
        if rule.not_regex is not None and rule.not_regex.search(s.agent_message):
            return False
        if "min_turn" in w and s.turn < _knob_number(w["min_turn"], knobs):
            return False
        if "max_turn" in w and s.turn > _knob_number(w["max_turn"], knobs):
            return False
        if "min_questions" in w and s.questions_asked < _knob_number(w["min_questions"], knobs):
            return False
        if "every" in w:
            n = int(_knob_number(w["every"], knobs))
            if n <= 0 or s.turn % n != 0:
                return False
        if "reveals_left" in w and (self.budget > 0) != w["reveals_left"]:
            return False
        if "unrevealed_left" in w and bool(self._unrevealed(rule)) != w["unrevealed_left"]:
            return False
        return True

    def _kind_ok(self, rule: Rule, fact: Fact) -> bool:
        return not rule.kinds or fact.kind in rule.kinds

    def _matched(self, rule: Rule) -> list[Fact]:
        """The hidden facts the message matches, then the stated ones it touches."""
        return self._disclosable(rule) + [f for f in self.confirmed if self._kind_ok(rule, f)]

    def _disclosable(self, rule: Rule) -> list[Fact]:
        return [f for f, _ in self.matches if self._kind_ok(rule, f)]

    def _unrevealed(self, rule: Rule) -> list[Fact]:
        facts = [f for f in self.revealable if self._kind_ok(rule, f) and not self.state.revealed.get(f.id)]
        return sorted(facts, key=lambda f: (-f.importance, f.id))

    def to_reveal(self, rule: Rule) -> list[Fact]:
        if rule.reveal == "matched":
            facts = self._disclosable(rule)
        elif rule.reveal == "next":
            facts = self._unrevealed(rule)
        else:
            return []
        return facts[:min(self.per_reply, self.budget)]
