"""Copy-on-write databases and their state hash.

Why: tau2-bench's real retail db.json is 2.8 MB (1,500 records); each episode and each scoring
replay needs its own copy, and the DB check hashes the whole state. Copying and hashing it all
costs ~50-100 ms per world on this machine. Here a world's table shares the cached base records and
copies a record only when a tool reads it for use (`__getitem__`, iteration); the state hash is a
hash over (table, key, record hash) where an untouched record's hash is computed once per base
and shared by every world made from that base.

`state_hash(db)` is the DB state's identity for the DB check: tables that are dicts of records are
hashed record by record (canonical JSON of each record, keys sorted), other tables (telecom's
lists) as canonical JSON. Two states with the same content hash the same however they were made.
"""
from __future__ import annotations

import hashlib
import json
import pickle
from typing import Any, Iterator


def canonical_json(data: Any) -> str:
    return json.dumps(data, sort_keys=True, separators=(",", ":"), default=str)


def record_hash(record: Any) -> str:
    return hashlib.sha256(canonical_json(record).encode()).hexdigest()


def fresh(value: Any) -> Any:
    """A deep copy (pickle round trip: several times faster than copy.deepcopy)."""
    return pickle.loads(pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL))


class CowTable(dict):
    """A table of records shared with a base table until a record is indexed; the first
    `table[key]` replaces the shared record by a private copy, so tools may mutate what they
    index (not what they iterate: see below)."""

    def __init__(self, base: dict, base_hashes: dict[str, str]):
        super().__init__(base)
        self.own: set = set()
        self.base_hashes = base_hashes      # key -> hash of the base record (shared, filled lazily)

    def __getitem__(self, key):
        value = dict.__getitem__(self, key)
        if key not in self.own:
            value = fresh(value)
            dict.__setitem__(self, key, value)
            self.own.add(key)
        return value

    def __setitem__(self, key, value) -> None:
        dict.__setitem__(self, key, value)
        self.own.add(key)

    def get(self, key, default=None):
        return self[key] if key in self else default

    # Iteration (values(), items()) is for searching and gives the records as they stand, shared
    # ones included, WITHOUT copying: a tool must not mutate what it iterates; to change a record
    # it indexes it (`table[key]`), which copies it first. (Copying on iteration would copy all
    # 500 users of the real retail file for every email lookup.)

    def pop(self, key, *default):
        self.own.discard(key)
        return dict.pop(self, key, *default)

    def __delitem__(self, key) -> None:
        self.own.discard(key)
        dict.__delitem__(self, key)

    def __deepcopy__(self, memo) -> dict:
        return {k: fresh(dict.__getitem__(self, k)) for k in dict.keys(self)}

    def __reduce__(self):
        return (dict, (), None, None, iter([(k, dict.__getitem__(self, k)) for k in dict.keys(self)]))

    def record_hashes(self) -> Iterator[tuple[str, str]]:
        for key in sorted(dict.keys(self), key=str):
            value = dict.__getitem__(self, key)
            if key in self.own:
                yield key, record_hash(value)
            else:
                if key not in self.base_hashes:
                    self.base_hashes[key] = record_hash(value)
                yield key, self.base_hashes[key]


def state_hash(db: dict) -> str:
    """The hash of a database state (see the module docstring)."""
    h = hashlib.sha256()
    for table in sorted(db):
        value = db[table] if not isinstance(db, CowTable) else dict.__getitem__(db, table)
        h.update(f"\x00{table}\x00".encode())
        if isinstance(value, CowTable):
            pairs = value.record_hashes()
        elif isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
            pairs = ((k, record_hash(value[k])) for k in sorted(value, key=str))
        else:
            h.update(canonical_json(value).encode())
            continue
        for key, digest in pairs:
            h.update(f"{key}\x01{digest}\x02".encode())
    return h.hexdigest()


class Base:
    """A parsed database kept once; `copy()` gives a world its own copy-on-write view of it."""

    def __init__(self, db: dict):
        self.db = db
        self.hashes: dict[str, dict[str, str]] = {t: {} for t in db}

    def copy(self) -> dict:
        out = {}
        for table, value in self.db.items():
            if isinstance(value, dict) and all(isinstance(v, dict) for v in value.values()):
                out[table] = CowTable(value, self.hashes[table])
            else:
                out[table] = fresh(value)
        return out
