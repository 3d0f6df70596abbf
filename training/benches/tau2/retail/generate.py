"""Generate our compact retail database and tasks (seeded): `python -m training.benches.tau2.retail.generate`.

The database: 10 product types with 4-6 variants each, 40 users, 2-3 orders per user. The tasks
(60 train, 20 test) cycle through eight kinds of request, each with gold actions that replay:
cancel a pending order, change its address, its payment method or an item, return or exchange
items of a delivered order, change the user's address, and a question whose answer must be told
(COMMUNICATE). The user identifies by email or by name and zip code.
"""
from __future__ import annotations

import random
from pathlib import Path

from training.benches.tau2.retail.data_model import CANCEL_REASONS
from training.benches.tau2.synth import address, digits, person, task_record, write_domain

FOLDER = Path(__file__).resolve().parent
SEED = 2026
PRODUCTS = {
    "T-Shirt": {"color": ["red", "navy", "white", "green"], "size": ["S", "M", "L", "XL"]},
    "Water Bottle": {"capacity": ["500ml", "750ml", "1000ml"], "material": ["steel", "glass"]},
    "Desk Lamp": {"color": ["black", "white", "silver"], "brightness": ["low", "medium", "high"]},
    "Backpack": {"color": ["black", "grey", "olive"], "size": ["small", "medium", "large"]},
    "Headphones": {"type": ["over-ear", "on-ear", "in-ear"], "connectivity": ["wired", "wireless"]},
    "Sneakers": {"size": ["8", "9", "10", "11"], "material": ["leather", "mesh"]},
    "Coffee Maker": {"color": ["black", "red", "stainless"], "capacity": ["4 cups", "8 cups", "12 cups"]},
    "Yoga Mat": {"thickness": ["4mm", "6mm", "8mm"], "material": ["rubber", "PVC", "TPE"]},
    "Smart Watch": {"color": ["black", "gold", "silver"], "band": ["leather", "silicone"]},
    "Office Chair": {"material": ["mesh", "leather", "fabric"], "armrest": ["fixed", "adjustable"]},
}
BASE_PRICE = {"T-Shirt": 25, "Water Bottle": 30, "Desk Lamp": 60, "Backpack": 80, "Headphones": 150,
              "Sneakers": 110, "Coffee Maker": 90, "Yoga Mat": 40, "Smart Watch": 250,
              "Office Chair": 300}
KINDS = ("cancel", "address", "payment", "items", "return", "exchange", "user_address", "info")


def make_products(rng: random.Random) -> dict:
    products = {}
    for name, dims in PRODUCTS.items():
        pid = digits(rng, 10)
        keys = list(dims)
        combos = [(a, b) for a in dims[keys[0]] for b in dims[keys[1]]]
        variants = {}
        for a, b in rng.sample(combos, k=min(len(combos), rng.randint(4, 6))):
            iid = digits(rng, 10)
            variants[iid] = {"item_id": iid, "options": {keys[0]: a, keys[1]: b},
                             "available": rng.random() < 0.8,
                             "price": round(BASE_PRICE[name] * rng.uniform(0.85, 1.25), 2)}
        first = next(iter(variants.values()))
        first["available"] = True
        products[pid] = {"name": name, "product_id": pid, "variants": variants}
    return products


def make_user(rng: random.Random, used: set, n: int) -> dict:
    first, last = person(rng, used)
    uid = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
    methods = {}
    card = f"credit_card_{digits(rng, 7)}"
    methods[card] = {"source": "credit_card", "id": card, "brand": rng.choice(["visa", "mastercard"]),
                     "last_four": digits(rng, 4)}
    if n % 2 == 0:
        gift = f"gift_card_{digits(rng, 7)}"
        methods[gift] = {"source": "gift_card", "id": gift, "balance": float(rng.randint(20, 400))}
    if n % 3 == 0:
        pp = f"paypal_{digits(rng, 7)}"
        methods[pp] = {"source": "paypal", "id": pp}
    return {"user_id": uid, "name": {"first_name": first, "last_name": last},
            "address": address(rng), "email": f"{first.lower()}.{last.lower()}{rng.randint(10, 99)}@example.com",
            "payment_methods": methods, "orders": []}


def make_order(rng: random.Random, user: dict, products: dict, status: str, orders: dict) -> dict:
    oid = f"#W{digits(rng, 7)}"
    items = []
    for p in rng.sample(list(products.values()), k=rng.randint(1, 3)):
        v = rng.choice(list(p["variants"].values()))
        items.append({"name": p["name"], "product_id": p["product_id"], "item_id": v["item_id"],
                      "price": v["price"], "options": dict(v["options"])})
    method = rng.choice(list(user["payment_methods"]))
    total = round(sum(i["price"] for i in items), 2)
    fulfil = [] if status == "pending" else [{"tracking_id": [digits(rng, 12)],
                                              "item_ids": [i["item_id"] for i in items]}]
    order = {"order_id": oid, "user_id": user["user_id"], "address": dict(user["address"]),
             "items": items, "status": status, "fulfillments": fulfil,
             "payment_history": [{"transaction_type": "payment", "amount": total,
                                  "payment_method_id": method}]}
    orders[oid] = order
    user["orders"].append(oid)
    return order


def make_db(rng: random.Random) -> dict:
    products, users, orders, used = make_products(rng), {}, {}, set()
    for n in range(40):
        user = make_user(rng, used, n)
        users[user["user_id"]] = user
        statuses = ["pending", "delivered"] + rng.sample(["processed", "cancelled", "delivered",
                                                          "pending"], k=rng.randint(0, 1))
        for status in statuses:
            make_order(rng, user, products, status, orders)
    return {"products": products, "users": users, "orders": orders}


def identify(rng: random.Random, user: dict) -> tuple[str, dict]:
    """(known_info sentence, the lookup action) by email or by name and zip."""
    if rng.random() < 0.5:
        return (f"Your email is {user['email']}.",
                {"name": "find_user_id_by_email", "arguments": {"email": user["email"]}})
    n = user["name"]
    return (f"You are {n['first_name']} {n['last_name']} and your zip code is {user['address']['zip']}.",
            {"name": "find_user_id_by_name_zip", "arguments": {
                "first_name": n["first_name"], "last_name": n["last_name"],
                "zip": user["address"]["zip"]}})


def other_variant(rng, products, item, *, need_available=True):
    choices = [v for v in products[item["product_id"]]["variants"].values()
               if v["item_id"] != item["item_id"] and (v["available"] or not need_available)]
    return rng.choice(choices) if choices else None


def describe(options: dict) -> str:
    return ", ".join(f"{k} {v}" for k, v in options.items())


def _orders(db: dict, user: dict, status: str) -> list[dict]:
    return [db["orders"][o] for o in user["orders"] if db["orders"][o]["status"] == status]


def build(kind: str, rng: random.Random, db: dict, user: dict) -> dict | None:
    """The parts of one task of `kind` for `user`: reason, actions (after the lookup),
    communicate; None when the user's orders do not allow that kind."""
    pending, delivered = _orders(db, user, "pending"), _orders(db, user, "delivered")
    uid = user["user_id"]
    get_user = {"name": "get_user_details", "arguments": {"user_id": uid}}
    if kind in ("cancel", "address", "payment", "items") and not pending:
        return None
    if kind in ("return", "exchange") and not delivered:
        return None
    order = rng.choice(pending if kind in ("cancel", "address", "payment", "items") else
                       delivered or [None])
    oid = order["order_id"] if order else None
    get_order = {"name": "get_order_details", "arguments": {"order_id": oid}}
    first_item = order["items"][0] if order else None
    if kind == "cancel":
        reason = rng.choice(CANCEL_REASONS)
        why = "You no longer need it." if reason == "no longer needed" else "You ordered it by mistake."
        return {"reason": f"You want to cancel your order {oid}. {why}",
                "actions": [get_user, get_order, {"name": "cancel_pending_order",
                                                  "arguments": {"order_id": oid, "reason": reason}}]}
    if kind == "address":
        new = address(rng)
        line = f"{new['address1']}{', ' + new['address2'] if new['address2'] else ''}, " \
               f"{new['city']}, {new['state']} {new['zip']}, {new['country']}"
        return {"reason": f"You want to change the shipping address of your order {oid}. "
                          f"The new address is {line}.",
                "actions": [get_user, get_order, {"name": "modify_pending_order_address",
                                                  "arguments": {"order_id": oid, **new}}]}
    if kind == "payment":
        current = order["payment_history"][0]["payment_method_id"]
        amount = order["payment_history"][0]["amount"]
        options = [m for m, pm in user["payment_methods"].items() if m != current and
                   (pm["source"] != "gift_card" or pm["balance"] >= amount)]
        if not options:
            return None
        new = rng.choice(options)
        label = {"credit": "credit card", "gift": "gift card", "paypal": "PayPal account"}[new.split("_")[0]]
        return {"reason": f"You want to pay for your order {oid} with your {label} "
                          f"instead. The payment method id is {new}.",
                "actions": [get_user, get_order, {"name": "modify_pending_order_payment",
                                                  "arguments": {"order_id": oid, "payment_method_id": new}}]}
    if kind in ("items", "exchange"):
        new = other_variant(rng, db["products"], first_item)
        pay = order["payment_history"][0]["payment_method_id"]
        method = user["payment_methods"][pay]
        if new is None or (method["source"] == "gift_card"
                           and method["balance"] < new["price"] - first_item["price"]):
            return None
        verb = "change" if kind == "items" else "exchange"
        tool = "modify_pending_order_items" if kind == "items" else "exchange_delivered_order_items"
        return {"reason": f"You want to {verb} the {first_item['name'].lower()} in your order {oid} "
                          f"for the one with {describe(new['options'])}. "
                          f"Any price difference goes to the original payment method.",
                "actions": [get_user, get_order,
                            {"name": "get_product_details", "arguments": {"product_id": first_item["product_id"]}},
                            {"name": tool, "arguments": {"order_id": oid, "item_ids": [first_item["item_id"]],
                                                         "new_item_ids": [new["item_id"]],
                                                         "payment_method_id": pay}}]}
    if kind == "return":
        items = order["items"][: rng.randint(1, len(order["items"]))]
        pay = order["payment_history"][0]["payment_method_id"]
        names = " and the ".join(i["name"].lower() for i in items)
        return {"reason": f"You want to return the {names} from your order {oid}. "
                          f"The refund should go to the original payment method.",
                "actions": [get_user, get_order, {"name": "return_delivered_order_items", "arguments": {
                    "order_id": oid, "item_ids": [i["item_id"] for i in items], "payment_method_id": pay}}]}
    if kind == "user_address":
        new = address(rng)
        return {"reason": f"You moved and want to update the default address on your account. "
                          f"The new address is {new['address1']}, {new['address2'] or 'no second line'}, "
                          f"{new['city']}, {new['state']} {new['zip']}, {new['country']}.",
                "actions": [get_user, {"name": "modify_user_address", "arguments": {"user_id": uid, **new}}]}
    if kind == "info":
        n_orders = len(user["orders"])
        return {"reason": f"You want to know how many orders you have placed with the store. "
                          f"You just want the number; you do not want to change anything.",
                "actions": [get_user], "communicate": [str(n_orders)]}
    raise ValueError(kind)


def make_tasks(rng: random.Random, db: dict, n_train: int = 60, n_test: int = 20) -> list[dict]:
    users = list(db["users"].values())
    tasks, i = [], 0
    while len(tasks) < n_train + n_test:
        kind = KINDS[i % len(KINDS)]
        user = users[(i * 7) % len(users)]
        i += 1
        parts = build(kind, rng, db, user)
        if parts is None:
            continue
        known, lookup = identify(rng, user)
        split = "train" if len(tasks) < n_train else "test"
        tasks.append(task_record(
            f"ours_{kind}_{len(tasks):03d}", split, reason=parts["reason"], known=known,
            unknown="You do not remember your email address." if "zip" in known else "",
            actions=[lookup] + parts["actions"], communicate=parts.get("communicate")))
    return tasks


def main() -> None:
    rng = random.Random(SEED)
    db = make_db(rng)
    write_domain(FOLDER, db, make_tasks(rng, db))


if __name__ == "__main__":
    main()
