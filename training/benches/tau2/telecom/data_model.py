"""The telecom databases: the carrier's (plans, customers, lines, bills, devices) and the user's
phone with its surroundings (telecom is tau2's dual-control domain: the user acts on the phone).

Records are plain JSON in tau2-bench's telecom layout: `db.toml` holds lists of records,
`user_db.toml` a `device` and `surroundings`. `normalize_db` / `normalize_user_db` fill in the
defaults tau2's data model gives absent fields and turn TOML dates into ISO strings, so every
state is explicit and hashes the same however it was written.
"""
from __future__ import annotations

import copy
import datetime
from typing import Any

TODAY = "2025-02-25"            # tau2's telecom clock (utils.get_today)
LINE_STATUSES = ("Active", "Suspended", "Pending Activation", "Closed")
BILL_STATUSES = ("Draft", "Issued", "Awaiting Payment", "Paid", "Overdue", "Disputed")
TABLES = ("plans", "customers", "lines", "bills", "devices")
KEYS = {"plans": "plan_id", "customers": "customer_id", "lines": "line_id", "bills": "bill_id",
        "devices": "device_id"}

RECORD_DEFAULTS = {
    "lines": {"status": "Pending Activation", "device_id": None, "data_used_gb": 0.0,
              "data_refueling_gb": 0.0, "roaming_enabled": False, "contract_end_date": None,
              "last_plan_change_date": None, "last_sim_replacement_date": None,
              "suspension_start_date": None},
    "customers": {"account_status": "Pending Verification", "payment_methods": [], "line_ids": [],
                  "bill_ids": [], "created_at": "2025-01-01", "last_extension_date": None,
                  "goodwill_credit_used_this_year": 0.0},
    "bills": {"line_items": [], "status": "Draft"},
    "devices": {"imei": None, "activated": False, "activation_date": None,
                "last_esim_transfer_date": None},
    "plans": {},
}

SIGNAL = ("none", "poor", "fair", "good", "excellent")
TECHNOLOGIES = ("none", "2G", "3G", "4G", "5G")
NETWORK_MODES = ("4g_5g_preferred", "4g_only", "3g_only", "2g_only")
DEFAULT_APN = {"apn_name": "internet", "reset_at_reboot": False, "mms_apn": "mms",
               "mmsc_url": "http://mms.carrier.com/mms/wapenc", "mms_proxy": None, "mms_port": None}
DEFAULT_DEVICE = {
    "sim_card_status": "active", "sim_card_missing": False, "airplane_mode": False,
    "network_signal_strength": "good", "network_technology_connected": "5G",
    "network_connection_status": "connected", "battery_level": 80, "data_enabled": True,
    "roaming_enabled": False, "network_mode_preference": "4g_5g_preferred",
    "active_apn_settings": DEFAULT_APN, "wifi_enabled": False, "wifi_connected": False,
    "wifi_ssid": None, "wifi_signal_strength": "none", "wifi_calling_enabled": False,
    "wifi_calling_mms_over_wifi": False, "data_saver_mode": False, "vpn_enabled_setting": False,
    "vpn_connected": False, "vpn_details": None,
    "app_statuses": {
        "messaging": {"app_name": "messaging",
                      "permissions": {"sms": True, "storage": True, "phone": True, "network": False}},
        "browser": {"app_name": "browser",
                    "permissions": {"sms": False, "storage": True, "phone": False, "network": True}},
    },
}
DEFAULT_SURROUNDINGS = {
    "name": None, "phone_number": None, "is_abroad": False, "roaming_allowed": False,
    "signal_strength": {"2G": "poor", "3G": "fair", "4G": "good", "5G": "excellent"},
    "mobile_data_usage_exceeded": False, "line_active": True, "payment_request": None,
}


class BadDatabase(ValueError):
    pass


def iso(value: Any) -> Any:
    """TOML dates and datetimes as ISO strings, recursively."""
    if isinstance(value, (datetime.date, datetime.datetime)):
        return value.isoformat()
    if isinstance(value, dict):
        return {k: iso(v) for k, v in value.items()}
    if isinstance(value, list):
        return [iso(v) for v in value]
    return value


def normalize_db(raw: Any, source: str = "telecom database") -> dict:
    if not isinstance(raw, dict) or any(not isinstance(raw.get(t, []), list) for t in TABLES):
        raise BadDatabase(f"{source} must hold the lists {', '.join(TABLES)}.")
    db = {}
    for table in TABLES:
        records = []
        for record in iso(raw.get(table, [])):
            if not isinstance(record, dict) or KEYS[table] not in record:
                raise BadDatabase(f"{source}: a {table} record lacks {KEYS[table]}.")
            full = copy.deepcopy(RECORD_DEFAULTS[table])
            full.update(record)
            records.append(full)
        db[table] = records
    return db


def merge(defaults: dict, given: dict) -> dict:
    out = copy.deepcopy(defaults)
    for key, value in given.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict) and key != "app_statuses":
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def normalize_user_db(raw: Any, source: str = "telecom user database") -> dict:
    if not isinstance(raw, dict):
        raise BadDatabase(f"{source} must be a table with `device` and `surroundings`.")
    raw = iso(raw)
    return {"device": merge(DEFAULT_DEVICE, raw.get("device") or {}),
            "surroundings": merge(DEFAULT_SURROUNDINGS, raw.get("surroundings") or {})}


def default_user_db() -> dict:
    return normalize_user_db({})
