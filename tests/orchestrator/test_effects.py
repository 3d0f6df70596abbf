"""Measured effects: the W steps after an applied commit against the W before, beyond a noise floor
from step-to-step variation; labels in the ledger; one experience finding per effect."""
import json
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "fakes"))
from runlogs import add_event, make_workspace, write_run  # noqa: E402

from orchestrator import effects, experience  # noqa: E402


def rows(values, start=1, name="success/colbench"):
    return [{"step": start + i, name: v} for i, v in enumerate(values)]


def test_clear_rise_helps_clear_fall_harms_noise_is_inconclusive():
    noisy = [0.30, 0.32, 0.29, 0.31, 0.30, 0.28, 0.31, 0.30, 0.32, 0.29]
    up = rows(noisy + [v + 0.3 for v in noisy])
    assert effects.measure(up, 11, "success/colbench", "up")[4] == "helped"
    assert effects.measure(up, 11, "success/colbench", "down")[4] == "harmed"
    flat = rows(noisy + noisy[::-1])
    before, after, delta, floor, label = effects.measure(flat, 11, "success/colbench", "up")
    assert label == "inconclusive" and abs(delta) < floor


def test_no_effect_until_a_full_window_follows():
    assert effects.measure(rows([0.1] * 15), 11, "success/colbench", "up") is None


def test_noise_floor_scales_with_step_to_step_variation():
    quiet = [0.3, 0.31] * 10
    loud = [0.1, 0.5] * 10
    assert effects.noise_floor(loud, 10) > 10 * effects.noise_floor(quiet, 10)


def test_target_comes_from_expect_line_or_the_knobs_changed():
    assert effects.target_of("x\n\nWhy: a\nExpect: user/leak_rate falls.", {}, []) == ("user/leak_rate", "down")
    assert effects.target_of("x\nExpect: success/colbench rises", {}, []) == ("success/colbench", "up")
    # two metrics on one line: the first is judged by its own clause ("falls"), not by the second's
    # "rises" (the demo's fix for refused actions was once measured as harm and nearly reverted)
    assert effects.target_of("x\nExpect: episode/invalid_rate falls, then reward/mean rises.", {}, []) \
        == ("episode/invalid_rate", "down")
    # a missing step's remedy names the share of episodes taking the step first (two parts after
    # took/, both kept), then the score it should lead to
    assert effects.target_of("x\nExpect: took/tau/identify rises, then score/tau.", {}, ["tau"]) \
        == ("took/tau/identify", "up")
    assert effects.target_of("x", {"user.colbench.facts_per_reply": (3, 1)}, []) == ("user/leak_rate", "down")
    assert effects.target_of("x", {"env.travel.max_steps": (8, 12)}, []) == ("success/travel", "up")
    assert effects.target_of("x", {"agent.entropy_coeff": (0.0, 0.004)}, []) == ("actor/entropy", "up")


def _commit(ws, knob_path, value, msg):
    knobs = json.loads((ws / "knobs.json").read_text())
    node = knobs
    for p in knob_path.split(".")[:-1]:
        node = node[p]
    node[knob_path.split(".")[-1]] = value
    (ws / "knobs.json").write_text(json.dumps(knobs, indent=2))
    subprocess.run(["git", "-C", str(ws), "-c", "user.name=a", "-c", "user.email=a@b", "commit",
                    "-qam", msg], check=True)
    return subprocess.run(["git", "-C", str(ws), "rev-parse", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()


def test_update_effects_writes_ledger_lines_once_and_findings(tmp_path, monkeypatch):
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    ws = make_workspace(exp / "workspace")
    sha = _commit(ws, "env.colbench.max_steps", 14, "Raise max_steps\n\nWhy: deadlock\nExpect: success/colbench rises")
    run = write_run(exp / "run-001", 30, metric_fn=lambda s, r: {
        "success/colbench": (0.1 if s < 15 else 0.6) + r.gauss(0, 0.02)})
    add_event(run, event="applied", commit=sha, step=15)
    new = effects.update_effects(exp, run, ws)
    assert [(e.commit, e.metric, e.label) for e in new] == [(sha, "success/colbench", "helped")]
    assert effects.update_effects(exp, run, ws) == []            # measured once
    lines = effects.ledger_read(exp, "effect")
    assert len(lines) == 1 and lines[0]["label"] == "helped" and lines[0]["noise_floor"] > 0
    paths = experience.record_effects(exp, "colbench", ws)
    assert len(paths) == 1 and experience.record_effects(exp, "colbench", ws) == []
    finding = experience.read_findings(bench="colbench")[0]
    assert finding["target"] == "env.colbench.max_steps" and finding["change"] == "10 -> 14"
    assert finding["evidence"]["effect"] == "helped" and finding["evidence"]["run"] == "run-001"
    assert "env.colbench.max_steps" in experience.index(bench="colbench")
    assert experience.read_findings(bench="tau2") == []


def test_sparse_per_gym_metric_is_compared_over_its_nearest_observations():
    # success/travel is logged only at the steps whose small batch held a travel task
    sparse = [{"step": s, "success/travel": 0.1 if s < 10 else 0.9} for s in (1, 4, 6, 9, 12, 15)]
    dense_only = [{"step": s, "reward/mean": 0.0} for s in range(1, 16)]
    metrics = sorted(sparse + dense_only, key=lambda r: r["step"])
    before, after, delta, floor, label = effects.measure(metrics, 10, "success/travel", "up", window=2)
    assert (before, after) == (0.1, 0.9) and label == "helped"
    # two observations after step 10 exist, three are needed
    assert effects.measure(metrics, 10, "success/travel", "up", window=3) is None


def test_a_finished_run_records_why_an_effect_could_not_be_measured(tmp_path, monkeypatch):
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    ws = make_workspace(exp / "workspace")
    sha = _commit(ws, "env.colbench.max_steps", 14, "Raise\n\nWhy: x\nExpect: success/colbench rises")
    run = write_run(exp / "run-001", 8, metric_fn=lambda s, r: {"success/colbench": 0.1})
    add_event(run, event="applied", commit=sha, step=7)
    assert effects.update_effects(exp, run, ws, window=3) == []          # the run may go on
    (e,) = effects.update_effects(exp, run, ws, window=3, final=True)
    assert e.label == "unmeasured" and e.before is None
    assert "logged 6 time(s) before step 7 (2 needed) and 2 time(s) from it on (3 needed)" in e.reason
    line = effects.ledger_read(exp, "effect")[0]
    assert line["label"] == "unmeasured" and "3 needed" in line["reason"]
    assert effects.update_effects(exp, run, ws, window=3, final=True) == []   # once
    assert experience.record_effects(exp, "colbench", ws) == []          # nothing was learnt


def test_a_commit_the_trainer_never_applied_is_unmeasured_with_the_reason(tmp_path, monkeypatch):
    """Accepted while the run trained, never applied on its own: either the run ended first (the
    CPU demo's step-8 commit) or a later commit including it was applied in its place. A commit
    accepted before the run started is part of its start, not an intervention of it."""
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    from orchestrator import ledger

    exp = tmp_path / "exp"
    ws = make_workspace(exp / "workspace")
    before = _commit(ws, "env.colbench.max_steps", 12, "Raise\n\nWhy: x\nExpect: success/colbench rises")
    first = _commit(ws, "env.colbench.max_steps", 14, "Raise\n\nWhy: x\nExpect: success/colbench rises")
    second = _commit(ws, "env.colbench.max_steps", 16, "Raise\n\nWhy: x\nExpect: success/colbench rises")
    last = _commit(ws, "user.colbench.facts_per_reply", 2, "More\n\nWhy: x\nExpect: score/colbench rises")
    run = write_run(exp / "run-001", 8, metric_fn=lambda s, r: {"success/colbench": 0.1})
    add_event(run, event="started", time=100.0, step=0, commit=before)
    add_event(run, event="applied", commit=second, step=6)
    for sha, ts in ((before, 50.0), (first, 150.0), (second, 160.0), (last, 200.0)):
        ledger.append_line(exp, {"type": "verdict", "ts": ts, "commit": sha, "verdict": "accepted"})
    found = {e.commit: e for e in effects.update_effects(exp, run, ws, window=3, final=True)}
    assert set(found) == {first, second, last}
    assert found[first].reason == f"the trainer applied it together with {second[:10]} at step 6, " \
                                  f"whose effect it shares"
    assert found[last].reason == "run-001 ended at step 8 before the trainer applied it"
    assert (found[last].metric, found[last].label) == ("score/colbench", "unmeasured")


def test_a_missing_steps_remedy_is_measured_on_the_share_taking_the_step(tmp_path, monkeypatch):
    """The CPU run of 16 steps took a tau worked example back as "no effect on score/tau": the
    score stayed 0 while the policy began identifying the user. Its Expect names
    took/tau/identify, which rises beyond the noise floor while score/tau stays 0."""
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    exp = tmp_path / "exp"
    ws = make_workspace(exp / "workspace")
    sha = _commit(ws, "env.tau.demonstrations", 1, "Show tau a worked example\n\nWhy: x\n"
                  "Expect: took/tau/identify rises, then score/tau.")
    took = [0.0, 0.1, 0.0, 0.0, 0.1, 0.4, 0.5, 0.4, 0.6, 0.5]
    run = write_run(exp / "run-001", 10, metric_fn=lambda s, r: {
        "score/tau": 0.0, "took/tau/identify": took[s - 1]})
    add_event(run, event="applied", commit=sha, step=6)
    (e,) = effects.update_effects(exp, run, ws, window=5)
    assert (e.metric, e.direction, e.label) == ("took/tau/identify", "up", "helped")
    assert (e.before, e.after) == (0.04, 0.48)


def test_commits_for_different_gyms_applied_together_are_each_measured_on_their_own_gym(tmp_path, monkeypatch):
    """A built-in session commits one change per gym; the trainer applies the session's last
    commit, which includes the first, at one step boundary. Each is judged on its own gym's
    metric (the CPU demo of 2026-12-06 left tau's example "unmeasured: shares its effect" with
    function's step reward)."""
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    from orchestrator import ledger

    exp = tmp_path / "exp"
    ws = make_workspace(exp / "workspace")
    tau = _commit(ws, "env.tau.demonstrations", 1, "Show tau\n\nWhy: x\nExpect: took/tau/identify rises, then score/tau.")
    travel = _commit(ws, "env.travel.demonstrations", 2, "Show travel\n\nWhy: x\nExpect: took/travel/search rises.")
    run = write_run(exp / "run-001", 10, gym="tau", metric_fn=lambda s, r: {
        "success/travel": 0.0, "took/tau/identify": 0.0 if s < 6 else 0.5 + r.gauss(0, 0.01),
        "took/travel/search": 0.3})
    add_event(run, event="started", time=100.0, step=0)
    add_event(run, event="applied", commit=travel, step=6)
    for sha, ts in ((tau, 150.0), (travel, 160.0)):
        ledger.append_line(exp, {"type": "verdict", "ts": ts, "commit": sha, "verdict": "accepted"})
    found = {e.commit: e for e in effects.update_effects(exp, run, ws, window=2, final=True)}
    assert (found[tau].metric, found[tau].step, found[tau].label) == ("took/tau/identify", 6, "helped")
    assert (found[travel].metric, found[travel].label) == ("took/travel/search", "inconclusive")


def test_a_revert_of_a_change_with_no_effect_leaves_the_gyms_changes_with_it_measured(tmp_path, monkeypatch):
    """The H100 runs of 2026-12-06: a session took back `no_repeat` (no effect on the repeat rate
    of every gym) and committed tau's and travel's own changes; the trainer applied all at one
    step. A revert that says it changes nothing does not make them share one effect; a change to
    every gym that expects an effect still does."""
    monkeypatch.setenv("EAU_EXPERIENCE_DIR", str(tmp_path / "pool"))
    from orchestrator import ledger

    def run_with(name, revert_expect):
        exp = tmp_path / name
        ws = make_workspace(exp / "workspace")
        revert = _commit(ws, "reward.modules.no_repeat.enabled", False,
                         f"Revert 1234567890: no effect\n\nWhy: x\nExpect: {revert_expect}\n")
        tau = _commit(ws, "env.tau.demonstrations", 2,
                      "Show tau\n\nWhy: x\nExpect: took/tau/identify rises, then score/tau.")
        travel = _commit(ws, "env.travel.demonstrations", 2, "Show travel\n\nWhy: x\nExpect: took/travel/search rises.")
        run = write_run(exp / "run-001", 10, gym="tau", metric_fn=lambda s, r: {
            "episode/repeat_rate": 0.3, "success/travel": 0.0,
            "took/tau/identify": 0.0 if s < 6 else 0.5 + r.gauss(0, 0.01),
            "took/travel/search": 0.3})
        add_event(run, event="started", time=100.0, step=0)
        add_event(run, event="applied", commit=travel, step=6)
        for sha, ts in ((revert, 140.0), (tau, 150.0), (travel, 160.0)):
            ledger.append_line(exp, {"type": "verdict", "ts": ts, "commit": sha, "verdict": "accepted"})
        found = {e.commit: e for e in effects.update_effects(exp, run, ws, window=2, final=True)}
        return found[revert], found[tau]

    revert, tau = run_with("settled", "episode/repeat_rate stays within its noise floor.")
    assert (tau.metric, tau.step, tau.label) == ("took/tau/identify", 6, "helped")
    assert revert.label == "unmeasured"
    revert, tau = run_with("global", "episode/repeat_rate falls.")
    assert tau.label == "unmeasured" and "whose effect it shares" in tau.reason
