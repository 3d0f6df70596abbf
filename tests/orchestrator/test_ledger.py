"""orchestrator.ledger: whole lines, concurrent appenders, corrupt lines skipped with a warning."""
from __future__ import annotations

import json
import threading

import pytest

from orchestrator import ledger


def test_append_and_read_by_type(tmp_path):
    ledger.append_line(tmp_path, {"type": "verdict", "commit": "a", "verdict": "accepted"})
    ledger.append_line(tmp_path, {"type": "effect", "commit": "a", "metric": "reward/mean", "delta": 0.1})
    lines = ledger.read_lines(tmp_path)
    assert [r["type"] for r in lines] == ["verdict", "effect"]
    assert all(isinstance(r["ts"], float) for r in lines)
    assert ledger.read_lines(tmp_path, "effect")[0]["metric"] == "reward/mean"


def test_unknown_type_is_refused(tmp_path):
    with pytest.raises(ValueError, match="not one of"):
        ledger.append_line(tmp_path, {"type": "gossip"})


def test_corrupt_line_is_skipped_with_a_warning(tmp_path):
    ledger.append_line(tmp_path, {"type": "session", "id": 1})
    with ledger.ledger_path(tmp_path).open("a") as f:
        f.write('{"type": "verdict", "comm\n')
    ledger.append_line(tmp_path, {"type": "session", "id": 2})
    with pytest.warns(UserWarning, match="line 2 skipped"):
        assert [r["id"] for r in ledger.read_lines(tmp_path)] == [1, 2]


def test_concurrent_appenders_write_whole_lines(tmp_path):
    def writer(k):
        for i in range(50):
            ledger.append_line(tmp_path, {"type": "control", "writer": k, "i": i, "pad": "x" * 3000})
    threads = [threading.Thread(target=writer, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    raw = ledger.ledger_path(tmp_path).read_text().splitlines()
    assert len(raw) == 200 and all(json.loads(line)["pad"] for line in raw)


def test_applied_events_are_copied_once(tmp_path):
    events = tmp_path / "run-001" / "events.jsonl"
    events.parent.mkdir()
    events.write_text(json.dumps({"event": "started"}) + "\n" +
                      json.dumps({"event": "applied", "commit": "abc", "step": 7}) + "\nnot json\n")
    assert ledger.sync_applied(tmp_path) == 1
    assert ledger.sync_applied(tmp_path) == 0
    assert ledger.read_lines(tmp_path, "applied") == [
        {"type": "applied", "ts": ledger.read_lines(tmp_path)[0]["ts"], "commit": "abc",
         "run": "run-001", "step": 7}]
