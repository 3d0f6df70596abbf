"""The gate's check of environment patches (orchestrator/gate_patches.py): imported and replayed
in the sandbox like reward modules; each refusal one sentence naming the file and the hook."""
from __future__ import annotations

import pytest

from gate_testkit import commit, make_experiment, write, ws_of
from orchestrator import gate
from orchestrator.workspace import LIVE_REF


@pytest.fixture
def exp(tmp_path):
    return make_experiment(tmp_path)


def judge(exp, files):
    ws = ws_of(exp)
    write(ws, files)
    sha = commit(ws, "an environment patch")
    (verdict,) = gate.judge_pending(exp)
    return verdict, sha, ws


def test_a_patch_that_returns_its_type_is_accepted(exp):
    v, sha, ws = judge(exp, {"env_patches/travel.py":
                             "def count_question(turn):\n    return '?' in turn['message']\n"})
    assert v.accepted, v.reasons
    assert ws.rev(LIVE_REF) == sha


@pytest.mark.parametrize("path,source,expected", [
    ("env_patches/travel.py", "def count_question(turn):\n    return 'yes'\n",
     "env_patches/travel.py: count_question returned 'yes', not a bool on a replayed turn."),
    ("env_patches/travel.py", "def count_question(turn):\n    while True:\n        pass\n",
     "env_patches/travel.py: count_question did not return within 2 s (the limit) on replayed turns."),
    ("env_patches/travel.py", "def counter(turn):\n    return True\n",
     "env_patches/travel.py: defines none of travel's hooks (count_question); see "
     "training/env_patches.py for what each takes and returns."),
    ("env_patches/travel.py", "import no_such_module\n",
     "env_patches/travel.py: importing the patch failed (ModuleNotFoundError: No module named "
     "'no_such_module')."),
    ("env_patches/retail.py", "def count_question(turn):\n    return True\n",
     "env_patches/retail.py: retail has no hooks a patch can replace (patches exist for colbench, "
     "function, intention, persuade, tau, telepathy, travel, turtle)."),
    ("env_patches/colbench.py", "def count_question(turn):\n    return True\n",
     "env_patches/colbench.py: patches colbench, which this usergym experiment does not train on"),
    ("env_patches/nogym.py", "def count_question(turn):\n    return True\n",
     "env_patches/nogym.py: outside the workspace"),
])
def test_a_bad_patch_is_refused_in_one_sentence(exp, path, source, expected):
    live = ws_of(exp).rev(LIVE_REF)
    v, _, ws = judge(exp, {path: source})
    assert not v.accepted and ws.rev(LIVE_REF) == live
    assert v.reasons[0].startswith(expected), v.reasons
