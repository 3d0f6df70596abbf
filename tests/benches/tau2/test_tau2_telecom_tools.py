"""Every telecom tool (the carrier's and the phone's) on a small fixture, and the sync between them."""
from __future__ import annotations

import copy
import json

import pytest

from training.benches.tau2.domain import World
from training.benches.tau2.telecom.data_model import BadDatabase, default_user_db, normalize_db
from training.benches.tau2.telecom.tools import TelecomTools
from training.benches.tau2.telecom.user_tools import TelecomUserTools

RAW = {
    "plans": [{"plan_id": "P1", "name": "Basic", "data_limit_gb": 5.0, "price_per_month": 40.0,
               "data_refueling_price_per_gb": 5.0}],
    "customers": [{"customer_id": "C1", "full_name": "Ann Lee", "date_of_birth": "1990-01-01",
                   "email": "a@x.com", "phone_number": "555-000-0001", "address": {},
                   "line_ids": ["L1"], "bill_ids": ["B1"]}],
    "lines": [{"line_id": "L1", "phone_number": "555-000-0002", "status": "Active", "plan_id": "P1",
               "device_id": "D1", "data_used_gb": 1.0}],
    "bills": [{"bill_id": "B1", "customer_id": "C1", "period_start": "2025-01-01",
               "period_end": "2025-01-31", "issue_date": "2025-01-01", "total_due": 40.0,
               "due_date": "2025-01-15", "status": "Issued"}],
    "devices": [{"device_id": "D1", "device_type": "phone", "model": "X", "is_esim_capable": True}],
}


@pytest.fixture
def world() -> World:
    w = World("telecom", normalize_db(copy.deepcopy(RAW)), default_user_db())
    w.run_function("user", "set_user_info", {"name": "Ann Lee", "phone_number": "555-000-0002"})
    return w


def ok(world, name, requestor="assistant", **args):
    result = world.call(name, args, requestor)
    assert not result.error, result.content
    return result.content


def err(world, name, requestor="assistant", **args):
    result = world.call(name, args, requestor)
    assert result.error, result.content
    return result.content


def test_tool_sets():
    assert set(TelecomTools.tool_names()) == {
        "disable_roaming", "enable_roaming", "get_bills_for_customer", "get_customer_by_id",
        "get_customer_by_name", "get_customer_by_phone", "get_data_usage", "get_details_by_id",
        "refuel_data", "resume_line", "send_payment_request", "suspend_line",
        "transfer_to_human_agents"}
    assert set(TelecomUserTools.tool_names()) == {
        "can_send_mms", "check_apn_settings", "check_app_permissions", "check_app_status",
        "check_data_restriction_status", "check_installed_apps", "check_network_mode_preference",
        "check_network_status", "check_payment_request", "check_sim_status", "check_status_bar",
        "check_vpn_status", "check_wifi_calling_status", "check_wifi_status", "connect_vpn",
        "disconnect_vpn", "grant_app_permission", "make_payment", "reboot_device",
        "reseat_sim_card", "reset_apn_settings", "run_speed_test", "set_apn_settings",
        "set_network_mode_preference", "toggle_airplane_mode", "toggle_data",
        "toggle_data_saver_mode", "toggle_roaming", "toggle_wifi", "toggle_wifi_calling"}


def test_carrier_lookups(world):
    assert json.loads(ok(world, "get_customer_by_phone", phone_number="555-000-0002"))["customer_id"] == "C1"
    assert "not found" in err(world, "get_customer_by_phone", phone_number="555")
    assert json.loads(ok(world, "get_customer_by_name", full_name="ann lee", dob="1990-01-01"))[0]["customer_id"] == "C1"
    assert json.loads(ok(world, "get_customer_by_name", full_name="Ann Lee", dob="1991-01-01")) == []
    assert json.loads(ok(world, "get_details_by_id", id="L1"))["roaming_enabled"] is False
    assert json.loads(ok(world, "get_details_by_id", id="D1"))["activated"] is False   # default filled
    assert "Unknown ID format" in err(world, "get_details_by_id", id="X9")
    assert json.loads(ok(world, "get_bills_for_customer", customer_id="C1", limit=1))[0]["bill_id"] == "B1"
    usage = json.loads(ok(world, "get_data_usage", customer_id="C1", line_id="L1"))
    assert usage["data_limit_gb"] == 5.0 and usage["cycle_end_date"] == "2025-02-28"
    assert "not found for customer" in err(world, "get_data_usage", customer_id="C1", line_id="L9")
    assert ok(world, "transfer_to_human_agents", summary="s") == "Transfer successful"


def test_suspend_resume_reach_the_phone(world):
    assert "reason" in err(world, "suspend_line", customer_id="C1", line_id="L1")
    ok(world, "suspend_line", customer_id="C1", line_id="L1", reason="travel")
    assert world.user_tools.db["surroundings"]["line_active"] is False
    assert "must be active" in err(world, "suspend_line", customer_id="C1", line_id="L1", reason="x")
    ok(world, "reboot_device", "user")
    assert world.user_tools.assert_service_status("no_service")
    ok(world, "resume_line", customer_id="C1", line_id="L1")
    assert "must be suspended" in err(world, "resume_line", customer_id="C1", line_id="L1")
    ok(world, "reboot_device", "user")
    assert world.user_tools.assert_service_status("connected")


def test_roaming_abroad_needs_line_and_phone(world):
    world.run_function("user", "set_user_location", {"abroad": True})
    assert not world.user_tools.assert_mobile_data_status(True)
    assert ok(world, "enable_roaming", customer_id="C1", line_id="L1") == "Roaming enabled successfully"
    assert ok(world, "enable_roaming", customer_id="C1", line_id="L1") == "Roaming was already enabled"
    assert "Data Roaming is now ON" in ok(world, "toggle_roaming", "user")
    assert world.user_tools.assert_mobile_data_status(True)
    assert ok(world, "disable_roaming", customer_id="C1", line_id="L1") == "Roaming disabled successfully"
    assert not world.user_tools.assert_mobile_data_status(True)


def test_refuel_charges_a_deterministic_draft_bill(world):
    world.run_function("assistant", "set_data_usage", {"customer_id": "C1", "line_id": "L1", "data_used_gb": 6.0})
    assert world.user_tools.db["surroundings"]["mobile_data_usage_exceeded"] is True
    assert "must be positive" in err(world, "refuel_data", customer_id="C1", line_id="L1", gb_amount=0)
    out = json.loads(ok(world, "refuel_data", customer_id="C1", line_id="L1", gb_amount=2))
    assert out["charge"] == 10.0
    assert world.user_tools.db["surroundings"]["mobile_data_usage_exceeded"] is False
    draft = world.tools.db["bills"][-1]
    assert draft["bill_id"] == "BC1-draft-1" and draft["total_due"] == 10.0


def test_payment_request_paid_from_the_phone(world):
    assert "not found for customer" in err(world, "send_payment_request", customer_id="C1", bill_id="B9")
    ok(world, "send_payment_request", customer_id="C1", bill_id="B1")
    assert "already awaiting" in err(world, "send_payment_request", customer_id="C1", bill_id="B1")
    assert "bill B1 of 40.0 USD" in ok(world, "check_payment_request", "user")
    ok(world, "make_payment", "user")
    assert world.tools.db["bills"][0]["status"] == "Paid"
    assert ok(world, "make_payment", "user") == "You do not have a payment request."


@pytest.mark.parametrize("breaker,args,fix,fix_args,check", [
    ("turn_airplane_mode_on", {}, "toggle_airplane_mode", {}, ("assert_service_status", {"expected_status": "connected"})),
    ("unseat_sim_card", {}, "reseat_sim_card", {}, ("assert_service_status", {"expected_status": "connected"})),
    ("turn_data_off", {}, "toggle_data", {}, ("assert_mobile_data_status", {"expected_status": True})),
    ("turn_data_saver_mode_on", {}, "toggle_data_saver_mode", {}, ("assert_internet_speed", {"expected_speed": 200, "expected_desc": "excellent"})),
    ("set_network_mode_preference", {"mode": "2g_only"}, "set_network_mode_preference", {"mode": "4g_5g_preferred"}, ("assert_internet_speed", {"expected_speed": 200})),
    ("break_vpn", {}, "disconnect_vpn", {}, ("assert_internet_speed", {"expected_speed": 200})),
    ("remove_app_permission", {"app_name": "messaging", "permission": "sms"}, "grant_app_permission", {"app_name": "messaging", "permission": "sms"}, ("assert_can_send_mms", {"expected_status": True})),
    ("set_wifi_calling", {"enabled": True, "mms_over_wifi": True}, "toggle_wifi_calling", {}, ("assert_can_send_mms", {"expected_status": True})),
])
def test_phone_faults_and_their_fixes(world, breaker, args, fix, fix_args, check):
    assertion = {"env_type": "user", "func_name": check[0], "arguments": check[1], "assert_value": True}
    assert world.check_assertion(assertion)
    world.run_function("user", breaker, args)
    assert not world.check_assertion(assertion)
    ok(world, fix, "user", **fix_args)
    assert world.check_assertion(assertion)


def test_set_apn_settings(world):
    assert "APN settings set to: broken" in ok(world, "set_apn_settings", "user", apn_settings={"apn_name": "broken"})
    assert world.user_tools.assert_service_status("no_service")
    assert "must be 'internet'" in err(world, "set_apn_settings", "user", apn_settings={"apn_name": "wap"})
    assert "unknown field(s) color" in err(world, "set_apn_settings", "user", apn_settings={"color": "red"})
    ok(world, "set_apn_settings", "user", apn_settings={"apn_name": "internet", "mmsc_url": None})
    assert world.user_tools.assert_service_status("connected") and not world.user_tools._can_send_mms()


def test_apn_reset_applies_at_reboot(world):
    world.run_function("user", "break_apn_settings", {})
    assert "Not Set" not in ok(world, "check_apn_settings", "user")
    ok(world, "reset_apn_settings", "user")
    assert world.user_tools.assert_service_status("no_service")
    ok(world, "reboot_device", "user")
    assert world.user_tools.assert_service_status("connected")


def test_phone_reads_and_bad_arguments(world):
    assert "Status Bar:" in ok(world, "check_status_bar", "user")
    assert "Airplane Mode: OFF" in ok(world, "check_network_status", "user")
    assert "4g_5g_preferred" in ok(world, "check_network_mode_preference", "user")
    assert "Mbps (Excellent)" in ok(world, "run_speed_test", "user")
    assert "active" in ok(world, "check_sim_status", "user")
    assert ok(world, "check_data_restriction_status", "user") == "Data Saver mode is OFF."
    assert "OFF" in ok(world, "check_wifi_status", "user")
    assert "Wi-Fi is now ON" in ok(world, "toggle_wifi", "user")
    assert "turned OFF" in ok(world, "check_wifi_calling_status", "user")
    assert "VPN is turned OFF." == ok(world, "check_vpn_status", "user")
    assert "connected successfully" in ok(world, "connect_vpn", "user")
    assert "messaging, browser" in ok(world, "check_installed_apps", "user")
    assert "sms, storage, phone" in ok(world, "check_app_status", "user", app_name="messaging")
    assert "not found" in ok(world, "check_app_permissions", "user", app_name="camera")
    assert "can send MMS" in ok(world, "can_send_mms", "user")
    assert "not a valid option" in ok(world, "set_network_mode_preference", "user", mode="6g")
    assert "not tracked" in err(world, "grant_app_permission", "user", app_name="messaging", permission="gps")
    assert "missing required argument" in err(world, "grant_app_permission", "user", app_name="messaging")
    assert "unknown tool" in err(world, "toggle_airplane_mode")          # a phone tool, not the agent's


def test_normalize_db_refuses_bad_files():
    with pytest.raises(BadDatabase, match="lists plans"):
        normalize_db({"plans": {}})
    with pytest.raises(BadDatabase, match="lacks line_id"):
        normalize_db({"lines": [{"phone_number": "1"}]})
