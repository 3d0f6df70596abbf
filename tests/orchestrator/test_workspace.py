"""orchestrator.workspace on real temporary git repositories."""
from __future__ import annotations

import os

import pytest

from orchestrator.errors import UserError
from orchestrator.workspace import (LIVE_REF, CommitInfo, Workspace, is_agent_author, parse_trailers)

PERSON = ("Pat", "pat@example.org")


@pytest.fixture
def ws(tmp_path):
    seed = tmp_path / "seed"
    (seed / "rewards").mkdir(parents=True)
    (seed / "knobs.json").write_text('{"a": 1}\n')
    (seed / "rewards" / "r.py").write_text("APPLIES_TO = []\n")
    (seed / "rewards" / "__pycache__").mkdir()
    (seed / "rewards" / "__pycache__" / "r.cpython-311.pyc").write_bytes(b"\0")
    return Workspace.create(tmp_path / "ws", seed, "seed\n\nWhy: x\nExpect: y\n")


def test_create_commits_the_seed_on_main_without_caches(ws):
    assert ws.run("symbolic-ref", "HEAD") == "refs/heads/main"
    assert sorted(ws.list_files("main")) == ["knobs.json", "rewards/r.py"]
    assert ws.read_file("main", "knobs.json") == b'{"a": 1}\n'
    assert ws.read_file("main", "missing.json") is None


def test_not_a_repository_is_one_sentence(tmp_path):
    with pytest.raises(UserError, match="is not a git repository"):
        Workspace(tmp_path)


def test_history_refs_and_notes(ws):
    first = ws.main()
    shas = []
    for i in range(3):
        (ws.path / "knobs.json").write_text(f'{{"a": {i + 2}}}\n')
        shas.append(ws.commit_all(f"c{i}", PERSON, verify=False))
    assert ws.commits_since(first) == shas                       # oldest first
    assert ws.first_parent_history()[:3] == shas[::-1]
    assert ws.changed_paths(first, shas[-1]) == {"knobs.json": "modified"}
    assert ws.set_ref(LIVE_REF, shas[0]) and ws.rev(LIVE_REF) == shas[0]
    assert not ws.set_ref(LIVE_REF, shas[1], expect_old=first)   # compare-and-swap refuses
    assert ws.rev(LIVE_REF) == shas[0]
    ws.tag("run-001-start", shas[1])
    assert ws.rev("run-001-start") == shas[1]
    ws.add_note(shas[2], "one")
    ws.add_note(shas[2], "two")                                  # overwriting is allowed
    assert ws.note(shas[2]) == "two" and ws.note(shas[1]) is None
    assert ws.noted_commits() == {shas[2]}
    assert ws.is_ancestor(first, shas[2]) and not ws.is_ancestor(shas[2], first)


def test_apply_change_on_another_tree(ws):
    base = ws.main()
    (ws.path / "knobs.json").write_text('{"a": 5}\n')
    bad = ws.commit_all("bad", PERSON, verify=False)
    (ws.path / "notes.md").write_text("hello\n")
    good = ws.commit_all("good", PERSON, verify=False)
    tree = ws.apply_change_on(ws.tree_of(base), bad, good)      # only good's own change
    assert ws.read_file(tree, "knobs.json") == b'{"a": 1}\n'
    assert ws.read_file(tree, "notes.md") == b"hello\n"
    (ws.path / "knobs.json").write_text('{"a": 6}\n')
    clash = ws.commit_all("builds on bad", PERSON, verify=False)
    assert ws.apply_change_on(ws.tree_of(base), good, clash) is None


def test_advance_main_moves_the_checkout_and_refuses_a_stale_base(ws):
    first = ws.main()
    (ws.path / "knobs.json").write_text('{"a": 9}\n')
    second = ws.commit_all("nine", PERSON, verify=False)
    back = ws.commit_tree(ws.tree_of(first), second, "back")
    assert not ws.advance_main(back, first)                      # main is not at `first`
    assert ws.advance_main(back, second)
    assert ws.main() == back and (ws.path / "knobs.json").read_text() == '{"a": 1}\n'
    assert ws.run("status", "--porcelain") == ""


def test_export_tree_is_atomic_and_skips_links(ws, tmp_path):
    os.symlink("/etc/passwd", ws.path / "link.md")
    sha = ws.commit_all("link", PERSON, verify=False)
    dest = tmp_path / "snap"
    dest.mkdir()
    (dest / "stale.txt").write_text("old")
    ws.export_tree(sha, dest)
    assert sorted(str(p.relative_to(dest)) for p in dest.rglob("*") if p.is_file()) == \
        ["knobs.json", "rewards/r.py"]
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".snap")] == []


def test_agent_identity_and_trailers():
    msg = "x\n\nWhy: a\nExpect: b\nEau-Agent: claude\nnot a: trailer line\n"
    assert parse_trailers(msg)["Eau-Agent"] == "claude" and "not a" not in parse_trailers(msg)
    person = CommitInfo("s", None, "t", "x\n\nWhy: a", "Pat", "pat@example.org")
    assert not is_agent_author(person)
    assert is_agent_author(CommitInfo("s", None, "t", "x", "c", "codex@agents.eau"))
    assert is_agent_author(CommitInfo("s", None, "t", msg, "Pat", "pat@example.org"))


def test_advance_main_keeps_a_persons_unrelated_uncommitted_edit(ws):
    first = ws.main()
    (ws.path / "knobs.json").write_text('{"a": 9}\n')
    second = ws.commit_all("nine", PERSON, verify=False)
    (ws.path / "rewards" / "r.py").write_text("APPLIES_TO = ['travel']\n")   # being edited
    assert ws.advance_main(ws.commit_tree(ws.tree_of(first), second, "back"), second)
    assert (ws.path / "knobs.json").read_text() == '{"a": 1}\n'
    assert (ws.path / "rewards" / "r.py").read_text() == "APPLIES_TO = ['travel']\n"
