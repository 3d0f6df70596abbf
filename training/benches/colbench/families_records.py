"""Task families about records and collections: paging, per-customer totals, restocking, moving
averages, working days, rate limiting, merging bookings, password checks.

Same contract as families_pricing.py: hidden parameters drawn from a seeded rng write the
reference, the hidden tests and the facts together.
"""
from __future__ import annotations

import random

from training.benches.colbench.spec import Spec, call


def paginate(rng: random.Random) -> Spec:
    base, size = rng.choice([0, 1]), rng.choice([5, 10, 20])
    meta, clamp = rng.random() < 0.5, rng.random() < 0.4
    total = "(len(items) + page_size - 1) // page_size"
    over = (f"page = min(max(page, {base}), max(pages - 1 + {base}, {base}))" if clamp else
            f"if page < {base} or page >= pages + {base}:\n        chunk = []\n    else:\n    "
            "    chunk = None")
    src = f'''def paginate(items, page, page_size={size}):
    if page_size <= 0:
        return {'{"items": [], "page": page, "total_pages": 0}' if meta else '[]'}
    pages = {total}
    chunk = None
    {over}
    if chunk is None:
        start = (page - {base}) * page_size
        chunk = items[start:start + page_size]
    return {'{"items": chunk, "page": page, "total_pages": pages}' if meta else 'chunk'}
'''
    items = list(range(1, rng.choice([23, 37, 41])))
    tests = [call("paginate", items, base), call("paginate", items, base + 1),
             call("paginate", items, base + 1, 7), call("paginate", items, 99),
             call("paginate", items, -1), call("paginate", [], base), call("paginate", items, base, 0),
             call("paginate", ["a", "b", "c"], base, 2)]
    desc = rng.choice(["Write `paginate(items, page, page_size=...)` that returns one page of a list.",
                       "Implement `paginate(items, page, page_size=...)` for our list endpoints."])
    s = Spec("paginate", "paginate", desc, src, tests)
    s.add("argument", f"Pages are numbered from {base}; the default page_size is {size}.",
          "page", "numbered", "index", "first", "start", "default", "size")
    s.add("shape", "It returns a dict with keys items, page and total_pages." if meta else
          "It returns just the list of items on that page.", "return", "dict", "list", "metadata", "total")
    s.add("edge_case", ("A page out of range is clamped to the first or last page." if clamp else
                        "A page out of range gives an empty list of items.")
          + " A page_size of zero or less gives no items.", "out", "range", "beyond", "last",
          "invalid", "empty")
    return s


def totals_by_customer(rng: random.Random) -> Spec:
    ranked, paid_only = rng.random() < 0.5, rng.random() < 0.5
    refunds, tuples = rng.random() < 0.5, rng.random() < 0.5
    get = "customer, amount, status = order" if tuples else \
        'customer, amount, status = order["customer"], order["amount"], order["status"]'
    skip = []
    if paid_only:
        skip.append('status != "paid"')
    if not refunds:
        skip.append("amount < 0")
    skip_line = f"\n        if {' or '.join(skip)}:\n            continue" if skip else ""
    ret = ("sorted(([name, round(total, 2)] for name, total in totals.items()), "
           "key=lambda row: (-row[1], row[0]))" if ranked else
           "{name: round(total, 2) for name, total in totals.items()}")
    src = f'''def totals_by_customer(orders):
    totals = {{}}
    for order in orders:
        {get}{skip_line}
        totals[customer] = totals.get(customer, 0) + amount
    return {ret}
'''
    def orders(n):
        rows = [(rng.choice(["ann", "bob", "cy", "dee"]), rng.choice([12.5, 30.0, 7.25, 99.99, -10.0]),
                 rng.choice(["paid", "paid", "pending"])) for _ in range(n)]
        return [list(r) for r in rows] if tuples else \
            [{"customer": c, "amount": a, "status": st} for c, a, st in rows]
    tests = [call("totals_by_customer", orders(n)) for n in (1, 3, 5, 8, 12)] + \
        [call("totals_by_customer", [])]
    desc = rng.choice(["Write `totals_by_customer(orders)` that sums order amounts per customer.",
                       "Implement `totals_by_customer(orders)` for the sales dashboard."])
    s = Spec("totals_by_customer", "totals_by_customer", desc, src, tests)
    s.add("argument", "Each order is a list [customer, amount, status]." if tuples else
          "Each order is a dict with keys customer, amount and status.", "order", "orders",
          "format", "fields", "input", "keys")
    s.add("rule", ("Only orders with status 'paid' count." if paid_only else "Every status counts.")
          + (" Negative amounts (refunds) are included." if refunds else " Negative amounts are skipped."),
          "status", "paid", "pending", "refund", "refunds", "negative", "count")
    s.add("shape", "It returns a list of [customer, total] sorted by total descending, then name."
          if ranked else "It returns a dict customer -> total.", "return", "sorted", "order",
          "dict", "list", "shape")
    s.add("return", "Totals are rounded to 2 decimals.", "round", "decimals", "total")
    return s


def restock_list(rng: random.Random) -> Spec:
    inclusive, by_qty = rng.random() < 0.5, rng.random() < 0.5
    default, pairs = rng.choice([5, 10, 3]), rng.random() < 0.5
    op = "<=" if inclusive else "<"
    key = "key=lambda name: (inventory[name], name)" if by_qty else ""
    row = "[name, threshold - inventory[name]]" if pairs else "name"
    src = f'''def restock_list(inventory, threshold={default}):
    low = [name for name, qty in inventory.items() if qty {op} threshold]
    return [{row} for name in sorted(low{", " + key if key else ""})]
'''
    def inv():
        names = rng.sample(["bolts", "nuts", "gears", "belts", "pumps", "tape", "wire"], 5)
        return {n: rng.choice([0, 1, 2, 3, 5, 8, 10, 12, 20]) for n in names}
    tests = [call("restock_list", inv()) for _ in range(4)]
    tests += [call("restock_list", inv(), 8), call("restock_list", {"a": 5, "b": 5}, 5),
              call("restock_list", {})]
    desc = rng.choice(["Write `restock_list(inventory, threshold=...)` listing what to reorder.",
                       "Implement `restock_list(inventory, threshold=...)` for the warehouse."])
    s = Spec("restock_list", "restock_list", desc, src, tests)
    s.add("argument", f"inventory maps item name to quantity; the default threshold is {default}.",
          "inventory", "threshold", "default", "argument", "maps")
    s.add("edge_case", "An item exactly at the threshold needs restocking." if inclusive else
          "An item exactly at the threshold does not need restocking.", "exactly", "equal",
          "threshold", "boundary", "at")
    s.add("shape", ("Items are sorted by quantity, lowest first, then by name." if by_qty else
                    "Items are sorted by name.") + (" Each entry is [name, threshold - quantity]."
                                                    if pairs else " Each entry is just the name."),
          "sorted", "order", "return", "entry", "list", "format")
    return s


def moving_average(rng: random.Random) -> Spec:
    partial, digits = rng.random() < 0.5, rng.choice([1, 2, 3])
    default, skip_none = rng.choice([3, 5]), rng.random() < 0.5
    clean = "\n    values = [v for v in values if v is not None]" if skip_none else ""
    if partial:
        body = "[sum(values[max(0, i - window + 1):i + 1]) / len(values[max(0, i - window + 1):i + 1]) for i in range(len(values))]"
    else:
        body = "[sum(values[i:i + window]) / window for i in range(len(values) - window + 1)]"
    src = f'''def moving_average(values, window={default}):{clean}
    if window <= 0 or window > len(values):
        return []
    averages = {body}
    return [round(a, {digits}) for a in averages]
'''
    vals = lambda n: [rng.choice([1, 2, 3.5, 4, 10, 7.25]) for _ in range(n)]
    tests = [call("moving_average", vals(8)), call("moving_average", vals(6), 2),
             call("moving_average", vals(4), 4), call("moving_average", vals(3), 5),
             call("moving_average", [], 1), call("moving_average", vals(5), 0),
             call("moving_average", [1, None, 3, 5, None, 7], 2)]
    desc = rng.choice(["Write `moving_average(values, window=...)` for our metrics charts.",
                       "Implement `moving_average(values, window=...)` that smooths a series."])
    s = Spec("moving_average", "moving_average", desc, src, tests)
    s.add("shape", "The output has one value per input value; early points average what is "
          "available." if partial else "The output has len(values) - window + 1 values (full "
          "windows only).", "length", "output", "size", "windows", "partial", "start")
    s.add("return", f"Averages are rounded to {digits} decimals; the default window is {default}.",
          "round", "decimals", "default", "window", "return")
    s.add("edge_case", ("None values are dropped first." if skip_none else "None values are not "
                        "expected and raise an error.") + " A window above the length or not "
          "positive returns [].", "none", "missing", "gaps", "window", "larger", "empty")
    return s


def working_days(rng: random.Random) -> Spec:
    inclusive, weekend = rng.random() < 0.5, rng.choice([(5, 6), (4, 5)])
    swap, holidays = rng.random() < 0.5, rng.choice([(), ("01-01", "12-25"), ("07-04",)])
    end_cmp = "<=" if inclusive else "<"
    order = ("if end < start:\n        start, end = end, start" if swap else
             "if end < start:\n        return 0")
    src = f'''from datetime import date, timedelta

def working_days(start, end):
    start, end = date.fromisoformat(start), date.fromisoformat(end)
    {order}
    count, day = 0, start
    while day {end_cmp} end:
        if day.weekday() not in {weekend!r} and day.strftime("%m-%d") not in {holidays!r}:
            count += 1
        day += timedelta(days=1)
    return count
'''
    tests = [call("working_days", a, b) for a, b in
             (("2024-03-04", "2024-03-08"), ("2024-03-01", "2024-03-31"), ("2024-12-20", "2025-01-03"),
              ("2024-07-01", "2024-07-07"), ("2024-03-09", "2024-03-09"), ("2024-03-15", "2024-03-11"),
              ("2024-02-26", "2024-03-04"))]
    desc = rng.choice(["Write `working_days(start, end)` that counts working days between two dates.",
                       "Implement `working_days(start, end)` for the leave-request form."])
    s = Spec("working_days", "working_days", desc, src, tests)
    s.add("argument", "Dates are ISO strings 'YYYY-MM-DD'.", "dates", "format", "string", "iso")
    s.add("edge_case", "The end date is included." if inclusive else "The end date is excluded.",
          "inclusive", "include", "exclusive", "end", "last")
    s.add("rule", ("The weekend is Saturday and Sunday." if weekend == (5, 6) else
                   "The weekend is Friday and Saturday.") + (" Holidays (every year): " + ", ".join(holidays)
                                                             + "." if holidays else " No holidays."),
          "weekend", "weekends", "holidays", "holiday", "friday", "saturday", "sunday")
    s.add("edge_case", "If end is before start the dates are swapped." if swap else
          "If end is before start it returns 0.", "before", "reversed", "order", "swap")
    return s


def rate_limit(rng: random.Random) -> Spec:
    shape, inclusive = rng.choice(["count", "flags", "accepted"]), rng.random() < 0.5
    default = rng.choice([10, 60])
    cmp = "<=" if inclusive else "<"
    ret = {"count": "sum(flags)", "flags": "flags",
           "accepted": "[t for t, ok in zip(stamps, flags) if ok]"}[shape]
    src = f'''def rate_limit(timestamps, limit, window={default}):
    stamps = sorted(timestamps)
    accepted, flags = [], []
    for t in stamps:
        recent = [a for a in accepted if t - a {cmp} window]
        ok = len(recent) < limit
        flags.append(ok)
        if ok:
            accepted.append(t)
    return {ret}
'''
    tests = [call("rate_limit", sorted(rng.sample(range(0, 3 * default), 12)), 3),
             call("rate_limit", [0, 1, 2, 3, default, default + 1], 2),
             call("rate_limit", [5, 1, 3, 2], 2, 10), call("rate_limit", [], 1),
             call("rate_limit", [0, default, 2 * default], 1),
             call("rate_limit", list(range(0, 40, 2)), 4, 7)]
    desc = rng.choice(["Write `rate_limit(timestamps, limit, window=...)` for the API gateway.",
                       "Implement `rate_limit(timestamps, limit, window=...)` that applies a "
                       "request limit."])
    s = Spec("rate_limit", "rate_limit", desc, src, tests)
    s.add("shape", {"count": "It returns how many requests are accepted.",
                    "flags": "It returns a list of booleans, one per request in time order.",
                    "accepted": "It returns the list of accepted timestamps in time order."}[shape],
          "return", "output", "count", "list", "booleans", "accepted")
    s.add("rule", f"Sliding window of {default} seconds by default; at most limit accepted requests "
          "in it; rejected ones do not count.", "window", "sliding", "default", "seconds", "rejected")
    s.add("edge_case", ("A request exactly window seconds after an accepted one still sees it "
                        "(inclusive)." if inclusive else "A request exactly window seconds later "
                        "no longer sees it (exclusive)."), "exactly", "boundary", "inclusive",
          "edge", "window")
    s.add("argument", "Timestamps are seconds and may come unsorted; they are sorted first.",
          "timestamps", "sorted", "unsorted", "order", "seconds", "units")
    return s


def merge_bookings(rng: random.Random) -> Spec:
    touch, out = rng.random() < 0.5, rng.choice(["merged", "count", "total"])
    bad = rng.choice(["drop", "swap"])
    cmp = "<=" if touch else "<"
    fix = ("[[min(a, b), max(a, b)] for a, b in bookings]" if bad == "swap" else
           "[[a, b] for a, b in bookings if a <= b]")
    ret = {"merged": "merged", "count": "len(merged)", "total": "sum(b - a for a, b in merged)"}[out]
    src = f'''def merge_bookings(bookings):
    spans = sorted({fix})
    merged = []
    for a, b in spans:
        if merged and a {cmp} merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return {ret}
'''
    tests = [call("merge_bookings", x) for x in
             ([[1, 3], [2, 6], [8, 10]], [[1, 4], [4, 5]], [[5, 7], [1, 2]], [[9, 3], [1, 2]], [],
              [[1, 10], [2, 3], [10, 12]], sorted([rng.randint(0, 20), rng.randint(21, 30)] for _ in range(4)))]
    desc = rng.choice(["Write `merge_bookings(bookings)` that combines overlapping room bookings.",
                       "Implement `merge_bookings(bookings)` for the calendar service."])
    s = Spec("merge_bookings", "merge_bookings", desc, src, tests)
    s.add("edge_case", "Bookings that only touch (end == start) are merged." if touch else
          "Bookings that only touch (end == start) stay separate.", "touch", "adjacent",
          "equal", "back", "end", "start")
    s.add("return", {"merged": "It returns the merged [start, end] pairs sorted by start.",
                     "count": "It returns how many separate blocks remain after merging.",
                     "total": "It returns the total booked time covered by the merged blocks."}[out],
          "return", "output", "result", "count", "total", "list")
    s.add("edge_case", "A booking with end before start is dropped." if bad == "drop" else
          "A booking with end before start has its ends swapped.", "invalid", "reversed",
          "backwards", "before")
    s.add("argument", "Each booking is a pair [start, end] of numbers.", "booking", "pair", "format")
    return s


def validate_password(rng: random.Random) -> Spec:
    min_len = rng.choice([8, 10, 12])
    rules = [("too_short", f"len(pw) < {min_len}")]
    for name, expr in rng.sample([("no_digit", "not any(c.isdigit() for c in pw)"),
                                  ("no_upper", "not any(c.isupper() for c in pw)"),
                                  ("no_symbol", "not any(c in '!@#$%&*' for c in pw)"),
                                  ("has_space", "' ' in pw")], rng.choice([2, 3])):
        rules.append((name, expr))
    as_list = rng.random() < 0.6
    checks = "\n".join(f"    if {e}:\n        failed.append({n!r})" for n, e in rules)
    src = f'''def validate_password(pw):
    failed = []
{checks}
    return {"failed" if as_list else "not failed"}
'''
    tests = [call("validate_password", p) for p in
             ("short", "longenoughpassword", "Longenough1!", "Has Space 123!", "ABCDEFGHIJKLMN",
              "aB3$" * 4, "", "Zz9#" * 2 + "x")]
    desc = rng.choice(["Write `validate_password(pw)` that checks a new password.",
                       "Implement `validate_password(pw)` for the sign-up form."])
    s = Spec("validate_password", "validate_password", desc, src, tests)
    s.add("rule", f"It must be at least {min_len} characters long.", "length", "long", "short",
          "minimum", "characters")
    s.add("rule", "The other rules: " + ", ".join(n for n, _ in rules[1:]) + ".", "rules", "digit",
          "upper", "symbol", "space", "requirements")
    if any(n == "no_symbol" for n, _ in rules):
        s.add("rule", "The symbols that count are !@#$%&*.", "symbol", "symbols", "special")
    s.add("return", "It returns the list of failed rule names in the order "
          + ", ".join(n for n, _ in rules) + " (empty when valid)." if as_list else
          "It returns True when valid, False otherwise.", "return", "output", "list", "bool",
          "names", "errors")
    return s


FAMILIES = (paginate, totals_by_customer, restock_list, moving_average, working_days, rate_limit,
            merge_bookings, validate_password)
