"""`orchestrator start --skill generic` (paper table 4's generic meta-agent): the experiment trains
against the LLM user alone, and no session can bring the symbolic user back."""
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from gate_testkit import AGENT, commit, knobs, make_experiment, set_knob, ws_of  # noqa: E402

from orchestrator import gate  # noqa: E402
from orchestrator.errors import UserError  # noqa: E402
from orchestrator.experiment import Experiment, pin_generic_baseline  # noqa: E402
from orchestrator.workspace import LIVE_REF  # noqa: E402


def test_generic_baseline_pins_strategy_mix_to_zero_through_the_gate(tmp_path):
    exp_dir = make_experiment(tmp_path)
    exp = Experiment(exp_dir)
    from orchestrator.gate_context import BENCH_GYMS

    gyms = set(BENCH_GYMS["usergym"])
    before = {g: v for g, v in knobs(exp.ws)["user"].items() if g in gyms}
    assert gyms <= set(before) and any(g["strategy_mix"] > 0 for g in before.values())
    pin_generic_baseline(exp)
    ws = ws_of(exp_dir)
    live = ws.rev(LIVE_REF)
    assert live == ws.main() == exp.meta["generic_pinned"]          # judged, accepted, live
    pinned = {g: v for g, v in knobs(ws)["user"].items() if g in gyms}
    assert all(g["strategy_mix"] == 0 for g in pinned.values())
    pin_generic_baseline(Experiment(exp_dir))                         # once: no second commit
    assert ws.main() == live
    # a session raising it again is refused by the narrowed schema and reverted
    gym = next(iter(pinned))
    set_knob(ws, f"user.{gym}.strategy_mix", 0.1)
    sha = commit(ws, "bring the symbolic user back", identity=AGENT,
                 body="\n\nWhy: x\nExpect: y\n\nEau-Agent: claude\nEau-Session: s1\n", verify=False)
    verdict = {v.commit: v for v in gate.judge_pending(exp_dir, ws)}[sha]
    assert not verdict.accepted and any("strategy_mix" in r for r in verdict.reasons)
    assert ws.rev(LIVE_REF) == live


def test_generic_baseline_needs_a_fresh_experiment(tmp_path):
    exp = Experiment(make_experiment(tmp_path))
    exp.meta["runs"] = [{"name": "run-001", "state": "finished"}]
    with pytest.raises(UserError, match="already ran with the EAU skill"):
        pin_generic_baseline(exp)


def test_user_mode_symbolic_is_pinned_and_llm_modes_bring_an_llm_user(tmp_path):
    """--user-mode (paper table 3): the mixture is set for every gym of the bench and its schema
    narrowed to it; llm and hybrid train with an LLM user (the frozen reference), which a person
    cannot remove with --set; and an experiment keeps its mode."""
    from orchestrator.experiment import StartOptions, pin_user_mode, user_mode_overrides

    exp_dir = make_experiment(tmp_path)
    exp = Experiment(exp_dir)
    sha = pin_user_mode(exp, "symbolic", "User mode symbolic", "a test;")
    ws = ws_of(exp_dir)
    assert ws.rev(LIVE_REF) == sha and exp.meta["user_mode"] == {"mode": "symbolic", "commit": sha}
    assert {v["strategy_mix"] for g, v in knobs(ws)["user"].items() if g in ("travel", "tau")} == {1.0}
    assert pin_user_mode(Experiment(exp_dir), "symbolic", "again", "a test;") == sha   # no second commit
    with pytest.raises(UserError, match="trains with user mode symbolic: start the llm mode as a new"):
        pin_user_mode(Experiment(exp_dir), "llm", "switch", "a test;")
    set_knob(ws, "user.travel.strategy_mix", 0.5)
    sha2 = commit(ws, "mix again", identity=AGENT,
                  body="\n\nWhy: x\nExpect: y\n\nEau-Agent: claude\nEau-Session: s1\n", verify=False)
    verdict = {v.commit: v for v in gate.judge_pending(exp_dir, ws)}[sha2]
    assert not verdict.accepted and any("strategy_mix" in r for r in verdict.reasons)
    assert user_mode_overrides(StartOptions(bench="usergym", agent="none", user_mode="hybrid")) == \
        {"rollout.user_llm": "reference"}
    # symbolic pins every strategy_mix to 1: the presets' LLM user would never answer, so none loads
    assert user_mode_overrides(StartOptions(bench="usergym", agent="none", user_mode="symbolic")) == \
        {"rollout.user_llm": "none"}
    assert user_mode_overrides(StartOptions(bench="usergym", agent="none", user_mode="symbolic",
                                            overrides={"rollout.user_llm": "reference"})) == {}
    assert user_mode_overrides(StartOptions(bench="usergym", agent="none", skill="generic")) == \
        {"rollout.user_llm": "reference"}
    with pytest.raises(UserError, match="needs an LLM user in training, but --set rollout.user_llm=none"):
        user_mode_overrides(StartOptions(bench="usergym", agent="none", user_mode="llm",
                                         overrides={"rollout.user_llm": "none"}))
