"""Hostile code in reward modules and in ColBench answers.

Each attack (infinite loop, memory bomb, fork bomb, huge output, reading the user's home, the
workspace's .git or the eval folder, writing a file, opening a socket, importing the trainer's
modules, patching builtins or the sandbox's own settings to get out, forging the result pipe,
os._exit) must be contained by the sandbox, scored as a failure (0 for that module and turn,
counted in reward/module_errors; a ColBench answer scores 0), and the caller goes on unharmed:
no file outside the sandbox changed, this process's builtins, folder and modules untouched.
"""
from __future__ import annotations

import builtins
import json
import os
import sys
from pathlib import Path

import pytest

from toy_env import KNOBS, write_run, write_workspace
from training import metrics, rewards
from training.benches.base import Task
from training.benches.colbench.scorer import ReferenceCache, score_answer


@pytest.fixture
def secrets(tmp_path):
    """Files a hostile module would want: a user's home, a workspace's .git, an eval folder."""
    home = tmp_path / "home"
    files = {"home": home / ".ssh" / "id_rsa", "git": tmp_path / "exp" / "workspace" / ".git" / "config",
             "eval": tmp_path / "exp" / "eval" / "summary.json"}
    for name, path in files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"SECRET-{name}")
    files["pwned"] = tmp_path / "pwned.txt"
    return files


def attacks(s: dict[str, Path]) -> dict[str, str]:
    """Bodies of a function `attack()` (indented 4), each one kind of hostile code."""
    return {
        "loop": "while True:\n        pass",
        "memory_bomb": "return len('x' * (10 ** 10))",
        "fork_bomb": "import os\n    while True:\n        os.fork()",
        "huge_output": "while True:\n        print('x' * 10000)",
        "read_home": f"return open({str(s['home'])!r}).read()",
        "list_home": f"import os\n    return os.listdir({str(s['home'].parent)!r})",
        "read_git": f"return open({str(s['git'])!r}).read()",
        "read_eval": f"return open({str(s['eval'])!r}).read()",
        "write_file": f"open({str(s['pwned'])!r}, 'w').write('x')\n    return 1.0",
        "socket": "import socket\n    return socket.create_connection(('127.0.0.1', 22)).fileno()",
        "import_trainer": "import training.trainer as t\n    t.step_seed = None\n    return 1.0",
        "patch_builtins": ("import builtins, os\n    builtins.any = lambda *a: True\n"
                           "    os.path.realpath = lambda p: os.getcwd()\n"
                           f"    return open({str(s['home'])!r}).read()"),
        "sandbox_settings": ("import sys\n    m = sys.modules['__main__']\n"
                             "    m.CFG['allow_network'] = True\n    m.CFG['max_procs'] = 9\n"
                             "    import subprocess\n    return subprocess.run(['id']).returncode"),
        "forge_result": ("import os, sys\n    os.write(int(sys.argv[1]), b'{\"ok\": tru\\n')\n"
                         "    return 1.0"),
        "flood_result_pipe": ("import os, sys\n    while True:\n"
                              "        os.write(int(sys.argv[1]), b'x' * 65536)"),
        "os_exit": "import os\n    os._exit(0)",
    }


def reward_source(body: str) -> str:
    return ("APPLIES_TO = ['toy']\n\ndef attack():\n    " + body +
            "\n\ndef turn_reward(turn):\n    return float(attack())\n")


def episode() -> dict:
    return {"gym": "toy", "task_id": "t", "turns": [
        {"turn": 1, "agent": "what is it?", "user": "42", "env_reward": 0.0}]}


def caller_state() -> tuple:
    return (os.getcwd(), builtins.any, builtins.open, os.path.realpath,
            sorted(m for m in sys.modules if m.startswith("training")))


def test_hostile_reward_modules_score_zero_and_scoring_goes_on(tmp_path, secrets):
    folder = tmp_path / "rewards"
    folder.mkdir()
    hostile = attacks(secrets)
    files = {}
    for name, body in hostile.items():
        files[name] = folder / f"{name}.py"
        files[name].write_text(reward_source(body))
    files["fair"] = folder / "fair.py"
    files["fair"].write_text("APPLIES_TO = ['toy']\n\ndef turn_reward(turn):\n    return 0.5\n")
    knobs = json.loads(json.dumps(KNOBS))
    knobs["reward"]["turn_reward_clip"] = {"min": -10.0, "max": 10.0}
    knobs["reward"]["modules"] = {n: {"enabled": True, "weight": 1.0} for n in files}
    before = caller_state()
    modules = rewards.load_modules(files, knobs)
    try:
        for attempt in range(2):        # a second episode: dead workers restart, still contained
            stats = rewards.ScoreStats()
            ep = episode()
            out = rewards.score_episode(ep, modules, knobs, stats)
            parts = ep["turns"][0]["module_rewards"]
            assert {n: parts[n] for n in hostile} == {n: 0.0 for n in hostile}, parts
            assert parts["fair"] == 0.5 and out == [0.5]
            assert stats.errors == len(hostile) and stats.calls == len(files)
    finally:
        rewards.close_all(modules)
    assert caller_state() == before
    assert not secrets["pwned"].exists()
    for name in ("home", "git", "eval"):
        assert secrets[name].read_text() == f"SECRET-{name}"


@pytest.mark.parametrize("name", ["fork_bomb", "read_git", "sandbox_settings", "os_exit",
                                  "forge_result"])
def test_hostile_code_at_import_makes_the_module_unusable(tmp_path, secrets, name):
    """The same code at import time: the module cannot be loaded (the trainer then keeps its
    previous snapshot, training.live), and nothing outside the sandbox changes."""
    body = attacks(secrets)[name].replace("\n    ", "\n").replace("return ", "_ = ")
    path = tmp_path / f"{name}.py"
    path.write_text("APPLIES_TO = ['toy']\n" + body + "\ndef turn_reward(turn):\n    return 1.0\n")
    knobs = {"reward": {"modules": {name: {"enabled": True}}}}
    with pytest.raises(rewards.RewardModuleError, match=f"reward module {name}"):
        rewards.load_modules({name: path}, knobs)
    assert not secrets["pwned"].exists()


def test_trainer_goes_on_with_hostile_modules_and_records_errors(tmp_path, tiny_model_dir,
                                                                  secrets):
    ws = write_workspace(tmp_path / "ws")
    knobs = json.loads(json.dumps(KNOBS))
    hostile = {k: v for k, v in attacks(secrets).items()
               if k in ("fork_bomb", "read_eval", "os_exit", "sandbox_settings", "memory_bomb")}
    (ws / "rewards").mkdir()
    for name, body in hostile.items():
        (ws / "rewards" / f"{name}.py").write_text(reward_source(body))
    knobs["reward"]["modules"] = {n: {"enabled": True, "weight": 1.0} for n in hostile}
    (ws / "knobs.json").write_text(json.dumps(knobs))
    run = tmp_path / "run"
    write_run(run, workspace_dir=ws, model_dir=tiny_model_dir, overrides={
        "trainer.total_steps": 1, "rollout.response_length": 4, "rollout.max_turns": 2})
    from training.trainer import Trainer

    assert Trainer(run).run() == 0
    row = list(metrics.read_lines(run / "metrics.jsonl"))[-1]
    assert row["step"] == 1
    assert row["reward/module_errors"] == row["reward/module_calls"] > 0
    assert all(row[f"reward/module/{n}"] == 0.0 for n in hostile)
    assert secrets["eval"].read_text() == "SECRET-eval"


# ---- ColBench answers ------------------------------------------------------------------------

REF = "def double(x):\n    return x * 2\n"
TASK = Task(id="t-double", gym="colbench", split="test", prompt="Write double(x).",
            data={"ground_truth": REF, "func": "double",
                  "test_cases": {"t1": "double(1)", "t2": "double(2)", "t3": "double(5)"}})


def answer_source(body: str, right: bool) -> str:
    """An answer that computes the right values (when `right`) and also runs the attack."""
    value = "x * 2" if right else "x"
    return ("def attack():\n    " + body + "\n\ndef double(x):\n    attack()\n    return " + value + "\n")


def test_hostile_colbench_answers_score_zero(tmp_path, secrets):
    cache = ReferenceCache()
    assert score_answer(TASK, answer_source("return 1", True), cache=cache).success
    before = caller_state()
    scores = {}
    for name, body in attacks(secrets).items():
        scores[name] = score_answer(TASK, "```python\n" + answer_source(body, True) + "```",
                                    cache=cache)
    for name, s in scores.items():
        assert (s.pass_rate, s.success, s.passed) == (0.0, False, 0), (name, s.kind, s.tests)
        assert s.counted == 3
    kinds = {n: s.kind for n, s in scores.items()}
    assert kinds["os_exit"] == "exit"
    for name in ("fork_bomb", "read_home", "list_home", "read_git", "read_eval", "write_file",
                 "socket", "patch_builtins", "sandbox_settings", "forge_result"):
        assert kinds[name] == "forbidden", (name, kinds[name], scores[name].tests[0].error)
    # in namespaces the project's folder is not there to be refused: the import finds nothing
    assert kinds["import_trainer"] == "forbidden" or all(
        "No module named 'training'" in t.error for t in scores["import_trainer"].tests)
    assert {scores[n].tests[0].kind for n in ("loop", "memory_bomb", "huge_output",
                                               "flood_result_pipe")} <= {
        "timeout", "memory", "output_limit", "crash"}
    assert caller_state() == before
    assert not secrets["pwned"].exists()
