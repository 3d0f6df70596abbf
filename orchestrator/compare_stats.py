"""How sure `orchestrator compare` can be: bootstrap intervals per method, paired differences per
pair of methods, and the per-gym table, from the per-task results each evaluation records.

    orchestrator compare --bench usergym --seeds 3 ... --eval-data-dir ../shared/benchdata/userrl
    orchestrator compare-merge runs/usergym-all runs/a/results.json runs/b/results.json

RESULTS.md gets these sections once for the held-out split (the shipped test tasks) and once for
the original test files (`--eval-data-dir`), never pooled: they are different task sets. What is
computed, and why:
1. `task_rows` keeps each evaluated episode's success, score, agent turns, refused turns and
   family (point 5) by "gym/task_id" (the walled evaluation's episodes.jsonl), so methods can be
   compared task by task: task i under evaluation seed s gets the same environment seed whatever
   the policy (training/evaluate.py `task_seed`).
2. `interval`: the 95% percentile interval of the mean over gyms (the tables' "overall": every gym
   weighs the same) under a two-way bootstrap that resamples seeds (each one training run and its
   evaluation) and, within each gym, tasks, both with replacement: Owen's pigeonhole bootstrap
   for crossed designs (Owen 2007, Annals of Applied Statistics 1(2)). Resampling tasks alone
   would hide the spread between training runs; seeds alone (3) cannot make an interval.
3. `paired_difference`: A minus B per task and seed, resampled the same way. Seed s of two
   methods shares trainer.seed and the evaluation seed, and a task is as hard for both, so that
   noise cancels (the paired design); only the seeds and tasks both methods have count. A
   difference whose interval excludes 0 is "outside the noise".
4. The resampling generator is seeded (`SEED`), so the same results.json gives the same intervals.
5. Tasks drawn from one family are resampled together (a cluster bootstrap within each gym):
   a family is what the tasks share of the environment, so they are not independent draws of
   the gym. Persuade's tasks are families by their prompt, which names one claim. In the
   shipped split every task of a claim draws its hidden reasons from the claim's same five
   (tables.CLAIMS): 30 held-out tasks over 4 claims, and on 2026-12-07 8 of EAU seed 0's 14
   persuade successes were one claim, while on UserRL's 42 test tasks (27 claims) EAU was not
   above PPO. Resampled as 30 independent tasks, that gym's interval was too narrow. In UserRL's
   files the tasks of one claim have reasons of their own but one prompt, so the policy opens
   them alike; drawing them together there is the cautious side (249 tasks, 234 families).
   Every other gym's task is its own family (its hidden facts are its own). Rows written before
   families were recorded count each task as its own.
"""
from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import numpy as np

METRICS = ("success", "score")
# Measured on 7 gyms x 30 tasks x 3 seeds of success 0.1: an interval's ends moved by 0.0005
# (lower) and 0.0013 (upper, sd over 20 generator seeds) at 2,000 resamples, 0.0023 at 500;
# one interval takes 10 ms
RESAMPLES = 2000
SEED = 0
LEVEL = 0.95
BASELINE = "prompting"  # the untrained model: a gym "learns" under a method that beats it there
# gyms whose tasks with one prompt are one family (point 5 of the docstring)
FAMILY_BY_PROMPT = frozenset({"persuade"})


def task_rows(episodes_file: Path) -> dict[str, dict[str, float]]:
    """One evaluation's episodes by "gym/task_id": success (0/1), score, the environment's own
    rewards summed over the episode (UserGym's number in the paper's table 1), agent turns and
    refused turns (those the environment answered as an invalid action) and rejected ones (a
    right tag with arguments the environment rejected, `rejected` in the record: function's
    probes of two integers); task ids are unique within a gym in every bench's files."""
    rows: dict[str, dict[str, float]] = {}
    for line in episodes_file.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        turns = r.get("turns") or []
        key = f"{r['gym']}/{r['task_id']}"
        rows[key] = {
            "success": float(bool(r["success"])), "score": float(r["score"]),
            "env_reward": float(sum(t.get("env_reward", 0.0) for t in turns)), "turns": len(turns),
            "refused": sum(1 for t in turns if t.get("invalid_action")),
            "rejected": sum(1 for t in turns if t.get("rejected")),
            "family": family_of(r["gym"], key, r.get("prompt"))}
    return rows


def family_of(gym: str, key: str, prompt: str | None) -> str:
    """The family a task is resampled with (point 5): its prompt in a gym of FAMILY_BY_PROMPT,
    else the task itself."""
    return f"{gym}/prompt:{prompt}" if gym in FAMILY_BY_PROMPT and prompt else key


def _with_tasks(seeds: dict[str, dict[str, Any]]) -> list[str]:
    return sorted((k for k, s in seeds.items() if s.get("tasks")), key=lambda k: (len(k), k))


def _cells(seeds: dict[str, dict[str, Any]], seed_keys: list[str], metric: str,
           gyms: set[str] | None = None) -> dict[str, tuple[list[str], np.ndarray, list[str]]]:
    """gym -> (task keys, values (T, S) over `seed_keys`, NaN where a seed lacks the task, each
    task's family: point 5, the task itself where no row names one)."""
    keys_of: dict[str, set[str]] = {}
    for s in seed_keys:
        for key in seeds[s]["tasks"]:
            gym = key.split("/", 1)[0]
            if gyms is None or gym in gyms:
                keys_of.setdefault(gym, set()).add(key)
    out = {}
    for gym, keys in sorted(keys_of.items()):
        tasks = sorted(keys)
        x = np.full((len(tasks), len(seed_keys)), np.nan)                  # (T, S)
        family = {}
        for j, s in enumerate(seed_keys):
            rows = seeds[s]["tasks"]
            for i, key in enumerate(tasks):
                if key in rows and metric in rows[key]:
                    x[i, j] = float(rows[key][metric])
                if key in rows and rows[key].get("family"):
                    family.setdefault(key, str(rows[key]["family"]))
        out[gym] = (tasks, x, [family.get(k, k) for k in tasks])
    return out


def _nanmean(x: np.ndarray, axis=None):
    with warnings.catch_warnings():            # a resample may draw only missing cells: NaN
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmean(x, axis=axis)


def _resampled_means(cells: dict[str, tuple[np.ndarray, list[str]]], resamples: int,
                     seed: int) -> np.ndarray:
    """(resamples,) the mean over gyms of the mean over cells, seeds drawn once per resample for
    every gym (a seed is one run, which played every gym) and, within each gym, families of tasks
    drawn with all their tasks (point 5; a family of one task is the plain task bootstrap, and the
    same draws)."""
    rng = np.random.default_rng(seed)
    n_seeds = next(iter(cells.values()))[0].shape[1]
    si = rng.integers(0, n_seeds, size=(resamples, n_seeds))              # (B, S)
    total = np.zeros(resamples)
    for gym in sorted(cells):
        x, family = cells[gym]                                              # (T, S), (T,)
        names = {f: i for i, f in enumerate(dict.fromkeys(family))}       # first-seen order
        index = np.array([names[f] for f in family])
        ok = ~np.isnan(x)
        sums = np.zeros((len(names), n_seeds))                              # (F, S)
        counts = np.zeros((len(names), n_seeds))
        np.add.at(sums, index, np.where(ok, x, 0.0))
        np.add.at(counts, index, ok.astype(float))
        fi = rng.integers(0, len(names), size=(resamples, len(names)))     # (B, F)
        picked_sums = sums[fi[:, :, None], si[:, None, :]].sum(axis=(1, 2))
        picked_counts = counts[fi[:, :, None], si[:, None, :]].sum(axis=(1, 2))
        with np.errstate(invalid="ignore", divide="ignore"):                # all missing: NaN
            total += np.where(picked_counts > 0, picked_sums / np.maximum(picked_counts, 1), np.nan)
    return total / len(cells)


def _summary(cells: dict[str, tuple[np.ndarray, list[str]]], resamples: int,
             seed: int) -> dict[str, float]:
    point = float(np.mean([_nanmean(x) for x, _ in cells.values()]))
    boot = _resampled_means(cells, resamples, seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        lo, hi = np.nanpercentile(boot, [50 * (1 - LEVEL), 50 * (1 + LEVEL)])
    return {"mean": point, "lo": float(lo), "hi": float(hi)}


def interval(seeds: dict[str, dict[str, Any]], metric: str, gyms: set[str] | None = None,
             resamples: int = RESAMPLES, seed: int = SEED) -> dict[str, Any] | None:
    """The mean over gyms of one method's `metric` with its bootstrap interval over tasks and
    seeds, or None without per-task records."""
    keys = _with_tasks(seeds)
    cells = _cells(seeds, keys, metric, gyms) if keys else {}
    if not cells:
        return None
    return {**_summary({g: (x, fam) for g, (_, x, fam) in cells.items()}, resamples, seed),
            "tasks": sum(len(t) for t, _, _ in cells.values()),
            "families": sum(len(set(fam)) for _, _, fam in cells.values()), "seeds": len(keys)}


def paired_difference(a: dict[str, dict[str, Any]], b: dict[str, dict[str, Any]], metric: str,
                      gyms: set[str] | None = None, resamples: int = RESAMPLES,
                      seed: int = SEED) -> dict[str, Any] | None:
    """A minus B per task and seed over what both have, mean over gyms and its bootstrap interval;
    `relative` is the difference over B's mean on the same cells (None where B's is 0)."""
    keys = [k for k in _with_tasks(a) if k in set(_with_tasks(b))]
    if not keys:
        return None
    ca, cb = _cells(a, keys, metric, gyms), _cells(b, keys, metric, gyms)
    diff, base = {}, {}
    for gym in sorted(set(ca) & set(cb)):
        (ta, xa, fa), (tb, xb, _) = ca[gym], cb[gym]
        common = sorted(set(ta) & set(tb))
        if common:
            at_a, at_b = {t: i for i, t in enumerate(ta)}, {t: i for i, t in enumerate(tb)}
            ia, ib = [at_a[t] for t in common], [at_b[t] for t in common]
            d = xa[ia] - xb[ib]                                             # (T, S), NaN if either lacks it
            diff[gym] = (d, [fa[i] for i in ia])
            base[gym] = np.where(np.isnan(d), np.nan, xb[ib])
    if not diff:
        return None
    out = _summary(diff, resamples, seed)
    b_mean = float(np.mean([_nanmean(x) for x in base.values()]))
    return {"diff": out["mean"], "lo": out["lo"], "hi": out["hi"],
            "relative": out["mean"] / b_mean if b_mean else None, "base": b_mean,
            "tasks": sum(x.shape[0] for x, _ in diff.values()),
            "families": sum(len(set(fam)) for _, fam in diff.values()), "seeds": len(keys)}


def _wear(seeds: dict[str, dict[str, Any]], gym: str) -> dict[str, float | None]:
    """Mean agent turns an episode and the shares of agent turns refused and rejected, in one gym
    (rejected: None for results written before evaluations recorded it)."""
    rows = [r for s in _with_tasks(seeds) for k, r in seeds[s]["tasks"].items()
            if k.split("/", 1)[0] == gym]
    turns = sum(r.get("turns", 0) for r in rows)
    marked = [r for r in rows if "rejected" in r]
    marked_turns = sum(r.get("turns", 0) for r in marked)
    return {"turns": turns / len(rows) if rows else None,
            "refused": sum(r.get("refused", 0) for r in rows) / turns if turns else None,
            "rejected": sum(r["rejected"] for r in marked) / marked_turns if marked_turns else None}


def method_pairs(methods: list[str], twins: dict[str, Any]) -> list[tuple[str, str]]:
    """(A, B) to compare: each method against its twins, B or a list of them (EAU against PPO,
    grpo-eau against grpo: the meta-agent's effect; a user mode against the LLM user: compare_merge
    --by-user-mode), then every method against the untrained model."""
    out = [(m, b) for m in methods
           for b in ([twins[m]] if isinstance(twins.get(m), str) else twins.get(m) or [])
           if b in methods]
    if BASELINE in methods:
        out += [(m, BASELINE) for m in methods if m != BASELINE]
    return out


def set_stats(methods: dict[str, dict[str, Any]], twins: dict[str, Any],
              groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Intervals per method, paired differences per pair, the same in each group of gyms
    (trained, held-out) for success, and the per-gym rows of one set of evaluations
    (results.json's "methods", or "data_files"'s)."""
    seeds = {m: e.get("seeds", {}) for m, e in methods.items()}
    pairs = method_pairs(list(methods), twins)
    stats: dict[str, Any] = {"resamples": RESAMPLES, "seed": SEED, "level": LEVEL,
                             "methods": {m: {k: interval(s, k) for k in METRICS} for m, s in seeds.items()},
                             "pairs": [], "groups": {}, "gyms": {}}
    for a, b in pairs:
        stats["pairs"].append({"a": a, "b": b, **{k: paired_difference(seeds[a], seeds[b], k)
                                                  for k in METRICS}})
    gyms = sorted({key.split("/", 1)[0] for s in seeds.values() for k in _with_tasks(s)
                   for key in s[k]["tasks"]})
    for name, members in (groups or {}).items():
        members = [g for g in members if g in gyms]     # UserRL's files run no travel or tau
        if not members:
            continue
        stats["groups"][name] = {
            "gyms": members,
            "methods": {m: interval(s, "success", set(members)) for m, s in seeds.items()},
            "pairs": [{"a": a, "b": b, "success": paired_difference(seeds[a], seeds[b], "success",
                                                                    set(members))} for a, b in pairs]}
    for gym in gyms:
        for m, s in seeds.items():
            row = {"success": interval(s, "success", {gym}), **_wear(s, gym)}
            if BASELINE in seeds and m != BASELINE:
                row["vs_baseline"] = paired_difference(s, seeds[BASELINE], "success", {gym})
            stats["gyms"].setdefault(gym, {})[m] = row
    return stats


def add_stats(results: dict[str, Any], twins: dict[str, Any]) -> None:
    """Put `set_stats` beside each set of evaluations of a results.json, with the trained and
    held-out gyms as groups where some gyms were held out of training."""
    held = results.get("held_out_gyms") or []
    groups = {"trained": list(results.get("trained_gyms") or []), "held_out": held} if held else {}
    for place in (results, results.get("data_files")):
        if place and place.get("methods"):
            place["stats"] = set_stats(place["methods"], twins, groups)


# ---- RESULTS.md --------------------------------------------------------------------------------

def _num(x: float, signed: bool = False) -> str:
    return f"{x:+.3f}" if signed else f"{x:.3f}"


def _ci(s: dict[str, Any] | None, key: str = "mean", signed: bool = False) -> str:
    if not s:
        return "-"
    return f"{_num(s[key], signed)} [{_num(s['lo'], signed)}, {_num(s['hi'], signed)}]"


def outside_noise(d: dict[str, Any] | None) -> int:
    """+1 where the interval lies above 0, -1 below, 0 where it holds 0 (or there is none)."""
    if not d:
        return 0
    return 1 if d["lo"] > 0 else -1 if d["hi"] < 0 else 0


def _verdict(a: str, b: str, d: dict[str, Any] | None) -> str:
    side = outside_noise(d)
    if d is None:
        return "no common tasks and seeds"
    if side:
        return f"outside the noise, {a} {'above' if side > 0 else 'below'} {b}"
    return "within the noise (the interval holds 0)"


def _size(d: dict[str, Any] | None) -> str:
    """"tasks x seeds", with the families resampled where they are fewer than the tasks."""
    if not d:
        return "-"
    fam = d.get("families")
    return (f"{d['tasks']} ({fam} families) x {d['seeds']}" if fam and fam < d["tasks"]
            else f"{d['tasks']} x {d['seeds']}")


def _relative(d: dict[str, Any] | None) -> str:
    return "-" if not d or d.get("relative") is None else f"{d['relative']:+.0%}"


def _pair_lines(stats: dict[str, Any]) -> list[str]:
    lines = ["### Paired differences", "",
             "A minus B on each task and evaluation seed both have (the same environment seeds), "
             "then the mean over gyms; relative: of B's mean on the same tasks.", "",
             "| A − B | Δ success [95%] | relative | Δ score [95%] | tasks x seeds |",
             "| --- | --- | ---: | --- | ---: |"]
    for p in stats["pairs"]:
        d = p["success"] or p["score"]
        size = _size(d)
        lines.append(f"| {p['a']} − {p['b']} | {_ci(p['success'], 'diff', True)} | "
                     f"{_relative(p['success'])} | {_ci(p['score'], 'diff', True)} | {size} |")
    lines += ["", "In words:", ""]
    for p in stats["pairs"]:
        a, b, s, c = p["a"], p["b"], p["success"], p["score"]
        rel = f" ({_relative(s)} relative)" if s and s.get("relative") is not None else ""
        lines.append(f"- {a} − {b}: success {_ci(s, 'diff', True)}{rel}, {_verdict(a, b, s)}; "
                     f"score {_ci(c, 'diff', True)}, {_verdict(a, b, c)}.")
    out = [f"{p['a']} − {p['b']}" for p in stats["pairs"] if outside_noise(p["success"])]
    lines += ["", ("Success differences outside the noise: " + ", ".join(out) + ".") if out else
              "No success difference lies outside the noise."]
    return lines


def _group_lines(stats: dict[str, Any]) -> list[str]:
    """Success on the trained gyms and on the held-out gyms apart, per method and per pair."""
    groups = stats.get("groups") or {}
    if not groups:
        return []
    names = {"trained": "trained gyms", "held_out": "held-out gyms"}
    lines = ["### Success by group of gyms", "",
             "| | " + " | ".join(f"{names.get(g, g)} ({', '.join(v['gyms'])}) [95%]"
                                 for g, v in groups.items()) + " |",
             "| --- |" + " --- |" * len(groups)]
    first = next(iter(groups.values()))
    for m in first["methods"]:
        lines.append(f"| {m} | " + " | ".join(_ci(v["methods"][m]) for v in groups.values()) + " |")
    for i, p in enumerate(first["pairs"]):
        lines.append(f"| {p['a']} − {p['b']} | " + " | ".join(
            _ci(v["pairs"][i]["success"], "diff", True) for v in groups.values()) + " |")
    lines.append("")
    for g, v in groups.items():
        out = [f"{p['a']} − {p['b']}" for p in v["pairs"] if outside_noise(p["success"])]
        lines.append(f"On the {names.get(g, g)}, success differences outside the noise: "
                     f"{', '.join(out) if out else 'none'}.")
    return lines + [""]


def _gym_lines(stats: dict[str, Any], held_out: list[str]) -> list[str]:
    lines = ["### Per gym: which gyms learn", "",
             f"A gym learns under a method whose success there is above the untrained model's "
             f"({BASELINE}) outside the noise (paired per task and seed); turns: agent turns an "
             f"episode; refused: share of agent turns the environment refused as invalid actions; "
             f"rejected: share it took in format but rejected for their arguments.",
             "", f"| gym | method | success [95%] | − {BASELINE} [95%] | learns | turns | refused | rejected |",
             "| --- | --- | --- | --- | --- | ---: | ---: | ---: |"]
    for gym, by_method in stats["gyms"].items():
        name = f"{gym} (held out)" if gym in held_out else gym
        for m, row in by_method.items():
            d = row.get("vs_baseline")
            learns = "-" if d is None else {1: "yes", 0: "no", -1: "worse"}[outside_noise(d)]
            turns = "-" if row["turns"] is None else f"{row['turns']:.1f}"
            refused = "-" if row["refused"] is None else f"{row['refused']:.0%}"
            rejected = "-" if row.get("rejected") is None else f"{row['rejected']:.0%}"
            lines.append(f"| {name} | {m} | {_ci(row['success'])} | {_ci(d, 'diff', True)} | "
                         f"{learns} | {turns} | {refused} | {rejected} |")
    return lines


def left_out(methods: dict[str, dict[str, Any]]) -> list[str]:
    """The gyms an evaluation protocol could not run, with why (UserRL's files hold no TravelGym
    or tau-bench database): "gyms" deviations of the evaluations."""
    out = {}
    for entry in methods.values():
        for s in entry.get("seeds", {}).values():
            for d in s.get("deviations") or []:
                if d.get("setting") == "gyms":
                    out.update({g: why.get("why", "") for g, why in (d.get("left_out") or {}).items()})
    return [f"{g} ({why})" if why else g for g, why in sorted(out.items())]


def render_set(stats: dict[str, Any] | None, title: str, held_out: list[str],
               gyms_left_out: list[str] = ()) -> list[str]:
    """One set's section of RESULTS.md: intervals, paired differences in a table and in words,
    the per-gym table."""
    lines = [f"## {title}", ""]
    if gyms_left_out:
        lines += [f"Gyms left out: {'; '.join(gyms_left_out)}.", ""]
    if not stats or not any(v for s in stats["methods"].values() for v in s.values()):
        return lines + ["No per-task records (results.json written before compare kept them): "
                        "no intervals.", ""]
    lines += [f"Bootstrap {stats['level']:.0%} intervals ({stats['resamples']:,} resamples of the "
              f"seeds and of the tasks within each gym, generator seed {stats['seed']}) of the mean "
              f"over gyms, every gym weighing the same as in the overall rows. Tasks of one family "
              f"are drawn together (persuade's tasks of one claim); the size column gives the "
              f"families where they are fewer than the tasks.", "",
              "| method | success [95%] | score [95%] | tasks x seeds |", "| --- | --- | --- | ---: |"]
    for m, s in stats["methods"].items():
        size = _size(s["success"])
        lines.append(f"| {m} | {_ci(s['success'])} | {_ci(s['score'])} | {size} |")
    lines.append("")
    if stats["pairs"]:
        lines += _pair_lines(stats) + [""]
    return lines + _group_lines(stats) + _gym_lines(stats, held_out) + [""]


def render_sections(results: dict[str, Any]) -> list[str]:
    """RESULTS.md's sections on uncertainty: the held-out split, then the original test files."""
    held = results.get("held_out_gyms") or []
    data = results.get("data", "shipped")
    tasks = "the shipped test tasks" if data == "shipped" else f"the original test files, {data}"
    lines = render_set(results.get("stats"), f"Uncertainty on the held-out split ({tasks})", held,
                       left_out(results["methods"]))
    files = results.get("data_files")
    if files:
        lines += render_set(files.get("stats"), f"The original test files ({files['folder']}), "
                                                f"reported apart", held, left_out(files["methods"]))
    return lines
