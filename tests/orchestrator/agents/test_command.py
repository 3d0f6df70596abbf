"""The command adapter: any executable, given the context through EAU_* variables and a prompt file."""
import stat
import subprocess

from conftest import make_ctx

from orchestrator.agents import base

SCRIPT = """#!/bin/sh
test -f "$1" || exit 3
grep -q "Diagnostics" "$1" || exit 4
sed -i 's/"max_steps": 10/"max_steps": 12/' "$EAU_WORKSPACE/knobs.json"
printf 'Raise colbench max_steps\\n\\nWhy: deadlocks\\nExpect: success/colbench rises\\n' > "$EAU_SESSION_DIR/message.txt"
echo done
"""


def test_command_gets_context_and_its_edits_are_committed(exp, tmp_path):
    prog = tmp_path / "agent.sh"
    prog.write_text(SCRIPT)
    prog.chmod(prog.stat().st_mode | stat.S_IEXEC)
    res = base.run_session(make_ctx(exp, "command", command=[str(prog)]))
    assert res.status == base.OK, res.reason
    log = subprocess.run(["git", "-C", str(exp / "workspace"), "log", "-1", "--format=%ae%n%B"],
                         capture_output=True, text=True).stdout
    assert log.startswith("command-s001@agents.eau") and "Why: deadlocks" in log
    assert '"max_steps": 12' in (exp / "workspace" / "knobs.json").read_text()


def test_failing_command_leaves_the_workspace_clean(exp, tmp_path):
    prog = tmp_path / "bad.sh"
    prog.write_text("#!/bin/sh\necho x >> \"$EAU_WORKSPACE/knobs.json\"\nexit 7\n")
    prog.chmod(0o755)
    res = base.run_session(make_ctx(exp, "command", command=[str(prog)]))
    assert res.status == base.FAILED and "exited 7" in res.reason
    assert subprocess.run(["git", "-C", str(exp / "workspace"), "status", "--porcelain"],
                          capture_output=True, text=True).stdout == ""


def test_prompt_has_diagnostics_and_pool_under_eau_but_not_under_generic(exp):
    from runlogs import ROOT

    eau = base.build_prompt(make_ctx(exp, "command"))
    assert "Diagnostics now" in eau and "Experience pool index" in eau and str(exp / "workspace") in eau
    generic = base.build_prompt(make_ctx(exp, "command", skill_path=ROOT / "skills" / "generic" / "SKILL.md"))
    assert "Diagnostics" not in generic and "Improve training" in generic


def test_kill_active_ends_a_running_session_cli(exp, tmp_path):
    import threading
    import time

    prog = tmp_path / "sleepy.sh"
    prog.write_text("#!/bin/sh\nsleep 60\n")
    prog.chmod(0o755)
    results = []
    t = threading.Thread(target=lambda: results.append(
        base.run_session(make_ctx(exp, "command", command=[str(prog)], time_limit_s=60))))
    t.start()
    deadline = time.time() + 10
    while not base.ACTIVE and time.time() < deadline:
        time.sleep(0.05)
    base.kill_active()
    t.join(15)
    assert results and results[0].status == base.FAILED and results[0].duration_s < 15
