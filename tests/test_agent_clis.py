"""When the pinned agent CLIs cannot be had (tests/agent_clis.py): a developer's machine skips
the real-CLI tests with the reason, CI (CI=true) fails them with it. Nothing is installed here:
the installer is a stand-in script that fails as npm does without a registry."""
from __future__ import annotations

import pytest

import agent_clis


def outcome(agent: str = "codex") -> tuple[str, str]:
    """("skipped" | "failed", the message) of `pinned_cli` when the CLI is nowhere."""
    try:
        agent_clis.pinned_cli(agent)
    except pytest.skip.Exception as exc:
        return "skipped", str(exc.msg)
    except pytest.fail.Exception as exc:
        return "failed", str(exc.msg)
    return "found", ""


@pytest.fixture
def no_cli(tmp_path, monkeypatch):
    """No pinned CLI on PATH or in the cache folder, npm present, and an installer that fails."""
    script = tmp_path / "scripts" / "install_agent_clis.sh"
    script.parent.mkdir()
    script.write_text("echo 'npm error code ENOTFOUND: registry.npmjs.org not reachable' >&2\n"
                      "exit 1\n")
    monkeypatch.setattr(agent_clis, "ROOT", tmp_path)
    monkeypatch.setattr(agent_clis, "_INSTALL", [])          # tried once per session: a fresh try
    monkeypatch.setattr(agent_clis, "_pinned_exe", lambda agent: None)
    monkeypatch.setattr(agent_clis.shutil, "which", lambda name: f"/usr/bin/{name}")
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv("EAU_INSTALL_AGENT_CLIS", raising=False)
    return monkeypatch


def test_a_failed_install_fails_the_test_under_ci_in_one_sentence(no_cli):
    no_cli.setenv("CI", "true")
    kind, msg = outcome()
    assert kind == "failed"
    assert "install_agent_clis.sh failed: npm error code ENOTFOUND" in msg
    assert "under CI=true the real-CLI tests must run" in msg
    assert msg.endswith(".") and msg.count(". ") == 0


def test_no_npm_fails_the_test_under_ci(no_cli):
    no_cli.setenv("CI", "true")
    no_cli.setattr(agent_clis.shutil, "which", lambda name: None)
    kind, msg = outcome("claude-code")
    assert kind == "failed" and "npm is not installed" in msg


def test_a_developer_machine_skips_with_the_reason(no_cli):
    kind, msg = outcome()
    assert kind == "skipped" and "install_agent_clis.sh failed: npm error code ENOTFOUND" in msg
    no_cli.setattr(agent_clis.shutil, "which", lambda name: None)
    no_cli.setattr(agent_clis, "_INSTALL", [])
    kind, msg = outcome()
    assert kind == "skipped" and "npm is not installed" in msg


def test_ci_that_opts_out_by_name_skips(no_cli):
    no_cli.setenv("CI", "true")
    no_cli.setenv("EAU_INSTALL_AGENT_CLIS", "0")
    kind, msg = outcome()
    assert kind == "skipped" and "EAU_INSTALL_AGENT_CLIS=0" in msg
