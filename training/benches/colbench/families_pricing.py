"""Task families about money and numbers: shipping, order totals, late fees, tax, grades, bills.

Each family draws its hidden parameters (units, rates, thresholds, sentinel values, rounding)
from a seeded `random.Random` and writes the reference, the hidden test calls and the facts from
the same parameters. The description names the function and its arguments but leaves out the
hidden parameters, which the agent learns only by asking the collaborator.
"""
from __future__ import annotations

import random

from training.benches.colbench.spec import Spec, call


def shipping_cost(rng: random.Random) -> Spec:
    grams = rng.random() < 0.5
    base, per_kg = rng.choice([3.5, 4.0, 5.0, 6.5]), rng.choice([1.2, 1.5, 2.0, 2.5])
    zones = {1: 1.0}
    for z, m in enumerate(sorted(rng.sample([1.2, 1.4, 1.5, 1.8, 2.0, 2.5], rng.choice([1, 2, 3]))), 2):
        zones[z] = m
    heavy, surcharge = rng.choice([10, 20, 30]), rng.choice([5.0, 7.5, 10.0])
    bad = rng.choice([-1.0, 0.0])
    src = f'''def shipping_cost(weight, zone):
    multipliers = {zones!r}
    if zone not in multipliers:
        return {bad!r}
    kg = {"weight / 1000" if grams else "weight"}
    if kg <= 0:
        return 0.0
    cost = {base!r} + {per_kg!r} * kg
    if kg > {heavy}:
        cost += {surcharge!r}
    return round(cost * multipliers[zone], 2)
'''
    scale = 1000 if grams else 1
    weights = [0.5, 1.2, 3.0, heavy + 2.5, 7.25, 0]
    tests = [call("shipping_cost", w * scale, rng.choice(list(zones))) for w in weights]
    tests += [call("shipping_cost", 2 * scale, max(zones)), call("shipping_cost", 2 * scale, max(zones) + 1),
              call("shipping_cost", -5 * scale, 1)]
    desc = rng.choice(["Write a Python function `shipping_cost(weight, zone)` that returns the cost of "
                       "shipping a parcel.",
                       "We need `shipping_cost(weight, zone)` for the checkout service: it prices a "
                       "parcel for delivery."])
    s = Spec("shipping_cost", "shipping_cost", desc, src, tests)
    s.add("argument", f"The weight argument is in {'grams' if grams else 'kilograms'}.",
          "weight", "unit", "grams", "kilograms", "kg")
    s.add("rule", f"The cost is {base} plus {per_kg} per kilogram, and parcels over {heavy} kg pay "
          f"a {surcharge} surcharge.", "cost", "price", "rate", "fee", "kilogram", "heavy", "surcharge")
    s.add("argument", "The zone is an integer; the cost is multiplied by "
          + ", ".join(f"{m} for zone {z}" for z, m in zones.items()) + ".",
          "zone", "multiplier", "region", "destination")
    s.add("edge_case", f"An unknown zone returns {bad}, and a weight of zero or less costs 0.0.",
          "unknown", "invalid", "zone", "zero", "negative", "weight")
    s.add("return", "It returns the cost as a float rounded to 2 decimals.",
          "return", "round", "decimals", "float", "output")
    return s


def order_total(rng: random.Random) -> Spec:
    qty_first = rng.random() < 0.5
    names = rng.sample(["SAVE10", "WELCOME", "VIP20", "SPRING15", "HALFOFF", "FRIEND5"], 3)
    pcts = rng.sample([5, 10, 15, 20, 25, 50], 3)
    coupons = dict(zip(names, pcts))
    tax = rng.choice([0.0, 0.05, 0.08, 0.2])
    unknown = rng.choice(["ignore", "reject"])
    fold = rng.random() < 0.5
    pair = "qty, price" if qty_first else "price, qty"
    code = "coupon.upper()" if fold else "coupon"
    reject = "return -1.0" if unknown == "reject" else "code = None"
    src = f'''def order_total(items, coupon=None):
    coupons = {coupons!r}
    subtotal = sum(price * qty for {pair} in items)
    code = {code} if coupon else None
    if code is not None and code not in coupons:
        {reject}
    if code is not None:
        subtotal = subtotal * (1 - coupons[code] / 100)
    return round(subtotal * (1 + {tax!r}), 2)
'''
    def items(n):
        rows = [(rng.choice([2.5, 4.99, 10.0, 19.9, 100.0]), rng.randint(1, 4)) for _ in range(n)]
        return [[q, p] if qty_first else [p, q] for p, q in rows]
    tests = [call("order_total", items(2)), call("order_total", items(3), names[0]),
             call("order_total", items(1), names[1]), call("order_total", items(2), names[2]),
             call("order_total", items(2), names[0].lower()), call("order_total", items(2), "BOGUS"),
             call("order_total", []), call("order_total", items(4), None)]
    desc = rng.choice(["Write `order_total(items, coupon=None)` that computes what the customer pays "
                       "for an order.",
                       "Implement `order_total(items, coupon=None)` returning the total of a "
                       "shopping cart."])
    s = Spec("order_total", "order_total", desc, src, tests)
    s.add("argument", f"Each item is a pair [{pair.replace('qty', 'quantity')}].",
          "item", "items", "pair", "price", "quantity", "format")
    s.add("rule", "The coupons are " + ", ".join(f"{n} for {p}% off" for n, p in coupons.items())
          + (" and codes are case-insensitive." if fold else " and codes are case-sensitive."),
          "coupon", "code", "discount", "percent", "case")
    s.add("rule", f"Tax of {round(tax * 100)}% is added after the discount.", "tax", "vat", "rate")
    s.add("edge_case", "An unknown coupon " + ("returns -1.0." if unknown == "reject" else
          "is ignored (no discount).") + " An empty cart totals 0.0.",
          "unknown", "invalid", "coupon", "empty", "cart")
    s.add("return", "The total is a float rounded to 2 decimals.", "return", "round", "decimals", "float")
    return s


def late_fee(rng: random.Random) -> Spec:
    grace, rate = rng.choice([0, 2, 3, 5]), rng.choice([0.5, 1.0, 1.5, 2.0])
    cap, all_days = rng.choice([10, 15, 20, 25]), rng.random() < 0.5
    days = "days_late" if all_days else f"(days_late - {grace})"
    src = f'''def late_fee(days_late, amount):
    if days_late <= {grace} or amount <= 0:
        return 0.0
    fee = amount * {rate!r} / 100 * {days}
    return round(min(fee, amount * {cap} / 100), 2)
'''
    tests = [call("late_fee", d, rng.choice([80.0, 120.0, 250.0, 999.99]))
             for d in (grace, grace + 1, grace + 3, 7, 30, 90)]
    tests += [call("late_fee", 10, 0), call("late_fee", 0, 100.0), call("late_fee", -3, 100.0)]
    desc = rng.choice(["Write `late_fee(days_late, amount)` for our billing system: the fee charged "
                       "on an overdue invoice.",
                       "Implement `late_fee(days_late, amount)` that tells how much to charge for "
                       "paying late."])
    s = Spec("late_fee", "late_fee", desc, src, tests)
    s.add("rule", f"There is a grace period of {grace} days: no fee up to and including day {grace}.",
          "grace", "period", "days", "free", "late")
    s.add("rule", f"The fee is {rate}% of the amount per day, counted "
          + ("from the first day once the grace period is over." if all_days else
             "only for the days after the grace period."),
          "rate", "percent", "per", "day", "daily", "fee", "count")
    s.add("edge_case", f"The fee is capped at {cap}% of the amount; a zero or negative amount "
          "pays 0.0.", "cap", "maximum", "limit", "zero", "amount")
    s.add("return", "It returns a float rounded to 2 decimals.", "return", "round", "decimals")
    return s


def income_tax(rng: random.Random) -> Spec:
    t1 = rng.choice([10000, 12000, 15000])
    t2 = t1 + rng.choice([20000, 30000, 40000])
    r0, r1, r2 = rng.choice([0, 5]), rng.choice([10, 15, 20]), rng.choice([30, 35, 40])
    progressive, whole = rng.random() < 0.6, rng.random() < 0.5
    if progressive:
        body = (f"tax = min(income, {t1}) * {r0} / 100\n"
                f"    tax += max(0, min(income, {t2}) - {t1}) * {r1} / 100\n"
                f"    tax += max(0, income - {t2}) * {r2} / 100")
    else:
        body = f"rate = {r0} if income <= {t1} else {r1} if income <= {t2} else {r2}\n    tax = income * rate / 100"
    rnd = "round(tax)" if whole else "round(tax, 2)"
    src = f'''def income_tax(income):
    if income <= 0:
        return 0
    {body}
    return {rnd}
'''
    tests = [call("income_tax", x) for x in
             (t1 // 2, t1, t1 + 1234, t2, t2 + 5555, t2 * 3 + 17, 0, -500)]
    desc = rng.choice(["Write `income_tax(income)` that returns the tax owed on a yearly income.",
                       "Our payroll service needs `income_tax(income)`: compute the income tax."])
    s = Spec("income_tax", "income_tax", desc, src, tests)
    s.add("rule", f"The brackets are {r0}% up to {t1}, {r1}% up to {t2} and {r2}% above.",
          "bracket", "brackets", "rate", "rates", "percent", "threshold")
    s.add("rule", "Each rate applies only to the part of the income inside its bracket."
          if progressive else "The whole income is taxed at the rate of the bracket it falls in.",
          "progressive", "marginal", "whole", "bracket", "apply", "part")
    s.add("edge_case", "An income of zero or less owes 0.", "zero", "negative", "income", "edge")
    s.add("return", "It returns the tax rounded to " + ("a whole number." if whole else "2 decimals."),
          "return", "round", "rounded", "integer", "decimals")
    return s


def letter_grade(rng: random.Random) -> Spec:
    cuts = rng.choice([(90, 80, 70, 60), (93, 85, 77, 70), (85, 75, 65, 50)])
    fraction, bad = rng.random() < 0.5, rng.choice(["invalid", "?", "N/A"])
    strict = rng.random() < 0.4
    op = ">" if strict else ">="
    scale = "round(score * 100, 6)" if fraction else "score"
    top = 1 if fraction else 100
    lines = "\n".join(f"    if pct {op} {c}:\n        return {g!r}" for c, g in zip(cuts, "ABCD"))
    src = f'''def letter_grade(score):
    if score < 0 or score > {top}:
        return {bad!r}
    pct = {scale}
{lines}
    return 'F'
'''
    pts = [cuts[0], cuts[1] + 1, cuts[2] - 1, cuts[3], cuts[3] - 5, 100, 0]
    vals = [p / 100 for p in pts] if fraction else pts
    tests = [call("letter_grade", v) for v in vals] + [call("letter_grade", 150), call("letter_grade", -1)]
    desc = rng.choice(["Write `letter_grade(score)` that turns a score into a letter grade.",
                       "Implement `letter_grade(score)` for the gradebook service."])
    s = Spec("letter_grade", "letter_grade", desc, src, tests)
    s.add("argument", "The score is a fraction between 0 and 1." if fraction else
          "The score is a percentage between 0 and 100.", "score", "range", "scale", "fraction", "percent")
    s.add("rule", "The cutoffs are " + ", ".join(f"{g} from {c}" for c, g in zip(cuts, "ABCD"))
          + ", F below.", "cutoff", "cutoffs", "threshold", "grade", "letter", "boundaries")
    s.add("edge_case", ("A score exactly on a cutoff gets the lower letter (strictly above is needed)."
                        if strict else "A score exactly on a cutoff gets that letter."),
          "exactly", "boundary", "cutoff", "equal", "inclusive")
    s.add("edge_case", f"A score outside the range returns {bad!r}.", "outside", "invalid", "range")
    s.add("return", "It returns one capital letter A, B, C, D or F.", "return", "letter", "plus", "minus")
    return s


def electricity_bill(rng: random.Random) -> Spec:
    fee, t1 = rng.choice([5.0, 8.5, 12.0]), rng.choice([100, 200, 300])
    t2 = t1 + rng.choice([200, 300, 500])
    p1, p2, p3 = rng.choice([0.1, 0.12]), rng.choice([0.15, 0.18]), rng.choice([0.22, 0.25, 0.3])
    wh = rng.random() < 0.4
    neg = rng.choice([0.0, -1.0])
    conv = "usage / 1000" if wh else "usage"
    src = f'''def electricity_bill(usage):
    kwh = {conv}
    if kwh < 0:
        return {neg!r}
    cost = min(kwh, {t1}) * {p1!r}
    cost += max(0, min(kwh, {t2}) - {t1}) * {p2!r}
    cost += max(0, kwh - {t2}) * {p3!r}
    return round({fee!r} + cost, 2)
'''
    k = 1000 if wh else 1
    tests = [call("electricity_bill", x * k) for x in
             (0, t1 // 2, t1, t1 + 50, t2, t2 + 120, 2 * t2 + 7, -10)]
    desc = rng.choice(["Write `electricity_bill(usage)` returning the monthly electricity bill.",
                       "Implement `electricity_bill(usage)` for the utilities portal."])
    s = Spec("electricity_bill", "electricity_bill", desc, src, tests)
    s.add("argument", f"usage is in {'watt-hours' if wh else 'kilowatt-hours'}.",
          "usage", "unit", "units", "kwh", "watt", "measured")
    s.add("rule", f"Tiered prices: {p1} per kWh up to {t1}, {p2} up to {t2}, {p3} above.",
          "tier", "tiers", "price", "rate", "per", "kwh")
    s.add("rule", f"A fixed monthly fee of {fee} is always added.", "fixed", "fee", "monthly", "standing")
    s.add("edge_case", f"Negative usage returns {neg}.", "negative", "invalid", "usage")
    s.add("return", "It returns a float rounded to 2 decimals.", "return", "round", "decimals")
    return s


FAMILIES = (shipping_cost, order_total, late_fee, income_tax, letter_grade, electricity_bill)
