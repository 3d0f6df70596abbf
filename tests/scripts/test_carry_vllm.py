"""Carrying vLLM to the device in parts (scripts/gpu/carry_vllm.py, scripts/gpu/device_vllm.py),
on small synthetic files with a part limit of 6,000 bytes: the parts join back to the same bytes,
a repeated call is harmless, a damaged part and a missing one are named in one sentence, and the
requirement walk carries what the device lacks or holds in a failing version. No network, no GPU,
no pip."""
from __future__ import annotations

import hashlib
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

GPU = Path(__file__).resolve().parents[2] / "scripts" / "gpu"


def load(name: str):
    sys.path.insert(0, str(GPU))                # carry_vllm imports its sibling device_vllm
    try:
        spec = importlib.util.spec_from_file_location(name, GPU / f"{name}.py")
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module              # dataclasses look their module up there
        spec.loader.exec_module(module)
        return module
    finally:
        sys.path.remove(str(GPU))


dv = load("device_vllm")
cv = load("carry_vllm")
PART = 6000                                     # bytes a part: the 30,720-byte tar makes 6 parts


@pytest.fixture
def packed(tmp_path):
    """Five files of 1-9 KiB packed into tmp/out: (manifest, out folder, {name: bytes})."""
    src = tmp_path / "src"
    src.mkdir()
    data = {f"pkg{i}-1.0-py3-none-any.whl": bytes((i * 7 + j) % 251 for j in range(1024 + 2048 * i))
            for i in range(5)}
    for name, body in data.items():
        (src / name).write_bytes(body)
    out = tmp_path / "out"
    manifest = dv.pack([src / n for n in data], out, PART, "b.tar", extra={"vllm": "0.0"})
    return manifest, out, data


def call(out: Path, tmp_path: Path, *indices: int) -> Path:
    """A device call's view: a folder holding only the part folders of `indices`."""
    carried = tmp_path / "call"
    if carried.exists():
        for link in carried.iterdir():
            link.unlink()
    carried.mkdir(exist_ok=True)
    for index in indices:
        folder, _ = dv.part_label(index, 6)
        (carried / folder).symlink_to(out / folder)
    return carried


def test_parts_join_back_to_the_files(packed, tmp_path):
    manifest, out, data = packed
    parts = manifest["parts"]
    assert manifest["bundle"]["size"] == 30720      # tar pads its stream to 10,240-byte records
    assert [p["folder"] for p in parts] == ["c01", "c02", "c03", "c04", "c05", "c06"]
    assert all(p["size"] == PART for p in parts[:-1]) and 0 < parts[-1]["size"] <= PART
    whole = b"".join((out / p["folder"] / p["file"]).read_bytes() for p in parts)
    assert hashlib.sha256(whole).hexdigest() == manifest["bundle"]["sha256"]
    assert json.loads((out / "tool" / "manifest.json").read_text()) == manifest

    stash = tmp_path / "stash"
    assert dv.store(manifest, out, stash) == [1, 2, 3, 4, 5, 6]
    wheels = dv.unpack(manifest, dv.join(manifest, stash, tmp_path / "j"), tmp_path / "whl")
    assert {w.name: w.read_bytes() for w in wheels} == data


def test_packing_twice_gives_the_same_parts(packed, tmp_path):
    manifest, out, data = packed
    again = dv.pack(sorted((tmp_path / "src").iterdir(), key=lambda p: list(data).index(p.name)),
                    tmp_path / "again", PART, "b.tar", extra={"vllm": "0.0"})
    assert again == manifest


def test_calls_one_part_each_and_a_repeat_is_harmless(packed, tmp_path):
    manifest, out, _ = packed
    stash = tmp_path / "stash"
    for index in (1, 2, 2):
        assert dv.store(manifest, call(out, tmp_path, index), stash) == [index]
    assert dv.missing(manifest, stash) == [3, 4, 5, 6]
    with pytest.raises(dv.CarryError,
                       match=r"^parts 3-6 of 6 are missing from .*: carry them again\.$"):
        dv.join(manifest, stash, tmp_path / "j")


def test_a_damaged_carried_part_is_named(packed, tmp_path):
    manifest, out, _ = packed
    path = out / "c02" / "part02"
    body = bytearray(path.read_bytes())
    body[100] ^= 0xFF
    path.write_bytes(bytes(body))
    with pytest.raises(dv.CarryError) as caught:
        dv.store(manifest, out, tmp_path / "stash")
    message = str(caught.value)
    assert message.startswith("part 2 (carried ")
    assert message.endswith("it was damaged on the way, carry c02 again.")
    assert message.count(". ") == 0 and "\n" not in message          # one sentence


def test_a_part_damaged_while_kept_is_named_at_the_join(packed, tmp_path):
    manifest, out, _ = packed
    stash = tmp_path / "stash"
    dv.store(manifest, out, stash)
    kept = stash / "part05"
    kept.write_bytes(b"x" * kept.stat().st_size)
    with pytest.raises(dv.CarryError, match=r"^part 5 \(kept .*carry c05 again\.$"):
        dv.join(manifest, stash, tmp_path / "j")


def test_main_names_the_parts_a_cold_machine_lost(packed, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("OUT", str(tmp_path / "OUT"))
    manifest, out, _ = packed
    args = ["--manifest", str(out / "tool" / "manifest.json"), "--stash", str(tmp_path / "stash"),
            "--site", str(tmp_path / "site")]
    assert dv.main([*args, "--carried", str(call(out, tmp_path, 1))]) == 0
    assert "missing part(s): 2-6\n" in capsys.readouterr().out
    # a fresh machine: /tmp (here the stash) is empty when part 3 arrives
    args[3] = str(tmp_path / "stash-fresh")
    assert dv.main([*args, "--carried", str(call(out, tmp_path, 3))]) == 0
    said = capsys.readouterr().out
    assert "holding 1 of 6" in said
    assert "missing part(s): 1-2, 4-6 (parts 1-2 are not here: the machine was given back" in said
    freeze = (tmp_path / "OUT" / "device-freeze.txt").read_text().splitlines()
    assert any(line.startswith("pytest==") for line in freeze)


def test_main_stops_at_a_damaged_part_with_one_line(packed, tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("OUT", raising=False)
    manifest, out, _ = packed
    (out / "c01" / "part01").write_bytes(b"short")
    code = dv.main(["--manifest", str(out / "tool" / "manifest.json"), "--carried", str(out),
                    "--stash", str(tmp_path / "stash"), "--site", str(tmp_path / "site")])
    said = capsys.readouterr().out.strip().splitlines()
    assert code == 1
    assert said == [f"error: part 1 (carried {out / 'c01' / 'part01'}) has 5 bytes where the "
                    f"manifest says {PART}: carry c01 again."]


def test_ranges_and_labels():
    assert dv.ranges([5, 1, 2, 3, 9, 10]) == "1-3, 5, 9-10"
    assert dv.part_label(3, 16) == ("c03", "part03")
    assert dv.part_label(7, 120) == ("c007", "part007")


def resolved(name: str, *requires: str):
    return cv.Resolved(name, "1.0", list(requires), f"https://x/{name}-1.0.whl", "0" * 64)


def test_walk_carries_what_the_device_lacks_or_fails():
    graph = {n: resolved(n, *reqs) for n, reqs in {
        "vllm": ["a", "b>=2", "c==3", "d[x]", "old; python_version < '3.12'",
                 "bench; extra == 'bench'", "lazy"],
        "a": ["a-dep"], "a-dep": [], "b": [], "c": [], "lazy": ["lazy-dep"], "lazy-dep": [],
        "d": ["d-base", "e; extra == 'x'"], "e": [], "old": [], "bench": [], "d-base": [],
    }.items()}
    device = {"b": "1.0", "c": None, "d": "1.0", "d-base": "1.0"}
    plan = cv.plan_carry(graph, device, leave=frozenset({"lazy"}))
    assert set(plan.carry) == {"vllm", "a", "a-dep", "b", "e"}
    assert plan.carry["b"] == "device 1.0 fails b>=2 (vllm)"
    assert plan.carry["e"] == "absent on the device (d)"
    assert plan.unchecked == {"c": ["==3 (vllm)"]}
    assert plan.kept == {"c": "on the device, version unknown", "d": "device 1.0"}
    assert plan.left == {"lazy": "vllm"}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                          check=True).stdout.strip()


def test_gpuwork_is_excluded_once_also_from_a_worktree(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "-c", "user.email=t@t", "-c", "user.name=t", "commit", "-q", "--allow-empty",
        "-m", "x")
    git(repo, "worktree", "add", "-q", str(tmp_path / "wt"))
    cv.ensure_excluded(tmp_path / "wt")
    cv.ensure_excluded(repo)
    exclude = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert exclude.count("/.gpuwork/") == 1
    (tmp_path / "wt" / ".gpuwork").mkdir()
    (tmp_path / "wt" / ".gpuwork" / "big.whl").write_bytes(b"x" * 1000)
    assert git(tmp_path / "wt", "status", "--porcelain") == ""
    assert cv.tree_bytes(tmp_path / "wt") == 0
