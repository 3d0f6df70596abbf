"""Measured effect of every applied intervention (paper appendix A.2).

For a commit the trainer applied at step s, the relevant metric's mean over the W steps after s is
compared with its mean over the W steps before. The noise floor comes from the step-to-step
variation around s: sigma = std(first differences) / sqrt(2) estimates the per-step noise, the
standard error of a difference of two W-step means is sigma * sqrt(2 / W), and the floor is twice
that. A change beyond the floor in the good direction is "helped", in the bad one "harmed", else
"inconclusive" (the paper's match_threshold sweep was inconclusive at a floor of 0.228).

Effects are written as ledger lines of type "effect", where `orchestrator log`, the agent's prompt
and the built-in agent's "revert what harmed" rule read them.
"""
from __future__ import annotations

import json
import math
import re
import statistics
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from orchestrator import diagnostics, finding

DEFAULT_WINDOW = 10


# ------------------------------------------------------------------- ledger (orchestrator.ledger)

def ledger_append(exp_dir: Path | str, line: dict[str, Any]) -> None:
    """Append one ledger line; through orchestrator.ledger (it checks the type) when installed."""
    try:
        from orchestrator import ledger
    except ImportError:
        ledger = None
    if ledger is not None:
        ledger.append_line(Path(exp_dir), line)
        return
    with open(Path(exp_dir) / "ledger.jsonl", "a") as fh:
        fh.write(json.dumps(line, sort_keys=True) + "\n")


def ledger_read(exp_dir: Path | str, type_: str | None = None) -> list[dict[str, Any]]:
    try:
        from orchestrator import ledger
    except ImportError:
        ledger = None
    if ledger is not None:
        return list(ledger.read_lines(Path(exp_dir), type_))
    rows = diagnostics._read_jsonl(Path(exp_dir) / "ledger.jsonl")
    return [r for r in rows if type_ is None or r.get("type") == type_]


def reverted_commits(workspace: Path | str) -> set[str]:
    """Commits a later commit on main names in a `Reverts:` line (the built-in agent's reverts
    of what harmed or had no effect)."""
    from orchestrator import gitops

    log = gitops.git(workspace, "log", "--format=%B", check=False)
    return {m.group(1) for m in re.finditer(r"^Reverts: ([0-9a-f]{7,40})", log, re.M)}


def open_effects(exp_dir: Path | str, workspace: Path | str | None = None) -> list[dict[str, Any]]:
    """The ledger's effect lines whose commit no revert has taken back yet (workspace: the
    experiment's own, runs/NAME/workspace or the path in workspace.link, when not given)."""
    if workspace is None:
        link = Path(exp_dir) / "workspace.link"
        workspace = Path(link.read_text().strip()) if link.exists() else Path(exp_dir) / "workspace"
    from orchestrator.workspace import GitError

    try:
        done = reverted_commits(workspace)
    except (GitError, OSError):      # no workspace to read: nothing is known to be reverted
        done = set()
    return [e for e in ledger_read(exp_dir, "effect") if e.get("commit") not in done]


# ------------------------------------------------------------------- the measurement

@dataclass
class Effect:
    commit: str
    run: str
    step: int
    metric: str
    direction: str        # "up" | "down": which way is good for this metric
    window: int
    before: float | None
    after: float | None
    delta: float | None
    noise_floor: float | None
    label: str            # helped | harmed | inconclusive | unmeasured (the run ended first)
    reason: str = ""      # why an effect is unmeasured

    def ledger_line(self) -> dict[str, Any]:
        # "noise" is the ledger's name for the floor (orchestrator.ledger's `effect` lines)
        line = {"type": "effect", **asdict(self), "noise": self.noise_floor}
        if not self.reason:
            del line["reason"]
        return line


def unmeasured_reason(metrics: list[dict[str, Any]], step: int, metric: str, window: int) -> str:
    """Why `measure` gave None: how many values of the metric the run logged on either side."""
    series = [s for s, v in diagnostics.metric_series(metrics, metric) if math.isfinite(v)]
    before = sum(s < step for s in series)
    after = sum(s >= step for s in series)
    return (f"the run ended with {metric} logged {before} time(s) before step {step} (2 needed) "
            f"and {after} time(s) from it on ({window} needed)")


def noise_floor(values: list[float], window: int) -> float:
    """Twice the standard error of a difference of two `window`-step means (see module docstring)."""
    diffs = [b - a for a, b in zip(values, values[1:])]
    if len(diffs) < 2:
        return math.inf
    sigma = statistics.stdev(diffs) / math.sqrt(2)
    return 2.0 * sigma * math.sqrt(2.0 / window)


def measure(metrics: list[dict[str, Any]], step: int, metric: str, direction: str,
            window: int = DEFAULT_WINDOW) -> tuple[float, float, float, float, str] | None:
    """(before, after, delta, floor, label) for a change applied at `step`; None until W values
    follow.

    The change applied at step s first shapes the episodes of step s (DESIGN.md: applied at the
    step boundary), so "before" is the last W values logged before step s and "after" the first W
    logged from step s on. For a metric logged every step these are steps [s-W, s) and [s, s+W);
    a per-gym metric is logged only at the steps whose batch held that gym (small batches skip
    gyms), and is then compared over its W nearest observations on either side.
    """
    series = [(s, v) for s, v in diagnostics.metric_series(metrics, metric) if math.isfinite(v)]
    before = [v for s, v in series if s < step][-window:]
    after = [v for s, v in series if s >= step][:window]
    if len(after) < window or len(before) < 2:
        return None
    b, a = statistics.fmean(before), statistics.fmean(after)
    floor = noise_floor(before + after, window) if len(before) + len(after) > 3 else math.inf
    # a metric constant on both sides has no noise: any change is real
    delta = a - b
    if abs(delta) <= floor or delta == 0:
        label = "inconclusive"
    else:
        label = "helped" if (delta > 0) == (direction == "up") else "harmed"
    return round(b, 4), round(a, 4), round(delta, 4), round(floor, 4), label


# ------------------------------------------------------------------- which metric a change targets

# took/<gym>/<step> (the share of a gym's episodes that took a step, training.steps) has two
# parts after its prefix; read as one, "took/tau/identify" would be measured as "took/tau"
_METRIC_RE = re.compile(r"\b((?:took/[\w-]+/|(?:success|score|reward|episode|user|actor|critic|kl"
                        r"|invalid|repeat|rejected|stale|looped)/)[\w.-]+)")
_DOWN_WORDS = ("down", "fall", "drop", "decreas", "lower", "reduc", "shrink", "below")
_UP_WORDS = ("rise", "increas", "raise", "higher", "grow", "improv", "above")
_GOOD_DOWN = ("user/leak_rate", "critic/value_loss", "kl/ref", "actor/approx_kl", "episode/turns",
              "episode/invalid_rate", "episode/truncated_frac", "episode/repeat_rate",
              "user/looped_rate")


def target_of(message: str, changed: dict[str, tuple[Any, Any]], gyms: list[str]) -> tuple[str, str]:
    """(metric, good direction) that a commit means to move.

    The commit's `Expect:` line names it when it can ("Expect: success/colbench rises"); otherwise
    it follows from the knobs changed: leak controls -> user/leak_rate down, entropy_coeff ->
    actor/entropy up, anything else -> success of the gym it touches (or reward/mean) up.
    """
    for line in message.splitlines():
        if line.lower().startswith("expect:"):
            m = _METRIC_RE.search(line)
            if m:
                metric = m.group(1).rstrip(".,;")
                # the direction words of the metric's own clause: "Expect: episode/invalid_rate
                # falls, then reward/mean rises" judges invalid_rate by "falls" alone (read as
                # both, it once counted the fall as harm and asked to revert the fix)
                clause = re.split(r"[,;]|\bthen\b|\band\b", line[m.end():].lower())[0]
                words = set(re.findall(r"[a-z]+", clause))
                down = any(w.startswith(_DOWN_WORDS) for w in words)
                up = "up" in words or any(w.startswith(_UP_WORDS) for w in words)
                if down != up:
                    return metric, "down" if down else "up"
                return metric, "down" if metric in _GOOD_DOWN else "up"
    keys = list(changed)
    if any(k.endswith(("facts_per_reply", "volunteer_interval", "withhold_kinds", "max_reveals"))
           for k in keys):
        return "user/leak_rate", "down"
    if any(k == "agent.entropy_coeff" for k in keys):
        return "actor/entropy", "up"
    for k in keys:
        parts = k.split(".")
        if parts[0] in ("env", "user") and len(parts) > 2:
            return f"success/{parts[1]}", "up"
    if len(gyms) == 1:
        return f"success/{gyms[0]}", "up"
    return "reward/mean", "up"


# ------------------------------------------------------------------- updating the ledger

def update_effects(exp_dir: Path | str, run_dir: Path | str, workspace: Path | str,
                   window: int = DEFAULT_WINDOW, *, final: bool = False) -> list[Effect]:
    """Measure every applied commit of this run that has W steps after it and no effect line yet.

    final=True (the run has ended): a commit that still cannot be measured gets an "unmeasured"
    line saying why, so `orchestrator log` shows a reason instead of an empty column."""
    from orchestrator import gitops   # git lives behind one module

    exp_dir, run_dir = Path(exp_dir), Path(run_dir)
    done = {(e.get("commit"), e.get("run")) for e in ledger_read(exp_dir, "effect")}
    metrics = diagnostics.read_metrics(run_dir)
    gyms = diagnostics.metric_gyms(metrics)
    new = []
    for ev in diagnostics.read_events(run_dir):
        if ev.get("event") != "applied" or (ev.get("commit"), run_dir.name) in done:
            continue
        commit, step = ev["commit"], int(ev["step"])
        try:
            msg = gitops.message(workspace, commit)
            parents = gitops.git(workspace, "rev-list", "--parents", "-n1", commit).split()[1:]
            old = gitops.knobs_at(workspace, parents[0]) if parents else {}
        except gitops.GitError:
            continue
        changed = diagnostics.knob_changes(old, gitops.knobs_at(workspace, commit))
        metric, direction = target_of(msg, changed, gyms)
        result = measure(metrics, step, metric, direction, window)
        if result is None:
            if not final:
                continue
            effect = Effect(commit, run_dir.name, step, metric, direction, window, None, None,
                            None, None, "unmeasured",
                            unmeasured_reason(metrics, step, metric, window))
        else:
            effect = Effect(commit, run_dir.name, step, metric, direction, window, *result)
        ledger_append(exp_dir, effect.ledger_line())
        done.add((commit, run_dir.name))
        new.append(effect)
    # commits the trainer applied inside a later one (a session's commits for different gyms,
    # each judged on its own gym's metric): measured at that step when no other commit applied
    # with them is judged on the same gym; the rest share an effect (never_applied says so)
    for commit, step, metric, direction in own_gym_riders(exp_dir, run_dir, workspace, gyms, done):
        result = measure(metrics, step, metric, direction, window)
        if result is None:
            if not final:
                continue
            effect = Effect(commit, run_dir.name, step, metric, direction, window, None, None,
                            None, None, "unmeasured", unmeasured_reason(metrics, step, metric, window))
        else:
            effect = Effect(commit, run_dir.name, step, metric, direction, window, *result)
        ledger_append(exp_dir, effect.ledger_line())
        done.add((commit, run_dir.name))
        new.append(effect)
    if final:
        for effect in never_applied(exp_dir, run_dir, workspace, metrics, gyms, window, done):
            ledger_append(exp_dir, effect.ledger_line())
            new.append(effect)
    return new


def never_applied(exp_dir: Path, run_dir: Path, workspace: Path | str,
                  metrics: list[dict[str, Any]], gyms: list[str], window: int,
                  done: set[tuple[Any, str]]) -> list[Effect]:
    """"unmeasured" effects, with the reason, for the commits the gate accepted while this run
    trained that the trainer never applied on their own: the run ended first (the CPU demo's
    step-8 commit once showed "-" in `orchestrator log`), or a later commit that includes it was
    applied in its place (two commits between two step boundaries)."""
    last = int(metrics[-1]["step"]) if metrics else 0
    out = []
    for commit, later in _not_applied_alone(exp_dir, run_dir, workspace, done):
        reason = (f"the trainer applied it together with {later[0][0][:10]} at step {later[0][1]}, "
                  f"whose effect it shares" if later else
                  f"{run_dir.name} ended at step {last} before the trainer applied it")
        metric, direction = _target_at(workspace, commit, gyms)
        out.append(Effect(commit, run_dir.name, later[0][1] if later else last, metric, direction,
                          window, None, None, None, None, "unmeasured", reason))
        done.add((commit, run_dir.name))
    return out


def _not_applied_alone(exp_dir: Path, run_dir: Path, workspace: Path | str,
                       done: set[tuple[Any, str]]) -> list[tuple[str, list[tuple[str, int]]]]:
    """(commit, the applied commits that include it, in order) for each commit the gate accepted
    while this run trained that has no "applied" event of its own and no effect line yet."""
    events = diagnostics.read_events(run_dir)
    started = min((e.get("time", 0.0) for e in events if e.get("event") == "started"), default=None)
    applied = [(e["commit"], int(e["step"])) for e in events if e.get("event") == "applied"
               and e.get("commit")]
    if started is None:
        return []
    out = []
    for v in ledger_read(exp_dir, "verdict"):
        commit = v.get("commit")
        if v.get("verdict") != "accepted" or not commit or (commit, run_dir.name) in done \
                or commit in {c for c, _ in applied} or float(v.get("ts") or 0.0) < started:
            continue
        out.append((commit, [(c, s) for c, s in applied if _is_ancestor(workspace, commit, c)]))
    return out


def _target_at(workspace: Path | str, commit: str, gyms: list[str]) -> tuple[str, str]:
    from orchestrator import gitops

    try:
        msg = gitops.message(workspace, commit)
        parents = gitops.git(workspace, "rev-list", "--parents", "-n1", commit).split()[1:]
        old = gitops.knobs_at(workspace, parents[0]) if parents else {}
        return target_of(msg, diagnostics.knob_changes(old, gitops.knobs_at(workspace, commit)), gyms)
    except gitops.GitError:
        return "reward/mean", "up"


# the gym a metric names: took/<gym>/<step>, success/<gym>, score/<gym>, reward/<gym>
METRIC_GYM = finding.METRIC_GYM


def metric_gym(metric: str, gyms: list[str]) -> str | None:
    """The gym a metric is about (took/tau/identify, success/tau, ...), or None (reward/mean,
    episode/invalid_rate: every gym's)."""
    m = METRIC_GYM.match(metric)
    return m.group(1) if m and m.group(1) in gyms else None


def expect_gym(workspace: Path | str, commit: str, gyms: list[str]) -> str | None:
    """The gym of the metric a commit's `Expect:` line names first, or None (no such line, or a
    metric of every gym)."""
    from orchestrator import gitops

    msg = gitops.message(workspace, commit)
    expect = next((line for line in msg.splitlines() if line.lower().startswith("expect:")), "")
    m = METRIC_GYM.search(expect)
    return m.group(1) if m and m.group(1) in gyms else None


def own_gym_riders(exp_dir: Path, run_dir: Path, workspace: Path | str, gyms: list[str],
                   done: set[tuple[Any, str]]) -> list[tuple[str, int, str, str]]:
    """(commit, step, metric, direction) for each commit applied inside a later one at `step`
    whose metric is about a gym no other commit applied at that step is judged on."""
    riders = [(c, later[0]) for c, later in _not_applied_alone(exp_dir, run_dir, workspace, done) if later]
    by_step: dict[int, list[tuple[str, str, str]]] = {}
    for commit, (head, step) in riders:
        by_step.setdefault(step, []).append((commit, *_target_at(workspace, commit, gyms)))
    for commit, step in {(h, s) for _, (h, s) in riders}:
        by_step[step].append((commit, *_target_at(workspace, commit, gyms)))
    # read each commit's message once, not once for every rider applied beside it
    settled = {c for group in by_step.values() for c, _, _ in group if settles(workspace, c)}
    out = []
    for commit, (_, step) in riders:
        group = by_step[step]
        metric, direction = next((m, d) for c, m, d in group if c == commit)
        gym = metric_gym(metric, gyms)
        if gym is None or any(metric_gym(m, gyms) in (gym, None) for c, m, _ in group
                              if c != commit and c not in settled):
            continue
        out.append((commit, step, metric, direction))
    return out


SETTLES_RE = re.compile(r"^Expect:.*\bstays within its noise floor", re.M | re.I)


def settles(workspace: Path | str, commit: str) -> bool:
    """Whether a commit says it changes nothing measurable ("Expect: METRIC stays within its noise
    floor.": a revert of a change measured "no effect"). It does not make the changes applied with
    it share one effect: on the H100 runs of 2026-12-06 (seeds 1 and 2) the revert of `no_repeat`
    went in with four gyms' own changes, all applied at step 14, and each of those was left
    "unmeasured" because the revert was judged on a metric of every gym."""
    from orchestrator import gitops
    try:
        return bool(SETTLES_RE.search(gitops.message(workspace, commit)))
    except gitops.GitError:
        return False


def _is_ancestor(workspace: Path | str, a: str, b: str) -> bool:
    from orchestrator.workspace import Workspace

    return Workspace(workspace).is_ancestor(a, b)
