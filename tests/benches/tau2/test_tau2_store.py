"""Copy-on-write worlds share the cached base without ever changing it, and hash like full copies."""
from __future__ import annotations

import copy

from training.benches.tau2.store import Base, CowTable, state_hash

DB = {"users": {"u1": {"name": "Ann", "tags": ["a"]}, "u2": {"name": "Bob", "tags": []}},
      "plans": [{"id": "P1", "price": 10.0}]}


def test_reads_copy_records_and_leave_the_base_alone():
    base = Base(copy.deepcopy(DB))
    world = base.copy()
    assert isinstance(world["users"], CowTable)
    world["users"]["u1"]["tags"].append("b")
    for key in world["users"]:
        world["users"][key]["name"] = world["users"][key]["name"].upper()
    assert [u["name"] for u in world["users"].values()] == ["ANN", "BOB"]
    world["plans"][0]["price"] = 0.0
    assert base.db == DB                                   # the base is untouched
    assert world["users"]["u1"] == {"name": "ANN", "tags": ["a", "b"]}
    assert base.copy()["users"]["u1"] == DB["users"]["u1"]  # a second world starts clean


def test_state_hash_is_the_content_whatever_the_path():
    base = Base(copy.deepcopy(DB))
    plain = copy.deepcopy(DB)
    cow = base.copy()
    assert state_hash(cow) == state_hash(plain)
    reordered = {"plans": plain["plans"], "users": {"u2": plain["users"]["u2"], "u1": plain["users"]["u1"]}}
    assert state_hash(reordered) == state_hash(plain)
    cow["users"]["u2"]["name"] = "Bo"
    assert state_hash(cow) != state_hash(plain)
    plain["users"]["u2"]["name"] = "Bo"
    assert state_hash(cow) == state_hash(plain)
    cow["users"]["u3"] = {"name": "Cy", "tags": []}
    del cow["users"]["u1"]
    plain["users"]["u3"] = {"name": "Cy", "tags": []}
    del plain["users"]["u1"]
    assert state_hash(cow) == state_hash(plain)
    assert state_hash(base.copy()) == state_hash(DB)        # cached base hashes stay right


def test_deepcopy_of_a_world_is_plain_and_independent():
    world = Base(copy.deepcopy(DB)).copy()
    clone = copy.deepcopy(world)
    clone["users"]["u1"]["name"] = "Zed"
    assert world["users"]["u1"]["name"] == "Ann"
