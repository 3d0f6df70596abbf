"""The telecom user's phone: the tools the simulated user runs on their own device, the set-up
functions tasks use to break it, and the assertions that score a telecom task.

The phone follows tau2-bench's mock phone (v0.2.0): a network search sets the connection from the
SIM, the network-mode preference, the signal around the user, airplane mode, the APN and whether
the line is active; mobile data works only with service, data on, roaming when abroad (on the
phone and on the line) and data left; the speed test is (min+max)/2 of the technology's range
times the signal factor, cut by a poor VPN (x0.1) and data saver (x0.2); MMS needs working data,
3G or better, no MMS-over-Wi-Fi calling, an MMSC URL and the messaging app's sms and storage
permissions. Tool names and effects are tau2's; the descriptions are ours.
"""
from __future__ import annotations

from typing import TypedDict

from training.benches.tau2.telecom.data_model import DEFAULT_APN, NETWORK_MODES
from training.benches.tau2.toolkit import ToolError, Toolkit, tool

SPEED_RANGE = {"2G": (0.1, 0.4), "3G": (1.0, 5.0), "4G": (10.0, 100.0), "5G": (50.0, 500.0),
               "none": (0.0, 0.0)}
SIGNAL_FACTOR = {"none": 0.0, "poor": 0.2, "fair": 0.5, "good": 0.8, "excellent": 1.0}
SIGNAL_ICON = {"none": "No Signal", "poor": "1 bar (Poor)", "fair": "2 bars (Fair)",
               "good": "3 bars (Good)", "excellent": "4 bars (Excellent)"}
MODE_TECH = {"4g_only": "4G", "3g_only": "3G", "2g_only": "2G"}


class APNSettings(TypedDict, total=False):
    apn_name: str               # "internet" | "broken"
    reset_at_reboot: bool
    mms_apn: str | None
    mmsc_url: str | None
    mms_proxy: str | None
    mms_port: int | None


VPN_DEFAULT = {"server_address": "192.168.1.1", "protocol": "OpenVPN",
               "server_performance": "excellent"}


class TelecomUserTools(Toolkit):
    """Tools the user runs on their phone (db = {"device": ..., "surroundings": ...})."""

    @property
    def device(self) -> dict:
        return self.db["device"]

    @property
    def around(self) -> dict:
        return self.db["surroundings"]

    # -- simulation ------------------------------------------------------------------------------
    def _no_service(self) -> None:
        self.device.update(network_connection_status="no_service",
                           network_technology_connected="none", network_signal_strength="none")

    def simulate_network_search(self) -> None:
        d, signal = self.device, self.around["signal_strength"]
        if self._sim_status() == "active":
            d["network_connection_status"] = "connected"
            mode = d["network_mode_preference"]
            tech = MODE_TECH.get(mode, "4G")
            if mode == "4g_5g_preferred" and signal.get("5G", "none") != "none":
                tech = "5G"
            d["network_technology_connected"] = tech
            d["network_signal_strength"] = signal.get(tech, "none")
        else:
            self._no_service()
        if (d["airplane_mode"] or d["active_apn_settings"]["apn_name"] == "broken"
                or not self.around["line_active"]):
            self._no_service()

    def _sim_status(self) -> str:
        return "missing" if self.device["sim_card_missing"] else self.device["sim_card_status"]

    def _data_working(self) -> bool:
        d, s = self.device, self.around
        if d["airplane_mode"] or d["network_signal_strength"] == "none":
            return False
        if d["network_connection_status"] == "no_service":
            return False
        if s["is_abroad"] and not (d["roaming_enabled"] and s["roaming_allowed"]):
            return False
        return d["data_enabled"] and not s["mobile_data_usage_exceeded"]

    def _speed(self) -> tuple[float | None, str]:
        if not self._data_working():
            return None, "No Connection"
        d = self.device
        factor = 0.1 if (d["vpn_connected"] and d["vpn_details"]
                         and d["vpn_details"]["server_performance"] == "poor") else 1.0
        if d["data_saver_mode"]:
            factor *= 0.2
        low, high = SPEED_RANGE.get(d["network_technology_connected"], (0.0, 0.0))
        speed = round((low + high) / 2.0 * SIGNAL_FACTOR[d["network_signal_strength"]] * factor, 2)
        for limit, desc in ((1, "Very Poor"), (5, "Poor"), (25, "Fair"), (100, "Good")):
            if speed < limit:
                return speed, desc
        return speed, "Excellent"

    def _can_send_mms(self) -> bool:
        d = self.device
        if not self._data_working() or d["network_technology_connected"] == "2G":
            return False
        if d["wifi_calling_enabled"] and d["wifi_calling_mms_over_wifi"]:
            return False
        if d["active_apn_settings"]["mmsc_url"] is None:
            return False
        app = d["app_statuses"].get("messaging")
        return bool(app and app["permissions"]["storage"] and app["permissions"]["sms"])

    def _status_bar(self) -> str:
        d = self.device
        parts = []
        if d["airplane_mode"]:
            parts.append("Airplane Mode")
        else:
            parts.append(SIGNAL_ICON[d["network_signal_strength"]])
            if d["network_technology_connected"] != "none":
                parts.append(d["network_technology_connected"])
            if d["data_enabled"] and d["network_technology_connected"] != "none":
                parts.append("Data Enabled" + (" | Data Saver" if d["data_saver_mode"] else ""))
            else:
                parts.append("Data Disabled")
        if d["wifi_enabled"] and d["wifi_connected"]:
            parts.append(f"Wi-Fi {d['wifi_ssid'] or 'connected'}")
        if d["vpn_connected"]:
            parts.append("VPN Connected")
        parts.append(f"Battery {d['battery_level']}%")
        return "Status Bar: " + " | ".join(parts)

    def _toggle(self, key: str, search: bool = True) -> bool:
        self.device[key] = not self.device[key]
        if search:
            self.simulate_network_search()
        return self.device[key]

    def _toggle_airplane(self) -> bool:
        d = self.device
        turning_on = not d["airplane_mode"]
        d["airplane_mode"] = turning_on
        if not turning_on:
            d["network_connection_status"] = "searching"
        d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
        if turning_on and d["vpn_connected"]:
            d.update(vpn_connected=False, vpn_details=None)
        self.simulate_network_search()
        return d["airplane_mode"]

    # -- tools (what the user can do on the phone) -----------------------------------------------
    @tool("read")
    def check_status_bar(self) -> str:
        """Show the icons at the top of the screen: signal, network type, data, Wi-Fi, VPN, battery."""
        return self._status_bar()

    @tool("read")
    def check_network_status(self) -> str:
        """Show airplane mode, SIM status, cellular connection, signal, network type, mobile data,
        data roaming and Wi-Fi."""
        d = self.device
        yn = {True: "Yes", False: "No"}
        lines = [f"Airplane Mode: {'ON' if d['airplane_mode'] else 'OFF'}",
                 f"SIM Card Status: {self._sim_status()}",
                 f"Cellular Connection: {d['network_connection_status']}",
                 f"Cellular Signal: {d['network_signal_strength']}",
                 f"Cellular Network Type: {d['network_technology_connected']}",
                 f"Mobile Data Enabled: {yn[d['data_enabled']]}",
                 f"Data Roaming Enabled: {yn[d['roaming_enabled']]}",
                 f"Wi-Fi Radio: {'ON' if d['wifi_enabled'] else 'OFF'}",
                 f"Wi-Fi Connected: {yn[d['wifi_connected']]}"]
        return "\n".join(lines)

    @tool("read")
    def check_network_mode_preference(self) -> str:
        """Show which cellular network types the phone prefers."""
        return f"Network Mode Preference: {self.device['network_mode_preference']}"

    @tool("write")
    def set_network_mode_preference(self, mode: str) -> str:
        """Choose the cellular network types the phone prefers: '4g_5g_preferred', '4g_only',
        '3g_only' or '2g_only'. Faster types give faster data.

        Args:
            mode: One of '4g_5g_preferred', '4g_only', '3g_only', '2g_only'.
        """
        if mode not in NETWORK_MODES:
            return (f"Failed to set network mode: '{mode}' is not a valid option. Please use one "
                    f"of: {', '.join(NETWORK_MODES)}.")
        self.device["network_mode_preference"] = mode
        self.simulate_network_search()
        return f"Preferred Network Mode set to: {mode}\n{self._status_bar()}"

    @tool("read")
    def run_speed_test(self) -> str:
        """Measure the mobile internet download speed."""
        speed, desc = self._speed()
        if speed is None:
            return f"Speed test failed: {desc}."
        return f"Speed Test Result: {speed:.2f} Mbps ({desc})."

    @tool("write")
    def toggle_airplane_mode(self) -> str:
        """Turn airplane mode on or off (on cuts cellular, Wi-Fi and VPN)."""
        state = self._toggle_airplane()
        return f"Airplane Mode is now {'ON' if state else 'OFF'}.\n{self._status_bar()}"

    @tool("read")
    def check_sim_status(self) -> str:
        """Show whether the SIM card is active, missing, or locked by a PIN or PUK."""
        return {"active": "Your SIM card is active and working.",
                "missing": "No SIM card detected in the phone.",
                "locked_pin": "The SIM card is locked with a PIN code.",
                "locked_puk": "The SIM card is locked with a PUK code."}[self._sim_status()]

    @tool("write")
    def reseat_sim_card(self) -> str:
        """Take the SIM card out and put it back in."""
        self.device["sim_card_missing"] = False
        self.simulate_network_search()
        return f"SIM card re-seated successfully.\n{self._status_bar()}"

    @tool("write")
    def toggle_data(self) -> str:
        """Turn mobile data on or off."""
        state = self._toggle("data_enabled")
        return f"Mobile Data is now {'ON' if state else 'OFF'}.\n{self._status_bar()}"

    @tool("write")
    def toggle_roaming(self) -> str:
        """Turn data roaming on or off (needed for mobile data abroad)."""
        state = self._toggle("roaming_enabled")
        return f"Data Roaming is now {'ON' if state else 'OFF'}.\n{self._status_bar()}"

    @tool("read")
    def check_data_restriction_status(self) -> str:
        """Show whether Data Saver mode is on."""
        on = self.device["data_saver_mode"]
        return "Data Saver mode is ON (limits data usage)." if on else "Data Saver mode is OFF."

    @tool("write")
    def toggle_data_saver_mode(self) -> str:
        """Turn Data Saver mode on or off (on slows data down)."""
        state = self._toggle("data_saver_mode", search=False)
        return f"Data Saver Mode is now {'ON' if state else 'OFF'}.\n{self._status_bar()}"

    @tool("read")
    def check_apn_settings(self) -> str:
        """Show the APN name and the MMSC URL the phone uses for mobile data and picture messages."""
        apn = self.device["active_apn_settings"]
        return (f"Current APN Name: {apn['apn_name'] or 'Not Set'}\n"
                f"MMSC URL (for picture messages): {apn['mmsc_url'] or 'Not Set'}")

    @tool("write")
    def set_apn_settings(self, apn_settings: APNSettings) -> str:
        """Set the phone's APN settings (fields not given keep their default values).

        Args:
            apn_settings: The settings, such as {"apn_name": "internet", "mmsc_url": "http://mms.carrier.com/mms/wapenc"}.
        """
        if apn_settings.get("apn_name", "internet") not in ("internet", "broken"):
            raise ToolError("apn_name must be 'internet' or 'broken'")
        self.device["active_apn_settings"] = {**DEFAULT_APN, **apn_settings}
        self.simulate_network_search()
        return f"APN settings set to: {self.device['active_apn_settings']['apn_name']}\n{self._status_bar()}"

    @tool("write")
    def reset_apn_settings(self) -> str:
        """Reset the APN settings to the defaults; this takes effect at the next restart."""
        self.device["active_apn_settings"]["reset_at_reboot"] = True
        self.simulate_network_search()
        return f"APN settings will reset at reboot.\n{self._status_bar()}"

    @tool("read")
    def check_wifi_status(self) -> str:
        """Show whether Wi-Fi is on and which network it is connected to."""
        d = self.device
        if not d["wifi_enabled"]:
            return "Wi-Fi is turned OFF."
        if d["wifi_connected"]:
            return f"Wi-Fi is ON and connected to '{d['wifi_ssid']}'."
        return "Wi-Fi is ON but not connected to any network."

    @tool("write")
    def toggle_wifi(self) -> str:
        """Turn the Wi-Fi radio on or off (not possible in airplane mode)."""
        d = self.device
        if d["airplane_mode"]:
            return f"Cannot change Wi-Fi settings while Airplane Mode is ON.\n{self._status_bar()}"
        d["wifi_enabled"] = not d["wifi_enabled"]
        if not d["wifi_enabled"]:
            d.update(wifi_connected=False, wifi_ssid=None, wifi_signal_strength="none")
        return f"Wi-Fi is now {'ON' if d['wifi_enabled'] else 'OFF'}.\n{self._status_bar()}"

    @tool("read")
    def check_wifi_calling_status(self) -> str:
        """Show whether Wi-Fi Calling is on."""
        return f"Wi-Fi Calling is currently turned {'ON' if self.device['wifi_calling_enabled'] else 'OFF'}."

    @tool("write")
    def toggle_wifi_calling(self) -> str:
        """Turn Wi-Fi Calling on or off (calls over Wi-Fi instead of the cellular network)."""
        state = self._toggle("wifi_calling_enabled", search=False)
        return f"Wi-Fi Calling is now {'ON' if state else 'OFF'}.\n{self._status_bar()}"

    @tool("read")
    def check_vpn_status(self) -> str:
        """Show whether a VPN is connected, with its details."""
        d = self.device
        if d["vpn_connected"]:
            return f"VPN is ON and connected. Details: {d['vpn_details']}"
        if d["vpn_enabled_setting"]:
            return "VPN is turned ON in settings, but currently not connected."
        return "VPN is turned OFF."

    @tool("write")
    def connect_vpn(self) -> str:
        """Connect to the VPN."""
        if self.device["vpn_connected"]:
            return "VPN already connected."
        self.device.update(vpn_connected=True, vpn_details=dict(VPN_DEFAULT))
        return f"VPN connected successfully.\n{self._status_bar()}"

    @tool("write")
    def disconnect_vpn(self) -> str:
        """Disconnect the VPN."""
        if not self.device["vpn_connected"]:
            return f"No active VPN connection to disconnect.\n{self._status_bar()}"
        self.device.update(vpn_connected=False, vpn_details=None)
        return f"VPN disconnected successfully.\n{self._status_bar()}"

    @tool("read")
    def check_installed_apps(self) -> str:
        """List the apps installed on the phone."""
        return "The following apps are installed on the phone: " + \
            ", ".join(self.device["app_statuses"])

    @tool("read")
    def check_app_status(self, app_name: str) -> str:
        """Show an app's permissions.

        Args:
            app_name: The app, such as 'messaging'.
        """
        return self.check_app_permissions(app_name)

    @tool("read")
    def check_app_permissions(self, app_name: str) -> str:
        """Show which permissions (sms, storage, phone, network) an app has.

        Args:
            app_name: The app, such as 'messaging'.
        """
        app = self.device["app_statuses"].get(app_name)
        if app is None:
            return f"App '{app_name}' not found on this phone."
        granted = [p for p, ok in app["permissions"].items() if ok]
        if not granted:
            return f"App '{app_name}' currently has no permissions granted."
        return f"App '{app_name}' has permission for: {', '.join(granted)}."

    @tool("write")
    def grant_app_permission(self, app_name: str, permission: str) -> str:
        """Give an app a permission.

        Args:
            app_name: The app, such as 'messaging'.
            permission: The permission in lower case: 'sms', 'storage', 'phone' or 'network'.
        """
        app = self.device["app_statuses"].get(app_name)
        if app is None:
            raise ToolError(f"App '{app_name}' not found. Cannot grant permission.")
        permission = permission.lower()
        if permission not in app["permissions"]:
            raise ToolError(f"Permission '{permission}' not tracked for app '{app_name}', "
                            f"available permissions: {list(app['permissions'])}")
        app["permissions"][permission] = True
        return f"Success. Permission '{permission}' granted to app '{app_name}'.\n{self._status_bar()}"

    @tool("read")
    def can_send_mms(self) -> str:
        """Check whether the messaging app can send picture messages (MMS)."""
        ok = self._can_send_mms()
        return f"Your messaging app {'can' if ok else 'cannot'} send MMS messages."

    @tool("write")
    def reboot_device(self) -> str:
        """Restart the phone (applies a pending APN reset, then searches for the network again)."""
        if self.device["active_apn_settings"]["reset_at_reboot"]:
            self.device["active_apn_settings"] = dict(DEFAULT_APN)
        self.device["network_connection_status"] = "searching"
        self.simulate_network_search()
        return f"Restarting network services...\n{self._status_bar()}"

    @tool("read")
    def check_payment_request(self) -> str:
        """Check whether the agent has sent you a request to pay a bill."""
        req = self.around["payment_request"]
        if req is None:
            return "No payment request has been made."
        return f"You have a payment request for bill {req['bill_id']} of {req['amount_due']} USD."

    @tool("write")
    def make_payment(self) -> str:
        """Pay the bill the agent asked you to pay."""
        req = self.around["payment_request"]
        if req is None:
            return "You do not have a payment request."
        req["paid"] = True
        return f"Payment of {req['amount_due']} USD has been made for bill {req['bill_id']}."

    # -- set-up functions tasks call to place the user and break the phone (not tools) -----------
    def set_user_info(self, name: str, phone_number: str) -> None:
        self.around.update(name=name, phone_number=phone_number)

    def set_user_location(self, abroad: bool) -> None:
        self.around["is_abroad"] = abroad

    def _set(self, key: str, value: bool) -> str:
        if self.device[key] != value:
            if key == "airplane_mode":
                self._toggle_airplane()
            else:
                self._toggle(key, search=key in ("data_enabled", "roaming_enabled"))
        return f"{key} is now {'ON' if value else 'OFF'}."

    def turn_airplane_mode_on(self) -> str:
        return self._set("airplane_mode", True)

    def turn_airplane_mode_off(self) -> str:
        return self._set("airplane_mode", False)

    def turn_data_on(self) -> str:
        self.device["data_enabled"] = True   # tau2: no network search here
        return "Data connection restored."

    def turn_data_off(self) -> str:
        return self._set("data_enabled", False)

    def turn_roaming_on(self) -> str:
        return self._set("roaming_enabled", True)

    def turn_roaming_off(self) -> str:
        return self._set("roaming_enabled", False)

    def turn_data_saver_mode_on(self) -> str:
        return self._set("data_saver_mode", True)

    def turn_data_saver_mode_off(self) -> str:
        return self._set("data_saver_mode", False)

    def unseat_sim_card(self) -> str:
        self.device["sim_card_missing"] = True
        self.simulate_network_search()
        return "SIM card un-seated successfully."

    def lock_sim_card(self, mode: str) -> str:
        if mode not in ("pin", "puk"):
            raise ToolError(f"lock mode must be 'pin' or 'puk', not {mode!r}")
        self.device["sim_card_status"] = f"locked_{mode}"
        self.simulate_network_search()
        return f"SIM card locked successfully in {mode} mode."

    def break_apn_settings(self) -> str:
        self.device["active_apn_settings"]["apn_name"] = "broken"
        self.simulate_network_search()
        return "APN settings broken."

    def break_apn_mms_setting(self) -> str:
        self.device["active_apn_settings"]["mmsc_url"] = None
        return "APN MMS setting broken."

    def break_vpn(self) -> str:
        if not self.device["vpn_connected"]:
            self.device.update(vpn_connected=True, vpn_details=dict(VPN_DEFAULT))
        self.device["vpn_details"]["server_performance"] = "poor"
        return "VPN connection broken."

    def remove_app_permission(self, app_name: str, permission: str) -> str:
        app = self.device["app_statuses"].get(app_name)
        if app is None or permission.lower() not in app["permissions"]:
            raise ToolError(f"app {app_name!r} or permission {permission!r} not found")
        app["permissions"][permission.lower()] = False
        return f"Permission '{permission}' removed from app '{app_name}'."

    def set_wifi_calling(self, enabled: bool, mms_over_wifi: bool | None = None) -> str:
        self.device["wifi_calling_enabled"] = enabled
        if mms_over_wifi is not None:
            self.device["wifi_calling_mms_over_wifi"] = mms_over_wifi
        return f"Wi-Fi Calling is now {'ON' if enabled else 'OFF'}."

    # -- assertions (environment checks of the score) --------------------------------------------
    def assert_airplane_mode_status(self, expected_status: bool) -> bool:
        return self.device["airplane_mode"] == expected_status

    def assert_service_status(self, expected_status: str) -> bool:
        return self.device["network_connection_status"] == expected_status

    def assert_mobile_data_status(self, expected_status: bool) -> bool:
        return self._data_working() == expected_status

    def assert_mobile_roaming_status(self, expected_status: bool) -> bool:
        return self.device["roaming_enabled"] == expected_status

    def assert_mobile_data_saver_mode_status(self, expected_status: bool) -> bool:
        return self.device["data_saver_mode"] == expected_status

    def assert_internet_speed(self, expected_speed: float, expected_desc: str | None = None) -> bool:
        speed, desc = self._speed()
        ok = (speed or 0.0) >= expected_speed
        return ok if expected_desc is None else ok and desc.lower() == expected_desc.lower()

    def assert_internet_not_excellent(self) -> bool:
        return self._speed()[1].lower() != "excellent"

    def assert_can_send_mms(self, expected_status: bool) -> bool:
        return self._can_send_mms() == expected_status

    def assert_mobile_data_usage_exceeded(self, expected_status: bool) -> bool:
        return self.around["mobile_data_usage_exceeded"] == expected_status
