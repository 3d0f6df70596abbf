"""Fixtures for the adapter tests: an experiment folder with a real workspace repository, a run
with logs, and the fake `claude`/`codex` executables on PATH."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "fakes"))
from runlogs import FAKES, ROOT, make_workspace, write_run  # noqa: E402

from orchestrator.agents.base import SessionContext  # noqa: E402


@pytest.fixture
def exp(tmp_path, monkeypatch):
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    make_workspace(exp / "workspace")
    write_run(exp / "run-001", 12)
    (exp / "run-001" / "config.json").write_text('{"frozen": true}\n')
    (exp / "eval").mkdir()
    (exp / "eval" / "results.json").write_text('{"test_success": 0.42}\n')
    return exp


@pytest.fixture
def fakes_on_path(monkeypatch, tmp_path):
    log = tmp_path / "fake-calls.jsonl"
    monkeypatch.setenv("PATH", f"{FAKES}:{Path(sys.executable).parent}:/usr/bin:/bin")
    monkeypatch.setenv("EAU_AGENT_CLIS", "")     # the installed real CLIs never stand in
    # codex's config and temporary folder of the test's own (the adapter reads both)
    monkeypatch.setenv("CODEX_HOME", str(tmp_path / "codex-home"))
    monkeypatch.setenv("TMPDIR", str(tmp_path / "tmpdir"))
    monkeypatch.setenv("FAKE_LOG", str(log))
    return log


def make_ctx(exp: Path, agent: str, session: str = "s001", **kw) -> SessionContext:
    kw.setdefault("skill_path", ROOT / "skills" / "eau" / "SKILL.md")
    return SessionContext(agent=agent, session_id=session, exp_dir=exp, workspace=exp / "workspace",
                          run_dir=exp / "run-001", bench="colbench",
                          experience_dir=exp.parent / "pool", **kw)
