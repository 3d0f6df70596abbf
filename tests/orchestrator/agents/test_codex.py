"""The codex adapter against a fake `codex` that behaves like 0.171.0: `exec -C WS` under the
adapter's permission profile, `--json -o FILE`, no --full-auto, .git read-only so the adapter
commits with the agent's last message, hangs killed, writes outside refused by the sandbox, no
credentials. (tests/e2e/test_real_cli_sessions.py runs the real CLI.)"""
import json
import subprocess

from conftest import make_ctx

from orchestrator.agents import base, codex


def test_edits_committed_with_the_agents_message(exp, fakes_on_path, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
    ctx = make_ctx(exp, "codex", extra_env={"FAKE_MODE": "commit", "FAKE_LOG": str(fakes_on_path)})
    res = base.run_session(ctx)
    assert res.status == base.OK and len(res.commits) == 1 and res.turns == 1
    msg = subprocess.run(["git", "-C", str(ctx.workspace), "log", "-1", "--format=%ae%n%B"],
                         capture_output=True, text=True).stdout
    assert msg.startswith("codex-s001@agents.eau") and "Expect: actor/entropy rises." in msg
    assert "Eau-Agent: codex" in msg
    call = json.loads(fakes_on_path.read_text().splitlines()[0])
    argv = call["argv"]
    assert argv[0] == "exec" and "--full-auto" not in argv and "--sandbox" not in argv
    assert 'default_permissions="eau_session"' in argv          # a --sandbox would void the profile
    profile = next(a for a in argv if a.startswith("permissions.eau_session.filesystem="))
    assert f'"{(exp / "eval").resolve()}"="none"' in profile and '":project_roots"={"."="write"}' in profile
    assert argv[argv.index("-C") + 1] == str(ctx.workspace) and "--json" in argv and "-o" in argv
    assert "openai_base_url=http://127.0.0.1:9/v1" in argv and call["stdin_devnull"]


def test_hang_is_killed_and_half_edits_discarded(exp, fakes_on_path):
    res = base.run_session(make_ctx(exp, "codex", time_limit_s=1.0, extra_env={"FAKE_MODE": "hang"}))
    assert res.status == base.TIMEOUT and res.commits == []


def test_write_outside_refused_by_sandbox(exp, fakes_on_path):
    before = (exp / "run-001" / "config.json").read_text()
    res = base.run_session(make_ctx(exp, "codex", extra_env={"FAKE_MODE": "outside"}))
    assert res.commits == [] and (exp / "run-001" / "config.json").read_text() == before


def test_no_credentials(exp, fakes_on_path):
    res = base.run_session(make_ctx(exp, "codex", extra_env={"FAKE_MODE": "nologin"}))
    assert res.status == base.UNAVAILABLE and "credentials" in res.reason


def test_a_config_that_voids_the_profile_or_the_sandbox_is_refused_before_the_session(
        exp, fakes_on_path, monkeypatch, tmp_path):
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text('sandbox_mode = "workspace-write"\n')
    res = base.run_session(make_ctx(exp, "codex"))
    assert res.status == base.UNAVAILABLE and "sets sandbox_mode" in res.reason
    assert "remove sandbox_mode" in res.reason and not fakes_on_path.exists()    # never started
    (home / "config.toml").write_text('model = "x"\n')
    monkeypatch.setenv("TMPDIR", str(tmp_path))          # CODEX_HOME now inside the temp folder
    res = base.run_session(make_ctx(exp, "codex", session="s002"))
    assert res.status == base.UNAVAILABLE and "inside the temporary folder" in res.reason
    assert not fakes_on_path.exists()


def test_the_key_variable_of_a_custom_provider_reaches_the_session(exp, fakes_on_path, monkeypatch, tmp_path):
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text('model_provider = "local"\n[model_providers.local]\n'
                                      'base_url = "http://127.0.0.1:9/v1"\nwire_api = "responses"\n'
                                      'env_key = "LOCAL_MODEL_KEY"\n')
    monkeypatch.setenv("LOCAL_MODEL_KEY", "k-local")
    monkeypatch.setenv("UNRELATED_SECRET", "s")
    env = base.clean_env(make_ctx(exp, "codex"), keep=codex.credential_env())
    assert env["LOCAL_MODEL_KEY"] == "k-local" and "UNRELATED_SECRET" not in env


def test_offline_and_refusals_are_read_from_codex_own_lines():
    """The line shapes of codex-cli 0.171.0 (its --json events; its rollout file's payloads), so
    this holds where the real CLI is not installed (test_real_cli_flags.py runs it)."""
    offline = ('{"type":"turn.started"}\n{"type":"error","message":"Reconnecting... waiting for '
               'network (Connection failed: error sending request)"}\n')
    assert codex.unreachable(offline).startswith("codex cannot reach its model endpoint (offline)")
    bad_key = ('{"type":"error","message":"Reconnecting... 1/5 (unexpected status 401 Unauthorized: '
               'invalid key, url: http://127.0.0.1:9/v1/responses)"}\n')
    assert codex.unreachable(bad_key).startswith("codex has no valid credentials")
    assert codex.unreachable('{"type":"turn.started"}\n{"type":"item.completed"') == ""   # cut line
    rollout = "\n".join(json.dumps({"type": "response_item", "payload": p}) for p in (
        {"type": "function_call", "name": "exec_command", "call_id": "c1",
         "arguments": json.dumps({"cmd": "git reset --hard HEAD"})},
        {"type": "function_call", "name": "exec_command", "call_id": "c2",
         "arguments": json.dumps({"cmd": "cat knobs.json"})},
        {"type": "function_call_output", "call_id": "c1", "output": "Process exited with code 128\n"
         "Output:\nfatal: Unable to create '/ws/.git/index.lock': Read-only file system\n"},
        {"type": "function_call_output", "call_id": "c2", "output": "Process exited with code 0\n"}))
    assert codex.denials(rollout) == ["exec(git reset --hard HEAD)"]
