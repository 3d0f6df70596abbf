"""`orchestrator start --knob KEY=VALUE`: a new experiment's starting knobs, set in its seed before
the first commit (the README demo starts without worked examples: --knob env.*.demonstrations=0)."""
from __future__ import annotations

import json

import pytest

from orchestrator.errors import UserError
from orchestrator.experiment import Experiment
from orchestrator.experiment_init import init_experiment
from orchestrator.paths import project_root


def test_wildcard_knob_is_set_in_the_seed_commit(tmp_path):
    exp = init_experiment("demo", "usergym", tmp_path, seed_knobs={"env.*.demonstrations": 0,
                                                                   "agent.entropy_coeff": 0.002})
    ws = Experiment(exp).ws
    knobs = json.loads(ws.read_file(ws.main(), "knobs.json"))
    assert {g: e["demonstrations"] for g, e in knobs["env"].items()} == {g: 0 for g in knobs["env"]}
    assert knobs["agent"]["entropy_coeff"] == 0.002
    assert "env.*.demonstrations=0" in ws.info(ws.main()).message
    meta = json.loads((exp / "experiment.json").read_text())
    assert meta["seed_knobs"] == {"env.*.demonstrations": 0, "agent.entropy_coeff": 0.002}
    shipped = json.loads((project_root() / "workspace" / "knobs.json").read_text())
    assert shipped["env"]["intention"]["demonstrations"] == 1           # the project's untouched


@pytest.mark.parametrize("knobs,words", [
    ({"env.*.no_such_knob": 1}, ["--knob env.*.no_such_knob", "no such knob"]),
    ({"env.intention.demonstrations": 9}, ["demonstrations", "9"]),          # the schema's maximum
])
def test_bad_knobs_are_refused_and_nothing_is_left(tmp_path, knobs, words):
    with pytest.raises(UserError) as err:
        init_experiment("bad", "usergym", tmp_path, seed_knobs=knobs)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert not (tmp_path / "bad").exists()
    assert (project_root() / "workspace" / "knobs.json").exists()


def test_knob_on_an_existing_experiment_is_refused(tmp_path):
    init_experiment("old", "usergym", tmp_path)
    with pytest.raises(UserError, match="--knob sets the starting knobs of a new experiment"):
        Experiment.open_or_create("old", "usergym", tmp_path, seed_knobs={"env.*.demonstrations": 0})
