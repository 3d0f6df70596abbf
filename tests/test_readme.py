"""The README's first screen: what the project is, the two commands CI and a new user run (the
second exactly as `.ci/run` greps it), what the demo shows in one small table, and where to go
next, without the measurement history (benchmarks/RESULTS-*.md keeps that)."""
import re
import subprocess
from pathlib import Path

from orchestrator.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text()
FIRST_SCREEN = README.split("\n## ", 1)[0]


def test_the_two_commands_are_the_first_lines_of_code_and_ci_finds_the_second():
    block = FIRST_SCREEN.split("```bash\n", 1)[1].split("```", 1)[0].splitlines()
    assert block == [
        "bash scripts/setup.sh && .venv/bin/orchestrator start --agent builtin --bench usergym "
        "--preset cpu --exp demo --knob 'env.*.demonstrations=0'",
        "bash scripts/setup.sh && .venv/bin/python -m pytest -q -p no:cacheprovider"]
    ci = (ROOT / ".ci" / "run").read_text()
    pattern = re.search(r"grep -m1 '([^']+)' README.md", ci).group(1)
    found = subprocess.run(["grep", "-m1", pattern, "README.md"], cwd=ROOT, capture_output=True,
                           text=True).stdout.strip()
    assert found == block[1]


def test_the_first_screen_says_what_the_demo_shows_and_where_to_go_next():
    assert len(FIRST_SCREEN.splitlines()) <= 50
    tables = [t for t in re.split(r"\n\s*\n", FIRST_SCREEN) if t.lstrip().startswith("|")]
    assert len(tables) == 1 and "refused actions" in tables[0]
    for needed in ("orchestrator log demo", "orchestrator diff", "../shared/benchdata",
                   "After the demo", "Disk"):
        assert needed in FIRST_SCREEN, needed
    for history in ("AVX2", "now 48", "2026-12-03"):           # measurement history: RESULTS files
        assert history not in FIRST_SCREEN, history


def test_every_subcommand_the_readme_names_exists():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    # in code: `orchestrator X ...`, .venv/bin/orchestrator X, or a command line of a code block
    named = set(re.findall(r"(?:`|^\s*|\.venv/bin/)orchestrator ([a-z][a-z-]*[a-z])\b", README, re.M))
    assert {"start", "prune", "diff"} <= named
    assert named <= set(sub.choices), sorted(named - set(sub.choices))
