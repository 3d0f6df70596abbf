"""Short text that still reads as whole sentences: for the plain lines `start` prints, the
`status` tables, the report and the quotes in findings.

A reason cut at a fixed width ends mid-word ("... with 0 demonstration(s) sho", the CPU demo's
session line before this module); a reader cannot tell what was dropped. `fit` drops whole
sentences from the end, then whole clauses, and says where the rest is; `quote` shortens a
quoted agent turn at a word and marks the cut.
"""
from __future__ import annotations

import re

# a sentence ends at ., ! or ? and a space, except in "e.g." and "i.e."
_SENTENCE_END = re.compile(r"(?<=[.!?])(?<!e\.g\.)(?<!i\.e\.)\s+")
# clause boundaries a sentence may be shortened at, latest first: "; ", ", ", ": ", " (", " - "
_CLAUSE = re.compile(r";\s|,\s|:\s|\s\(|\s-\s|\s\u2014\s")


def sentences(text: str) -> list[str]:
    """`text` split after each sentence's end (., ! or ? and a space; not "e.g." or "i.e."),
    never inside a double-quoted span (a quoted agent turn has sentences of its own)."""
    flat = " ".join(str(text).split())
    out, start = [], 0
    for m in _SENTENCE_END.finditer(flat):
        if flat.count('"', start, m.start()) % 2 == 0:     # outside any quote
            out.append(flat[start:m.start()])
            start = m.end()
    out.append(flat[start:])
    return [x for x in out if x]


def _clauses_fit(sentence: str, limit: int) -> str | None:
    """The longest start of `sentence` that ends at a clause boundary and fits in `limit`
    characters with a closing period; None when not even its first clause fits."""
    best = None
    for m in _CLAUSE.finditer(sentence):
        if sentence.count('"', 0, m.start()) % 2:      # inside a quoted turn: not a clause of ours
            continue
        head = sentence[:m.start()].rstrip(" ,;:(-\u2014")
        if len(head) + 1 <= limit:
            best = head
    return None if best is None else best + "."


def fit(text: str, limit: int, more: str = "") -> str:
    """`text` in at most `limit` characters (plus `more`'s pointer), as whole sentences.

    Keeps as many leading sentences as fit; where even the first does not, keeps its leading
    clauses and ends them with a period; where not even a clause fits, keeps whole words and
    ends with "...". Whatever was dropped is announced by `more` (e.g. "(the rest in
    agents/s004/transcript.md)"), appended after a space. Text that fits is returned unchanged
    (whitespace runs collapsed)."""
    flat = " ".join(str(text).split())
    if len(flat) <= limit:
        return flat
    kept = ""
    for s in sentences(flat):
        candidate = f"{kept} {s}".strip()
        if len(candidate) > limit:
            break
        kept = candidate
    if not kept:
        first = sentences(flat)[0] if sentences(flat) else flat
        kept = _clauses_fit(first, limit) or _words_fit(first, limit)
    return f"{kept} {more}".rstrip() if more else kept


def _words_fit(text: str, limit: int) -> str:
    words, out = text.split(), ""
    for w in words:
        if len(out) + len(w) + 4 > limit:
            break
        out = f"{out} {w}".strip()
    if out.count('"') % 2:                  # never leave a quote open: drop the quote begun
        out = out[:out.rfind('"')].rstrip(" ,;:")
    return (out or words[0][:max(1, limit - 3)]) + "..."


def quote(text: str, limit: int = 90) -> str:
    """A quoted agent turn for a finding: its first `limit` characters, cut after a whole word
    and marked with "..." when shortened, in double quotes."""
    flat = " ".join(str(text or "").split())
    if len(flat) > limit:
        cut = flat[:limit - 3]
        cut = cut[:cut.rfind(" ")] if " " in cut else cut
        flat = cut + "..."
    return '"' + flat.replace('"', "'") + '"'
