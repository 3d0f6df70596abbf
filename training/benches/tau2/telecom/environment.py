"""The telecom domain's parts: the carrier's tools, the user's phone tools, the database loaders,
and the sync that carries the carrier's state to the phone after every call (tau2-bench's
`TelecomEnvironment.sync_tools`): the user's line being active, roaming being allowed, data left,
a paid payment request marking its bill paid, and a bill awaiting payment showing on the phone.
"""
from __future__ import annotations

from training.benches.tau2.domain import Domain
from training.benches.tau2.telecom.data_model import default_user_db, normalize_db, normalize_user_db
from training.benches.tau2.telecom.tools import TelecomTools
from training.benches.tau2.telecom.user_tools import TelecomUserTools


def sync(tools: TelecomTools, user_tools: TelecomUserTools | None) -> None:
    if user_tools is None:
        return
    around = user_tools.db["surroundings"]
    phone = around["phone_number"]
    if phone is None:
        return
    line = tools._line_by_phone(phone)
    plan = tools._plan(line["plan_id"])
    around["line_active"] = line["status"] == "Active"
    around["roaming_allowed"] = bool(line["roaming_enabled"])
    around["mobile_data_usage_exceeded"] = \
        line["data_used_gb"] >= plan["data_limit_gb"] + line["data_refueling_gb"]
    request = around["payment_request"]
    if request is not None and request.get("paid"):
        tools._set_bill_to_paid(request["bill_id"])
        around["payment_request"] = None
    if around["payment_request"] is None:
        waiting = tools._awaiting_payment(tools.get_customer_by_phone(phone))
        if waiting:
            around["payment_request"] = {"bill_id": waiting[0]["bill_id"],
                                         "amount_due": waiting[0]["total_due"], "paid": False}


DOMAIN = Domain(name="telecom", tools=TelecomTools, normalize_db=normalize_db,
                user_tools=TelecomUserTools, normalize_user_db=normalize_user_db,
                default_user_db=default_user_db, sync=sync)
