"""`orchestrator compare-merge`: sessions' raw results.json merged into one table with its
intervals, and the files that cannot be merged refused in one sentence."""
from __future__ import annotations

import json

import numpy as np
import pytest

from compare_testkit import bernoulli, write_results
from orchestrator.cli import main


def _session(tmp_path, name, seeds, rng, methods=("prompting", "ppo", "eau"), **kw):
    p = {"prompting": 0.2, "ppo": 0.5, "eau": 0.7, "grpo": 0.4}
    return write_results(tmp_path / name, {
        m: {str(s): bernoulli(rng, {"travel": p[m.split("@")[0]], "intention": 0.3},
                              source="model" if m == "prompting" else "checkpoint")
            for s in seeds} for m in methods}, **kw)


def _merge(tmp_path, capsys, *files, out="merged"):
    rc = main(["compare-merge", str(tmp_path / out), *map(str, files)])
    return rc, capsys.readouterr()


def test_two_sessions_of_other_seeds_merge_into_one_table_with_intervals(tmp_path, capsys):
    rng = np.random.default_rng(0)
    a = _session(tmp_path, "a", [0, 1], rng)
    b = _session(tmp_path, "b", [2], rng, spec={"steps": 60})
    rc, io = _merge(tmp_path, capsys, a, b.parent)            # a file or its folder
    assert rc == 0, io.err
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    for m in ("prompting", "ppo", "eau"):
        assert sorted(merged["methods"][m]["seeds"]) == ["0", "1", "2"]
        assert merged["methods"][m]["aggregate"]["overall"]["success"]["n"] == 3
        assert merged["stats"]["methods"][m]["success"]["seeds"] == 3
    pair = next(p for p in merged["stats"]["pairs"] if (p["a"], p["b"]) == ("eau", "ppo"))
    assert (pair["success"]["tasks"], pair["success"]["seeds"]) == (60, 3)
    # a session's raw files are untouched, and merging them again gives the same numbers
    assert "stats" not in json.loads(a.read_text())
    assert _merge(tmp_path, capsys, a, b, out="again")[0] == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text())
    assert again["stats"] == merged["stats"]
    md = (tmp_path / "merged" / "RESULTS.md").read_text()
    assert "| **overall** |" in md and "(n=3)" in md and "| eau − ppo |" in md
    assert "## Sessions merged" in md and "| 0, 1 | 2 |" in md and "| 2 | 60 |" in md
    assert "RESULTS.md" in io.out


def test_other_methods_with_the_same_seeds_join_and_a_repeated_untrained_evaluation_is_kept_once(
        tmp_path, capsys):
    rng = np.random.default_rng(1)
    a = _session(tmp_path, "a", [0, 1], rng)
    b = _session(tmp_path, "b", [0, 1], rng, methods=("prompting", "grpo"))
    assert _merge(tmp_path, capsys, a, b)[0] == 0
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert list(merged["methods"]) == ["prompting", "ppo", "eau", "grpo"]
    first = json.loads(a.read_text())["methods"]["prompting"]["seeds"]["0"]
    assert merged["methods"]["prompting"]["seeds"]["0"]["tasks"] == first["tasks"]
    assert any("prompting seed 0" in n and "kept" in n for n in merged["notes"])
    assert ("grpo", "prompting") in {(p["a"], p["b"]) for p in merged["stats"]["pairs"]}


def test_a_session_run_with_no_untrained_pairs_against_another_sessions_untrained_model(
        tmp_path, capsys):
    """`compare --no-untrained` leaves the untrained model out of a later session: its methods
    are still paired against prompting, whose evaluations come from the session that ran them."""
    rng = np.random.default_rng(3)
    a = _session(tmp_path, "a", [0, 1], rng)
    b = _session(tmp_path, "b", [0, 1], rng, methods=("grpo",))
    assert _merge(tmp_path, capsys, a, b)[0] == 0
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert sorted(merged["methods"]["prompting"]["seeds"]) == ["0", "1"]
    pair = next(p for p in merged["stats"]["pairs"] if (p["a"], p["b"]) == ("grpo", "prompting"))
    assert pair["success"]["seeds"] == 2 and not merged["notes"]


def test_a_failed_seed_takes_another_sessions_result(tmp_path, capsys):
    rng = np.random.default_rng(2)
    a = write_results(tmp_path / "a", {"ppo": {"0": bernoulli(rng, {"travel": 0.5}),
                                               "1": {"missing": "its training failed"}}})
    b = write_results(tmp_path / "b", {"ppo": {"1": bernoulli(rng, {"travel": 0.5})}})
    assert _merge(tmp_path, capsys, a, b)[0] == 0
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    assert all("per_gym" in s for s in merged["methods"]["ppo"]["seeds"].values())


def _one_sentence(rc, io):
    assert rc == 2
    assert io.err.startswith("orchestrator: ") and len(io.err.strip().splitlines()) == 1
    assert io.err.strip().endswith(".")
    return io.err


def test_different_benches_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(3)
    a = _session(tmp_path, "a", [0], rng)
    b = _session(tmp_path, "b", [1], rng, bench="colbench")
    err = _one_sentence(*_merge(tmp_path, capsys, a, b))
    assert "on usergym" in err and "on colbench" in err and "different benches cannot be merged" in err
    assert not (tmp_path / "merged").exists()


@pytest.mark.parametrize("change, said", [
    ({"deviations": [{"setting": "max_turns", "protocol": 16, "used": 10}]},
     "(the bench's protocol against max_turns 10)"),
    ({"protocol": {"user_llm": "default"}}, "(user none (symbolic arm only) against user default)"),
    ({"protocol": {"data": "/data/userrl"}}, "(shipped tasks against original files)")])
def test_different_evaluation_protocols_are_refused(tmp_path, capsys, change, said):
    rng = np.random.default_rng(4)
    a = _session(tmp_path, "a", [0], rng)
    b = write_results(tmp_path / "b", {"ppo": {"1": bernoulli(rng, {"travel": 0.5}, **change)}})
    err = _one_sentence(*_merge(tmp_path, capsys, a, b))
    assert "different protocols" in err and said in err


def test_protocols_are_checked_in_the_original_files_set_too(tmp_path, capsys):
    rng = np.random.default_rng(5)
    files = {"data": "/u"}
    first5 = [{"setting": "episodes", "protocol": "all", "used": "first 5"}]

    def session(name, seed, deviations):
        held = {"ppo": {seed: bernoulli(rng, {"travel": 0.5})}}
        turtle = bernoulli(rng, {"turtle": 0.5}, protocol=files, deviations=deviations)
        return write_results(tmp_path / name, held, data_files={
            "folder": "/u", "methods": {"ppo": {"seeds": {seed: turtle}}}})
    err = _one_sentence(*_merge(tmp_path, capsys, session("a", "0", []), session("b", "1", first5)))
    assert "(the bench's protocol against episodes first 5)" in err


def test_a_seed_in_two_sessions_and_other_training_setups_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(6)
    a = _session(tmp_path, "a", [0, 1], rng)
    b = _session(tmp_path, "b", [1, 2], rng)
    err = _one_sentence(*_merge(tmp_path, capsys, a, b))
    assert "seed 1 of ppo is in both" in err and "--first-seed" in err
    c = _session(tmp_path, "c", [2], rng, spec={"user_mode": "hybrid"})
    err = _one_sentence(*_merge(tmp_path, capsys, a, c))
    assert "different --user-mode (the default against hybrid)" in err


def test_unreadable_inputs_and_an_output_over_an_input_are_refused(tmp_path, capsys):
    rng = np.random.default_rng(7)
    a = _session(tmp_path, "a", [0], rng)
    err = _one_sentence(*_merge(tmp_path, capsys, a, tmp_path / "nope.json"))
    assert "cannot read" in err
    (tmp_path / "bad.json").write_text("{\"x\": 1}")
    err = _one_sentence(*_merge(tmp_path, capsys, a, tmp_path / "bad.json"))
    assert "no comparison's results.json" in err
    err = _one_sentence(*_merge(tmp_path, capsys, a, out="a"))
    assert "holds one of the results being merged" in err
    err = _one_sentence(*_merge(tmp_path, capsys, a, a.parent))
    assert "is given twice" in err


def test_a_file_without_its_settings_is_checked_for_what_it_has(tmp_path, capsys):
    """An older results.json has no spec: its gyms trained on are still checked, and the
    settings of the files that have them are checked against each other."""
    rng = np.random.default_rng(8)
    old = _session(tmp_path, "old", [0], rng)
    raw = json.loads(old.read_text())
    del raw["spec"]
    old.write_text(json.dumps(raw))
    a = _session(tmp_path, "a", [1], rng)
    b = _session(tmp_path, "b", [2], rng, spec={"model": "models/warm"})
    err = _one_sentence(*_merge(tmp_path, capsys, old, a, b))
    assert "a/results.json and" in err and "different --model (the default against models/warm)" in err
    raw["trained_gyms"] = ["travel", "turtle"]
    old.write_text(json.dumps(raw))
    err = _one_sentence(*_merge(tmp_path, capsys, old, a))
    assert "different trained gyms (['travel', 'turtle'] against ['travel'])" in err
    raw["trained_gyms"] = ["travel"]
    old.write_text(json.dumps(raw))
    assert _merge(tmp_path, capsys, old, a)[0] == 0


def test_the_committed_results_merge_with_persuades_claims_as_families(tmp_path, capsys):
    """benchmarks/results/ keeps every GPU comparison's results.json in git so that later seeds
    merge with them (the run folders were lost with a checkout twice); they must stay readable
    by the current compare-merge, and the held-out split's persuade tasks are 4 claims."""
    from pathlib import Path
    files = sorted((Path(__file__).resolve().parents[2] / "benchmarks" / "results").glob("*.json"))
    assert files, "benchmarks/results/ holds no results.json"
    rc, io = _merge(tmp_path, capsys, *files)
    assert rc == 0, io.err
    merged = json.loads((tmp_path / "merged" / "results.json").read_text())
    held = merged["stats"]["gyms"]["persuade"]["eau"]["success"]
    assert (held["tasks"], held["families"]) == (30, 4)
    pair = next(p for p in merged["stats"]["pairs"] if (p["a"], p["b"]) == ("eau", "ppo"))
    assert pair["success"]["families"] < pair["success"]["tasks"] == 210
    assert "families) x" in (tmp_path / "merged" / "RESULTS.md").read_text()


def test_a_committed_run_of_another_setting_is_refused_beside_the_series(tmp_path, capsys):
    """benchmarks/results/apart/ keeps runs that change a setting of the series (EAU seed 0 with
    6-step windows): merged beside the series' own seed 0 of EAU it is refused, not averaged in,
    and merged by itself it gives its own table."""
    from pathlib import Path
    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    apart = sorted((results / "apart").glob("*.json"))
    assert apart, "benchmarks/results/apart/ holds no results.json"
    series = sorted(results.glob("*.json"))
    err = _one_sentence(*_merge(tmp_path, capsys, *series, apart[0]))
    assert "seed 0 of eau is in both" in err, err
    for f in apart:
        rc, io = _merge(tmp_path, capsys, f, out=f.stem)
        assert rc == 0, io.err


def test_sessions_of_other_user_modes_merge_by_user_mode_paired_against_the_llm_user(tmp_path, capsys):
    """The paper's user table: sessions that differ only in --user-mode are refused by a plain
    merge and merged with --by-user-mode, each trained method named with its user and paired
    against the same method with the LLM user alone and against its algorithm alone; a session
    with no LLM user (rollout.user_llm=none) is the symbolic row; the untrained model keeps its
    name."""
    rng = np.random.default_rng(7)
    series = _session(tmp_path, "series", [0], rng, spec={"sets": ["rollout.user_llm=none"]})
    llm = _session(tmp_path, "llm", [0], rng, methods=("eau",), spec={"user_mode": "llm"})
    hybrid = _session(tmp_path, "hybrid", [0], rng, methods=("ppo", "eau"), spec={"user_mode": "hybrid"})
    err = _one_sentence(*_merge(tmp_path, capsys, series, llm, hybrid))
    assert "different --user-mode" in err
    # a comparison that named the user in its methods (compare --methods eau@llm,eau@hybrid)
    side = _session(tmp_path, "side", [1], rng, methods=("eau@llm", "eau@hybrid"))
    rc = main(["compare-merge", str(tmp_path / "um"), str(series), str(llm), str(hybrid), str(side),
               "--by-user-mode"])
    assert rc == 0, capsys.readouterr().err
    merged = json.loads((tmp_path / "um" / "results.json").read_text())
    assert list(merged["methods"]) == ["prompting", "ppo@symbolic", "eau@symbolic", "eau@llm",
                                       "ppo@hybrid", "eau@hybrid"]
    assert sorted(merged["methods"]["eau@hybrid"]["seeds"]) == ["0", "1"]
    pairs = {(p["a"], p["b"]) for p in merged["stats"]["pairs"]}
    assert {("eau@hybrid", "eau@llm"), ("eau@symbolic", "eau@llm"), ("eau@hybrid", "ppo@hybrid"),
            ("eau@symbolic", "ppo@symbolic"), ("eau@llm", "prompting")} <= pairs
    assert ("eau@llm", "eau@llm") not in pairs and ("ppo@hybrid", "eau@llm") not in pairs
    assert set(merged["user_modes"].values()) == {"symbolic", "llm", "hybrid", "default"}
    assert "| eau@hybrid − eau@llm |" in (tmp_path / "um" / "RESULTS.md").read_text()
