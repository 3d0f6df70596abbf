"""Rule regexes on a linear-time engine: RE2 (PyPI `google-re2`), never Python's backtracking `re`.

A symbolic-user rule's `regex` / `not_regex` condition (training/users/symbolic.py) is searched in
every message the policy writes. The gate replays a rule on recent messages, but it cannot foresee
what the policy writes later, and Python's `re` backtracks: `(x+x+)+y` takes a number of steps
exponential in n on a message of n x's and no y (about 2^n), which would stall the trainer
mid-rollout on a message no replay contained. RE2 runs in time linear in the message for every
pattern (https://github.com/google/re2/wiki/WhyRE2), and pays for it with features it lacks:
backreferences, lookahead and lookbehind, atomic groups and possessive repeats. A pattern that
uses one is refused in one sentence when the rules compile, which is where the gate, the rule
replay and the trainer all build them (`compile_rules`).

Matching is case-insensitive, as the rules have always been matched.
"""
from __future__ import annotations

import re

import re2

_OPTIONS = re2.Options()
_OPTIONS.case_sensitive = False
_OPTIONS.log_errors = False           # RE2 would print each refused pattern to stderr as well

# RE2's parse errors for the Perl syntax it lacks, as google-re2 1.1 words them, and what a
# rule writer calls that syntax
_LACKS = (("invalid perl operator: (?=", "a lookahead"),
          ("invalid perl operator: (?!", "a negative lookahead"),
          ("invalid perl operator: (?<=", "a lookbehind"),
          ("invalid perl operator: (?<!", "a negative lookbehind"),
          ("invalid perl operator: (?>", "an atomic group"),
          ("invalid perl operator: (?(", "a conditional group"),
          ("bad repetition operator: ++", "a possessive repeat"),
          ("bad repetition operator: *+", "a possessive repeat"),
          ("bad repetition operator: ?+", "a possessive repeat"))
_BACKREF = re.compile(r"invalid escape sequence: \\[1-9]")   # \1 .. \9


class RuleRegexError(ValueError):
    """A rule regex RE2 cannot run; the message is the reason, without the rule's name."""


class LinearRegex:
    """A compiled rule regex: `search(text)` gives a match object or None, like `re.Pattern`."""

    def __init__(self, pattern: str):
        self.pattern = pattern
        self._compiled = re2.compile(pattern, _OPTIONS)

    def search(self, text: str):
        try:
            return self._compiled.search(text)
        except UnicodeEncodeError:     # a lone surrogate: RE2 reads UTF-8, which cannot hold one
            return self._compiled.search(text.encode("utf-8", "replace").decode("utf-8"))


def compile_pattern(pattern) -> LinearRegex:
    """RE2's compiled `pattern`, or RuleRegexError saying in one clause what it lacks."""
    if not isinstance(pattern, str):
        raise RuleRegexError("expected a regular expression as a string")
    try:
        return LinearRegex(pattern)
    except re2.error as exc:
        error = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) \
            else str(exc)
    what = next((name for prefix, name in _LACKS if error.startswith(prefix)), None)
    if _BACKREF.match(error) or (what is None and "(?P=" in pattern):
        what = "a backreference"          # for (?P=name) RE2 names only "(?P"
    if what is not None:
        raise RuleRegexError(f"it uses {what}, which RE2 lacks (rule conditions run on RE2, whose "
                             f"matching time is linear in the message): write the condition "
                             f"without it")
    raise RuleRegexError(f"not a regular expression RE2 accepts ({error})")
