"""Generate our compact telecom database and tasks (seeded): `python -m training.benches.tau2.telecom.generate`.

The carrier's database: 4 plans, 40 customers with one line, one phone and two bills each. The
phone starts from tau2's default state (telecom/data_model.py). A task places the user (name and
number, at home or abroad), breaks something on the phone or the line with tau2's set-up
functions, and is scored on environment assertions about the phone afterwards (reward basis
ENV_ASSERTION, as tau2's telecom tasks). 13 kinds of fault: airplane mode, unseated SIM, broken
APN, mobile data off, roaming off abroad (phone or line), data saver, a 2G-only network mode, a
slow VPN, data used up (refuel), MMS permissions, MMS over Wi-Fi calling, a line suspended for an
overdue bill. 60 train and 20 test tasks.
"""
from __future__ import annotations

import random
from pathlib import Path

from training.benches.tau2.synth import digits, person, task_record, write_domain

FOLDER = Path(__file__).resolve().parent
SEED = 2028
PLANS = [("P1001", "Basic Plan", 5.0, 40.0, 5.0), ("P1002", "Premium Plan", 15.0, 65.0, 2.0),
         ("P1003", "Unlimited Plus", 999.0, 85.0, 0.1), ("P1004", "Family Share", 25.0, 120.0, 3.0)]
GROUNDING = ("Whenever the agent asks about your phone, answer from the results of your phone's "
             "tools, never from imagination. Do only what the agent asks you to do on the phone.")


def make_db(rng: random.Random) -> dict:
    plans = [{"plan_id": p, "name": n, "data_limit_gb": lim, "price_per_month": price,
              "data_refueling_price_per_gb": refuel} for p, n, lim, price, refuel in PLANS]
    customers, lines, devices, bills, used = [], [], [], [], set()
    for i in range(40):
        first, last = person(rng, used)
        cid, lid, did = f"C{2001 + i}", f"L{2001 + i}", f"D{2001 + i}"
        phone = f"555-{rng.randint(200, 899)}-{digits(rng, 4)}"
        plan = rng.choice(plans[:3])
        devices.append({"device_id": did, "device_type": "phone", "model": rng.choice(
            ["Pixel 8", "Galaxy S24", "iPhone 15", "Moto G"]), "imei": digits(rng, 15),
            "is_esim_capable": True, "activated": True, "activation_date": "2025-01-05T10:00:00",
            "last_esim_transfer_date": None})
        lines.append({"line_id": lid, "phone_number": phone, "status": "Active",
                      "plan_id": plan["plan_id"], "device_id": did,
                      "data_used_gb": round(rng.uniform(0.1, 0.6) * min(plan["data_limit_gb"], 20), 1),
                      "data_refueling_gb": 0.0, "roaming_enabled": rng.random() < 0.5,
                      "contract_end_date": "2026-01-31", "last_plan_change_date": None,
                      "last_sim_replacement_date": None, "suspension_start_date": None})
        bill_ids = []
        for month, status in (("2024-12", "Paid"), ("2025-01", "Paid")):
            bid = f"B{2001 + i}{month[-2:]}"
            bill_ids.append(bid)
            bills.append({"bill_id": bid, "customer_id": cid, "period_start": f"{month}-01",
                          "period_end": f"{month}-28", "issue_date": f"{month}-01",
                          "total_due": plan["price_per_month"], "due_date": f"{month}-15",
                          "line_items": [{"description": f"Charge for line {lid}",
                                          "amount": plan["price_per_month"], "date": f"{month}-01",
                                          "item_type": "Charge"}], "status": status})
        customers.append({"customer_id": cid, "full_name": f"{first} {last}",
                          "date_of_birth": f"19{rng.randint(55, 99)}-0{rng.randint(1, 9)}-1{rng.randint(0, 9)}",
                          "email": f"{first.lower()}.{last.lower()}@example.com", "phone_number": phone,
                          "address": {"street": f"{rng.randint(1, 99)} Elm Street", "city": "Springfield",
                                      "state": "IL", "zip_code": "627" + digits(rng, 2)},
                          "account_status": "Active", "payment_methods": [{
                              "method_type": "Credit Card", "account_number_last_4": digits(rng, 4),
                              "expiration_date": "12/2027"}],
                          "line_ids": [lid], "bill_ids": bill_ids, "created_at": "2024-06-01",
                          "last_extension_date": None, "goodwill_credit_used_this_year": 0.0})
    return {"plans": plans, "customers": customers, "lines": lines, "bills": bills, "devices": devices}


def user(func: str, **args) -> dict:
    return {"env_type": "user", "func_name": func, "arguments": args}


def agent(func: str, **args) -> dict:
    return {"env_type": "assistant", "func_name": func, "arguments": args}


def check(func: str, env_type: str = "user", **args) -> dict:
    return {"env_type": env_type, "func_name": func, "arguments": args, "assert_value": True}


def u(name: str, **args) -> dict:
    return {"name": name, "arguments": args, "requestor": "user"}


def a(name: str, **args) -> dict:
    return {"name": name, "arguments": args, "requestor": "assistant"}


SERVICE = check("assert_service_status", expected_status="connected")
DATA = check("assert_mobile_data_status", expected_status=True)
FAST = check("assert_internet_speed", expected_speed=200, expected_desc="excellent")
MMS = check("assert_can_send_mms", expected_status=True)
NO_SERVICE = "Your phone shows no service: you cannot make calls or use mobile data."
NO_DATA = "Your mobile data does not work: web pages do not load when you are not on Wi-Fi."
SLOW = "Your mobile data is very slow and you want excellent speed back."
NO_MMS = "You cannot send picture messages (MMS) from your phone."


def fault(kind: str, c: dict, line: dict, plan: dict) -> tuple[str, list, list, list] | None:
    """(reason, extra set-up actions, gold actions, assertions) of one fault for a customer."""
    cid, lid = c["customer_id"], line["line_id"]
    if kind == "airplane":
        return NO_SERVICE, [user("turn_airplane_mode_on")], [u("toggle_airplane_mode")], [SERVICE]
    if kind == "sim":
        return NO_SERVICE, [user("unseat_sim_card")], [u("reseat_sim_card")], [SERVICE]
    if kind == "apn":
        return NO_SERVICE, [user("break_apn_settings")], \
            [u("reset_apn_settings"), u("reboot_device")], [SERVICE]
    if kind == "data_off":
        return NO_DATA, [user("turn_data_off")], [u("toggle_data")], [DATA]
    if kind == "roaming_phone":
        if not line["roaming_enabled"]:
            return None
        return NO_DATA + " You are abroad.", [user("set_user_location", abroad=True),
                                              user("turn_roaming_off")], \
            [u("toggle_roaming")], [DATA]
    if kind == "roaming_line":
        setup = [user("set_user_location", abroad=True), user("turn_roaming_on")]
        if line["roaming_enabled"]:
            setup.append(agent("disable_roaming", customer_id=cid, line_id=lid))
        return NO_DATA + " You are abroad.", setup, [a("enable_roaming", customer_id=cid, line_id=lid)], [DATA]
    if kind == "data_saver":
        return SLOW, [user("turn_data_saver_mode_on")], [u("toggle_data_saver_mode")], [FAST]
    if kind == "network_mode":
        return SLOW, [user("set_network_mode_preference", mode="2g_only")], \
            [u("set_network_mode_preference", mode="4g_5g_preferred")], [FAST]
    if kind == "vpn":
        return SLOW, [user("break_vpn")], [u("disconnect_vpn")], [FAST]
    if kind == "data_used":
        if plan["data_limit_gb"] > 100:
            return None
        return NO_DATA + " You accept to buy 2 GB of extra data.", \
            [agent("set_data_usage", customer_id=cid, line_id=lid, data_used_gb=plan["data_limit_gb"] + 1.0)], \
            [a("refuel_data", customer_id=cid, line_id=lid, gb_amount=2.0)], \
            [DATA, check("assert_data_refueling_amount", "assistant", customer_id=cid, line_id=lid,
                         expected_amount=2.0)]
    if kind == "mms_permission":
        return NO_MMS, [user("remove_app_permission", app_name="messaging", permission="storage")], \
            [u("grant_app_permission", app_name="messaging", permission="storage")], [MMS]
    if kind == "mms_wifi_calling":
        return NO_MMS, [user("set_wifi_calling", enabled=True, mms_over_wifi=True)], \
            [u("toggle_wifi_calling")], [MMS]
    if kind == "overdue":
        bill = f"B{cid[1:]}OD"
        return NO_SERVICE + " You are willing to pay an overdue bill.", \
            [agent("suspend_line_for_overdue_bill", customer_id=cid, line_id=lid, new_bill_id=bill,
                   contract_ended=False), user("simulate_network_search")], \
            [a("send_payment_request", customer_id=cid, bill_id=bill), u("make_payment"),
             a("resume_line", customer_id=cid, line_id=lid), u("reboot_device")], \
            [SERVICE, check("assert_no_overdue_bill", "assistant", overdue_bill_id=bill)]
    raise ValueError(kind)


KINDS = ("airplane", "sim", "apn", "data_off", "roaming_phone", "roaming_line", "data_saver",
         "network_mode", "vpn", "data_used", "mms_permission", "mms_wifi_calling", "overdue")


def make_tasks(db: dict, n_train: int = 60, n_test: int = 20) -> list[dict]:
    plans = {p["plan_id"]: p for p in db["plans"]}
    tasks, i = [], 0
    while len(tasks) < n_train + n_test:
        kind = KINDS[i % len(KINDS)]
        c = db["customers"][(i * 3) % len(db["customers"])]
        i += 1
        line = next(ln for ln in db["lines"] if ln["line_id"] == c["line_ids"][0])
        parts = fault(kind, c, line, plans[line["plan_id"]])
        if parts is None:
            continue
        reason, setup, gold, asserts = parts
        split = "train" if len(tasks) < n_train else "test"
        where = "abroad" if any(s["func_name"] == "set_user_location" for s in setup) else "at home"
        tasks.append(task_record(
            f"ours_{kind}_{len(tasks):03d}", split, reason=reason,
            known=f"You are {c['full_name']} with phone number {line['phone_number']}. "
                  f"You are currently {where}.",
            behaviour=GROUNDING, actions=gold, reward_basis=["ENV_ASSERTION"],
            initial_state={"initialization_data": None, "message_history": None,
                           "initialization_actions": [user("set_user_info", name=c["full_name"],
                                                           phone_number=line["phone_number"])] + setup},
            env_assertions=asserts))
    return tasks


def main() -> None:
    db = make_db(random.Random(SEED))
    write_domain(FOLDER, db, make_tasks(db))


if __name__ == "__main__":
    main()
