"""Task families about parsing and formatting text: durations, slugs, card masks, query strings,
phone numbers, log lines.

Same contract as families_pricing.py: hidden parameters drawn from a seeded rng write the
reference, the hidden tests and the facts together.
"""
from __future__ import annotations

import random

from training.benches.colbench.spec import Spec, call


def parse_duration(rng: random.Random) -> Spec:
    minutes, bad = rng.random() < 0.5, rng.choice([-1, 0])
    days, fold = rng.random() < 0.5, rng.random() < 0.5
    units = "dhms" if days else "hms"
    text = "text.lower()" if fold else "text"
    ret = "round(total / 60, 2)" if minutes else "total"
    src = f'''import re

def parse_duration(text):
    pattern = r"(\\d+)\\s*([{units}])"
    parts = re.findall(pattern, {text})
    if not parts or re.sub(pattern, "", {text}).strip():
        return {bad}
    factors = {{"d": 86400, "h": 3600, "m": 60, "s": 1}}
    total = sum(int(n) * factors[u] for n, u in parts)
    return {ret}
'''
    tests = [call("parse_duration", t) for t in
             ("1h30m", "45s", "2h", f"{rng.randint(2, 9)}m {rng.randint(1, 59)}s", "1d2h",
              "90M", "", "soon", "3h 5m 10s")]
    desc = rng.choice(["Write `parse_duration(text)` that parses a duration such as \"1h30m\".",
                       "Implement `parse_duration(text)` for the scheduler's time-limit field."])
    s = Spec("parse_duration", "parse_duration", desc, src, tests)
    s.add("return", f"It returns the duration in {'minutes, rounded to 2 decimals' if minutes else 'whole seconds'}.",
          "return", "unit", "seconds", "minutes", "output")
    s.add("argument", "Units are " + ("d, h, m and s" if days else "h, m and s (no days)")
          + ", each after a number, spaces allowed between parts.", "units", "format", "days",
          "hours", "accepted", "syntax")
    s.add("edge_case", "Upper-case units are accepted." if fold else
          "Units must be lower case; upper case is invalid.", "case", "upper", "uppercase", "capital")
    s.add("edge_case", f"Empty or malformed text returns {bad}.", "empty", "invalid", "malformed", "error")
    return s


def slugify(rng: random.Random) -> Spec:
    sep, max_len = rng.choice(["-", "_"]), rng.choice([None, 20, 30])
    stop = rng.choice([(), ("a", "an", "the"), ("a", "an", "the", "of", "and")])
    empty = rng.choice(["", "untitled", "n-a"])
    cut = f"\n    slug = slug[:{max_len}].rstrip({sep!r})" if max_len else ""
    src = f'''import re

def slugify(title):
    words = re.findall(r"[a-z0-9]+", title.lower())
    words = [w for w in words if w not in {tuple(sorted(stop))!r}]
    slug = {sep!r}.join(words){cut}
    return slug or {empty!r}
'''
    tests = [call("slugify", t) for t in
             ("Hello World", "The Art of War", "  Many   spaces -- and  dashes ",
              "An Introduction to the Theory of Computation and Its Applications",
              "Café & Bar 2024!", "", "!!!", "a an the")]
    desc = rng.choice(["Write `slugify(title)` that turns an article title into a URL slug.",
                       "Implement `slugify(title)` for the blog's permalinks."])
    s = Spec("slugify", "slugify", desc, src, tests)
    s.add("rule", f"Words are lower-cased, keep only a-z and 0-9, and are joined with {sep!r}.",
          "separator", "join", "dash", "underscore", "lowercase", "characters")
    s.add("rule", ("These words are dropped: " + ", ".join(stop) + ".") if stop else "No words are dropped.",
          "stop", "words", "drop", "remove", "skip", "articles")
    s.add("shape", f"The slug is cut to at most {max_len} characters, without a trailing separator."
          if max_len else "There is no length limit.", "length", "long", "maximum", "limit", "truncate")
    s.add("edge_case", f"When nothing is left it returns {empty!r}.", "empty", "nothing", "blank")
    return s


def mask_card(rng: random.Random) -> Spec:
    keep, mask = rng.choice([4, 2, 6]), rng.choice(["*", "#", "X"])
    group, bad = rng.random() < 0.5, rng.choice(["", "invalid"])
    grp = ('\n    masked = " ".join(masked[i:i + 4] for i in range(0, len(masked), 4))'
           if group else "")
    src = f'''def mask_card(number):
    if any(not (c.isdigit() or c in " -") for c in number):
        return {bad!r}
    digits = "".join(c for c in number if c.isdigit())
    if not 12 <= len(digits) <= 19:
        return {bad!r}
    masked = {mask!r} * (len(digits) - {keep}) + digits[-{keep}:]{grp}
    return masked
'''
    tests = [call("mask_card", t) for t in
             ("4111111111111111", "5500 0000 0000 0004", "3782-822463-10005", "1234",
              "4111x11111111111", "", "60110000000000000004")]
    desc = rng.choice(["Write `mask_card(number)` that hides a credit card number for display.",
                       "Implement `mask_card(number)` used on receipts."])
    s = Spec("mask_card", "mask_card", desc, src, tests)
    s.add("rule", f"Show only the last {keep} digits; every other digit becomes {mask!r}.",
          "last", "digits", "show", "visible", "keep", "mask", "character")
    s.add("argument", "The number may contain spaces or dashes, which are ignored.",
          "spaces", "dashes", "format", "input", "number")
    s.add("shape", "The result is grouped in blocks of 4 separated by spaces." if group else
          "The result has no spaces or grouping.", "group", "groups", "blocks", "spaces", "format")
    s.add("edge_case", f"Other characters, or fewer than 12 / more than 19 digits, return {bad!r}.",
          "invalid", "short", "letters", "length", "error")
    return s


def parse_query(rng: random.Random) -> Spec:
    repeat, ints = rng.choice(["last", "first", "list"]), rng.random() < 0.5
    flag = rng.choice(["", True])
    conv = "int(value) if value.isdigit() else value" if ints else "value"
    merge = {"last": "result[key] = value",
             "first": "result.setdefault(key, value)",
             "list": ("if key in result:\n            old = result[key]\n"
                      "            result[key] = (old if isinstance(old, list) else [old]) + [value]\n"
                      "        else:\n            result[key] = value")}[repeat]
    src = f'''def parse_query(qs):
    result = {{}}
    for part in qs.lstrip("?").split("&"):
        if not part:
            continue
        if "=" in part:
            key, value = part.split("=", 1)
            value = {conv}
        else:
            key, value = part, {flag!r}
        {merge}
    return result
'''
    tests = [call("parse_query", t) for t in
             ("a=1&b=two", "?page=3&sort=name", "tag=x&tag=y&tag=z", "debug&v=2", "", "a=&b=5",
              "x=1&&y=2", "id=007&id=8")]
    desc = rng.choice(["Write `parse_query(qs)` that parses a URL query string.",
                       "Implement `parse_query(qs)` for our tiny web framework."])
    s = Spec("parse_query", "parse_query", desc, src, tests)
    s.add("shape", {"last": "It returns a dict; for a repeated key the last value wins.",
                    "first": "It returns a dict; for a repeated key the first value wins.",
                    "list": "It returns a dict; a repeated key maps to the list of its values."}[repeat],
          "repeated", "duplicate", "same", "key", "list", "dict", "return")
    s.add("return", "Values made only of digits become ints; others stay strings." if ints
          else "All values stay strings.", "values", "type", "int", "numbers", "string", "convert")
    s.add("edge_case", f"A key without '=' gets {flag!r}; empty parts are skipped; a leading '?' is "
          "ignored.", "without", "missing", "flag", "empty", "question")
    return s


def normalize_phone(rng: random.Random) -> Spec:
    fmt = rng.choice(["+1-{a}-{b}-{c}", "({a}) {b}-{c}", "{a}.{b}.{c}", "{a}{b}{c}"])
    bad, country = rng.choice(["", "invalid"]), rng.random() < 0.6
    strip = ('\n    if len(digits) == 11 and digits[0] == "1":\n        digits = digits[1:]'
             if country else "")
    src = f'''def normalize_phone(raw):
    digits = "".join(c for c in raw if c.isdigit()){strip}
    if len(digits) != 10:
        return {bad!r}
    a, b, c = digits[:3], digits[3:6], digits[6:]
    return {fmt!r}.format(a=a, b=b, c=c)
'''
    tests = [call("normalize_phone", t) for t in
             ("555-123-4567", "(555) 987 6543", "+1 555 222 3333", "15551234567", "12345",
              "555.444.1212 ext", "", "25551234567")]
    desc = rng.choice(["Write `normalize_phone(raw)` that cleans up a US phone number.",
                       "Implement `normalize_phone(raw)` for the contacts import."])
    s = Spec("normalize_phone", "normalize_phone", desc, src, tests)
    s.add("shape", "The output format is " + fmt.format(a="555", b="123", c="4567") + ".",
          "format", "output", "dashes", "parentheses", "dots", "look")
    s.add("argument", "Any non-digit characters in the input are ignored"
          + (", and an 11-digit number starting with 1 drops the country code." if country else
             "; there is no country code handling."), "country", "code", "input", "characters")
    s.add("edge_case", f"Anything that does not give exactly 10 digits returns {bad!r}.",
          "invalid", "short", "long", "digits", "error")
    return s


def parse_log_line(rng: random.Random) -> Spec:
    shape = rng.choice(["dict4", "pair", "dict2"])
    bad, alias = rng.choice(["empty", "none_str"]), rng.random() < 0.5
    empty = {"dict4": "{}", "dict2": "{}", "pair": "[]"}[shape] if bad == "empty" else "'invalid'"
    out = {"dict4": '{"date": date, "time": time, "level": level, "message": message}',
           "dict2": '{"level": level, "message": message}', "pair": "[level, message]"}[shape]
    alias_line = '\n    level = {"WARN": "WARNING"}.get(level, level)' if alias else ""
    src = f'''def parse_log_line(line):
    parts = line.split(" ", 3)
    if len(parts) < 4:
        return {empty}
    date, time, level, message = parts
    level = level.upper(){alias_line}
    if level not in ("DEBUG", "INFO", "WARNING", "ERROR"):
        return {empty}
    return {out}
'''
    tests = [call("parse_log_line", t) for t in
             ("2024-03-01 12:00:05 ERROR disk full", "2024-03-01 12:00:06 info user logged in",
              "2024-03-02 08:15:00 WARN low memory", "2024-03-02 08:15:01 WARNING cpu hot",
              "garbage", "2024-03-02 08:15:02 FATAL boom", "")]
    desc = rng.choice(["Write `parse_log_line(line)` that parses one line of our service log.",
                       "Implement `parse_log_line(line)` so the log viewer can read log lines."])
    s = Spec("parse_log_line", "parse_log_line", desc, src, tests)
    s.add("argument", "A line is 'DATE TIME LEVEL message', separated by single spaces.",
          "line", "format", "fields", "input", "level")
    s.add("shape", {"dict4": "It returns a dict with keys date, time, level and message.",
                    "dict2": "It returns a dict with keys level and message only.",
                    "pair": "It returns a list [level, message]."}[shape],
          "return", "keys", "dict", "list", "fields", "output")
    s.add("rule", "Levels are DEBUG, INFO, WARNING, ERROR, upper-cased"
          + ("; WARN counts as WARNING." if alias else "; WARN is not a level."),
          "levels", "level", "warn", "case", "upper")
    s.add("edge_case", f"A malformed line or unknown level returns {empty}.",
          "malformed", "invalid", "unknown", "error", "empty")
    return s


FAMILIES = (parse_duration, slugify, mask_card, parse_query, normalize_phone, parse_log_line)
