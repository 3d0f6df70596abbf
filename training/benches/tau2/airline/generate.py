"""Generate our compact airline database and tasks (seeded): `python -m training.benches.tau2.airline.generate`.

The database: 40 flights on 16 routes between 8 airports, each flying every day of 2024-05-10..30
(before the clock, 2024-05-15 15:00, they have landed; a few days are delayed or cancelled), 30
users, 40 reservations. The tasks (60 train, 20 test) cycle through eight kinds of request with
gold actions that replay: cancel an eligible reservation, add a bag, fix a passenger's details,
move a flight to another day, upgrade the cabin, book a one-way trip, compensation for a
cancelled flight, and a flight-status question that must be answered (COMMUNICATE).
"""
from __future__ import annotations

import datetime
import random
from pathlib import Path

from training.benches.tau2.synth import address, digits, person, task_record, write_domain

FOLDER = Path(__file__).resolve().parent
SEED = 2027
AIRPORTS = ["JFK", "SFO", "ORD", "SEA", "BOS", "DEN", "ATL", "MIA"]
DAYS = [(datetime.date(2024, 5, 10) + datetime.timedelta(days=i)).isoformat() for i in range(21)]
TODAY = "2024-05-15"
KINDS = ("cancel", "bags", "passenger", "move", "upgrade", "book", "compensation", "status")


def make_flights(rng: random.Random) -> dict:
    routes = set()
    while len(routes) < 16:
        a, b = rng.sample(AIRPORTS, 2)
        routes.add((a, b))
    flights, n = {}, 1
    for a, b in sorted(routes):
        for _ in range(rng.choice([2, 3])):
            if n > 40:
                break
            dep = rng.randint(5, 20)
            dur = rng.randint(2, 5)
            number = f"HAT{n:03d}"
            n += 1
            dates = {}
            for day in DAYS:
                if day < TODAY:
                    dates[day] = {"status": "landed",
                                  "actual_departure_time_est": f"{day}T{dep:02d}:05:00",
                                  "actual_arrival_time_est": f"{day}T{(dep + dur) % 24:02d}:10:00"}
                elif day == TODAY and rng.random() < 0.3:
                    dates[day] = rng.choice([{"status": "cancelled"}, {
                        "status": "delayed", "estimated_departure_time_est": f"{day}T{dep + 2:02d}:00:00",
                        "estimated_arrival_time_est": f"{day}T{(dep + dur + 2) % 24:02d}:00:00"}])
                else:
                    base = rng.randint(80, 180)
                    dates[day] = {"status": "available",
                                  "available_seats": {"basic_economy": rng.randint(0, 9),
                                                      "economy": rng.randint(2, 15),
                                                      "business": rng.randint(1, 8)},
                                  "prices": {"basic_economy": base - rng.randint(20, 50),
                                             "economy": base, "business": base * 3 + rng.randint(0, 60)}}
            flights[number] = {"flight_number": number, "origin": a, "destination": b,
                               "scheduled_departure_time_est": f"{dep:02d}:00:00",
                               "scheduled_arrival_time_est": f"{(dep + dur) % 24:02d}:00:00"
                                                             + ("+1" if dep + dur >= 24 else ""),
                               "dates": dates}
    return flights


def make_user(rng: random.Random, used: set) -> dict:
    first, last = person(rng, used)
    uid = f"{first.lower()}_{last.lower()}_{rng.randint(1000, 9999)}"
    card, gift = f"credit_card_{digits(rng, 7)}", f"gift_card_{digits(rng, 7)}"
    methods = {card: {"source": "credit_card", "id": card, "brand": rng.choice(["visa", "mastercard"]),
                      "last_four": digits(rng, 4)},
               gift: {"source": "gift_card", "id": gift, "amount": float(rng.randint(0, 300))}}
    if rng.random() < 0.3:
        cert = f"certificate_{digits(rng, 7)}"
        methods[cert] = {"source": "certificate", "id": cert, "amount": float(rng.choice([100, 150, 250]))}
    companion = person(rng, set())
    return {"user_id": uid, "name": {"first_name": first, "last_name": last},
            "address": {**address(rng)}, "email": f"{first.lower()}.{last.lower()}@example.com",
            "dob": f"19{rng.randint(50, 99)}-{rng.randint(1, 12):02d}-{rng.randint(1, 28):02d}",
            "payment_methods": methods,
            "saved_passengers": [{"first_name": companion[0], "last_name": companion[1],
                                  "dob": f"19{rng.randint(60, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}"}],
            "membership": rng.choice(["regular", "silver", "gold"]), "reservations": []}


def make_reservation(rng: random.Random, user: dict, flights: dict, reservations: dict) -> dict:
    flight = rng.choice(list(flights.values()))
    day = rng.choice([d for d in DAYS if d >= TODAY])
    cabin = rng.choice(["basic_economy", "economy", "economy", "business"])
    info = flight["dates"][day]
    price = info["prices"][cabin] if info["status"] == "available" else 150
    passengers = [{"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"],
                   "dob": user["dob"]}] + user["saved_passengers"][: rng.randint(0, 1)]
    insurance = rng.choice(["yes", "no"])
    card = next(m for m in user["payment_methods"] if m.startswith("credit_card"))
    total = price * len(passengers) + (30 * len(passengers) if insurance == "yes" else 0)
    rid = "".join(rng.choice("ABCDEFGHJKLMNPQRSTUVWXYZ0123456789") for _ in range(6))
    created = rng.choice(["2024-05-01T10:00:00", "2024-05-08T09:30:00", "2024-05-14T18:20:00",
                          "2024-05-15T08:45:00"])
    reservation = {"reservation_id": rid, "user_id": user["user_id"], "origin": flight["origin"],
                   "destination": flight["destination"], "flight_type": "one_way", "cabin": cabin,
                   "flights": [{"flight_number": flight["flight_number"], "origin": flight["origin"],
                                "destination": flight["destination"], "date": day, "price": price}],
                   "passengers": passengers,
                   "payment_history": [{"payment_id": card, "amount": total}],
                   "created_at": created, "total_baggages": rng.randint(0, 2), "nonfree_baggages": 0,
                   "insurance": insurance, "status": None}
    reservations[rid] = reservation
    user["reservations"].append(rid)
    return reservation


def make_db(rng: random.Random) -> dict:
    flights, users, reservations, used = make_flights(rng), {}, {}, set()
    for _ in range(30):
        user = make_user(rng, used)
        users[user["user_id"]] = user
    for i in range(40):
        make_reservation(rng, list(users.values())[i % 30], flights, reservations)
    return {"flights": flights, "users": users, "reservations": reservations}


def _card(user: dict) -> str:
    return next(m for m in user["payment_methods"] if m.startswith("credit_card"))


def _seg(reservation: dict) -> dict:
    return reservation["flights"][0]


def build(kind: str, rng: random.Random, db: dict, user: dict) -> dict | None:
    """The parts of one task of `kind` for `user`; None when the user's data does not fit."""
    uid, flights = user["user_id"], db["flights"]
    get_user = {"name": "get_user_details", "arguments": {"user_id": uid}}
    res = [db["reservations"][r] for r in user["reservations"]]
    if not res and kind != "book":
        return None
    r = res[0] if res else None
    get_res = {"name": "get_reservation_details", "arguments": {"reservation_id": r["reservation_id"]}} if r else None
    rid = r["reservation_id"] if r else None
    if kind == "cancel":
        if not (r["created_at"] >= "2024-05-14T15:00:00" or r["cabin"] == "business" or r["insurance"] == "yes"):
            return None
        return {"reason": f"You want to cancel your reservation {rid}. Your plans changed and you "
                          f"will not travel.",
                "actions": [get_user, get_res, {"name": "cancel_reservation", "arguments": {"reservation_id": rid}}]}
    if kind == "bags":
        return {"reason": f"You want to add one checked bag to your reservation {rid}. "
                          f"Pay any fee with your credit card.",
                "actions": [get_user, get_res, {"name": "update_reservation_baggages", "arguments": {
                    "reservation_id": rid, "total_baggages": r["total_baggages"] + 1,
                    "nonfree_baggages": r["nonfree_baggages"] + 1, "payment_id": _card(user)}}]}
    if kind == "passenger":
        fixed = [dict(p) for p in r["passengers"]]
        fixed[0]["dob"] = f"{fixed[0]['dob'][:8]}{(int(fixed[0]['dob'][8:]) % 27) + 1:02d}"
        return {"reason": f"The date of birth on your reservation {rid} is wrong. "
                          f"It should be {fixed[0]['dob']}.",
                "actions": [get_user, get_res, {"name": "update_reservation_passengers", "arguments": {
                    "reservation_id": rid, "passengers": fixed}}]}
    seg = _seg(r) if r else None
    if kind in ("move", "upgrade"):
        if r["cabin"] == "basic_economy":
            return None
        cabin = r["cabin"] if kind == "move" else "business"
        if kind == "upgrade" and r["cabin"] == "business":
            return None
        days = [d for d in sorted(flights[seg["flight_number"]]["dates"])
                if d > TODAY and (kind == "upgrade" or d != seg["date"])]
        day = seg["date"] if kind == "upgrade" else rng.choice(days)
        info = flights[seg["flight_number"]]["dates"][day]
        if info["status"] != "available" or info["available_seats"][cabin] < len(r["passengers"]):
            return None
        target = {"flight_number": seg["flight_number"], "date": day}
        reason = (f"You want to move your reservation {rid} to the same flight on {day}."
                  if kind == "move" else f"You want to upgrade your reservation {rid} to business class.")
        return {"reason": reason + " Pay any difference with your credit card.",
                "actions": [get_user, get_res, {"name": "update_reservation_flights", "arguments": {
                    "reservation_id": rid, "cabin": cabin, "flights": [target], "payment_id": _card(user)}}]}
    if kind == "book":
        options = [(f, d) for f in flights.values() for d, info in f["dates"].items()
                   if d > TODAY and info["status"] == "available" and info["available_seats"]["economy"] > 0]
        f, d = rng.choice(options)
        price = f["dates"][d]["prices"]["economy"]
        me = {"first_name": user["name"]["first_name"], "last_name": user["name"]["last_name"], "dob": user["dob"]}
        return {"reason": f"You want to book a one-way economy flight from {f['origin']} to "
                          f"{f['destination']} on {d} for yourself, flight {f['flight_number']}. "
                          f"No bags and no insurance; pay with your credit card.",
                "actions": [get_user, {"name": "search_direct_flight", "arguments": {
                    "origin": f["origin"], "destination": f["destination"], "date": d}},
                    {"name": "book_reservation", "arguments": {
                        "user_id": uid, "origin": f["origin"], "destination": f["destination"],
                        "flight_type": "one_way", "cabin": "economy",
                        "flights": [{"flight_number": f["flight_number"], "date": d}],
                        "passengers": [me], "payment_methods": [{"payment_id": _card(user), "amount": price}],
                        "total_baggages": 0, "nonfree_baggages": 0, "insurance": "no"}}]}
    if kind == "compensation":
        if user["membership"] == "regular" and r["insurance"] == "no":
            return None
        amount = 100 * len(r["passengers"])
        return {"reason": f"Your flight on reservation {rid} was cancelled by the airline and you "
                          f"want compensation. You accept a travel certificate.",
                "actions": [get_user, get_res, {"name": "send_certificate", "arguments": {
                    "user_id": uid, "amount": amount}}]}
    if kind == "status":
        number = rng.choice(sorted(flights))
        status = flights[number]["dates"][TODAY]["status"]
        return {"reason": f"You want to know the status of flight {number} today, {TODAY}.",
                "actions": [{"name": "get_flight_status", "arguments": {"flight_number": number, "date": TODAY}}],
                "communicate": [status]}
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
        split = "train" if len(tasks) < n_train else "test"
        tasks.append(task_record(
            f"ours_{kind}_{len(tasks):03d}", split, reason=parts["reason"],
            known=f"You are {user['name']['first_name']} {user['name']['last_name']}. "
                  f"Your user id is {user['user_id']}.",
            actions=parts["actions"], communicate=parts.get("communicate")))
    return tasks


def main() -> None:
    rng = random.Random(SEED)
    db = make_db(rng)
    write_domain(FOLDER, db, make_tasks(rng, db))


if __name__ == "__main__":
    main()
