"""The claude-code adapter against a fake `claude` that behaves like the real 2.1.197: its flags,
commits under the session's identity, hangs killed at the time limit, writes outside the workspace
denied, no credentials, eval folder unreadable."""
import json
import subprocess

from conftest import make_ctx

from orchestrator import effects
from orchestrator.agents import base


def git(ws, *args):
    return subprocess.run(["git", "-C", str(ws), *args], capture_output=True, text=True, check=True).stdout


def test_commit_carries_identity_and_trailers_and_flags_are_right(exp, fakes_on_path):
    ctx = make_ctx(exp, "claude-code", budget_usd=0.5,
                   extra_env={"FAKE_MODE": "edit", "FAKE_LOG": str(fakes_on_path)})
    res = base.run_session(ctx)
    assert res.status == base.OK and len(res.commits) == 1
    assert res.cost_usd == 0.0123 and res.turns == 3
    msg = git(ctx.workspace, "log", "-1", "--format=%ae%n%B")
    assert msg.startswith("claude-code-s001@agents.eau") and "Eau-Agent: claude-code" in msg
    assert "Eau-Session: s001" in msg and "Why:" in msg
    call = json.loads(fakes_on_path.read_text().splitlines()[0])
    argv = call["argv"]
    assert call["stdin_devnull"] and call["max_retries"] == "2"
    assert argv[0] == "-p" and argv.index("--allowedTools") > 1     # prompt before --allowedTools
    assert argv[argv.index("--setting-sources") + 1] == ""
    assert argv[argv.index("--permission-mode") + 1] == "dontAsk"
    assert argv[argv.index("--output-format") + 1] == "stream-json" and "--verbose" in argv
    assert "--append-system-prompt-file" in argv and argv[argv.index("--max-budget-usd") + 1] == "0.5"
    settings = json.loads(open(argv[argv.index("--settings") + 1]).read())
    assert any("/eval/" in r for r in settings["permissions"]["deny"])
    line = effects.ledger_read(exp, "session")[-1]
    assert line["status"] == "ok" and line["commits"] == res.commits


def test_uncommitted_edits_are_committed_by_the_adapter(exp, fakes_on_path):
    res = base.run_session(make_ctx(exp, "claude-code", extra_env={"FAKE_MODE": "nocommit"}))
    assert res.status == base.OK and len(res.commits) == 1
    assert "Eau-Session: s001" in git(exp / "workspace", "log", "-1", "--format=%B")
    assert git(exp / "workspace", "status", "--porcelain") == ""


def test_hang_is_killed_at_the_time_limit(exp, fakes_on_path):
    ctx = make_ctx(exp, "claude-code", time_limit_s=1.0, extra_env={"FAKE_MODE": "hang"})
    res = base.run_session(ctx)
    assert res.status == base.TIMEOUT and "time limit" in res.reason
    assert res.duration_s < 15 and res.commits == []
    assert effects.ledger_read(exp, "session")[-1]["status"] == "timeout"


def test_edit_outside_the_workspace_is_denied(exp, fakes_on_path):
    before = (exp / "run-001" / "config.json").read_text()
    res = base.run_session(make_ctx(exp, "claude-code", extra_env={"FAKE_MODE": "outside"}))
    assert res.status == base.REFUSED and res.denials == [f"Edit({exp / 'run-001' / 'config.json'})"]
    assert (exp / "run-001" / "config.json").read_text() == before


def test_eval_folder_cannot_be_read(exp, fakes_on_path):
    res = base.run_session(make_ctx(exp, "claude-code", extra_env={"FAKE_MODE": "read_eval"}))
    assert "0.42" not in res.reason and res.denials and "eval" in res.denials[0]


def test_no_credentials_and_not_installed_end_the_session_with_a_reason(exp, fakes_on_path, monkeypatch):
    res = base.run_session(make_ctx(exp, "claude-code", extra_env={"FAKE_MODE": "nologin"}))
    assert res.status == base.UNAVAILABLE and "Not logged in" in res.reason
    assert "`claude /login`" in res.reason and "install" not in res.reason    # it is installed
    monkeypatch.setenv("PATH", "/usr/bin:/bin")   # git, but no claude
    res = base.run_session(make_ctx(exp, "claude-code", session="s002"))
    assert res.status == base.UNAVAILABLE and "not installed" in res.reason
    assert [s["status"] for s in effects.ledger_read(exp, "session")] == ["unavailable", "unavailable"]


def test_is_error_with_exit_code_is_a_failure(exp, fakes_on_path):
    res = base.run_session(make_ctx(exp, "claude-code", extra_env={"FAKE_MODE": "error"}))
    assert res.status == base.FAILED and "exited 1" in res.reason
