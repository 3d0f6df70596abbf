"""`orchestrator compare-merge OUT RESULTS...`: several sessions' comparisons as one table.

    orchestrator compare --bench usergym --name ug-a --seeds 2 ...                # session 1
    orchestrator compare --bench usergym --name ug-b --seeds 1 --first-seed 2 ...  # session 2
    orchestrator compare-merge runs/ug runs/ug-a/results.json runs/ug-b/results.json

A device session fits only so many runs, and the paper's tables want three or more seeds of every
method. Each session keeps its raw results.json (every evaluation's per-gym numbers and per-task
results); this writes OUT/results.json and OUT/RESULTS.md with the tables, intervals and paired
differences one `compare` of all the runs would have written. It refuses, in one sentence:
1. results of different benches;
2. evaluations under different protocols, in either set of evaluations (the held-out split, the
   original files): the split, shipped tasks or original files, the evaluation user, and every
   deviation (`--eval-max-turns`, `--eval-episodes`, gyms left out), since each of those changes
   what a number measures;
3. training setups that would change what a row means: the model, the preset, `--user-mode`,
   the gyms trained on and whether runs trained on the original files (steps, seeds, other
   settings and the methods may differ; RESULTS.md lists each session's command and steps);
4. one method's seed in two files: seed s of two methods is paired task by task, so a seed
   stands for one run. The untrained model is the exception: the same model evaluated with the
   same seed under the same protocol is the same measurement, and the first file's is kept.
A seed that failed in one file (its cell "missing") and has a result in another takes the result.

`--by-user-mode` merges sessions that differ in `--user-mode` (the paper's table 3: the LLM,
symbolic and hybrid users): each trained method is named with the user it trained against
(`eau@llm`, `eau@hybrid`), and each is paired against the same method with the LLM user alone,
the paper's baseline, as well as against its algorithm without the agent and the untrained
model. A session without `--user-mode` whose runs had no LLM user (`--set rollout.user_llm=none`,
as the series of 2026-12-07) trained against the symbolic user alone and counts as `symbolic`;
any other counts as `default`. The untrained model trains against no user and keeps its name.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from orchestrator.compare import PROMPTED, CompareSpec, add_aggregates, render_markdown, split_method
from orchestrator.errors import UserError

SETS = ("methods", "data_files")        # results.json's sets of evaluations
TRAINING = {"model": "--model", "preset": "--preset", "user_mode": "--user-mode"}


def load_results(path: Path) -> dict[str, Any]:
    """A session's results.json (or the folder holding it), with its settings: results.json's
    own "spec", else the compare.json beside it."""
    f = path / "results.json" if path.is_dir() else path
    try:
        results = json.loads(f.read_text())
    except OSError:
        raise UserError(f"cannot read {f}: give the results.json of a comparison or its folder.") from None
    except ValueError:
        raise UserError(f"{f} is not JSON: give a results.json that `orchestrator compare` wrote.") from None
    if not isinstance(results, dict) or not {"bench", "methods"} <= set(results):
        raise UserError(f"{f} is no comparison's results.json (it has no bench and methods): give "
                        f"one that `orchestrator compare` wrote.")
    if "spec" not in results and (f.parent / "compare.json").is_file():
        results["spec"] = json.loads((f.parent / "compare.json").read_text())
    results["file"] = str(f)
    return results


def _place(results: dict[str, Any], key: str) -> dict[str, Any]:
    return results if key == "methods" else results.get("data_files") or {}


def _protocol(entry: dict[str, Any]) -> dict[str, str]:
    """What an evaluation was measured under, in words: its settings apart from the bench's
    protocol, its tasks (the folder of the original files may sit elsewhere on another machine),
    its split and its user."""
    p = entry.get("protocol") or {}
    devs = sorted(json.dumps(d, sort_keys=True) for d in entry.get("deviations") or [])
    return {"settings": "; ".join(f"{d['setting']} {d['used']}" for d in map(json.loads, devs))
                        or "the bench's protocol",
            "tasks": "shipped tasks" if p.get("data", "shipped") == "shipped" else "original files",
            "split": f"split {p.get('split') or 'test'}", "user": f"user {p.get('user_llm') or 'default'}"}


def check_protocols(files: list[dict[str, Any]]) -> None:
    for key in SETS:
        first: tuple[str, dict[str, str]] | None = None
        for r in files:
            for entry in _place(r, key).get("methods", {}).values():
                for s in (s for s in entry.get("seeds", {}).values() if "per_gym" in s):
                    p = _protocol(s)
                    first = first or (r["file"], p)
                    differ = [k for k in p if p[k] != first[1][k]]
                    if differ:
                        raise UserError(
                            f"{first[0]} and {r['file']} were evaluated under different protocols "
                            f"({', '.join(first[1][k] for k in differ)} against "
                            f"{', '.join(p[k] for k in differ)}): merge only results measured alike.")


def _training(r: dict[str, Any]) -> dict[str, Any]:
    """The settings that change what a row means; an older file without its settings (no "spec",
    no compare.json beside it) has only the gyms trained on to check."""
    spec = r.get("spec") or {}
    out: dict[str, Any] = {"trained gyms": r.get("trained_gyms")}
    if spec:
        out.update({flag: spec.get(k) for k, flag in TRAINING.items()})
        out["--data-dir"] = any(str(s).startswith("data.data_dir=") for s in spec.get("sets") or ())
    return out


def check_training(files: list[dict[str, Any]], by_user_mode: bool = False) -> None:
    first: dict[str, tuple[str, Any]] = {}               # setting -> (file, value) first seen
    for r in files:
        for what, value in _training(r).items():
            if by_user_mode and what == TRAINING["user_mode"]:
                continue
            f0, v0 = first.setdefault(what, (r["file"], value))
            if value != v0:
                raise UserError(f"{f0} and {r['file']} trained with different {what} ({_said(v0)} "
                                f"against {_said(value)}): their rows would mix two setups, so merge "
                                f"only alike sessions.")


def _said(value: Any) -> str:
    return "the default" if value is None else str(value)


def _untrained(entry: dict[str, Any]) -> bool:
    return entry.get("source") == "model"


def user_mode_of(r: dict[str, Any]) -> str:
    """The user a session's runs trained against: its --user-mode; else "symbolic" where
    `rollout.user_llm=none` left the symbolic user alone; else "default" (the bench's mix)."""
    spec = r.get("spec") or {}
    if spec.get("user_mode"):
        return str(spec["user_mode"])
    alone = any(str(s).replace(" ", "") == "rollout.user_llm=none" for s in spec.get("sets") or ())
    return "symbolic" if alone else "default"


def _label(method: str, r: dict[str, Any], by_user_mode: bool) -> str:
    """The method's name in the merge: with the session's user mode where --by-user-mode asks,
    unless it names its own (`compare --methods eau@hybrid`) or trains nothing (prompting)."""
    if not by_user_mode or method in PROMPTED or split_method(method)[1]:
        return method
    return f"{method}@{user_mode_of(r)}"


def merge(files: list[dict[str, Any]], by_user_mode: bool = False) -> dict[str, Any]:
    """The sessions' evaluations as one results.json, with aggregates and intervals."""
    benches = {r["bench"] for r in files}
    if len(benches) > 1:
        a, b = files[0], next(r for r in files if r["bench"] != files[0]["bench"])
        raise UserError(f"{a['file']} compares on {a['bench']} and {b['file']} on {b['bench']}: "
                        f"results of different benches cannot be merged.")
    check_protocols(files)
    check_training(files, by_user_mode)
    merged: dict[str, Any] = {"bench": files[0]["bench"], "data": files[0].get("data", "shipped"),
                              "methods": {}, "jobs": [],
                              "trained_gyms": files[0].get("trained_gyms") or [],
                              "held_out_gyms": files[0].get("held_out_gyms") or [], "notes": []}
    folders = [r["data_files"]["folder"] for r in files if r.get("data_files")]
    if folders:
        merged["data_files"] = {"folder": ", ".join(dict.fromkeys(folders)), "methods": {}}
    where: dict[tuple[str, str, str], str] = {}           # (set, method, seed) -> file
    for r in files:
        merged["jobs"] += [{**j, "session": r["file"]} for j in r.get("jobs", [])]
        for exp, steps in (r.get("stale_rollouts") or {}).items():
            merged.setdefault("stale_rollouts", {}).setdefault(exp, []).extend(steps)
        for key in SETS:
            for m, entry in _place(r, key).get("methods", {}).items():
                m = _label(m, r, by_user_mode)
                into = _place(merged, key)["methods"].setdefault(m, {"seeds": {}})["seeds"]
                for seed, s in entry.get("seeds", {}).items():
                    _take(into, (key, m, seed), s, r["file"], where, merged["notes"])
    if by_user_mode:
        merged["user_modes"] = {r["file"]: user_mode_of(r) for r in files}
    add_aggregates(merged)
    return merged


def _take(into: dict[str, Any], at: tuple[str, str, str], entry: dict[str, Any], file: str,
          where: dict[tuple[str, str, str], str], notes: list[str]) -> None:
    """Put one seed's evaluation in, refusing a seed that already holds another run's result."""
    _, method, seed = at
    old = into.get(seed)
    if old is None or ("per_gym" not in old and "per_gym" in entry):
        into[seed], where[at] = entry, file
        return
    if "per_gym" not in entry:
        return                                                # a failed cell never replaces
    if _untrained(old) and _untrained(entry):
        notes.append(f"{method} seed {seed}: {file} repeats the evaluation of {where[at]}, whose "
                     f"result is kept.")
        return
    raise UserError(f"seed {seed} of {method} is in both {where[at]} and {file}: run one session "
                    f"with --first-seed so their seeds differ, or merge only one of them.")


def sessions_lines(files: list[dict[str, Any]], notes: list[str]) -> list[str]:
    lines = ["## Sessions merged", "", "| results | methods | seeds | steps | command |",
             "| --- | --- | --- | ---: | --- |"]
    for r in files:
        spec = r.get("spec") or {}
        seeds = sorted({int(s) for e in r["methods"].values() for s in e.get("seeds", {})})
        lines.append(f"| {r['file']} | {', '.join(r['methods'])} | {', '.join(map(str, seeds))} | "
                     f"{spec.get('steps') or '-'} | `{spec.get('command') or '-'}` |")
    return lines + ([""] + [f"- {n}" for n in notes] if notes else []) + [""]


def write_merged(out: Path, paths: list[Path], command: str, by_user_mode: bool = False) -> Path:
    """Merge the sessions' results into out/results.json and out/RESULTS.md; returns out."""
    files = [load_results(p) for p in paths]
    given = [str(Path(r["file"]).resolve()) for r in files]
    twice = next((f for f in given if given.count(f) > 1), None)
    if twice:
        raise UserError(f"{twice} is given twice: give each session's results once.")
    inputs = {Path(r["file"]).resolve().parent for r in files}
    if out.resolve() in inputs:
        raise UserError(f"{out} holds one of the results being merged: give the merge a folder of "
                        f"its own, so no session's raw results are overwritten.")
    merged = merge(files, by_user_mode)
    merged["merged_from"] = [{"file": r["file"], "spec": r.get("spec")} for r in files]
    methods = tuple(merged["methods"])
    seeds = {s for e in merged["methods"].values() for s in e["seeds"]}
    spec = CompareSpec(name=out.name, bench=merged["bench"], methods=methods, seeds=len(seeds))
    out.mkdir(parents=True, exist_ok=True)
    (out / "results.json").write_text(json.dumps(merged, indent=1) + "\n")
    md = render_markdown(spec, merged, command) + "\n" + "\n".join(sessions_lines(files, merged["notes"]))
    (out / "RESULTS.md").write_text(md)
    return out
