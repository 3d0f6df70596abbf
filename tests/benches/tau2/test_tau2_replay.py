"""Gold actions replay to reward 1 and a deliberately wrong action scores 0, for every task: our
shipped tasks of the three domains, and tau2-bench's real retail and telecom tasks (the real
airline tasks cannot replay: tau2-bench's airline db.json is not in ../shared/benchdata)."""
from __future__ import annotations

import pytest

from training.benches.tau2 import BENCH
from training.benches.tau2.domain import Tau2DataError, World, get_domain
from training.benches.tau2.scoring import ToolCall, gold_calls, score_episode

PERTURB = {"retail": lambda db: ToolCall("modify_user_address", {
    "user_id": next(iter(db["users"])), "address1": "0 Nowhere", "address2": "", "city": "X",
    "state": "XX", "country": "USA", "zip": "00000"}),
    "airline": lambda db: ToolCall("send_certificate", {"user_id": next(iter(db["users"])), "amount": 1})}


def run(task_data: dict, calls: list[ToolCall]) -> tuple[World, list]:
    world = World.for_task(task_data)
    results = [world.call(c.name, c.arguments, c.requestor) for c in calls]
    return world, results


def wrong_calls(task_data: dict, calls: list[ToolCall], results: list) -> list[ToolCall]:
    """The gold calls made wrong: without the last gold action when actions are scored, else
    without the last successful write, else with one extra write to the database."""
    if "ACTION" in task_data["reward_basis"]:
        return calls[:-1]
    domain = get_domain(task_data["domain"])
    for i in range(len(calls) - 1, -1, -1):
        kit = domain.user_tools if calls[i].requestor == "user" else domain.tools
        if not results[i].error and calls[i].name in kit.tool_names() \
                and kit.tool_kind(calls[i].name) == "write":
            return calls[:i] + calls[i + 1:]
    world = World.for_task(task_data)
    return calls + [PERTURB[task_data["domain"]](world.tools.db)]


def check_task(task) -> tuple[float, float]:
    """(score of the gold replay, score of the wrong replay) for one task."""
    data = task.data
    calls = gold_calls(data)
    world, results = run(data, calls)
    said = list(data["communicate_info"])        # the agent tells what it must tell
    gold = score_episode(data, calls, said, world=world).reward
    wrong = wrong_calls(data, calls, results)
    wrong_world, _ = run(data, wrong)
    bad = score_episode(data, wrong, said, world=wrong_world).reward
    if data["communicate_info"] and "COMMUNICATE" in data["reward_basis"]:
        assert score_episode(data, calls, [], world=world).reward == 0.0   # nothing said: 0
    return gold, bad


@pytest.mark.parametrize("domain", ["retail", "airline", "telecom"])
def test_shipped_tasks_replay_to_one_and_wrong_action_to_zero(domain):
    tasks = BENCH.load_tasks("train", [domain]) + BENCH.load_tasks("test", [domain])
    assert len(tasks) >= 60
    failures = [(t.id, s) for t in tasks if (s := check_task(t)) != (1.0, 0.0)]
    assert failures == []


def test_premature_stop_scores_zero():
    task = BENCH.load_tasks("test", ["retail"])[0]
    calls = gold_calls(task.data)
    assert score_episode(task.data, calls, task.data["communicate_info"], premature=True).reward == 0.0


def test_real_retail_tasks_replay(benchdata, capsys):
    tasks = BENCH.load_tasks(None, ["retail"], data_dir=benchdata / "tau2")
    assert len(tasks) == 114
    failures = [(t.id, s) for t in tasks if (s := check_task(t)) != (1.0, 0.0)]
    with capsys.disabled():
        print(f"\nreal retail tasks: {len(tasks) - len(failures)}/{len(tasks)} replay to 1 with a "
              f"wrong action scoring 0")
    assert failures == []


def test_real_telecom_tasks_replay(benchdata):
    tasks = BENCH.load_tasks(None, ["telecom"], data_dir=benchdata / "tau2")
    assert len(tasks) == 20                      # tasks_small.json: the file v0.2.0 ships
    # its ids are in no train/test list of split_tasks.json: all count as test
    assert len(BENCH.load_tasks("test", ["telecom"], data_dir=benchdata / "tau2")) == 20
    failures = [(t.id, s) for t in tasks if (s := check_task(t)) != (1.0, 0.0)]
    assert failures == []


def test_real_airline_tasks_load_but_need_the_missing_database(benchdata):
    tasks = BENCH.load_tasks("test", ["airline"], data_dir=benchdata / "tau2")
    assert len(tasks) == 20 and sum(bool(t.data["actions"]) for t in tasks) >= 15
    with pytest.raises(Tau2DataError, match="airline database file .*db.json not found"):
        World.for_task(tasks[0].data)
