"""Leak detector: how often a user reply reveals a hidden fact the agent did not ask for.

Why: the paper's ColBench run (appendix A.2, table 7) saw a user that, with more facts per reply,
handed over the reference solution unasked; a reward then measures the simulator, not the agent.
`user/leak_rate` (DESIGN.md metric names) is the fraction of user replies that disclose at least
one fact the agent's message did not match.

- `detect_revealed(reply_text, facts, known)`: facts whose content a free-text reply (an LLM
  user's) discloses: at least 60% of the fact's evidence words appear in the reply. Those are its
  value words (the words of its text that are not its keywords nor common words; numbers always
  count) that the agent has not read already in `known` (the task's prompt). Where the prompt
  holds them all, they are its keywords' words outside the prompt instead.
- `asked(agent_message, facts, threshold)`: the fact ids the message asks for (similarity >=
  threshold, training.users.symbolic.similarity), best match first; recorded on each turn as
  `asked_facts`, so that a reply can be read against what it was asked.
- `leaked(agent_message, revealed, facts, threshold)`: the disclosed fact ids the message did not
  ask for.
- `leak_rate(step_infos)`: over the step info dicts of episodes, replies with a leak / replies.
- `stale_replies(turns)`: the replies of one episode that told again only facts told before in
  it while the question also asked for a fact never told (the `stale/<gym>` metric and the
  diagnosis's `stale_disclosure` finding).
- `looped_reply(text)`: a reply that says one sentence three times or more (an LLM user caught in
  a loop; the `looped/<gym>` metric and the diagnosis's `user_loop` finding).
"""
from __future__ import annotations

import re
from collections import Counter
from typing import Any, Iterable

from training.benches.base import Fact
from training.users.symbolic import match_facts, words

_COMMON = frozenset("""a an the and or but if of to in on at for with by from as is are was were be been
am i my me we our you your it its this that these those there here have has had do does did not no yes
would like want need should could can will just also very really some any all about into than then so
please prefer preferred which what when where who how why""".split())


def value_words(fact: Fact) -> set[str]:
    keyword_words = {w for kw in fact.keywords for w in words(kw)}
    return {w for w in words(fact.text)
            if w not in _COMMON and w not in keyword_words and (len(w) >= 3 or w.isdigit())}


def evidence_words(fact: Fact, known: set[str]) -> set[str]:
    """The words whose presence in a reply shows `fact` told: its value words outside `known`
    (words the agent has read already), else its keywords' words outside `known`. In the H100
    run of 2026-12-08 against the 135M LLM user, 52 of turtle's 54 "leaks" (steps 19-24) were
    replies echoing the puzzle's own words: "The package is a parachute." has the value word
    "package", which the puzzle names, while its secret is the keyword "parachute"."""
    vw = value_words(fact) - known
    if vw:
        return vw
    return {w for kw in fact.keywords for w in words(kw)
            if w not in _COMMON and w not in known and (len(w) >= 3 or w.isdigit())}


def detect_revealed(reply_text: str, facts: Iterable[Fact], min_share: float = 0.6,
                    known: str = "") -> list[str]:
    bag, seen = set(words(reply_text)), set(words(known))
    found = []
    for fact in facts:
        ev = evidence_words(fact, seen)
        if ev and len(ev & bag) / len(ev) >= min_share:
            found.append(fact.id)
    return found


def asked(agent_message: str, facts: Iterable[Fact], threshold: float) -> list[str]:
    return [f.id for f, _ in match_facts(agent_message, list(facts), threshold)]


def leaked(agent_message: str, revealed: Iterable[str], facts: Iterable[Fact], threshold: float) -> list[str]:
    wanted = set(asked(agent_message, facts, threshold))
    return [fid for fid in revealed if fid not in wanted]


def leak_rate(step_infos: Iterable[dict]) -> float:
    """Fraction of user replies that leaked a fact; 0.0 with no replies. A step is a reply when
    info["user_replied"] is true (or, in records without that key, when it has a user arm)."""
    replies = leaks = 0
    for info in step_infos:
        if not info.get("user_replied", info.get("user_arm") is not None):
            continue
        replies += 1
        leaks += bool(info.get("leaked_facts"))
    return leaks / replies if replies else 0.0


Stale = tuple[dict[str, Any], list[str], list[str]]     # (turn, told again, asked and never told)


def disclosing_replies(turns: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns whose user reply disclosed a fact: what `stale/<gym>` is a share of."""
    return [t for t in turns if t.get("revealed_facts") and t.get("user_replied", True)]


def stale_replies(turns: Iterable[dict[str, Any]]) -> list[Stale]:
    """(turn, facts told again, asked facts never told) for each reply of one episode's turn
    records that disclosed only facts told before in it while the question also asked for one
    never told. Asked "first name, last name and zip code?", the tau user of the H100 runs of
    2026-12-07 said "My name is ..." to every asking (both facts match equally, one fact a reply,
    the name first), so no episode could identify its user. Records without `asked_facts`
    (written before it existed) have none."""
    told: set[str] = set()
    out = []
    for t in turns:
        revealed = [str(f) for f in t.get("revealed_facts") or []]
        if t.get("user_replied", True) and revealed and "asked_facts" in t:
            untold = [str(f) for f in t["asked_facts"] if str(f) not in told | set(revealed)]
            if untold and set(revealed) <= told:
                out.append((t, revealed, untold))
        told.update(revealed)
    return out


LOOP_TIMES = 3      # "I'm sorry. I'm sorry. I'm sorry." is a loop; a sentence said twice may be emphasis
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+|\n+")


def looped_reply(text: str, times: int = LOOP_TIMES) -> bool:
    """Whether `text` says one sentence `times` times or more (sentences compared lower-cased,
    spaces collapsed). The 135M reference user, answering every turn of the H100 run of
    2026-12-08, did so in 17-26% of its replies, most running on to the 96-token limit:
    "I'm sorry. I'm sorry. I'm sorry. ..."; the symbolic user's rule templates never do."""
    sentences = [" ".join(s.lower().split()) for s in _SENTENCE_END.split(text or "")]
    counts = Counter(s for s in sentences if s)
    return bool(counts) and counts.most_common(1)[0][1] >= times
