"""The device half of carrying vLLM to the lent H200 (scripts/gpu/carry_vllm.py is the other).

    python3 .gpuwork/vllm/tool/device_vllm.py          # every call, the same command

The device takes at most 64 MiB a call and has no internet, so vLLM and its missing dependencies
travel as one tar of wheels cut into parts, one part per call (folders .gpuwork/vllm/cNN/ beside
this script's tool/ folder; manifest.json beside this script gives every part's size and
sha256). Each call:
1. checks each part that came with it against the manifest and keeps it in /tmp/vllm-parts/
   (a part already kept is left alone, so repeating a call is harmless);
2. says which parts are still missing: /tmp lasts only while the machine stays warm (30 s after
   a call), so parts kept by calls before a cold start are gone and must be carried again;
3. once every part is held: checks them, joins them, checks the whole tar's sha256, unpacks it
   and installs the wheels with `pip install --no-index --no-deps --target /tmp/site-vllm`;
4. then (and on every later call) imports vllm and torch in a fresh interpreter with
   PYTHONPATH=/tmp/site-vllm and prints their versions, or the import error in one line, and
   the requirements of the installed packages that nothing on the device meets.
Every call also writes the device's own packages to $OUT/device-freeze.txt (name==version), for
carry_vllm.py --device-freeze. Exit status: 0 while parts are missing and once vllm imports,
1 on a damaged or lost part or a failed pip install, 2 when the import fails.

The packing (`pack`) lives here too so that one file owns the format; carry_vllm.py imports it.
Standard library only, except `packaging` in the requirement check (the device has it).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

MANIFEST = "manifest.json"
STASH = Path("/tmp/vllm-parts")
SITE = Path("/tmp/site-vllm")
PREPARED_SITE = Path("/tmp/site")       # ../shared/gpu/prepare.sh's staged wheels: carried too
CHUNK = 1 << 20


class CarryError(Exception):
    """A problem a person fixes by carrying again; its text is one sentence saying what to do."""


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(CHUNK), b""):
            digest.update(block)
    return digest.hexdigest()


def part_label(index: int, count: int) -> tuple[str, str]:
    """(folder, file) of part `index` of `count`: c01/part01, ... (zero-padded so they sort)."""
    width = max(2, len(str(count)))
    return f"c{index:0{width}d}", f"part{index:0{width}d}"


class _SplitWriter:
    """A write-only stream that fills part files of at most `limit` bytes one after the other,
    hashing each part and the whole as it goes (tarfile writes into it in stream mode)."""

    def __init__(self, out_dir: Path, limit: int):
        self.out_dir, self.limit = out_dir, limit
        self.whole = hashlib.sha256()
        self.size = 0
        self.parts: list[dict] = []           # {"size", "sha256", "path"} per finished part
        self._file = self._digest = self._path = None
        self._used = 0

    def write(self, data: bytes) -> int:
        view = memoryview(data)
        while view:
            if self._file is None or self._used == self.limit:
                self._roll()
            take = min(len(view), self.limit - self._used)
            self._file.write(view[:take])
            self._digest.update(view[:take])
            self.whole.update(view[:take])
            self._used += take
            self.size += take
            view = view[take:]
        return len(data)

    def _roll(self) -> None:
        self._finish()
        path = self.out_dir / f"raw{len(self.parts) + 1:06d}"
        self._file, self._digest, self._used = open(path, "wb"), hashlib.sha256(), 0
        self._path = path

    def _finish(self) -> None:
        if self._file is not None:
            self._file.close()
            self.parts.append({"size": self._used, "sha256": self._digest.hexdigest(),
                               "path": self._path})
            self._file = None

    def close(self) -> None:
        self._finish()


def pack(files: list[Path], out_dir: Path, part_bytes: int, bundle: str,
         extra: dict | None = None) -> dict:
    """Tars `files` (flat, by name, in the given order) into parts of at most `part_bytes`
    under out_dir/cNN/partNN and writes out_dir/tool/manifest.json; returns the manifest.
    The tar is not compressed: wheels are deflated zip files already."""
    if part_bytes < 1:
        raise ValueError("part_bytes must be positive")
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in list(out_dir.glob("c[0-9]*")) + list(out_dir.glob("raw*")):
        shutil.rmtree(old) if old.is_dir() else old.unlink()
    writer = _SplitWriter(out_dir, part_bytes)
    entries = []
    with tarfile.open(fileobj=writer, mode="w|", format=tarfile.PAX_FORMAT) as tar:
        for path in files:
            info = tar.gettarinfo(str(path), arcname=path.name)
            # a fixed owner and time, so the same wheels give the same parts and sha256s
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mtime = 0
            with open(path, "rb") as f:
                tar.addfile(info, f)
            entries.append({"file": path.name, "size": path.stat().st_size,
                            "sha256": sha256_file(path)})
    writer.close()
    count = len(writer.parts)
    parts = []
    for index, part in enumerate(writer.parts, 1):
        folder, name = part_label(index, count)
        (out_dir / folder).mkdir()
        part["path"].rename(out_dir / folder / name)
        parts.append({"index": index, "folder": folder, "file": name, "size": part["size"],
                      "sha256": part["sha256"]})
    manifest = {"format": 1, "bundle": {"name": bundle, "size": writer.size,
                                        "sha256": writer.whole.hexdigest()},
                "parts": parts, "wheels": entries, **(extra or {})}
    (out_dir / "tool").mkdir(exist_ok=True)
    (out_dir / "tool" / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def ranges(numbers: list[int]) -> str:
    """[1, 2, 3, 5] -> '1-3, 5': a compact list of part numbers for a one-line message."""
    spans: list[list[int]] = []
    for n in sorted(numbers):
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    return ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)


def store(manifest: dict, carried: Path, stash: Path) -> list[int]:
    """Checks the parts that came in `carried` (cNN/partNN) and keeps them in `stash`; returns
    the numbers of the parts it took. A part whose size or sha256 differs from the manifest
    raises CarryError, naming it."""
    stash.mkdir(parents=True, exist_ok=True)
    taken = []
    for part in manifest["parts"]:
        src = carried / part["folder"] / part["file"]
        if not src.is_file():
            continue
        check_part(part, src, "carried")
        dst = stash / part["file"]
        held = dst.is_file() and dst.stat().st_size == part["size"]
        if held and sha256_file(dst) == part["sha256"]:
            taken.append(part["index"])
            continue
        tmp = stash / (part["file"] + ".tmp")
        shutil.copyfile(src, tmp)
        os.replace(tmp, dst)                  # a call cut short leaves no half-written part
        taken.append(part["index"])
    return taken


def check_part(part: dict, path: Path, where: str) -> None:
    size = path.stat().st_size
    if size != part["size"]:
        raise CarryError(f"part {part['index']} ({where} {path}) has {size} bytes where the "
                         f"manifest says {part['size']}: carry {part['folder']} again.")
    digest = sha256_file(path)
    if digest != part["sha256"]:
        raise CarryError(f"part {part['index']} ({where} {path}) has sha256 {digest[:12]} "
                         f"where the manifest says {part['sha256'][:12]}: it was damaged on "
                         f"the way, carry {part['folder']} again.")


def missing(manifest: dict, stash: Path) -> list[int]:
    """Numbers of the parts not (fully) held in `stash`."""
    out = []
    for part in manifest["parts"]:
        path = stash / part["file"]
        if not path.is_file() or path.stat().st_size != part["size"]:
            out.append(part["index"])
    return out


def join(manifest: dict, stash: Path, dest: Path) -> Path:
    """Checks every held part, joins them into dest/<bundle name> and checks the whole sha256;
    returns the joined tar. Raises CarryError naming what is missing or damaged."""
    gone = missing(manifest, stash)
    if gone:
        raise CarryError(f"parts {ranges(gone)} of {len(manifest['parts'])} are missing from "
                         f"{stash}: carry them again.")
    for part in manifest["parts"]:
        check_part(part, stash / part["file"], "kept")
    dest.mkdir(parents=True, exist_ok=True)
    out = dest / manifest["bundle"]["name"]
    digest = hashlib.sha256()
    with open(out, "wb") as f:
        for part in manifest["parts"]:
            with open(stash / part["file"], "rb") as src:
                for block in iter(lambda: src.read(CHUNK), b""):
                    digest.update(block)
                    f.write(block)
    if digest.hexdigest() != manifest["bundle"]["sha256"]:
        out.unlink()
        raise CarryError(f"the joined {manifest['bundle']['name']} has sha256 "
                         f"{digest.hexdigest()[:12]} where the manifest says "
                         f"{manifest['bundle']['sha256'][:12]}: the parts belong to different "
                         f"packings, carry every part of this manifest again.")
    return out


def unpack(manifest: dict, bundle: Path, dest: Path) -> list[Path]:
    """Unpacks the joined tar into dest and checks each wheel against the manifest."""
    dest.mkdir(parents=True, exist_ok=True)
    names = {w["file"] for w in manifest["wheels"]}
    with tarfile.open(bundle, mode="r|") as tar:
        for member in tar:
            # only the flat file names the manifest lists: a tar cannot write outside dest
            if member.name not in names or not member.isfile():
                raise CarryError(f"{bundle} holds {member.name!r}, which the manifest does not "
                                 f"list: pack it again with carry_vllm.py.")
            with tar.extractfile(member) as src, open(dest / member.name, "wb") as f:
                shutil.copyfileobj(src, f, CHUNK)
    wheels = []
    for wheel in manifest["wheels"]:
        path = dest / wheel["file"]
        if not path.is_file() or sha256_file(path) != wheel["sha256"]:
            raise CarryError(f"{wheel['file']} did not come out of {bundle} intact: pack it "
                             f"again with carry_vllm.py.")
        wheels.append(path)
    return wheels


def install(wheels: list[Path], site: Path) -> None:
    """pip-installs the wheels into a fresh folder and moves it to `site` only when pip
    succeeded, so a call cut short never leaves a half-installed site that looks done."""
    fresh = site.with_name(site.name + ".new")
    shutil.rmtree(fresh, ignore_errors=True)
    cmd = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps", "--no-compile",
           "--no-cache-dir", "--disable-pip-version-check", "--target", str(fresh),
           *map(str, wheels)]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip()).splitlines()[-1:] or ["(no output)"]
        raise CarryError(f"pip install into {fresh} failed: {last[0]}")
    shutil.rmtree(site, ignore_errors=True)
    fresh.rename(site)


# Run in a fresh interpreter with PYTHONPATH=<site>: prints one line for the imports and one for
# the requirements of the carried packages that neither <site> nor the device meets.
PROBE = r"""
import sys, importlib.metadata as md
site = sys.argv[1]
try:
    import torch, vllm
    print(f"vllm {vllm.__version__} (from {vllm.__file__}), torch {torch.__version__}, "
          f"cuda {torch.cuda.is_available()}")
except BaseException as exc:
    print(f"import failed: {type(exc).__name__}: {' '.join(str(exc).split())}")
try:
    from packaging.requirements import Requirement
except ImportError:
    print("requirements not checked: packaging is not importable"); raise SystemExit
have = {}
for dist in md.distributions():      # the first on sys.path wins, as for imports
    name = dist.metadata["Name"].lower().replace("_", "-").replace(".", "-")
    have.setdefault(name, dist)
unmet = []
for dist in md.distributions(path=[site]):
    for line in dist.requires or []:
        req = Requirement(line)
        if req.marker and not req.marker.evaluate({"extra": ""}):
            continue
        found = have.get(req.name.lower().replace("_", "-").replace(".", "-"))
        if found is None:
            unmet.append(f"{req} (for {dist.metadata['Name']}: absent)")
        elif not req.specifier.contains(found.version, prereleases=True):
            unmet.append(f"{req} (for {dist.metadata['Name']}: {found.version})")
print("unmet requirements: " + ("; ".join(sorted(set(unmet))) or "none"))
"""


def probe(site: Path) -> int:
    """Imports vllm and torch with `site` first on the path; 0 when both import."""
    # VLLM_CONFIGURE_LOGGING=0: vLLM's own logging setup writes INFO lines to stdout, which
    # would mix with the probe's lines
    env = dict(os.environ, VLLM_CONFIGURE_LOGGING="0", PYTHONPATH=os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]))
    done = subprocess.run([sys.executable, "-c", PROBE, str(site)], env=env, capture_output=True,
                          text=True)
    lines = [line for line in done.stdout.splitlines()
             if line.startswith(("vllm ", "import failed", "unmet ", "requirements not"))]
    if not lines or done.returncode != 0:
        tail = " ".join(done.stderr.split()[-60:])
        lines.append(f"import failed: the probe exited with {done.returncode}: ...{tail}")
    for line in lines:
        print(line)
    return 2 if any(line.startswith("import failed") for line in lines) else 0


def write_freeze(out: Path, carried: list[Path]) -> None:
    """The device's own packages (sys.path without the folders packages were carried into) as
    name==version, for carry_vllm.py --device-freeze: KINDS.md gives few versions."""
    def under(path: str, folder: Path) -> bool:
        p, f = Path(path).resolve(), folder.resolve()
        return p == f or f in p.parents

    paths = [p for p in sys.path if p and not any(under(p, c) for c in carried)]
    import importlib.metadata as md
    rows = sorted({f"{d.metadata['Name']}=={d.version}" for d in md.distributions(path=paths)},
                  key=str.lower)
    out.mkdir(parents=True, exist_ok=True)
    (out / "device-freeze.txt").write_text("\n".join(rows) + "\n")


def main(argv: list[str] | None = None) -> int:
    here = Path(__file__).resolve().parent
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", type=Path, default=here / MANIFEST)
    parser.add_argument("--carried", type=Path, default=here.parent,
                        help="the folder holding the cNN/ part folders")
    parser.add_argument("--stash", type=Path, default=STASH)
    parser.add_argument("--site", type=Path, default=SITE)
    args = parser.parse_args(argv)
    manifest = json.loads(args.manifest.read_text())
    total = len(manifest["parts"])
    done_mark = args.site / ".bundle-sha256"
    if os.environ.get("OUT"):             # every call: a sequence cut short still brings it back
        write_freeze(Path(os.environ["OUT"]), [args.site, args.stash, PREPARED_SITE])
    try:
        if not (done_mark.is_file() and done_mark.read_text() == manifest["bundle"]["sha256"]):
            taken = store(manifest, args.carried, args.stash)
            gone = missing(manifest, args.stash)
            print(f"took part(s) {ranges(taken) or 'none'}; holding {total - len(gone)} of "
                  f"{total} in {args.stash}")
            if gone:
                # parts below the highest one taken that are gone: the machine went cold (or
                # they were skipped), since a warm machine keeps /tmp between calls
                lost = [n for n in gone if taken and n < max(taken)]
                why = (f" (parts {ranges(lost)} are not here: the machine was given back since "
                       f"they were carried, or they were skipped; carry them again)"
                       if lost else "")
                print(f"missing part(s): {ranges(gone)}{why}")
                return 0
            work = args.stash.parent / "vllm-wheels"
            bundle = join(manifest, args.stash, work)
            wheels = unpack(manifest, bundle, work / "whl")
            bundle.unlink()
            install(wheels, args.site)
            shutil.rmtree(work)                 # the parts stay: they prove what was installed
            done_mark.write_text(manifest["bundle"]["sha256"])
            print(f"installed {len(wheels)} wheels into {args.site}")
        else:
            print(f"{args.site} already holds this manifest's wheels")
    except CarryError as exc:
        print(f"error: {exc}")
        return 1
    code = probe(args.site)
    print(f"use it with: export PYTHONPATH={args.site}:$PWD")
    return code


if __name__ == "__main__":
    sys.exit(main())
