"""Evaluation is walled off (DESIGN.md; paper section 5.1), tested from the `orchestrator eval`
command down:

- an evaluation reads nothing from the experiment's workspace or ledger: with both poisoned and
  made unreadable, the numbers and transcripts are identical, and a bench that tries to peek is
  refused by the evaluation process's audit hook;
- the meta-agent adapters are never given the eval folder: not in the prompt, the environment,
  the command line or the permission rules, and the built-in agent opens nothing under it.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.commands import eval_cmds

ROOT = Path(__file__).resolve().parents[2]
BENCH = "tests.training.fake_eval_bench:BENCH"
sys.path.insert(0, str(ROOT / "tests" / "fakes"))


@pytest.fixture(scope="module")
def experiment(tmp_path_factory, tiny_model_dir):
    """runs/exp with a workspace (the pristine knobs), a ledger, agent sessions and one checkpoint."""
    pytest.importorskip("torch")
    from tests.training.fake_eval_bench import make_checkpoint

    runs = tmp_path_factory.mktemp("runs")
    exp = runs / "exp"
    (exp / "workspace").mkdir(parents=True)
    (exp / "workspace" / "knobs.json").write_text((ROOT / "workspace" / "knobs.json").read_text())
    (exp / "ledger.jsonl").write_text('{"type": "session", "agent": "builtin"}\n')
    (exp / "agents" / "s001").mkdir(parents=True)
    (exp / "experiment.json").write_text(json.dumps({"name": "exp", "bench": "usergym"}))
    make_checkpoint(exp, tiny_model_dir)
    return runs


def _eval(runs: Path, *extra: str) -> int:
    return cli.main(["--runs-dir", str(runs), "eval", "exp", "--bench", BENCH, "--episodes", "3",
                     "--device", "cpu", *extra])


def _results(runs: Path) -> tuple[dict, list]:
    folder = runs / "exp" / "eval" / "run-001-step-000002-tests.training.fake_eval_bench_BENCH-test-seed0-first3"
    summary = json.loads((folder / "summary.json").read_text())
    episodes = [json.loads(x) for x in (folder / "episodes.jsonl").read_text().splitlines()]
    return summary, episodes


@pytest.mark.slow          # two evaluation subprocesses (~15 s idle, ~35 s on a busy 2-core machine)
def test_eval_ignores_poisoned_unreadable_workspace_and_ledger(experiment):
    runs = experiment
    exp = runs / "exp"
    assert _eval(runs) == 0
    clean_summary, clean_episodes = _results(runs)
    # poison: a workspace and ledger that would change the limits and the user if read
    knobs = json.loads((exp / "workspace" / "knobs.json").read_text())
    knobs["env"]["travel"]["max_steps"] = 1
    knobs["user"]["travel"]["facts_per_reply"] = 9
    (exp / "workspace" / "knobs.json").write_text(json.dumps(knobs))
    (exp / "ledger.jsonl").write_text('{"type": "control", "action": "eval-on-train"}\n{bad')
    for p in (exp / "workspace" / "knobs.json", exp / "workspace", exp / "ledger.jsonl"):
        p.chmod(0)
    try:
        assert _eval(runs) == 0
    finally:
        for p in (exp / "workspace", exp / "workspace" / "knobs.json", exp / "ledger.jsonl"):
            p.chmod(0o755)
    summary, episodes = _results(runs)
    assert summary["per_gym"] == clean_summary["per_gym"]
    assert [e["turns"] for e in episodes] == [e["turns"] for e in clean_episodes]
    assert summary["knobs"]["env"]["travel"]["max_steps"] == 3      # the bench's protocol
    assert summary["wall"]["refused"] == []
    assert summary["source"] == "checkpoint" and summary["step"] == 2


@pytest.mark.slow          # a third evaluation subprocess (~10-20 s on a busy 2-core machine)
def test_a_bench_that_peeks_at_the_ledger_is_refused(experiment, monkeypatch, capsys):
    runs = experiment
    monkeypatch.setenv("FAKE_EVAL_PEEK", str(runs / "exp" / "ledger.jsonl"))
    assert _eval(runs, "--seed", "7") == 2
    err = capsys.readouterr().err
    assert "the evaluation failed (exit 3)" in err
    assert not list((runs / "exp" / "eval").glob("*seed7*"))


def test_eval_command_walls_workspace_ledger_agents_and_linked_workspace(tmp_path):
    exp = tmp_path / "exp"
    (exp / "run-001" / "checkpoints" / "step-000004").mkdir(parents=True)
    (exp / "run-002" / "checkpoints" / "step-000003").mkdir(parents=True)
    (exp / "run-002" / "checkpoints" / "step-000009").mkdir(parents=True)
    (exp / "workspace.link").write_text(str(tmp_path / "elsewhere") + "\n")
    t = eval_cmds.resolve_target(str(exp), None, None)
    # the final checkpoint of the final run, by default (paper section 5.1)
    assert (t.run, t.step) == ("run-002", 9)
    args = cli.build_parser().parse_args(["eval", str(exp), "--bench", "usergym"])
    cmd = eval_cmds.eval_command(t, "usergym", args)
    walls = {cmd[i + 1] for i, a in enumerate(cmd) if a == "--wall"}
    for p in ("workspace", "ledger.jsonl", "agents", "run-001", "run-002"):
        assert str(exp / p) in walls
    assert str(tmp_path / "elsewhere") in walls
    assert cmd[cmd.index("--checkpoint") + 1] == str(exp / "run-002" / "checkpoints" / "step-000009")
    assert cmd[cmd.index("--out-root") + 1] == str(exp / "eval")


def test_eval_errors_are_one_sentence(tmp_path, capsys):
    (tmp_path / "exp" / "run-001").mkdir(parents=True)
    assert cli.main(["--runs-dir", str(tmp_path), "eval", "exp", "--bench", "usergym"]) == 2
    assert "has no checkpoint yet" in capsys.readouterr().err
    assert cli.main(["--runs-dir", str(tmp_path), "eval", "nope", "--bench", "usergym"]) == 2
    assert cli.main(["--runs-dir", str(tmp_path), "eval", "exp", "--bench", "chess"]) == 2
    assert cli.main(["--runs-dir", str(tmp_path), "eval"]) == 2


# ---- the meta-agent side ----------------------------------------------------------------------

@pytest.fixture
def agent_exp(tmp_path, monkeypatch):
    runlogs = pytest.importorskip("runlogs")
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    runlogs.make_workspace(exp / "workspace")
    runlogs.write_run(exp / "run-001", 12)
    (exp / "eval" / "run-001-step-000010-usergym-test-seed0").mkdir(parents=True)
    (exp / "eval" / "run-001-step-000010-usergym-test-seed0" / "summary.json").write_text(
        '{"per_gym": {"travel": {"score": 0.9}}}')
    return exp


def _ctx(exp: Path, agent: str, **kw):
    from orchestrator.agents.base import SessionContext

    return SessionContext(agent=agent, session_id="s001", exp_dir=exp,
                          workspace=exp / "workspace", run_dir=exp / "run-001", bench="usergym",
                          skill_path=ROOT / "skills" / "eau" / "SKILL.md",
                          experience_dir=exp.parent / "pool", **kw)


def test_adapters_are_never_given_the_eval_folder(agent_exp):
    from orchestrator.agents import base, claude_code, codex

    eval_dir = str(agent_exp / "eval")
    ctx = _ctx(agent_exp, "claude-code")
    ctx.prompt = base.build_prompt(ctx)
    assert "eval" not in ctx.prompt.replace("evaluat", "")
    assert not any(eval_dir in v for v in base.clean_env(ctx).values())
    allow, deny = claude_code.permissions(ctx)
    assert f"Read(/{eval_dir}/**)" in deny
    assert not any(eval_dir in rule or rule.endswith(f"{agent_exp}/**)") for rule in allow)
    argv = claude_code.build_argv(ctx, agent_exp / "settings.json")
    assert not any(eval_dir in a for a in argv)
    assert str(agent_exp) not in argv                                  # no --add-dir of the exp
    # codex names the folder once: as the "none" (no access) entry of its permission profile
    named = [a for a in codex.build_argv(_ctx(agent_exp, "codex", prompt="x"), "last.txt")
             if str((agent_exp / "eval").resolve()) in a]
    assert len(named) == 1 and named[0].startswith("permissions.eau_session.filesystem=")
    assert f'"{(agent_exp / "eval").resolve()}"="none"' in named[0]


AUDIT_BUILTIN = r"""
import json, os, sys
from pathlib import Path
exp = Path(sys.argv[1]); eval_dir = os.path.realpath(exp / "eval")
seen = []
def hook(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and isinstance(args[0], (str, bytes, os.PathLike)):
        p = os.path.realpath(os.fsdecode(args[0]))
        if p == eval_dir or p.startswith(eval_dir + os.sep):
            seen.append([event, p])
sys.addaudithook(hook)
from orchestrator.agents import base
from orchestrator.agents.base import SessionContext
ctx = SessionContext(agent="builtin", session_id="s001", exp_dir=exp, workspace=exp / "workspace",
                     run_dir=exp / "run-001", bench="usergym", skill_path=Path(sys.argv[2]),
                     experience_dir=exp.parent / "pool")
res = base.run_session(ctx)
print(json.dumps({"status": res.status, "seen": seen}))
"""


def test_builtin_agent_session_opens_nothing_under_eval(agent_exp):
    out = subprocess.run([sys.executable, "-c", AUDIT_BUILTIN, str(agent_exp),
                          str(ROOT / "skills" / "eau" / "SKILL.md")], capture_output=True,
                         text=True, cwd=ROOT, timeout=120,
                         env={**os.environ, "EAU_EXPERIENCE_DIR": str(agent_exp.parent / "pool")})
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["status"] in ("ok", "no_change"), result
    # the session's guard fingerprints the eval folder (lists and stats it, to refuse a session
    # that wrote there); no file under it is ever opened
    assert [p for event, p in result["seen"] if event == "open"] == [], result["seen"]


def test_model_target_files_prompting_rows(tmp_path):
    (tmp_path / "exp" / "run-001").mkdir(parents=True)          # no checkpoint needed for --model
    t = eval_cmds.resolve_target("exp", "default", str(tmp_path))
    assert (t.exp_root, t.checkpoint, t.model) == (tmp_path / "exp", None, "default")
    t = eval_cmds.resolve_target(None, "default", str(tmp_path))
    assert t.exp_root == tmp_path / "prompting"
