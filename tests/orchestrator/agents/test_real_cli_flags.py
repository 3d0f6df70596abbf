"""The adapters against the real, pinned CLIs (scripts/agent_clis.txt) and the scripted endpoint:
every flag and `-c` key an adapter passes is accepted by that version, and a CLI that cannot reach
its model, or whose key is refused, ends its session at once as unavailable with the reason.
Skipped with the reason when the CLI is absent and cannot be installed (tests/agent_clis.py).
(tests/e2e/test_real_cli_sessions.py runs whole scripted sessions with the trainer.)"""
import json
import socket
import subprocess
import sys
from pathlib import Path

from conftest import make_ctx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from agent_clis import point_claude, point_codex, use_cli  # noqa: E402

from orchestrator.agents import base, codex  # noqa: E402
from orchestrator.agents.scripted import ScriptedEndpoint, request_text  # noqa: E402

DONE = {"turns": [{"say": "Nothing needs fixing."}], "then": [{"say": "Nothing needs fixing."}]}
SKILL_HEADING = "# EAU meta-agent skill"       # a line of skills/eau/SKILL.md


def closed_port() -> int:
    """A local port nothing listens on: connections to it are refused."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_claude_takes_every_flag_of_the_adapter(exp, tmp_path, monkeypatch):
    use_cli(monkeypatch, "claude-code")
    with ScriptedEndpoint(DONE, tmp_path / "requests.jsonl") as ep:
        point_claude(monkeypatch, ep.url, tmp_path / "home")
        res = base.run_session(make_ctx(exp, "claude-code", budget_usd=1.0, time_limit_s=300))
        recorded = ep.requests()
    stderr = (exp / "agents" / "s001" / "stderr.txt").read_text()
    assert "unknown option" not in stderr and "error:" not in stderr, stderr
    # an unknown option exits 1 before any request: the session would be `failed`
    assert res.status == base.NO_CHANGE and res.reason == "Nothing needs fixing.", res
    main = [r for r in recorded if r["api"] == "anthropic" and r.get("turn") == 0]
    assert main and SKILL_HEADING in request_text(main[0]["body"])   # --append-system-prompt-file


def test_codex_takes_every_flag_and_config_key_of_the_adapter(exp, tmp_path, monkeypatch):
    use_cli(monkeypatch, "codex")
    (exp / "eval" / "results.json").unlink()
    (exp / "eval").rmdir()                 # a "none" entry for a folder not made yet is accepted
    with ScriptedEndpoint(DONE, tmp_path / "requests.jsonl") as ep:
        point_codex(monkeypatch, ep.url + "/v1", tmp_path)
        ctx = make_ctx(exp, "codex", prompt="Look at the run.")
        argv = codex.build_argv(ctx, str(tmp_path / "last.txt"), "codex")
        # --strict-config: an unknown `-c` key ends it ("unknown configuration field ... in
        # -c/--config override"), where it is otherwise ignored without a word
        argv.insert(2, "--strict-config")
        proc = subprocess.run(argv, cwd=ctx.workspace, env=base.clean_env(ctx, codex.CREDENTIAL_ENV),
                              capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
        res = base.run_session(make_ctx(exp, "codex", session="s002", time_limit_s=300))
    assert proc.returncode == 0, proc.stderr[-2000:]
    # a filesystem entry this version does not know is an error event, and ignored
    unknown = [e for e in codex.events(proc.stdout) if "not recognized" in json.dumps(e)]
    assert unknown == [] and (tmp_path / "last.txt").read_text().strip() == "Nothing needs fixing."
    assert res.status == base.NO_CHANGE and res.reason == "Nothing needs fixing.", res


def test_codex_offline_ends_at_once_as_unavailable(exp, tmp_path, monkeypatch):
    use_cli(monkeypatch, "codex")
    point_codex(monkeypatch, f"http://127.0.0.1:{closed_port()}/v1", tmp_path)
    # 0.171.0 would wait for the network for ever: without give_up this ends as a timeout
    res = base.run_session(make_ctx(exp, "codex", time_limit_s=600))
    assert res.status == base.UNAVAILABLE, res
    assert res.reason.startswith("codex cannot reach its model endpoint (offline)")
    assert "waiting for network" in res.reason
    # the CLI given up on leaves nothing behind (its file-system helper ran in a session of its
    # own and outlived the killed process group)
    assert base.naming(str(exp / "workspace")) == []


def test_refused_keys_end_either_cli_as_unavailable(exp, tmp_path, monkeypatch):
    with ScriptedEndpoint(DONE, tmp_path / "requests.jsonl", status=401) as ep:
        use_cli(monkeypatch, "codex")
        point_codex(monkeypatch, ep.url + "/v1", tmp_path)
        res = base.run_session(make_ctx(exp, "codex", time_limit_s=600))
        assert res.status == base.UNAVAILABLE and "no valid credentials" in res.reason, res
        assert "401" in res.reason
        use_cli(monkeypatch, "claude-code")
        point_claude(monkeypatch, ep.url, tmp_path / "home")
        res = base.run_session(make_ctx(exp, "claude-code", session="s002", time_limit_s=600))
        assert res.status == base.UNAVAILABLE and "credentials were refused" in res.reason, res
        assert len([r for r in ep.requests() if r.get("reply") == "status 401"]) >= 2


def test_claude_offline_ends_as_unavailable(exp, tmp_path, monkeypatch):
    use_cli(monkeypatch, "claude-code")
    point_claude(monkeypatch, f"http://127.0.0.1:{closed_port()}", tmp_path / "home")
    res = base.run_session(make_ctx(exp, "claude-code", time_limit_s=600))
    assert res.status == base.UNAVAILABLE and "cannot reach its model endpoint" in res.reason, res
