"""The report: built from small fake experiment folders laid out as DESIGN.md says; checks the
results table's numbers (paper layout, mean and spread over seeds), the figures, the marked
interventions, corrupt-line tolerance, several experiments side by side, and the page as a real
headless Chromium renders it (skipped with a message when chromium is absent)."""
from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest

from orchestrator import cli
from orchestrator.report import build_report
from orchestrator.report_data import load_experiment, read_jsonl, table_rows

ROOT = Path(__file__).resolve().parents[2]
USERGYM = ("travel", "function", "persuade", "tau", "turtle", "intention", "telepathy")


def _jsonl(path: Path, records: list[dict], tail: str = "") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in records) + tail)


def make_experiment(runs_dir: Path, name: str, *, agent: str = "builtin", n_runs: int = 2,
                    steps: int = 20, seeds=(0, 1, 2), shift: float = 0.0) -> Path:
    """A fake experiment: runs with metrics and events, a ledger with one applied knob change
    (helped) and one file change (harmed), usergym + colbench evaluations of the final checkpoint
    for each seed, and a prompting evaluation."""
    root = runs_dir / name
    (root / "workspace").mkdir(parents=True)
    (root / "experiment.json").write_text(json.dumps({"name": name, "bench": "usergym",
                                                      "agent": agent}))
    for r in range(1, n_runs + 1):
        run = root / f"run-{r:03d}"
        metrics = []
        for s in range(1, steps + 1):
            m = {"step": s, "reward/mean": 0.1 * r + 0.02 * s + shift,
                 "actor/entropy": 1.5 - 0.03 * s}
            for g in ("travel", "function"):
                m[f"success/{g}"] = min(1.0, 0.05 * s / r + shift)
                m[f"reward/{g}"] = 0.02 * s
            metrics.append(m)
        _jsonl(run / "metrics.jsonl", metrics)
        (run / "config.json").write_text(json.dumps({"bench": "usergym"}))
        _jsonl(run / "events.jsonl", [{"event": "started"}])
        (run / "checkpoints" / f"step-{steps:06d}").mkdir(parents=True)
    ledger = [
        {"type": "verdict", "commit": "a" * 40, "author_kind": "agent", "files": ["knobs.json"],
         "knob_changes": [{"path": "agent.entropy_coeff", "old": 0.001, "new": 0.003}],
         "verdict": "accepted", "reasons": []},
        {"type": "applied", "commit": "a" * 40, "run": "run-001", "step": 7},
        {"type": "effect", "commit": "a" * 40, "metric": "actor/entropy", "before": 1.2,
         "after": 1.3, "delta": 0.1, "noise": 0.02, "label": "helped"},
        {"type": "verdict", "commit": "b" * 40, "author_kind": "agent",
         "files": ["rewards/progress.py"], "knob_changes": [], "verdict": "accepted",
         "reasons": []},
        {"type": "applied", "commit": "b" * 40, "run": n_runs, "step": 12},
        {"type": "effect", "commit": "b" * 40, "metric": "success/travel", "delta": -0.2,
         "noise": 0.05, "label": "harmed"},
        {"type": "session", "agent": agent, "session_id": "s002", "status": "refused",
         "reason": "commit refused: <gate> said no", "commits": []},
    ]
    _jsonl(root / "ledger.jsonl", ledger, tail='{"type": "applied", "comm')   # truncated line
    for seed in seeds:
        gyms = {g: {"score": 0.1 * i + 0.01 * seed + shift, "success": 0.5, "n": 4}
                for i, g in enumerate(USERGYM)}
        _summary(root, f"run-{n_runs:03d}-s{steps}-usergym-seed{seed}", "usergym", seed,
                 gyms, run=n_runs, step=steps)
        _summary(root, f"run-{n_runs:03d}-s{steps}-colbench-seed{seed}", "colbench", seed,
                 {"colbench": {"score": 0.6 + 0.02 * seed, "success": 0.4, "n": 4}},
                 run=n_runs, step=steps)
    # an older checkpoint's evaluation must not be reported (final checkpoint of the final run)
    _summary(root, "run-001-old", "usergym", 0, {g: {"score": 9.0, "success": 1.0} for g in USERGYM},
             run=1, step=5)
    _summary(root, "model-default", "usergym", 0, {g: {"score": 0.05, "success": 0.0}
                                                   for g in USERGYM}, model="default")
    return root


def _summary(root: Path, eid: str, bench: str, seed: int, per_gym: dict, *, run: int = 0,
             step: int = 0, model: str | None = None) -> None:
    d = root / "eval" / eid
    d.mkdir(parents=True)
    s = {"bench": bench, "split": "test", "seed": seed, "per_gym": per_gym,
         "source": "model" if model else "checkpoint", "model": model}
    if not model:
        s.update(run=f"run-{run:03d}", run_index=run, step=step)
    (d / "summary.json").write_text(json.dumps(s))


def test_read_jsonl_skips_corrupt_and_truncated_lines(tmp_path):
    p = tmp_path / "m.jsonl"
    p.write_bytes(b'{"step": 1}\nnot json\n[1, 2]\n\xff\xfe\n{"step": 2}\n{"step": 3, "rew')
    warnings: list[str] = []
    assert [r["step"] for r in read_jsonl(p, warnings)] == [1, 2]
    assert len(warnings) == 4 and all(str(p) in w for w in warnings)


def test_table_is_final_checkpoint_mean_and_spread_over_seeds(tmp_path):
    exp = load_experiment(make_experiment(tmp_path, "eau"))
    rows = table_rows(exp)
    assert [r.method for r in rows] == ["Prompting", "EAU (builtin)"]
    trained = rows[1].cells
    # travel = 0.0 + 0.01*seed over seeds 0,1,2 -> mean 0.01, sample std 0.01; run-001's 9.0 unused
    mean, std, n = trained["usergym/travel"]
    assert n == 3 and math.isclose(mean, 0.01) and math.isclose(std, 0.01)
    expected_avg = sum(0.1 * i for i in range(7)) / 7 + 0.01
    assert math.isclose(trained["usergym/avg"][0], expected_avg)
    assert math.isclose(trained["colbench/pass"][0], 0.62)
    assert math.isclose(trained["colbench/avg"][0], (0.62 + 0.4) / 2)
    # overall = mean of UserGym's 7 scores and ColBench's Pass and Succ. (table 1)
    assert math.isclose(trained["overall"][0], (expected_avg * 7 + 0.62 + 0.4) / 9)
    assert any("truncated" in w for w in exp.warnings)


def test_interventions_joined_with_verdict_and_effect(tmp_path):
    exp = load_experiment(make_experiment(tmp_path, "eau"))
    by_commit = {iv.commit[0]: iv for iv in exp.interventions}
    assert by_commit["a"].run == "run-001" and by_commit["a"].step == 7
    assert "agent.entropy_coeff" in by_commit["a"].what and by_commit["a"].effect == "helped"
    assert by_commit["b"].run == "run-002" and by_commit["b"].what == "rewards/progress.py"
    assert by_commit["b"].effect == "harmed"


def test_report_page_and_figures(tmp_path):
    root = make_experiment(tmp_path, "eau")
    index = build_report([root], tmp_path / "out")
    page = index.read_text()
    assert "<table id=results>" in page and "Travel" in page and "Succ." in page
    assert "agent.entropy_coeff" in page and "rewards/progress.py" in page
    for png in ("eau-curves.png", "eau-knobs.png", "eau-runs.png"):
        assert f'src="{png}"' in page
        assert (tmp_path / "out" / png).stat().st_size > 5000
    assert "0.010<span class=spread>&plusmn;0.010" in page        # travel mean and spread
    assert "commit refused: &lt;gate&gt; said no" in page          # sessions, escaped
    assert "<script" not in page and "http" not in page            # self-contained


def test_cli_report_for_two_experiments_side_by_side(tmp_path, capsys):
    make_experiment(tmp_path, "eau")
    make_experiment(tmp_path, "ppo", agent="none", n_runs=1, shift=0.1)
    assert cli.main(["--runs-dir", str(tmp_path), "report", "eau", "ppo"]) == 0
    out = tmp_path / "report-eau-ppo"
    page = (out / "index.html").read_text()
    assert (out / "comparison.png").exists() and "Side by side" in page
    assert "PPO" in page and "EAU (builtin)" in page
    assert "warning:" in capsys.readouterr().err                  # the truncated ledger line
    assert cli.main(["--runs-dir", str(tmp_path), "report", "missing"]) == 2


def test_report_of_experiment_without_runs_or_evals(tmp_path):
    (tmp_path / "empty").mkdir()
    page = build_report([tmp_path / "empty"], tmp_path / "out").read_text()
    assert "No evaluation yet" in page and "No training metrics yet" in page
    # the command as it works: eval reads the bench from the experiment
    assert "run <code>orchestrator eval empty</code> (results go to" in page and "--bench" not in page


def _screenshot_module():
    spec = importlib.util.spec_from_file_location("screenshot_report",
                                                  ROOT / "scripts" / "screenshot_report.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_report_renders_in_headless_chromium(tmp_path):
    shot = _screenshot_module()
    if shot.find_chromium() is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): browser check skipped")
    make_experiment(tmp_path, "eau")
    make_experiment(tmp_path, "ppo", agent="none", n_runs=1, shift=0.1)
    index = build_report([tmp_path / "eau", tmp_path / "ppo"], tmp_path / "out")
    png = shot.screenshot(index, tmp_path / "shot.png")
    stats = shot.check_screenshot(png)
    assert stats["width"] >= 1200 and stats["height"] >= 2000
    assert stats["std"] > 20                    # not a blank page: table, text and figures
    assert stats["coloured_fraction"] > 0.003   # the plotted curves and markers are drawn
    # negative control: the same page without its figures has (almost) no coloured pixels
    for png_file in (tmp_path / "out").glob("*.png"):
        png_file.unlink()
    bare = shot.check_screenshot(shot.screenshot(index, tmp_path / "bare.png"))
    assert bare["coloured_pixels"] < stats["coloured_pixels"] / 3
    assert bare["ink_pixels"] * 1.3 < stats["ink_pixels"]


def test_screenshot_of_a_short_report_has_no_blank_band_at_the_bottom(tmp_path):
    """A one-run report is shorter than the 3,200-pixel window: its shot ends with the page."""
    import numpy as np
    from PIL import Image

    shot = _screenshot_module()
    if shot.find_chromium() is None:
        pytest.skip("chromium not installed (apt-get install -y chromium): browser check skipped")
    index = build_report([make_experiment(tmp_path, "eau", n_runs=1, seeds=(0,))], tmp_path / "out")
    rgb = np.asarray(Image.open(shot.screenshot(index, tmp_path / "shot.png")).convert("RGB"))
    inked = np.flatnonzero((rgb.min(axis=2) < 245).any(axis=1))
    assert rgb.shape[0] < shot.WINDOW[1] and rgb.shape[0] - inked[-1] <= 25


def test_tensorboard_export_reads_back(tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from orchestrator.tensorboard_export import export_experiment

    logdir = export_experiment(make_experiment(tmp_path, "eau"))
    acc = EventAccumulator(str(logdir / "run-001"))
    acc.Reload()
    rewards = acc.Scalars("reward/mean")
    assert [e.step for e in rewards] == list(range(1, 21))
    assert math.isclose(rewards[0].value, 0.12, rel_tol=1e-6)
    assert "success/travel" in acc.Tags()["scalars"]


def test_an_evaluation_off_the_protocol_gets_its_own_marked_row(tmp_path):
    root = make_experiment(tmp_path, "eau", seeds=(0,))
    d = root / "eval" / "run-002-s20-usergym-seed0-first1-turns4-tokens64"
    d.mkdir(parents=True)
    (d / "summary.json").write_text(json.dumps({
        "bench": "usergym", "split": "test", "seed": 0, "source": "checkpoint", "run": "run-002",
        "run_index": 2, "step": 20, "per_gym": {g: {"score": 5.0, "success": 1.0} for g in USERGYM},
        "deviations": [{"setting": "max_turns", "protocol": 16, "used": 4}]}))
    rows = table_rows(load_experiment(root))
    labels = [r.model for r in rows]
    assert "run-002 step 20" in labels and "run-002 step 20 [not the protocol: max_turns 4]" in labels
    protocol_row = rows[labels.index("run-002 step 20")]
    assert protocol_row.cells["usergym/travel"][0] == 0.0                 # 5.0 kept out of its mean


def _demo(tmp_path, steps: int = 8):
    """The CPU demo's shape: one run of `steps` steps, the builtin agent's commit at step 4."""
    from orchestrator.report_data import load_experiment as load

    root = tmp_path / "demo"
    _jsonl(root / "run-001" / "metrics.jsonl",
           [{"step": s, "reward/mean": 0.1 * s, "success/travel": 0.1, "actor/entropy": 1.0}
            for s in range(1, steps + 1)])
    (root / "experiment.json").write_text(json.dumps({"name": "demo", "bench": "usergym"}))
    changes = [{"path": "reward.modules.progress.enabled", "old": None, "new": True},
               {"path": "reward.modules.progress.weight", "old": 0.25, "new": 0.5}]
    _jsonl(root / "ledger.jsonl", [
        {"type": "verdict", "commit": "a" * 40, "knob_changes": changes, "verdict": "accepted"},
        {"type": "applied", "commit": "a" * 40, "run": "run-001", "step": min(4, steps)},
        {"type": "effect", "commit": "a" * 40, "metric": "reward/mean", "delta": None,
         "label": "unmeasured"}])
    return load(root)


def test_curves_count_steps_from_one_and_label_interventions_whole(tmp_path):
    from orchestrator import report_plots

    exp = _demo(tmp_path)
    assert report_plots.run_offsets(exp.runs) == {"run-001": 0}        # step 4 is drawn at 4
    fig = report_plots.training_curves_figure(exp)
    ax = fig.axes[0]
    assert ax.lines[0].get_xdata()[0] == 1
    assert [line.get_xdata()[0] for line in ax.lines[1:]] == [4]       # the intervention's line
    (legend,) = fig.legends
    text = " ".join(t.get_text() for t in legend.get_texts()).replace("\n", " ")
    assert "reward.modules.progress.enabled None\u2192True" in text    # whole, not "enabled No"
    assert "reward.modules.progress.weight 0.25\u21920.5  [unmeasured]" in text
    long = report_plots.intervention_key(exp, {"run-001": 0}, width=40)[0][2]
    assert all(line.strip() and not line.endswith(".") for line in long.splitlines())
    assert "reward.modules.progress.enabled" in long.split()            # a knob path is never split


def test_knob_plot_ticks_are_whole_steps(tmp_path):
    from orchestrator import report_plots

    fig = report_plots.knob_timeline_figure(_demo(tmp_path, steps=3))
    ax = fig.axes[-1]
    fig.canvas.draw()
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks == [1, 2, 3]
    assert ax.lines[0].get_xdata()[0] == 1                             # the starting value at step 1


def test_curves_show_the_share_of_refused_actions(tmp_path):
    """The report's curves include episode/invalid_rate: a run whose every turn was refused until
    an intervention draws that fall, not only flat reward."""
    from orchestrator import report_plots
    from orchestrator.report_data import load_experiment as load

    root = tmp_path / "demo"
    _jsonl(root / "run-001" / "metrics.jsonl",
           [{"step": s, "reward/mean": 0.0, "success/travel": 0.0, "actor/entropy": 1.0,
             "episode/invalid_rate": 1.0 if s < 4 else 0.2} for s in range(1, 9)])
    (root / "experiment.json").write_text(json.dumps({"name": "demo", "bench": "usergym"}))
    fig = report_plots.training_curves_figure(load(root))
    ax = next(a for a in fig.axes if a.get_ylabel() == "refused actions")
    assert list(ax.lines[0].get_ydata()) == [1.0, 1.0, 1.0, 0.2, 0.2, 0.2, 0.2, 0.2]


def test_an_unmeasured_intervention_carries_its_whole_reason(tmp_path):
    exp = _demo(tmp_path)
    (iv,) = exp.interventions
    assert iv.effect == "unmeasured" and iv.effect_detail == "reward/mean: the run ended first"
    path = tmp_path / "demo" / "ledger.jsonl"
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    lines[-1]["reason"] = ("the run ended with reward/mean logged 3 time(s) before step 4 (2 needed) "
                           "and 5 time(s) from it on (10 needed)")
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    from orchestrator.report_data import load_experiment as load
    (iv,) = load(tmp_path / "demo").interventions
    assert iv.effect_detail.endswith("and 5 time(s) from it on (10 needed)")
