"""An oracle agent solves every shipped task end to end against the symbolic user: it makes the
gold tool calls, asks the user to do the gold phone actions (telecom: the symbolic rules must turn
the request into the right phone tool), says what must be said, and offers more help until the user
ends the call. Every episode must score 1, so every shipped task is solvable through the
environment and its default symbolic user."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from training.benches.tau2 import BENCH
from training.snapshot import Snapshot

ROOT = Path(__file__).resolve().parents[3]
ASK_USER = {  # how the oracle asks for each phone action the gold actions contain
    "toggle_airplane_mode": "Please turn off airplane mode on your phone.",
    "reseat_sim_card": "Please take out your SIM card and re-insert it.",
    "reset_apn_settings": "Please reset your APN settings.",
    "reboot_device": "Please restart your phone.",
    "toggle_data": "Please turn on your mobile data.",
    "toggle_roaming": "Please turn on data roaming on your phone.",
    "toggle_data_saver_mode": "Please turn off data saver mode.",
    "set_network_mode_preference": "Please set your network mode to 4G/5G preferred.",
    "disconnect_vpn": "Please disconnect your VPN.",
    "grant_app_permission": "Please give the {app_name} app the {permission} permission.",
    "toggle_wifi_calling": "Please turn off Wi-Fi calling.",
    "make_payment": "Please pay the bill from the payment request on your phone.",
}


def play(env, task) -> tuple[float, dict]:
    env.reset()
    for action in task.data["actions"]:
        if action["requestor"] == "user":
            ask = ASK_USER[action["name"]].format(**action["arguments"])
            obs, reward, terminated, truncated, info = env.step(ask)
            assert f"[I ran {action['name']}:" in obs, (task.id, obs)
        else:
            call = json.dumps({"name": action["name"], "arguments": action["arguments"]})
            obs, reward, terminated, truncated, info = env.step(f"<tool_call>{call}</tool_call>")
            assert "Error" not in obs, (task.id, obs)
    if task.data["communicate_info"]:
        env.step("Here is what you asked: " + ", ".join(task.data["communicate_info"]) + ".")
    for _ in range(6):
        obs, reward, terminated, truncated, info = env.step("Is there anything else I can help with?")
        if terminated or truncated:
            return reward, info
    return 0.0, info


@pytest.mark.parametrize("domain", BENCH.gyms)
def test_oracle_solves_every_shipped_task(domain):
    snap = Snapshot.from_dir(ROOT / "workspace")
    tasks = BENCH.load_tasks("train", [domain]) + BENCH.load_tasks("test", [domain])
    failed = []
    for i, task in enumerate(tasks):
        reward, info = play(BENCH.make_env(task, snap, seed=i), task)
        if reward != 1.0:
            failed.append((task.id, info.get("end_reason"), info.get("reward_breakdown")))
    assert failed == []


def test_oracle_solves_the_real_telecom_tasks(benchdata):
    snap = Snapshot.from_dir(ROOT / "workspace")
    tasks = BENCH.load_tasks(None, ["telecom"], data_dir=benchdata / "tau2")
    results = [play(BENCH.make_env(t, snap, seed=i), t)[0] for i, t in enumerate(tasks)]
    assert results == [1.0] * len(tasks)


def test_oracle_solves_the_real_retail_tasks(benchdata):
    """Real gold actions include calls that fail on purpose (a product id that is an item id, a
    non-delivered order): they are replayed as they are, errors and all."""
    snap = Snapshot.from_dir(ROOT / "workspace")
    tasks = BENCH.load_tasks(None, ["retail"], data_dir=benchdata / "tau2")
    results = []
    for i, task in enumerate(tasks):
        env = BENCH.make_env(task, snap, seed=i)
        env.reset()
        for a in task.data["actions"]:
            env.step("<tool_call>" + json.dumps({"name": a["name"], "arguments": a["arguments"]})
                     + "</tool_call>")
        if task.data["communicate_info"]:
            env.step("Here is what you asked: " + ", ".join(task.data["communicate_info"]) + ".")
        reward = 0.0
        for _ in range(8):
            _, reward, terminated, truncated, _ = env.step("Is there anything else I can help with?")
            if terminated or truncated:
                break
        results.append(reward)
    assert results == [1.0] * len(tasks)
