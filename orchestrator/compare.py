"""`orchestrator compare`: the paper's comparison (table 1) on our own machine, in one command.

    orchestrator compare --bench usergym --methods prompting,ppo,eau --seeds 3 --steps 25 \
        --device cuda --parallel 6
    orchestrator compare --bench tau2 --methods grpo,grpo-eau,infopo,infopo-eau,infopo-eau-codex \
        --seeds 3 --steps 25 --set algorithm.gamma=0.8 --device cuda --parallel 6   # Table 5

What happens, and why:
1. Every trained method gets one experiment per seed, `runs/NAME-<method>-s<seed>`, started by
   the real `orchestrator start` (a subprocess each, at most --parallel at once: several 135M
   trainers fit one H200 side by side): PPO is `--agent none`, EAU is `--agent builtin` (or
   `eau-claude-code` / `eau-codex` where that CLI is usable). `generic` is table 4's generic
   meta-agent (`--skill generic --control inter-run`: no EAU skill, the LLM user alone, a session
   after each run that starts the next, up to `--max-runs`). A method may name its training
   algorithm first (`algorithm.name`): `grpo` and `infopo` alone, or with an agent
   (`grpo-eau`, `infopo-eau-codex`), so the rows of the paper's Table 5 (an algorithm with and
   without EAU) come from one command; plain `ppo` and `eau` train with PPO. A method may also
   name the user it trains against (`eau@llm`, `eau@hybrid`: `start --user-mode`, the paper's
   user table), each then paired against the same method with the LLM user. All of them start
   from the same project workspace, the same `--knob` starting knobs, the same config
   (`--preset`, `--set`, `--steps`) and `trainer.seed` = the seed, so the method is the only
   difference.
2. Each experiment's final checkpoint (no selection on test results, paper section 5.1) is
   evaluated by the walled evaluation, `orchestrator eval`, on the held-out split with the
   evaluation seed = the seed; prompting (the untrained model) is evaluated with the same seeds
   into `runs/NAME-prompting`, and so are `react` and `reflexion` (the same model prompted as
   Table 1's ReAct and Reflexion rows, training/prompting.py) into `runs/NAME-react`, `-reflexion`.
3. The results: `runs/NAME/results.json` (every evaluation's per-gym numbers), `RESULTS.md` (per
   method and gym: held-out success, score and, on UserGym, the environment's summed reward (the
   paper's number for that bench, shown first), mean and sample spread over the seeds with the
   number of seeds, n=1 where one seed gives no spread; the share of refused actions; the
   overall mean), and `report/` (`orchestrator report` of all the experiments: the paper's
   table and every run's curves with its interventions marked).
4. `--eval-data-dir FOLDER` (UserRL's folder): the runs still train on the shipped tasks, and every
   final checkpoint and the untrained model are evaluated once more on the bench's original test
   files; results.json keeps those under "data_files" and RESULTS.md reports them apart.
   `--no-untrained` leaves the untrained model's evaluation there to another session whose
   results hold it for the same seeds (compare-merge pairs against it).
5. results.json keeps each evaluation's per-task results, and RESULTS.md gets, per set of
   evaluations, bootstrap intervals per method, paired differences per pair of methods (in a
   table and in words) and the per-gym table (orchestrator/compare_stats.py). `--first-seed K`
   gives a later session other seeds, and `orchestrator compare-merge` merges the sessions'
   results.json (orchestrator/compare_merge.py).
A step that fails (a run that crashes, an evaluation that refuses) is recorded with its log file
and the comparison goes on; the tables say which cells are missing and why.
"""
from __future__ import annotations

import json
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator import compare_stats
from orchestrator.errors import UserError
from orchestrator.gate_context import BENCH_GYMS, TRAIN_GYMS
from training.config import ALGORITHMS

AGENTS = {"ppo": "none", "eau": "builtin", "eau-claude-code": "claude-code", "eau-codex": "codex"}
# The paper's generic meta-agent (section 5.4, table 4): no EAU skill and no symbolic user
# (`start --skill generic`), run between runs as the paper describes it ("the generic inter-run
# meta-agent", section 5.4): a session reviews each finished run and starts the next one
GENERIC = {"generic": "builtin", "generic-claude-code": "claude-code", "generic-codex": "codex"}
GENERIC_FLAGS = ("--skill", "generic", "--control", "inter-run")
# PPO's methods keep their short names (the paper's "PPO" and "EAU"); other algorithms prefix theirs
TRAINED = {**{m: ("ppo", a) for m, a in AGENTS.items()},
           **{m: ("ppo", a) for m, a in GENERIC.items()},
           **{algo: (algo, "none") for algo in ALGORITHMS if algo != "ppo"},
           **{f"{algo}-{m}": (algo, a) for algo in ALGORITHMS if algo != "ppo"
              for m, a in AGENTS.items() if m != "ppo"}}
# Table 1's prompting rows: the untrained model, plainly and as ReAct and Reflexion
# (training/prompting.py), each evaluated by the same walled protocol, nothing trained
PROMPTED = ("prompting", "react", "reflexion")
METHODS = (*PROMPTED, *TRAINED)
# `METHOD@MODE` trains the method against one user (the paper's user table: `start --user-mode`),
# so one comparison runs `eau@llm,eau@hybrid` side by side, each paired against `eau@llm`
USER_MODES = ("llm", "symbolic", "hybrid")


def split_method(method: str) -> tuple[str, str | None]:
    """("eau", "hybrid") for "eau@hybrid", ("eau", None) for "eau"."""
    base, at, mode = method.partition("@")
    return base, (mode if at else None)


def exp_name(spec: "CompareSpec", method: str, seed: int) -> str:
    """A trained method's experiment (runs/NAME-eau-s0, runs/NAME-eau-hybrid-s0)."""
    return f"{spec.name}-{method.replace('@', '-')}-s{seed}"


@dataclass(frozen=True)
class CompareSpec:
    """What to compare and how (one field per flag of `orchestrator compare`)."""

    name: str
    bench: str
    methods: tuple[str, ...] = ("prompting", "ppo", "eau")
    seeds: int = 3
    steps: int | None = None
    preset: str | None = None
    model: str | None = None
    sets: tuple[str, ...] = ()            # --set KEY=VALUE for every trained run
    knobs: tuple[str, ...] = ()           # --knob KEY=VALUE, every experiment's starting knobs
    every: int | None = None
    window: int | None = None
    max_lag: int | None = None
    user_mode: str | None = None          # llm | symbolic | hybrid, every trained run (table 3)
    max_runs: int | None = None           # runs per experiment, restarts and reviews included
    parallel: int = 1
    device: str = "auto"
    eval_args: tuple[str, ...] = ()       # passed to every `orchestrator eval`
    runs_dir: Path = Path("runs")
    first_seed: int = 0                   # seeds first_seed .. first_seed+seeds-1 (another session's)
    eval_data_dir: Path | None = None     # original test files every checkpoint is evaluated on too
    # the untrained model on eval_data_dir where prompting is not a method: off only where another
    # session's results hold it (its evaluation repeated task by task across machines, 2026-12-07)
    untrained_data_eval: bool = True


def seed_range(spec: CompareSpec) -> range:
    return range(spec.first_seed, spec.first_seed + spec.seeds)


@dataclass
class Job:
    """One subprocess of the comparison: a training run or an evaluation."""

    kind: str                             # "train" | "eval"
    method: str
    seed: int
    argv: list[str]
    log: Path
    rc: int | None = None
    seconds: float = 0.0
    extra: dict[str, Any] = field(default_factory=dict)


def check_spec(spec: CompareSpec) -> None:
    unknown = [m for m in spec.methods if split_method(m)[0] not in METHODS]
    if unknown:
        raise UserError(f"unknown method {unknown[0]!r}: choose from {', '.join(METHODS)}.")
    for m in spec.methods:
        base, mode = split_method(m)
        if mode is None:
            continue
        if base in PROMPTED:
            raise UserError(f"{m}: {base} trains against no user, so it takes no @user mode.")
        if mode not in USER_MODES:
            raise UserError(f"{m}: the user mode after @ is one of {', '.join(USER_MODES)}.")
        if spec.user_mode is not None:
            raise UserError(f"{m} names its user mode and --user-mode {spec.user_mode} names "
                            f"another for every run: give one or the other.")
    if spec.seeds < 1 or spec.parallel < 1:
        raise UserError("--seeds and --parallel must be at least 1.")
    for m in (m for m in spec.methods if split_method(m)[0] in GENERIC):
        mode = split_method(m)[1] or spec.user_mode
        if mode not in (None, "llm"):
            raise UserError(f"--user-mode {mode} cannot apply to {m}, which trains against the "
                            f"LLM user alone (paper table 4): compare it in a run of its own.")
    if spec.first_seed < 0:
        raise UserError("--first-seed must be 0 or more.")
    if any(item.split("=", 1)[0].strip() == "algorithm.name" for item in spec.sets):
        raise UserError("--set algorithm.name would relabel every method: name the algorithm in "
                        "the method instead (e.g. --methods grpo,grpo-eau).")
    for m in spec.methods:
        if split_method(m)[0] in TRAINED:
            exp = spec.runs_dir / exp_name(spec, m, spec.first_seed)
            if (exp / "experiment.json").exists():
                raise UserError(f"{exp} exists: a comparison starts fresh experiments; pick another "
                                f"--name or remove the old ones.")


def _cli(spec: CompareSpec) -> list[str]:
    return [sys.executable, "-m", "orchestrator.cli", "--runs-dir", str(spec.runs_dir)]


def train_jobs(spec: CompareSpec, logs: Path) -> list[Job]:
    jobs = []
    for seed in seed_range(spec):
        for m in (m for m in spec.methods if split_method(m)[0] in TRAINED):
            base, mode = split_method(m)
            algorithm, agent = TRAINED[base]
            exp = exp_name(spec, m, seed)
            argv = _cli(spec) + ["start", "--agent", agent, "--bench", spec.bench, "--exp", exp,
                                 "--no-live", "--set", f"trainer.seed={seed}",
                                 "--set", f"model.device={spec.device}",
                                 "--set", f"algorithm.name={algorithm}"]
            for flag, value in (("--preset", spec.preset), ("--steps", spec.steps),
                                ("--model", spec.model), ("--every", spec.every),
                                ("--window", spec.window), ("--max-lag", spec.max_lag),
                                ("--user-mode", mode or spec.user_mode), ("--max-runs", spec.max_runs)):
                if value is not None:
                    argv += [flag, str(value)]
            if base in GENERIC:
                argv += list(GENERIC_FLAGS)
            for item in spec.sets:
                argv += ["--set", item]
            for item in spec.knobs:
                argv += ["--knob", item]
            jobs.append(Job("train", m, seed, argv, logs / f"train-{exp}.log", extra={"exp": exp}))
    return jobs


def eval_jobs(spec: CompareSpec, logs: Path) -> list[Job]:
    jobs = []
    for seed in seed_range(spec):
        for m in spec.methods:
            if m in PROMPTED:
                target = str(spec.runs_dir / f"{spec.name}-{m}")
                head = [target, "--model", spec.model or "default", "--bench", spec.bench]
                head += ["--prompting", m] if m != "prompting" else []
                exp = f"{spec.name}-{m}"
            else:
                exp = exp_name(spec, m, seed)
                head = [exp]
            argv = _cli(spec) + ["eval", *head, "--seed", str(seed), "--device", spec.device,
                                 *spec.eval_args]
            log = logs / f"eval-{m.replace('@', '-')}-s{seed}.log"
            jobs.append(Job("eval", m, seed, argv, log, extra={"exp": exp}))
    return jobs


def data_eval_jobs(spec: CompareSpec, logs: Path) -> list[Job]:
    """`--eval-data-dir`: every evaluation again on the bench's original test files, and the
    untrained model's even where prompting is not among the methods (the runs train on the shipped
    tasks, so the original files say whether what they learnt carries over, and against what)."""
    if spec.eval_data_dir is None:
        return []
    methods = spec.methods if "prompting" in spec.methods or not spec.untrained_data_eval \
        else ("prompting", *spec.methods)
    jobs = eval_jobs(replace(spec, methods=methods, eval_args=(
        *spec.eval_args, "--data-dir", str(spec.eval_data_dir))), logs)
    for job in jobs:
        job.kind, job.log = "eval-data", job.log.with_name("data-" + job.log.name)
    return jobs


def run_jobs(jobs: list[Job], parallel: int, say=print, poll_s: float = 1.0) -> None:
    """Run the jobs, at most `parallel` at once, each with its output in its log file."""
    pending, running = list(jobs), []
    while pending or running:
        while pending and len(running) < parallel:
            job = pending.pop(0)
            job.log.parent.mkdir(parents=True, exist_ok=True)
            fh = open(job.log, "w")
            proc = subprocess.Popen(job.argv, stdout=fh, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL)
            running.append((job, proc, fh, time.monotonic()))
            say(f"{job.kind} {job.method} seed {job.seed}: started ({job.log.name})")
        time.sleep(poll_s)
        for item in list(running):
            job, proc, fh, t0 = item
            if proc.poll() is None:
                continue
            fh.close()
            job.rc, job.seconds = proc.returncode, round(time.monotonic() - t0, 1)
            running.remove(item)
            tail = ""
            if job.rc != 0:
                lines = job.log.read_text(errors="replace").strip().splitlines()
                tail = f": {lines[-1][:160]}" if lines else ""
            say(f"{job.kind} {job.method} seed {job.seed}: "
                f"{'done' if job.rc == 0 else f'failed (exit {job.rc})'} in {job.seconds:.0f} s{tail}")


def _data_of(argv: list[str]) -> str:
    """Which tasks an evaluation command reads, as its summary's "data" names them."""
    return argv[argv.index("--data-dir") + 1] if "--data-dir" in argv else "shipped"


def _eval_summary(spec: CompareSpec, exp: str, seed: int, started: float,
                  data: str = "shipped") -> tuple[Path, dict[str, Any]] | None:
    """The newest evaluation of `exp` with this seed on these tasks ("shipped" or the original
    files' folder), written after `started`: its folder and summary."""
    found = []
    for f in (spec.runs_dir / exp / "eval").glob("*/summary.json"):
        try:
            s = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        if (s.get("seed") == seed and s.get("data", "shipped") == data
                and f.stat().st_mtime >= started - 1):
            found.append((f.stat().st_mtime, f.parent, s))
    return max(found, key=lambda x: x[0])[1:] if found else None


def collect(spec: CompareSpec, jobs: list[Job], started: float) -> dict[str, Any]:
    """Every evaluation's per-gym numbers by method and seed, and the aggregate per method."""
    results: dict[str, Any] = {"bench": spec.bench, "methods": {}, "jobs": []}
    for job in (j for j in jobs if j.rc is not None):
        results["jobs"].append({"kind": job.kind, "method": job.method, "seed": job.seed,
                                "rc": job.rc, "seconds": job.seconds, "log": str(job.log),
                                "exp": job.extra.get("exp")})
    results["data"] = _data_of(list(spec.eval_args))      # the tasks of the main tables
    if spec.eval_data_dir is not None:
        results["data_files"] = {"folder": str(spec.eval_data_dir), "methods": {}}
    for job in (j for j in jobs if j.kind in ("eval", "eval-data")):
        found = (_eval_summary(spec, job.extra["exp"], job.seed, started, _data_of(job.argv))
                 if job.rc == 0 else None)
        place = results["data_files"] if job.kind == "eval-data" else results
        entry = place["methods"].setdefault(job.method, {"seeds": {}})
        entry["seeds"][str(job.seed)] = (
            seed_entry(*found) if found else
            {"missing": job.extra.get("missing") or f"see {job.log}"})
    trained = trained_gyms(spec, jobs)
    held_out = [g for g in BENCH_GYMS.get(spec.bench, ()) if g not in trained]
    results["trained_gyms"], results["held_out_gyms"] = list(trained), held_out
    results["stale_rollouts"] = stale_rollouts(spec.runs_dir, [j.extra.get("exp") for j in jobs
                                                              if j.kind == "train" and j.extra.get("exp")])
    add_aggregates(results)
    return results


def stale_rollouts(runs_dir: Path, exps: list[str]) -> dict[str, list[int]]:
    """Per training experiment, the steps whose rollout decoded weights older than the update
    before it (orchestrator.diagnostics.find_stale_rollouts over the whole run): a table of such
    runs compares weights fitted to another policy's samples (every GPU comparison up to
    2026-12-06), and RESULTS.md says so above the tables."""
    from orchestrator import diagnostics

    out: dict[str, list[int]] = {}
    for exp in dict.fromkeys(exps):
        for run in sorted((Path(runs_dir) / exp).glob("run-[0-9][0-9][0-9]*")):
            rows = diagnostics.read_metrics(run)
            for f in diagnostics.find_stale_rollouts(rows, len(rows)):
                out.setdefault(exp, []).extend(f.evidence["steps"])
    return out


def stale_lines(results: dict[str, Any]) -> list[str]:
    """A warning above the tables when some training run decoded stale weights."""
    stale = results.get("stale_rollouts") or {}
    if not stale:
        return []
    runs = "; ".join(f"{exp}: {len(steps)} step(s), first {min(steps)}" for exp, steps in sorted(stale.items()))
    return [f"**Stale rollouts.** In {len(stale)} training run(s) a rollout decoded weights older "
            f"than the update before it (`rollout/weights_copied` 0 after an update): {runs}. "
            f"Those runs trained on another policy's samples, so their rows do not measure the "
            f"method; fix the trainer and run them again.", ""]


def seed_entry(folder: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """What results.json keeps of one evaluation: its per-gym numbers, what it deviated from the
    protocol by, and each task's result (compare_stats pairs methods task by task)."""
    episodes = folder / "episodes.jsonl"
    return {"per_gym": summary["per_gym"], "deviations": summary.get("deviations") or [],
            "source": summary.get("source"), "step": summary.get("step"),
            "demonstrations": summary.get("demonstrations"),
            # the evaluation's tasks and user: compare-merge merges only alike evaluations
            "protocol": {k: summary.get(k) for k in ("split", "data", "user_llm", "user_protocol")},
            "tasks": compare_stats.task_rows(episodes) if episodes.exists() else {}}


def add_aggregates(results: dict[str, Any], twins: dict[str, Any] | None = None) -> None:
    """Each method's aggregate (trained and held-out gyms apart) and the intervals and paired
    differences (compare_stats; `twins`: the pairs besides each against the untrained model,
    by default each method with a meta-agent against its algorithm alone), in each set of
    evaluations."""
    trained, held_out = results["trained_gyms"], results["held_out_gyms"]
    groups = {"trained": list(trained), "held_out": held_out} if held_out else {}
    for place in (results, results.get("data_files")):
        for entry in (place or {}).get("methods", {}).values():
            entry["aggregate"] = aggregate(entry["seeds"], groups)
    if twins is None:
        twins = {**agent_twins(), **user_mode_twins(list(results.get("methods") or {}))}
    compare_stats.add_stats(results, twins)


def agent_twins() -> dict[str, str]:
    """Each method with a meta-agent -> the method of its algorithm without one (eau -> ppo,
    grpo-eau -> grpo): the pairs whose difference is the agent's effect."""
    plain = {algo: m for m, (algo, agent) in TRAINED.items() if agent == "none"}
    return {m: plain[algo] for m, (algo, agent) in TRAINED.items()
            if agent != "none" and algo in plain}


def user_mode_twins(methods: list[str]) -> dict[str, list[str]]:
    """`method@mode` -> its algorithm without the agent under the same user (eau@hybrid ->
    ppo@hybrid) and the same method under the LLM user alone (eau@hybrid -> eau@llm: the
    paper's user table measures the symbolic and hybrid users against it)."""
    agents = agent_twins()
    out: dict[str, list[str]] = {}
    for m in methods:
        base, mode = split_method(m)
        if mode is None:
            continue
        out[m] = ([f"{agents[base]}@{mode}"] if base in agents else []) + \
            ([f"{base}@llm"] if mode != "llm" else [])
    return out


def trained_gyms(spec: CompareSpec, jobs: list[Job]) -> tuple[str, ...]:
    """The gyms the runs trained on: a finished run's config `gyms`, else the bench's training
    gyms (UserGym holds Intention and Telepathy out, as the paper does)."""
    for job in (j for j in jobs if j.kind == "train" and j.rc == 0):
        try:
            cfg = json.loads((spec.runs_dir / job.extra["exp"] / "run-001" / "config.json").read_text())
        except (OSError, ValueError):
            continue
        if cfg.get("gyms"):
            return tuple(cfg["gyms"])
    return TRAIN_GYMS.get(spec.bench, ())


# What every evaluation reports per gym: success, the normalised score in [0, 1], the
# environment's own summed reward (UserGym's number in the paper) and the share of refused turns
METRICS = ("success", "score", "env_reward", "invalid_rate")
# The number each bench's paper table prints, shown first (paper table 1: UserGym's environment
# reward, where Intention reaches 1.2-2.0; ColBench's Pass, our score; table 2: tau2's success)
HEADLINE = {"usergym": "env_reward", "colbench": "score", "tau2": "success"}


def metric_titles(bench: str) -> list[tuple[str, str]]:
    """(key, title) of the tables of RESULTS.md, the paper's number of `bench` first."""
    titles = {"success": "success",
              "score": {"usergym": "score (normalised to [0, 1])",
                        "colbench": "score: Pass (the paper's ColBench number, with success)"}.get(bench, "score"),
              "env_reward": "environment reward (the paper's UserGym number: the gym's own rewards "
                            "summed over an episode, so Intention can pass 1)",
              "invalid_rate": "refused actions (share of agent turns)"}
    if bench == "tau2":
        titles["success"] = "success (the paper's tau2 number)"
    keys = [k for k in ("success", "score", "env_reward") if bench == "usergym" or k != "env_reward"]
    head = HEADLINE.get(bench)
    keys = ([head] if head in keys else []) + [k for k in keys if k != head] + ["invalid_rate"]
    return [(k, titles[k]) for k in keys]


def _mean_sd(values: list[float]) -> dict[str, float]:
    return {"mean": statistics.fmean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
            "n": len(values)}


def aggregate(seeds: dict[str, dict[str, Any]], groups: dict[str, list[str]] | None = None) -> dict[str, Any]:
    """Per gym, per group of gyms (trained and held-out) and overall (the mean over the gyms of
    each seed, then over seeds): success, score, the environment's summed reward and the
    refused-action rate, mean and sample spread over the seeds that have a result."""
    done = [s["per_gym"] for s in seeds.values() if "per_gym" in s]
    out: dict[str, Any] = {"gyms": {}, "overall": {}, "groups": {}, "seeds": len(done)}
    if not done:
        return out
    gyms = sorted({g for pg in done for g in pg})
    for key in METRICS:
        for gym in gyms:
            vals = [float(pg[gym][key]) for pg in done if gym in pg and key in pg[gym]]
            if vals:
                out["gyms"].setdefault(gym, {})[key] = _mean_sd(vals)
        per_seed = [statistics.fmean(float(pg[g][key]) for g in pg if key in pg[g])
                    for pg in done if any(key in pg[g] for g in pg)]
        if per_seed:
            out["overall"][key] = _mean_sd(per_seed)
        for name, members in (groups or {}).items():
            vals = [statistics.fmean(float(pg[g][key]) for g in members if g in pg and key in pg[g])
                    for pg in done if any(g in pg and key in pg[g] for g in members)]
            if vals:
                out["groups"].setdefault(name, {})[key] = _mean_sd(vals)
    return out


def demonstrations_line(results: dict[str, Any]) -> str:
    """Which worked-example setting the tables used: the paper's protocol shows none, ours one by
    default (`--eval-demonstrations N`), and a table must say which it is."""
    counts = sorted({n for entry in results["methods"].values() for s in entry.get("seeds", {}).values()
                     for n in (s.get("demonstrations") or {}).values()})
    if not counts:
        return "Worked examples before each task: not recorded."
    shown = " or ".join(str(n) for n in counts)
    paper = "the paper's protocol" if counts == [0] else \
        "the paper's protocol shows none (`--eval-demonstrations 0`)"
    return f"Worked examples before each task: {shown} ({paper})."


def render_markdown(spec: CompareSpec, results: dict[str, Any], command: str) -> str:
    """RESULTS.md: the command, then per gym and overall the held-out success, score and refused
    share of each method (mean ± sample spread over seeds, with the number of seeds), then what
    failed."""
    methods = [m for m in spec.methods if m in results["methods"]]
    gyms = sorted({g for m in methods for g in results["methods"][m]["aggregate"]["gyms"]})

    def cell(stat: dict[str, float] | None) -> str:
        # n beside the spread: a cell may have fewer seeds than asked for (a failed run), and
        # one seed has no spread to show (its sd of 0 read as a perfectly steady result)
        if not stat:
            return "-"
        if stat["n"] < 2:
            return f"{stat['mean']:.3f} (n={stat['n']})"
        return f"{stat['mean']:.3f} ± {stat['sd']:.3f} (n={stat['n']})"

    lines = [f"# Comparison {spec.name}: {', '.join(methods)} on {spec.bench}", "",
             "```", command, "```", "",
             f"Held-out split, the walled evaluation of each final checkpoint; mean ± sample spread "
             f"over the seeds with a result, n of the {spec.seeds} asked for (training seed = "
             f"evaluation seed; one seed has no spread).", "", demonstrations_line(results), "",
             *stale_lines(results)]
    for key, title in metric_titles(spec.bench):
        lines += [f"## {title}", "", "| gym | " + " | ".join(methods) + " |",
                  "| --- |" + " ---: |" * len(methods)]
        for gym in gyms:
            lines.append(f"| {gym} | " + " | ".join(
                cell(results["methods"][m]["aggregate"]["gyms"].get(gym, {}).get(key)) for m in methods) + " |")
        held = results.get("held_out_gyms") or []
        for name, title in (("trained", "trained gyms"), ("held_out", f"held-out gyms ({', '.join(held)})")):
            if held:
                lines.append(f"| **{title}** | " + " | ".join(cell(
                    results["methods"][m]["aggregate"].get("groups", {}).get(name, {}).get(key))
                    for m in methods) + " |")
        lines.append("| **overall** | " + " | ".join(
            cell(results["methods"][m]["aggregate"]["overall"].get(key)) for m in methods) + " |")
        lines.append("")
    lines += compare_stats.render_sections(results)
    failed = [j for j in results["jobs"] if j["rc"] != 0]
    lines += ["## Jobs", "", "| job | method | seed | exit | seconds | log |", "| --- | --- | ---: | ---: | ---: | --- |"]
    for j in results["jobs"]:
        lines.append(f"| {j['kind']} | {j['method']} | {j['seed']} | {j['rc']} | {j['seconds']:.0f} | {Path(j['log']).name} |")
    if failed:
        lines += ["", f"{len(failed)} job(s) failed: their cells are missing; read their logs."]
    return "\n".join(lines) + "\n"


def run_compare(spec: CompareSpec, command: str, say=print) -> Path:
    """The whole comparison; returns runs/NAME (results.json, RESULTS.md, report/)."""
    check_spec(spec)
    out = spec.runs_dir / spec.name
    logs = out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    started = time.time()
    settings = {k: (str(v) if isinstance(v, Path) else v) for k, v in spec.__dict__.items()}
    (out / "compare.json").write_text(json.dumps(
        {"command": command, "started": started, **settings}, indent=1) + "\n")
    train = train_jobs(spec, logs)
    run_jobs(train, spec.parallel, say)
    evals = eval_jobs(spec, logs) + data_eval_jobs(spec, logs)
    for m in PROMPTED:
        (spec.runs_dir / f"{spec.name}-{m}").mkdir(parents=True, exist_ok=True)
    trained = {t.extra["exp"] for t in train if t.rc == 0}
    skipped = [j for j in evals if j.method not in PROMPTED and j.extra["exp"] not in trained]
    for j in skipped:
        j.extra["missing"] = f"its training failed (see {logs / ('train-' + j.extra['exp'] + '.log')})"
    run_jobs([j for j in evals if j not in skipped], spec.parallel, say)
    results = collect(spec, train + evals, started)
    results["wall_s"] = round(time.time() - started, 1)
    # the settings travel with the results: compare-merge checks that sessions can be merged
    results["spec"] = {"command": command, **settings}
    (out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
    (out / "RESULTS.md").write_text(render_markdown(spec, results, command))
    exps = sorted({j.extra["exp"] for j in evals if j.rc == 0})
    if exps:
        from orchestrator.report import build_report

        build_report([spec.runs_dir / e for e in exps], out / "report")
    return out
