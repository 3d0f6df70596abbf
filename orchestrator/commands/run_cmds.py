"""`orchestrator start | status | stop | agents`: running an experiment with its meta-agent.

start   creates (or continues) an experiment, starts the trainer and, every K steps or T minutes,
        one meta-agent session while training goes on (orchestrator.experiment); a rich live
        view shows progress over steps, the latest metrics and the sessions
status  run, step, latest metrics, pending and recent interventions, sessions and their cost
stop    SIGTERM to the running `start` (or straight to the trainer when `start` is gone): the
        trainer checkpoints the last finished step, then stops; `start --exp NAME` resumes it
agents  which adapters are usable on this machine and why not
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

from rich.console import Console, Group
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from orchestrator import diagnostics, ledger, prune
from orchestrator.agents import clis
from orchestrator.commands.common import add_experiment_args, experiment_arg, only_experiment
from orchestrator.errors import UserError
from orchestrator.experiment import DEFAULT_CAP, Experiment, StartOptions, run_experiment
from orchestrator.paths import runs_dir
from orchestrator.sentences import fit
from orchestrator.supervisor import pid_alive
from training.rewards import errors_text

# The README demo's steps (--preset cpu, SmolLM2-135M, 4 episodes a step): 19-42 s each on an
# idle 2-core machine with native bf16
CPU_DEMO_STEP = "20-45 s"
MAIN_METRICS = ("reward/mean", "reward/module_errors", "score/mean", "episode/turns",
                "episode/invalid_rate", "episode/repeat_rate", "episode/question_rate",
                "user/leak_rate", "actor/entropy", "kl/ref", "perf/step_s")


def register(sub) -> None:
    p = sub.add_parser("start", help="train with a meta-agent co-evolving the training system")
    p.add_argument("--agent", default="builtin", choices=("claude-code", "codex", "builtin", "command", "none"))
    p.add_argument("--bench", default=None, help="usergym, colbench or tau2 (needed for a new experiment)")
    add_experiment_args(p, "experiment name (default: BENCH-AGENT); an existing one continues")
    p.add_argument("--every", type=int, default=None,
                   help="a session every K trainer steps (default 10; 2 with --preset cpu, an 8-step run)")
    p.add_argument("--minutes", type=float, default=None, help="or every T minutes, whichever comes first")
    p.add_argument("--preset", default=None, choices=("cpu", "usergym", "colbench", "tau2", "qwen3-4b"),
                   help="config preset (training/config.py PRESETS): cpu, a bench's own, or qwen3-4b "
                        "(the paper's policy size with random weights, LoRA; for a GPU)")
    p.add_argument("--steps", type=int, default=None, help="PPO steps of the run (trainer.total_steps)")
    p.add_argument("--model", default=None, help="policy: a local folder, or a Hugging Face hub id such as Qwen/Qwen3-4B (fetched "
                        "when online; offline, from the hub's cache) (default: SmolLM2-135M)")
    p.add_argument("--skill", default="eau", choices=("eau", "generic"),
                   help="eau (the EAU skill) or generic (paper table 4's generic meta-agent: no "
                        "EAU skill, and the LLM user alone)")
    p.add_argument("--control", default=None, choices=("intra-run", "inter-run", "both"),
                   help="when sessions run: intra-run (every --every steps, the default; a fork's "
                        "arm keeps the one `orchestrator fork` gave it), inter-run "
                        "(only after each run, which then starts the next run from what the session "
                        "changed, up to --max-runs: the paper's inter-run contrast), or both")
    p.add_argument("--user-mode", default=None, choices=("llm", "symbolic", "hybrid"),
                   help="who answers in training, pinned for the whole experiment (paper table 3): "
                        "llm (the frozen reference policy as the user), symbolic, or hybrid (half each)")
    p.add_argument("--max-runs", type=int, default=None,
                   help=f"cap of runs, restarts included (default: {DEFAULT_CAP} for a new "
                        f"experiment, else the experiment's own)")
    p.add_argument("--agent-cmd", default=None, help="the program of --agent command (quoted)")
    p.add_argument("--require-agent", action="store_true",
                   help="refuse to start when the agent's CLI or credentials are missing "
                        "(default: warn and train on; each session then ends as unavailable)")
    p.add_argument("--session-minutes", type=float, default=10.0, help="wall-clock limit of one session")
    p.add_argument("--budget-usd", type=float, default=None, help="spend limit of one claude-code session")
    p.add_argument("--window", type=int, default=None,
                   help="W: steps before/after for measured effects (default 10; 2 with --preset cpu)")
    p.add_argument("--max-lag", type=int, default=None, metavar="N",
                   help="the trainer waits at a step boundary for a session still running N steps "
                        "after it began, so its fix is trained on (default: never waits)")
    p.add_argument("--data-dir", default=None, metavar="FOLDER",
                   help="train on the bench's original files (UserRL's repository, ColBench's JSONL, "
                        "tau2-bench's repository) instead of the tasks shipped here (data.data_dir)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="config override, dotted (e.g. --set data.train_batch_size=4)")
    p.add_argument("--knob", action="append", default=[], metavar="KEY=VALUE",
                   help="a new experiment's starting knob, set in its seed workspace before the "
                        "first commit; '*' matches every gym (e.g. --knob env.*.demonstrations=0)")
    p.add_argument("--no-live", action="store_true",
                   help="print one line per step and per session or verdict instead of the live "
                        "view (the default when the output is not a terminal)")
    p.add_argument("--trainer-module", default="training.trainer", help=argparse.SUPPRESS)  # tests' stand-in
    p.set_defaults(func=cmd_start)

    p = sub.add_parser("status", help="where an experiment stands",
                       description="Where an experiment stands: its state, the current run's step "
                                   "and latest metrics, the live commit and the commits waiting "
                                   "for the gate, recent interventions with their measured "
                                   "effects, and the meta-agent sessions with their cost.")
    add_experiment_args(p, "experiment (default: the only one)")
    p.set_defaults(func=cmd_status)

    p = sub.add_parser("stop", help="checkpoint and stop a running experiment",
                       description="Send SIGTERM to the running `orchestrator start` (or to the "
                                   "trainer when `start` is gone): the trainer checkpoints its last "
                                   "finished step, then stops; `orchestrator start NAME` resumes.")
    add_experiment_args(p, "experiment (default: the only one)")
    p.add_argument("--wait", type=float, default=120.0, metavar="SECONDS",
                   help="how long to wait for the trainer's checkpoint (default 120)")
    p.set_defaults(func=cmd_stop)

    p = sub.add_parser("agents", help="which meta-agent adapters are usable here",
                       description="List the meta-agent adapters (builtin, claude-code, codex, "
                                   "command) and whether each is usable on this machine: its CLI "
                                   "on PATH and credentials found, or what to install. Takes no "
                                   "arguments.")
    p.set_defaults(func=cmd_agents)


def parse_sets(items: list[str], flag: str = "--set") -> dict:
    """`--set KEY=VALUE` items as dotted overrides; VALUE parsed as JSON where it can be."""
    out = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise UserError(f"{flag} {item!r} must look like KEY=VALUE (e.g. data.train_batch_size=4).")
        try:
            out[key] = json.loads(raw)
        except ValueError:
            out[key] = raw
    return out


def _stored(exp_dir: Path, key: str):
    """A value an existing experiment's experiment.json keeps (a fork's control), or None."""
    import json

    try:
        return json.loads((exp_dir / "experiment.json").read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        return None


def _exp_name(args, root: Path) -> str:
    name = experiment_arg(args)
    if name:
        return name
    if not args.bench:
        raise UserError("give --bench B for a new experiment, or --exp NAME to continue one.")
    return f"{args.bench.lower()}-{args.agent}"


# -- start ------------------------------------------------------------------------------------
def cmd_start(args) -> int:
    root = runs_dir(args.runs_dir)
    name = _exp_name(args, root)
    bench = args.bench
    if bench is None:
        meta = root / name / "experiment.json"
        if not meta.exists():
            raise UserError(f"no experiment {name!r} in {root}: give --bench B to create it.")
        bench = Experiment(root / name).meta["bench"]
    if args.max_lag is not None and args.max_lag < 0:
        raise UserError(f"--max-lag {args.max_lag} must be 0 or more (trainer steps a session may fall behind).")
    control = args.control or _stored(root / name, "control") or "intra-run"
    short = args.preset == "cpu"      # the CPU demo runs 8 steps: sessions and windows to match
    every = args.every if args.every is not None else (2 if short else 10)
    window = args.window if args.window is not None else (2 if short else 10)
    opts = StartOptions(bench=bench, agent=args.agent, every=every, minutes=args.minutes,
                        preset=args.preset, steps=args.steps, model=args.model, skill=args.skill,
                        user_mode=args.user_mode, control=control,
                        max_runs=args.max_runs,
                        agent_cmd=shlex.split(args.agent_cmd) if args.agent_cmd else None,
                        session_time_s=60.0 * args.session_minutes, window=window,
                        budget_usd=args.budget_usd, max_lag=args.max_lag,
                        overrides={**parse_sets(args.set), **(
                            {"data.data_dir": str(Path(args.data_dir).expanduser().resolve())}
                            if args.data_dir else {})}, trainer=args.trainer_module,
                        seed_knobs=parse_sets(args.knob, flag="--knob"))
    _check_agent(args.agent, opts.agent_cmd, args.require_agent)
    print(_opening_line(root / name), flush=True)
    stop = threading.Event()
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.set())
    # rich's Live draws nothing until the end when stdout is not a terminal (piped to tee, in
    # CI, to a log file): the demo was 16 minutes of silence there, so print lines instead
    view = LiveView(root / name, enabled=not args.no_live and sys.stdout.isatty())
    try:
        with view:
            exp, final = run_experiment(name, opts, root, stop=stop, on_tick=view.update)
    except KeyboardInterrupt:
        stop.set()
        raise
    finally:
        signal.signal(signal.SIGTERM, previous)
    Console().print(f"experiment {name}: {final} ({', '.join(r['name'] + ' ' + r['state'] for r in exp.runs)}); "
                    f"{prune.disk_bytes(exp.dir) / 2**30:.2f} GiB on disk in {exp.dir}; "
                    f"see `orchestrator log {name}`.", highlight=False)
    return 0 if final in ("finished", "stopped") else 1


def _opening_line(exp_dir: Path) -> str:
    """What `start` does first: create the experiment, or continue it (the run it resumes)."""
    if not (exp_dir / "experiment.json").exists():
        return (f"experiment {exp_dir.name}: creating {exp_dir} (a git workspace seeded from "
                f"the project's workspace/, with the gate's hooks), then its first run.")
    exp = Experiment(exp_dir)
    last = exp.runs[-1] if exp.runs else None
    if last and last.get("state") not in prune.ENDED and prune.whole_checkpoints(exp_dir / last["name"]):
        what = f"{last['name']} resumes from {prune.whole_checkpoints(exp_dir / last['name'])[-1].name}"
    else:
        what = "a run starts"
    return f"experiment {exp_dir.name}: continuing in {exp_dir}; {what}."


class LiveView:
    """Progress over steps, the latest metrics and the last sessions, refreshed every tick; or,
    not enabled, one flushed line per trainer step and one per session and gate verdict."""

    def __init__(self, exp_dir: Path, enabled: bool = True, console: Console | None = None):
        self.exp_dir, self.enabled, self.console = exp_dir, enabled, console
        self.progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                                 TimeElapsedColumn())
        self.task = None
        self.live: Live | None = None
        self.printed: dict[str, int] = {}       # run -> last step printed
        self.seen: dict[str, int] | None = None  # ledger type -> records already printed
        self.t0 = time.time()                    # a trainer's `started` after this is this start's
        self.phase: dict[str, tuple[str, float]] = {}   # run -> (loading|stepping, since)

    def __enter__(self) -> "LiveView":
        if self.enabled:
            self.live = Live(self.progress, refresh_per_second=2, transient=False, console=self.console)
            self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        if self.live is not None:
            self.live.__exit__(*exc)

    def update(self, st: dict) -> None:
        run_dir = self.exp_dir / st["run"]
        if not self.enabled:
            for line in self.startup_lines(st) + self.plain_lines(st):
                print(line, flush=True)
            return
        for line in self.startup_lines(st):
            self.live.console.print(line, highlight=False)
        if self.task is None or self.progress.tasks[self.task].description != st["run"]:
            self.task = self.progress.add_task(st["run"], total=st["total_steps"])
        self.progress.update(self.task, completed=st["step"])
        self.live.update(Group(self.progress, _metrics_table(run_dir), _sessions_table(self.exp_dir, 4)))


    def startup_lines(self, st: dict) -> list[str]:
        """Until a run's first step line: the trainer loading the model and the tasks, then,
        once it writes `started`, the step under way and its rough duration (the CPU demo's
        first line came after a minute of silence)."""
        run = st["run"]
        run_dir = self.exp_dir / run
        if run not in self.phase:
            self.phase[run] = ("loading", time.time())
            return [f"{run}: the trainer is loading the model and the bench's tasks "
                    f"(its log: {run_dir / 'trainer.log'})"]
        phase, since = self.phase[run]
        started = [e for e in diagnostics.read_events(run_dir)
                   if e.get("event") == "started" and e.get("time", 0) >= self.t0]
        if phase != "loading" or not started:
            return []
        self.phase[run] = ("stepping", time.time())
        step = int(started[-1].get("step") or 0) + 1
        rows = diagnostics.read_metrics(run_dir)
        if rows and rows[-1]["step"] >= step:         # its line is there already
            return []
        precision = started[-1].get("precision")
        return [f"{run}: model loaded ({max(0.0, started[-1]['time'] - since):.0f} s"
                f"{', ' + precision if precision else ''}); step {step}/{st['total_steps']} "
                f"under way: {self.step_hint(run_dir)}"]

    def step_hint(self, run_dir: Path) -> str:
        """How long a step takes, roughly: as this experiment's steps took, or what a step of
        this config does and what the CPU demo's took."""
        took = [v for d in sorted(self.exp_dir.glob("run-*"))
                for _, v in diagnostics.metric_series(diagnostics.read_metrics(d), "perf/step_s")]
        if took:
            return f"about {statistics.median(took):.0f} s, as this experiment's steps took"
        try:
            cfg = json.loads((run_dir / "config.json").read_text())
            episodes = cfg["data"]["train_batch_size"] * cfg["rollout"]["n"]
            turns, tokens = cfg["rollout"]["max_turns"], cfg["rollout"]["response_length"]
        except (OSError, ValueError, KeyError, TypeError):
            return "its line comes when it ends"
        return (f"{episodes} episodes of up to {turns} turns of {tokens} tokens, then the update "
                f"({CPU_DEMO_STEP} a step for the CPU demo on an idle 2-core machine, "
                f"seconds on a GPU)")

    def plain_lines(self, st: dict) -> list[str]:
        """The lines not printed yet: each new metrics row of the current run (only the latest
        one when the view starts on a resumed run), then each new session and verdict."""
        run = st["run"]
        rows = diagnostics.read_metrics(self.exp_dir / run)
        if run not in self.printed:
            self.printed[run] = rows[-2]["step"] if len(rows) > 1 else -1
        out = []
        for m in (r for r in rows if r.get("step", -1) > self.printed[run]):
            self.printed[run] = m["step"]
            out.append(f"{run} step {m['step']}/{st['total_steps']}  "
                       f"reward/mean {_num(m.get('reward/mean'))}  "
                       f"success/mean {_num(m.get('success/mean'))}  "
                       f"refused {_num(m.get('episode/invalid_rate'), '.2f')}  "
                       f"step {_num(m.get('perf/step_s'), '.1f')} s  sessions {st['sessions']}"
                       f"{' (one running)' if st['session_running'] else ''}{errors_text(m)}")
        records = {t: ledger.read_lines(self.exp_dir, t) for t in ("session", "verdict")}
        if self.seen is None:            # a continued experiment: its history is in `log`
            self.seen = {t: len(recs) for t, recs in records.items()}
        for s in records["session"][self.seen["session"]:]:
            commits = ", ".join(c[:8] for c in s.get("commits") or []) or "no commits"
            out.append(f"session {s.get('session_id', '?')} ({s.get('agent', '?')}) "
                       f"{s.get('status', '?')} after {s.get('duration_s') or 0:.0f} s: {commits}"
                       f"{'; ' + ledger.session_reason(s, 160) if s.get('reason') else ''}")
        for v in records["verdict"][self.seen["verdict"]:]:
            who = v.get("agent") or str(v.get("author", "?")).split(" <")[0]
            changes = ", ".join(f"{k['path']} {k['old']} -> {k['new']}" for k in v.get("knob_changes") or [])
            reasons = fit(" ".join(v.get("reasons") or []), 200, more="(all of them: orchestrator log)")
            out.append(f"gate {v.get('verdict', '?')} {str(v.get('commit', ''))[:8]} by {who}"
                       f"{': ' + changes if changes else ''}{' (' + reasons + ')' if reasons else ''}")
        self.seen = {t: len(recs) for t, recs in records.items()}
        return out


def _num(value, fmt: str = ".3f") -> str:
    return format(value, fmt) if isinstance(value, (int, float)) else "-"


def _metrics_table(run_dir: Path) -> Table:
    metrics = diagnostics.read_metrics(run_dir)
    t = Table(title=f"{run_dir.name}: latest metrics", show_header=True)
    t.add_column("metric")
    t.add_column("latest", justify="right")
    t.add_column("mean of last 10", justify="right")
    if not metrics:
        return t
    gyms = diagnostics.metric_gyms(metrics)
    names = list(MAIN_METRICS) + ["success/mean"] + [f"success/{g}" for g in gyms] + \
        [f"invalid/{g}" for g in gyms]
    for name in names:
        series = diagnostics.metric_series(metrics, name)
        if series:
            t.add_row(name, f"{series[-1][1]:.4g}", f"{diagnostics.recent_mean(metrics, name, 10):.4g}")
    return t


def _sessions_table(exp_dir: Path, last: int) -> Table:
    t = Table(title="meta-agent sessions", show_header=True)
    for col in ("session", "agent", "status", "commits", "cost $", "s", "reason"):
        t.add_column(col, overflow="fold")      # rich's default ends a long word with "..."
    for s in ledger.read_lines(exp_dir, "session")[-last:]:
        cost = s.get("cost_usd")
        t.add_row(s.get("session_id", "?"), s.get("agent", "?"), s.get("status", "?"),
                  ", ".join(c[:8] for c in s.get("commits") or []) or "-",
                  "-" if cost is None else f"{cost:.4f}", f"{s.get('duration_s', 0):.0f}",
                  ledger.session_reason(s, 160))
    return t


# -- status -----------------------------------------------------------------------------------
def _pick(args) -> Path:
    root = runs_dir(args.runs_dir)
    name = experiment_arg(args) or only_experiment(args.runs_dir)
    if not (root / name / "experiment.json").exists():
        raise UserError(f"no experiment {name!r} in {root}: `orchestrator start --bench B --exp {name}` creates it.")
    return root / name


def cmd_status(args) -> int:
    exp = Experiment(_pick(args))
    console = Console()
    runs = exp.runs
    state = exp.meta.get("state", "?")
    if state == "running" and not pid_alive(exp.meta.get("pid")):
        state = "stopped (the machine or the process stopped; `orchestrator start --exp NAME` resumes)"
    console.print(f"[bold]{exp.dir.name}[/] ({exp.meta['bench']}): {state}; runs {len(runs)}/{exp.cap}; "
                  f"agent {exp.meta.get('agent', '-')}")
    if not runs:
        return 0
    cur = runs[-1]
    run_dir = exp.dir / cur["name"]
    metrics = diagnostics.read_metrics(run_dir)
    step = metrics[-1]["step"] if metrics else 0
    total = _total_steps(run_dir)
    console.print(f"run {cur['name']} ({cur['reason']}, {cur['state']}): step {step}/{total}")
    console.print(_metrics_table(run_dir))
    for f in diagnostics.find_module_errors(metrics, diagnostics.read_episodes(run_dir), 10):
        console.print(f"[bold red]warning:[/] {f.message}", highlight=False)
    live = exp.ws.rev("refs/eau/live")
    pending = [c for c in _main_commits_after(exp, live)]
    console.print(f"live commit {live[:10] if live else '-'}; commits waiting for the gate: {len(pending)}")
    applied = {a["commit"]: a for a in ledger.read_lines(exp.dir, "applied")}
    effects = {e["commit"]: e for e in ledger.read_lines(exp.dir, "effect")}
    t = Table(title="recent interventions")
    for col in ("commit", "by", "verdict", "applied", "effect"):
        t.add_column(col, overflow="fold")
    for v in ledger.read_lines(exp.dir, "verdict")[-6:]:
        a, e = applied.get(v["commit"]), effects.get(v["commit"])
        t.add_row(v["commit"][:10], ledger.author_text(v, short=True), v.get("verdict", "?"),
                  ledger.applied_text(v, [f"{a['run']} step {a['step']}"] if a else [], runs),
                  ledger.effect_text(e) if e else "-")
    console.print(t)
    sessions = ledger.read_lines(exp.dir, "session")
    cost = sum(s.get("cost_usd") or 0.0 for s in sessions)
    console.print(_sessions_table(exp.dir, 8))
    console.print(f"sessions: {len(sessions)}, total cost ${cost:.4f}")
    return 0


def _total_steps(run_dir: Path) -> int:
    try:
        return json.loads((run_dir / "config.json").read_text())["trainer"]["total_steps"]
    except (OSError, ValueError, KeyError):
        return 0


def _main_commits_after(exp: Experiment, live: str | None) -> list[str]:
    if live is None:
        return []
    out = exp.ws.run("rev-list", f"{live}..refs/heads/main", check=False)
    return out.split() if out else []


# -- stop -------------------------------------------------------------------------------------
def cmd_stop(args) -> int:
    exp = Experiment(_pick(args))
    pid = exp.meta.get("pid")
    run = exp.runs[-1]["name"] if exp.runs else None
    trainer_pid = None
    if run and (exp.dir / run / "trainer.pid").exists():
        trainer_pid = (exp.dir / run / "trainer.pid").read_text().strip()
    target = pid if pid_alive(pid) else trainer_pid if pid_alive(trainer_pid) else None
    if target is None:
        print(f"experiment {exp.dir.name} is not running.")
        return 0
    os.kill(int(target), signal.SIGTERM)
    deadline = time.time() + args.wait
    while time.time() < deadline and (pid_alive(target) or pid_alive(trainer_pid)):
        time.sleep(0.5)
    if pid_alive(trainer_pid):
        raise UserError(f"the trainer (pid {trainer_pid}) is still checkpointing after {args.wait:.0f} s: "
                        f"wait, or run `orchestrator stop` again.")
    if run is None:
        print(f"experiment {exp.dir.name} stopped before its first run.")
        return 0
    rows = diagnostics.read_metrics(exp.dir / run)
    ckpts = prune.whole_checkpoints(exp.dir / run)
    print(f"experiment {exp.dir.name} stopped after step {rows[-1]['step'] if rows else 0}/"
          f"{_total_steps(exp.dir / run)} of {run} (checkpoint "
          f"{ckpts[-1].name if ckpts else 'none'}); `orchestrator start --exp {exp.dir.name}` "
          f"resumes it.")
    return 0


def _check_agent(agent: str, agent_cmd: list[str] | None, required: bool) -> None:
    """Say at once when the agent cannot run here: otherwise the first session says so only after
    K trainer steps (over 8 minutes with --preset cpu, at 75-95 s a step)."""
    usable, why = agent_usable(agent, agent_cmd)
    if usable:
        return
    if required:
        raise UserError(f"--agent {agent}: {why}; or drop --require-agent to train without it.")
    print(f"orchestrator: warning: --agent {agent}: {why}; training goes on and each session ends "
          f"as unavailable (--require-agent refuses instead).", file=sys.stderr, flush=True)


# -- agents -----------------------------------------------------------------------------------
def agent_usable(agent: str, agent_cmd: list[str] | None = None) -> tuple[bool, str]:
    """(usable, why) for one adapter, from what this machine has: its CLI (on PATH or installed by
    scripts/install_agent_clis.sh) and credentials where the adapter's CLI needs them."""
    if agent in ("claude-code", "codex"):
        return clis.usable(agent)
    if agent == "command":
        if agent_cmd and shutil.which(agent_cmd[0]) is None:
            return False, f"{agent_cmd[0]} is not an executable on PATH"
        return True, "any executable given with --agent-cmd"
    return True, "offline; always available" if agent == "builtin" else "no meta-agent"


def agent_availability() -> list[tuple[str, bool, str]]:
    """(agent, usable, why) for each adapter, from what this machine has."""
    return [(name, *agent_usable(name)) for name in ("builtin", "claude-code", "codex", "command")]


def cmd_agents(args) -> int:
    """Each adapter: usable or not and why; for the CLIs also the executable, its version beside
    the pinned one, the credentials found and how the adapter's last session ended. Plain lines,
    one fact each (a table of six columns folds every cell on an 80-column terminal)."""
    root = runs_dir(args.runs_dir)
    for name, ok, why in agent_availability():
        if name not in ("claude-code", "codex"):
            print(f"{name}: {'usable' if ok else 'not usable'} ({why})")
            continue
        print(f"{name}: {'usable' if ok else 'not usable'}")
        for key, value in clis.describe(name, root).items():
            print(f"  {key + ':':<14}{value}")
    return 0
