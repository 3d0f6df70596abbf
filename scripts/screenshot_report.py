"""Open a report in headless Chromium, take a screenshot, and check that it shows something.

    .venv/bin/python scripts/screenshot_report.py runs/NAME/report/index.html [--out shot.png]
    .venv/bin/python scripts/screenshot_report.py --build EXP [EXP ...] [--out shot.png]

The check (that the page is not empty): its pixels vary (a blank page has a standard deviation
near 0) and a share of them are saturated colours, which in our page come only from the
matplotlib figures (the table is black on white and grey). Chromium comes from Debian's packages
(`apt-get install -y chromium`). Headless Chromium cannot size its window to the page, so the
window is tall and the blank rows under the page's end are cut off the PNG (a one-run report
left the lower 40% of a 3,200-pixel shot white).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WINDOW = (1400, 3200)


def find_chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        found = shutil.which(name)
        if found:
            return found
    return None


def screenshot(html: Path, out: Path, window: tuple[int, int] = WINDOW,
               timeout_s: float = 120.0) -> Path:
    """Render `html` (a file) in headless Chromium and write a PNG of the window to `out`."""
    browser = find_chromium()
    if browser is None:
        raise SystemExit("chromium is not installed: run `apt-get install -y chromium`.")
    out = Path(out).resolve()
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="eau-chromium-") as profile:
        cmd = [browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
               "--disable-dev-shm-usage", "--no-first-run", f"--user-data-dir={profile}",
               f"--window-size={window[0]},{window[1]}", f"--screenshot={out}",
               Path(html).resolve().as_uri()]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s)
    if not out.exists():
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): "
                           f"{proc.stderr[-800:]}")
    return trim_blank_bottom(out)


def trim_blank_bottom(png: Path, margin: int = 24) -> Path:
    """Cut the rows below the last non-white one, keeping `margin` pixels of white."""
    import numpy as np
    from PIL import Image

    image = Image.open(png).convert("RGB")
    rgb = np.asarray(image)                                             # (H, W, 3)
    inked = np.flatnonzero((rgb.min(axis=2) < 245).any(axis=1))         # rows with any ink
    if inked.size:
        bottom = min(rgb.shape[0], int(inked[-1]) + 1 + margin)
        if bottom < rgb.shape[0]:
            image.crop((0, 0, rgb.shape[1], bottom)).save(png)
    return png


def check_screenshot(png: Path) -> dict[str, float]:
    """Size, pixel spread and the share of saturated (figure) pixels of a screenshot."""
    import numpy as np
    from PIL import Image

    rgb = np.asarray(Image.open(png).convert("RGB"), dtype=np.float32)   # (H, W, 3)
    saturation = rgb.max(axis=2) - rgb.min(axis=2)                       # (H, W)
    ink = rgb.min(axis=2) < 245
    return {"width": rgb.shape[1], "height": rgb.shape[0], "std": float(rgb.std()),
            "coloured_fraction": float((saturation > 60).mean()),
            "coloured_pixels": int((saturation > 60).sum()),
            "ink_fraction": float(ink.mean()), "ink_pixels": int(ink.sum())}


def bare_ink(html: Path) -> int:
    """Ink pixels of the same page rendered without its PNG figures (a negative control: flat
    curves of a real short run have few coloured pixels, but figures always add ink). Pixels,
    not shares: the trimmed shots of the two pages differ in height."""
    with tempfile.TemporaryDirectory(prefix="eau-bare-") as tmp:
        copy = Path(tmp) / "report"
        shutil.copytree(Path(html).parent, copy, ignore=shutil.ignore_patterns("*.png"))
        return check_screenshot(screenshot(copy / Path(html).name, Path(tmp) / "bare.png"))[
            "ink_pixels"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("html", nargs="?", help="a report's index.html")
    parser.add_argument("--build", nargs="+", metavar="EXP",
                        help="build the report of these experiment folders first")
    parser.add_argument("--out", default="report-screenshot.png")
    args = parser.parse_args(argv)
    if args.build:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from orchestrator.report import build_report

        html = build_report([Path(p) for p in args.build], Path(tempfile.mkdtemp()) / "report")
    elif args.html:
        html = Path(args.html)
    else:
        parser.error("give a report's index.html or --build EXP")
    png = screenshot(html, Path(args.out))
    stats = check_screenshot(png)
    bare = bare_ink(html)
    print(f"screenshot {png}: {stats['width']}x{stats['height']}, pixel std {stats['std']:.1f}, "
          f"coloured {100 * stats['coloured_fraction']:.1f}%, ink {stats['ink_pixels']:,} pixels"
          f" (without figures {bare:,})")
    ok = stats["std"] > 15 and stats["ink_pixels"] > 1.3 * bare
    print("looks like a report (table and figures drawn)" if ok else "looks EMPTY")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
