"""Helpers shared by the domains' generators (`<domain>/generate.py`): seeded names, addresses,
ids, the task record in tau2-bench's format, and writing db.json / tasks.json after checking that
every task's gold actions replay without a failed write.

A leaf below the generators: they import it, it imports none of them (the runner of them all is
`python -m training.benches.tau2.generate`).
"""
from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

from training.benches.tau2.domain import World, get_domain
from training.benches.tau2.loader import task_from_tau2

FIRST = ["Ava", "Liam", "Noah", "Emma", "Mia", "Lucas", "Sofia", "Ethan", "Chloe", "Omar", "Yara",
         "Ivan", "Priya", "Mateo", "Hana", "Kofi", "Lena", "Ravi", "Zoe", "Tariq", "Elena", "Jonas",
         "Aisha", "Diego", "Nora", "Felix", "Mei", "Samir", "Ines", "Theo"]
LAST = ["Okafor", "Lindqvist", "Moreau", "Tanaka", "Alvarez", "Novak", "Haddad", "Kowalski",
        "Brennan", "Castillo", "Nakamura", "Osei", "Petrov", "Quinn", "Rossi", "Sato", "Varga",
        "Weber", "Yilmaz", "Zhang", "Dubois", "Fischer", "Gallo", "Ibrahim"]
STREETS = ["Maple Avenue", "Cedar Lane", "Harbor Street", "Willow Way", "Summit Road",
           "Orchard Drive", "Lake Shore Road", "Pine Court", "Hillcrest Boulevard", "River Walk"]
CITIES = [("Portland", "OR", "972"), ("Austin", "TX", "787"), ("Denver", "CO", "802"),
          ("Madison", "WI", "537"), ("Raleigh", "NC", "276"), ("Tucson", "AZ", "857"),
          ("Boise", "ID", "837"), ("Albany", "NY", "122")]


def digits(rng: random.Random, n: int) -> str:
    return str(rng.randint(10 ** (n - 1), 10 ** n - 1))


def person(rng: random.Random, used: set[str]) -> tuple[str, str]:
    while True:
        first, last = rng.choice(FIRST), rng.choice(LAST)
        if (first, last) not in used:
            used.add((first, last))
            return first, last


def address(rng: random.Random) -> dict[str, str]:
    city, state, zip3 = rng.choice(CITIES)
    return {"address1": f"{rng.randint(10, 999)} {rng.choice(STREETS)}",
            "address2": rng.choice(["", f"Apt {rng.randint(1, 40)}", f"Suite {rng.randint(100, 999)}"]),
            "city": city, "country": "USA", "state": state, "zip": zip3 + digits(rng, 2)}


def task_record(task_id: str, split: str, *, reason: str, known: str, unknown: str = "",
                behaviour: str = "", actions: list[dict], communicate: list[str] | None = None,
                reward_basis: list[str] | None = None, initial_state: dict | None = None,
                env_assertions: list[dict] | None = None) -> dict[str, Any]:
    """One task in tau2-bench's task format (plus our `split`)."""
    record = {
        "id": task_id, "split": split,
        "user_scenario": {"persona": None, "instructions": {
            "reason_for_call": reason, "known_info": known, "unknown_info": unknown or None,
            "task_instructions": behaviour or "You answer the agent's questions briefly and "
                                                "confirm actions that match your request."}},
        "initial_state": initial_state,
        "evaluation_criteria": {
            "actions": [{"action_id": f"{task_id}_{i}", "requestor": a.get("requestor", "assistant"),
                         "name": a["name"], "arguments": a["arguments"]}
                        for i, a in enumerate(actions)],
            "communicate_info": communicate or [], "env_assertions": env_assertions or None,
            "reward_basis": reward_basis or ["DB", "COMMUNICATE"]},
    }
    return record


def write_domain(folder: Path, db: dict | None, tasks: list[dict]) -> None:
    """Write db.json (when given) and tasks.json, after replaying every task's gold actions: a
    failed gold write is a generator bug, so it stops the run."""
    domain = folder.name
    if db is not None:
        (folder / "db.json").write_text(json.dumps(db, indent=1, sort_keys=True) + "\n")
    tools = get_domain(domain).tools
    for record in tasks:
        task = task_from_tau2(record, domain, record["split"], policy="", db="shipped",
                              user_db="shipped" if domain == "telecom" else None)
        world = World.for_task(task.data)
        for a in task.data["actions"]:
            result = world.call(a["name"], a["arguments"], a["requestor"])
            is_write = a["requestor"] == "user" or tools.tool_kind(a["name"]) == "write"
            if result.error and is_write:
                raise AssertionError(f"{record['id']}: gold {a['name']} failed: {result.content}")
    (folder / "tasks.json").write_text(json.dumps(tasks, indent=1) + "\n")
