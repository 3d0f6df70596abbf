"""The report's figures (matplotlib, Agg backend, PNG files): training curves with interventions
marked (paper figures 1 and 6), a knob timeline, the run-by-run progression (figure 7) and, for
two or more experiments, their curves overlaid.

Runs of one experiment are laid end to end on one axis: run k starts where run k-1 ended, with a
dashed line and its name at each boundary, so restarts read like the paper's figure 6. The axis
counts steps from 1, as the tables and the trainer do (an intervention applied at step 4 is drawn
at 4), with whole-number ticks. Interventions are numbered on the curves and described in full,
wrapped at spaces, in a key under the figure: a label cut to fit ("enabled No" for None -> True)
said the opposite of what happened.
"""
from __future__ import annotations

import textwrap
from pathlib import Path

from orchestrator.report_data import ExperimentData, RunData

EFFECT_COLOURS = {"helped": "#1a7f37", "harmed": "#cf222e", "inconclusive": "#9a6700", "": "#57606a"}
CURVES = (("reward", "reward/mean", "reward"), ("success", "success/", "success"),
          # the share of agent turns refused for their format: 1.0 means no learning signal
          ("invalid", "episode/invalid_rate", "refused actions"),
          ("entropy", "actor/entropy", "actor entropy"))


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")      # files only; never a window (the CLI may run on a server)
    import matplotlib.pyplot as plt

    return plt


def run_offsets(runs: list[RunData]) -> dict[str, int]:
    """x offset of each run so that runs follow each other from x = 1: x = step + offset, and
    run k's first step comes right after run k-1's last."""
    offsets, at = {}, 1
    for run in runs:
        steps = run.steps()
        first = min(steps, default=0)
        offsets[run.name] = at - first
        at += (max(steps, default=first) - first) + 1
    return offsets


def success_keys(runs: list[RunData]) -> list[str]:
    return sorted({k for r in runs for m in r.metrics for k in m if k.startswith("success/")})


def _mean_success(run: RunData, keys: list[str]) -> tuple[list[int], list[float]]:
    """Per step, the mean of the gyms' success (a run of several gyms gets one line)."""
    xs, ys = [], []
    for m in run.metrics:
        vals = [float(m[k]) for k in keys if isinstance(m.get(k), (int, float))]
        if vals:
            xs.append(int(m["step"]))
            ys.append(sum(vals) / len(vals))
    return xs, ys


def _curve(run: RunData, key: str, keys: list[str]) -> tuple[list[int], list[float]]:
    return _mean_success(run, keys) if key == "success/" else run.series(key)


def intervention_key(exp: ExperimentData, offsets: dict[str, int],
                     width: int = 120) -> list[tuple[float, str, str]]:
    """(x, colour, key text) per applied intervention: "1  step 4: <knob or files> [effect]",
    whole, wrapped at spaces only (a knob path is never split)."""
    out = []
    for iv in (iv for iv in exp.interventions if iv.run in offsets):
        x = iv.step + offsets[iv.run]
        where = f"step {iv.step}" + (f" of {iv.run}" if len(exp.runs) > 1 else "")
        text = f"{len(out) + 1}  {where}: {iv.what}" + (f"  [{iv.effect}]" if iv.effect else "")
        text = textwrap.fill(text, width, break_long_words=False, break_on_hyphens=False,
                             subsequent_indent="     ")
        out.append((x, EFFECT_COLOURS.get(iv.effect, EFFECT_COLOURS[""]), text))
    return out


def plot_training_curves(exp: ExperimentData, out: Path) -> Path:
    return _save(training_curves_figure(exp), out)


def training_curves_figure(exp: ExperimentData):
    """Reward, success and entropy over steps; every applied intervention a numbered vertical
    line in the colour of its measured effect, described in the key under the figure."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    offsets = run_offsets(exp.runs)
    key = intervention_key(exp, offsets)
    key_lines = sum(text.count("\n") + 1 for _, _, text in key)
    fig, axes = plt.subplots(len(CURVES), 1, figsize=(11, 10.5 + 0.2 * key_lines), sharex=True,
                             layout="constrained")
    keys = success_keys(exp.runs)
    for ax, (_, curve_key, title) in zip(axes, CURVES):
        for run in exp.runs:
            xs, ys = _curve(run, curve_key, keys)
            ax.plot([x + offsets[run.name] for x in xs], ys, lw=1.4, label=run.name)
        ax.set_ylabel(title)
        ax.grid(alpha=0.3)
    _mark_runs(axes, exp.runs, offsets)
    _integer_steps(axes[-1])
    for n, (x, colour, _) in enumerate(key, start=1):
        for ax in axes:
            ax.axvline(x, color=colour, lw=1.2, alpha=0.8)
        axes[0].annotate(str(n), xy=(x, 1.0), xycoords=("data", "axes fraction"),
                         xytext=(3, -11 - 10 * ((n - 1) % 3)), textcoords="offset points",
                         fontsize=8, fontweight="bold", color=colour)
    axes[0].set_title(f"{exp.name}: training curves ({exp.method}); "
                      f"{len(exp.interventions)} applied interventions")
    axes[-1].set_xlabel("training step (runs laid end to end)")
    if len(exp.runs) > 1:
        axes[0].legend(loc="lower right", fontsize=7)
    if key:
        handles = [Line2D([], [], color=colour, lw=2) for _, colour, _ in key]
        fig.legend(handles, [text for _, _, text in key], loc="outside lower left", fontsize=8,
                   frameon=False, title="interventions (line colour: measured effect)",
                   title_fontsize=8, alignment="left")
    return fig


def _integer_steps(ax) -> None:
    """Whole-number step ticks (an 8-step run gave 0.5-step ticks on the knob plot)."""
    from matplotlib.ticker import MaxNLocator

    ax.xaxis.set_major_locator(MaxNLocator(integer=True))


def _mark_runs(axes, runs: list[RunData], offsets: dict[str, int]) -> None:
    for run in runs[1:]:
        x = min(run.steps(), default=0) + offsets[run.name]
        for ax in axes:
            ax.axvline(x, color="#8c959f", ls="--", lw=0.9)
        axes[0].text(x, 0.02, f" {run.name}", transform=axes[0].get_xaxis_transform(),
                     fontsize=7, color="#57606a")


def plot_knob_timeline(exp: ExperimentData, out: Path) -> Path | None:
    fig = knob_timeline_figure(exp)
    return None if fig is None else _save(fig, out)


def knob_timeline_figure(exp: ExperimentData):
    """Every knob an applied commit changed, as a step function over the training axis."""
    offsets = run_offsets(exp.runs)
    tracks: dict[str, list[tuple[int, float, str | None]]] = {}   # effect None: starting value
    for iv in exp.interventions:
        if iv.run not in offsets:
            continue
        for change in iv.knob_changes:
            new = change.get("new")
            if isinstance(new, (int, float)) and not isinstance(new, bool):
                track = tracks.setdefault(str(change.get("path")), [])
                old = change.get("old")
                if not track and isinstance(old, (int, float)):
                    track.append((1, float(old), None))     # the axis starts at 1 (run_offsets)
                track.append((iv.step + offsets[iv.run], float(new), iv.effect))
    if not tracks:
        return None
    plt = _pyplot()
    end = max((r.last_step() + offsets[r.name] for r in exp.runs), default=1)
    fig, axes = plt.subplots(len(tracks), 1, figsize=(11, 1.6 + 1.5 * len(tracks)),
                             sharex=True, squeeze=False)
    for ax, (path, points) in zip(axes[:, 0], sorted(tracks.items())):
        xs = [p[0] for p in points] + [end]
        ys = [p[1] for p in points] + [points[-1][1]]
        ax.step(xs, ys, where="post", color="#0969da")
        for x, y, effect in (p for p in points if p[2] is not None):
            ax.plot([x], [y], "o", color=EFFECT_COLOURS.get(effect, EFFECT_COLOURS[""]))
        ax.set_ylabel(path, fontsize=8, rotation=0, ha="right")
        ax.grid(alpha=0.3)
    _mark_runs(axes[:, 0], exp.runs, offsets)
    _integer_steps(axes[-1, 0])
    axes[0, 0].set_title(f"{exp.name}: knob timeline (dots coloured by measured effect)")
    axes[-1, 0].set_xlabel("training step (runs laid end to end)")
    return fig


def run_progression(exp: ExperimentData, window: int = 10) -> list[dict]:
    """Per run: mean reward and success over its last `window` steps, and the test score of its
    final checkpoint where one was evaluated (mean over gyms and seeds)."""
    keys = success_keys(exp.runs)
    rows = []
    for run in exp.runs:
        _, rewards = run.series("reward/mean")
        _, success = _mean_success(run, keys)
        evals = [e for e in exp.evals if e.get("source") == "checkpoint" and e.get("run") == run.name]
        last = max((int(e.get("step") or 0) for e in evals), default=None)
        scores = [float(g["score"]) for e in evals if int(e.get("step") or 0) == last
                  for g in (e.get("per_gym") or {}).values()
                  if isinstance(g, dict) and isinstance(g.get("score"), (int, float))]
        tail = lambda v: sum(v[-window:]) / len(v[-window:]) if v else None  # noqa: E731
        rows.append({"run": run.name, "index": run.index, "steps": run.last_step(),
                     "reward": tail(rewards), "success": tail(success),
                     "test_score": sum(scores) / len(scores) if scores else None})
    return rows


def plot_run_progression(exp: ExperimentData, out: Path) -> Path | None:
    """Figure 7: how each successive run ended (train reward, success; test score if evaluated)."""
    rows = run_progression(exp)
    if len(rows) < 2:
        return None
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for key, label, marker in (("reward", "train reward (last 10 steps)", "o"),
                               ("success", "train success (last 10 steps)", "s"),
                               ("test_score", "test score (final checkpoint)", "^")):
        pts = [(r["index"], r[key]) for r in rows if r[key] is not None]
        if pts:
            ax.plot([p[0] for p in pts], [p[1] for p in pts], marker=marker, label=label)
    ax.set_xticks([r["index"] for r in rows])
    ax.set_xlabel("run")
    ax.set_title(f"{exp.name}: run-by-run progression")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, out)


def plot_comparison(exps: list[ExperimentData], out: Path) -> Path:
    """Two or more experiments side by side: their reward, success and entropy curves overlaid."""
    plt = _pyplot()
    fig, axes = plt.subplots(1, len(CURVES), figsize=(14, 4))
    for exp in exps:
        offsets = run_offsets(exp.runs)
        keys = success_keys(exp.runs)
        for ax, (_, key, title) in zip(axes, CURVES):
            xs, ys = [], []
            for run in exp.runs:
                rx, ry = _curve(run, key, keys)
                xs += [x + offsets[run.name] for x in rx]
                ys += ry
            ax.plot(xs, ys, lw=1.4, label=f"{exp.name} ({exp.method})")
            ax.set_title(title)
            ax.grid(alpha=0.3)
    for ax in axes:
        ax.set_xlabel("training step")
        _integer_steps(ax)
    axes[0].legend(fontsize=7)
    return _save(fig, out)


def _save(fig, out: Path) -> Path:
    import matplotlib.pyplot as plt

    out.parent.mkdir(parents=True, exist_ok=True)
    if fig.get_layout_engine() is None:        # a constrained figure lays itself out
        fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
    return out
