"""An experiment: a workspace repository and up to N runs (paper sections 4.6 and 5; DESIGN.md).

`run_experiment` is what `orchestrator start` runs: it starts the trainer (orchestrator.supervisor)
on the current run, starts a meta-agent session every K steps or T minutes (orchestrator.scheduler)
while training goes on, lets the gate judge what sessions commit (the watcher also judges a
person's commits within seconds), measures the effect of every applied commit
(orchestrator.effects), and honours restart/resume requests that an accepted commit put in
`control.json`, up to the cap of runs (default 5, proactive restarts included). Every run starts
from the carried workspace's live commit, tagged `run-NNN-start`.

The experiment's state lives in `experiment.json` (runs, their states, the cap), so
`orchestrator start --exp NAME` after the machine stopped continues it: the unfinished run is
resumed from its newest checkpoint, or a finished one is followed by the next run.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from orchestrator import effects, experience, ledger, prune, reward_guard
from orchestrator.agents import base
from orchestrator.errors import UserError
from orchestrator.paths import project_root
from orchestrator.scheduler import Scheduler, SessionRunner
from orchestrator.supervisor import CRASHED, FINISHED, RESTARTED, STOPPED, Supervisor, has_checkpoint, last_step
from orchestrator.workspace import LIVE_REF, Workspace
from training import hold

DEFAULT_CAP = 5
LLM_AGENTS = ("claude-code", "codex", "command")


@dataclass
class StartOptions:
    """What `orchestrator start` was asked for (one field per flag)."""

    bench: str
    agent: str = "builtin"               # claude-code | codex | builtin | command | none
    every: int | None = 10               # K: a session every K trainer steps
    minutes: float | None = None         # T: or every T minutes
    preset: str | None = None            # cpu | usergym | colbench | tau2 (training.config.PRESETS)
    steps: int | None = None             # trainer.total_steps
    model: str | None = None             # model.path ("" = the packaged SmolLM2)
    skill: str = "eau"                   # eau | generic (the paper's generic meta-agent baseline)
    user_mode: str | None = None         # llm | symbolic | hybrid (table 3's ablation); None: the
                                         # workspace's own mixture
    control: str = "intra-run"           # intra-run: sessions every K steps; inter-run: sessions
                                         # only between runs (the paper's Figure 7 contrast); both
    max_runs: int | None = None          # the cap of runs; None: the experiment's own (5 when new)
    agent_cmd: list[str] | None = None   # the executable of --agent command
    session_time_s: float = 600.0        # wall-clock limit of one session
    budget_usd: float | None = None
    window: int = 10                     # W of measured effects
    max_lag: int | None = None           # the trainer waits for a session N steps after it began
    overrides: dict[str, Any] = field(default_factory=dict)   # dotted config keys
    seed_knobs: dict[str, Any] = field(default_factory=dict)  # a new experiment's starting knobs
    poll_s: float = 1.0
    trainer: str = "training.trainer"    # the trainer's module (tests run a stand-in)


class Experiment:
    """runs/NAME: experiment.json, the workspace, run-NNN folders, the ledger."""

    def __init__(self, exp_dir: Path | str):
        from orchestrator.experiment_init import load_experiment

        self.dir = Path(exp_dir)
        self.meta = load_experiment(self.dir)
        self.ws = Workspace(Path(self.meta.get("workspace") or self.dir / "workspace"))

    @classmethod
    def open_or_create(cls, name: str, bench: str, runs_dir: Path | str, cap: int | None = None,
                       seed_knobs: dict[str, Any] | None = None) -> "Experiment":
        from orchestrator.experiment_init import canonical_bench_name, init_experiment

        exp_dir = Path(runs_dir) / name
        if not (exp_dir / "experiment.json").exists():
            init_experiment(name, bench, runs_dir, seed_knobs=seed_knobs)
        elif seed_knobs:
            raise UserError(f"--knob sets the starting knobs of a new experiment, and {name!r} "
                            f"exists: commit the change to its workspace instead (the gate judges it).")
        exp = cls(exp_dir)
        if bench and canonical_bench_name(bench) != exp.meta["bench"]:
            raise UserError(f"experiment {name!r} trains {exp.meta['bench']}, not {bench}: drop --bench "
                            f"or pick another --exp.")
        if cap is not None:          # else the experiment keeps its own (a fork sets one)
            exp.meta["cap"] = cap
        exp.save()
        return exp

    def save(self) -> None:
        tmp = self.dir / "experiment.json.tmp"
        tmp.write_text(json.dumps(self.meta, indent=2) + "\n")
        os.replace(tmp, self.dir / "experiment.json")

    @property
    def runs(self) -> list[dict[str, Any]]:
        return self.meta.setdefault("runs", [])

    @property
    def pool(self) -> Path:
        """The experience pool its sessions read and add to: the runs folder's (or
        $EAU_EXPERIENCE_DIR), or a fork's own copy (orchestrator/fork.py)."""
        return experience.pool_dir(self.meta.get("experience_dir"), runs_root=self.dir.parent)

    @property
    def cap(self) -> int:
        return int(self.meta.get("cap", DEFAULT_CAP))

    def run_dir(self, name: str) -> Path:
        return self.dir / name

    def set_run_state(self, name: str, state: str, **extra: Any) -> None:
        for r in self.runs:
            if r["name"] == name:
                r.update(state=state, **extra)
        self.save()

    # ---- runs ---------------------------------------------------------------------------
    def new_run(self, opts: StartOptions, reason: str, from_run: str | None = None,
                from_checkpoint: str | None = None) -> Path:
        """Create run-NNN: frozen config.json, the live commit tagged run-NNN-start, and for a
        resume the chosen checkpoint copied in. Refused beyond the cap."""
        if len(self.runs) >= self.cap:
            raise UserError(f"experiment {self.dir.name} has used its cap of {self.cap} runs: "
                            f"raise it with --max-runs or start a new experiment.")
        name = f"run-{len(self.runs) + 1:03d}"
        config = self.config(opts)          # a refused config leaves no run folder behind
        run = self.run_dir(name)
        run.mkdir(parents=True)
        (run / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        if from_run and from_checkpoint:
            # hard links: the copy costs no disk, and slimming the old run below unlinks only
            # its own names (os.link: the run folders share one file system)
            shutil.copytree(self.run_dir(from_run) / "checkpoints" / from_checkpoint,
                            run / "checkpoints" / from_checkpoint, copy_function=os.link)
        live = self.ws.rev(LIVE_REF) or self.ws.main()
        self.ws.tag(f"{name}-start", live)
        self.runs.append({"name": name, "reason": reason, "state": "created", "start_commit": live,
                          "from_run": from_run, "from_checkpoint": from_checkpoint,
                          "created": time.time()})
        self.save()
        prune.slim_ended_runs(self.dir, self.meta)       # no earlier run is resumed again
        return run

    def config(self, opts: StartOptions) -> dict[str, Any]:
        from training.budget import check_start          # tokenizers + jinja2: no torch
        from training.config import ConfigError, resolve   # plain dataclasses: no torch

        over = {"workspace.repo": str(self.ws.path), **opts.overrides}
        if opts.steps is not None:
            over["trainer.total_steps"] = opts.steps
        if opts.model is not None:
            over["model.path"] = opts.model
        live = self.ws.rev(LIVE_REF)        # the knobs the new run's trainer will load
        knobs = self.ws.read_file(live, "knobs.json") if live else None
        try:
            cfg = resolve(self.meta["bench"], opts.preset, over)
            check_start(cfg, self.ws.path, json.loads(knobs) if knobs else None)
            return cfg.to_dict()
        except ConfigError as exc:
            raise UserError(str(exc)) from None

    def pick_run(self, opts: StartOptions) -> tuple[Path, bool]:
        """(run folder, resume?) for a start: continue an unfinished run, else begin the next."""
        if self.runs and self.runs[-1]["state"] not in (FINISHED, "restarted", CRASHED):
            run = self.run_dir(self.runs[-1]["name"])
            if has_checkpoint(run):
                return run, True
            if last_step(run) == 0:
                return run, False           # never trained: start it as it is
            self.set_run_state(run.name, "abandoned", note="no checkpoint to resume from")
        reason = "initial" if not self.runs else "next"
        return self.new_run(opts, reason), False

    # ---- control requests ----------------------------------------------------------------
    def pending_control(self) -> tuple[str, dict[str, Any]] | None:
        """A restart/resume request in the live tree's control.json not yet handled: (key, request).
        Only the live tree counts: the gate has accepted it (DESIGN.md, "Interfaces")."""
        live = self.ws.rev(LIVE_REF)
        if live is None:
            return None
        key = self.ws.run("rev-parse", "-q", "--verify", f"{live}:control.json", check=False)
        if not key:
            return None
        if any(r.get("key") == key for r in ledger.read_lines(self.dir, "control")):
            return None
        try:
            req = json.loads(self.ws.read_file(live, "control.json") or b"{}")
        except ValueError:
            return None
        return key, req


def skill_path(skill: str) -> Path:
    if skill not in ("eau", "generic"):
        raise UserError(f"unknown skill {skill!r}: choose eau or generic.")
    return project_root() / "skills" / skill / "SKILL.md"


class Loop:
    """One `orchestrator start`: trainer, sessions, gate, effects, control requests."""

    def __init__(self, exp: Experiment, opts: StartOptions, stop: threading.Event | None = None,
                 on_tick: Callable[[dict[str, Any]], None] | None = None):
        self.exp, self.opts = exp, opts
        self.stop_event = stop or threading.Event()
        self.on_tick = on_tick
        self.runner = SessionRunner()
        self.sessions = len(ledger.read_lines(exp.dir, "session"))
        self.sup: Supervisor | None = None
        self.run: Path | None = None
        self.sched: Scheduler | None = None
        self.watcher = None
        self.last_session: base.SessionResult | None = None
        self.total_steps = 0
        self.switched_off: dict[str, set[str]] = {}     # run -> reward modules tried (reward_guard)

    def start_run(self, run: Path, resume: bool) -> None:
        self.run = run
        hold.clear(run)             # one a killed orchestrator left behind
        self.sup = Supervisor(run, resume=resume, module=self.opts.trainer).start()
        self.total_steps = json.loads((run / "config.json").read_text())["trainer"]["total_steps"]
        self.exp.set_run_state(run.name, "running", pid=self.sup.proc.pid if self.sup.proc else None)
        self.sched = Scheduler(self.opts.every, self.opts.minutes, last_step=last_step(run))

    def session_ctx(self, step: int | None = None) -> base.SessionContext:
        self.sessions += 1
        sid = f"s{self.sessions:03d}"
        return base.SessionContext(
            agent=self.opts.agent, session_id=sid, exp_dir=self.exp.dir, workspace=self.exp.ws.path,
            run_dir=self.run, bench=self.exp.meta["bench"], skill_path=skill_path(self.opts.skill),
            time_limit_s=self.opts.session_time_s, budget_usd=self.opts.budget_usd,
            window=self.opts.window, command=self.opts.agent_cmd,
            experience_dir=self.exp.pool, step=step)

    def submit_session(self, step: int = 0) -> None:
        from orchestrator import gate

        lock = gate.gate_lock(self.exp.dir) if self.opts.agent in LLM_AGENTS else None

        ctx, run = self.session_ctx(step), self.run
        if self.opts.max_lag is not None:     # bound the lag (training/hold.py)
            hold.write(run, step + self.opts.max_lag, ctx.session_id,
                       timeout_s=self.opts.session_time_s + 120)

        def before() -> None:       # hold the gate until the session's commits carry their trailers
            if lock is not None:
                lock.__enter__()

        def after(res: base.SessionResult) -> None:
            try:
                if lock is not None:
                    lock.__exit__(None, None, None)
                if res.commits:
                    try:
                        gate.judge_pending(self.exp.dir, self.exp.ws)
                    except RuntimeError:
                        pass        # main kept moving: the watcher judges it on its next pass
            finally:
                hold.clear(run)     # judged and promoted: the trainer's next boundary loads it

        self.sched.started()
        self.runner.submit(ctx, before=before, after=after)

    def handle_control(self) -> bool:
        """Honour an accepted control request within the cap; True when a new run started."""
        pending = self.exp.pending_control()
        if pending is None or self.runner.running:
            return False
        key, req = pending
        line = {"type": "control", "key": key, "action": req.get("action"), "why": req.get("why"),
                "from_checkpoint": req.get("from_checkpoint"), "run": self.run.name}
        if len(self.exp.runs) >= self.exp.cap:
            ledger.append_line(self.exp.dir, {**line, "status": "refused",
                                              "reason": f"the cap of {self.exp.cap} runs is reached"})
            return False
        try:        # the live knobs may no longer let an episode succeed: keep the run going
            self.exp.config(self.opts)
        except UserError as exc:
            ledger.append_line(self.exp.dir, {**line, "status": "refused", "reason": str(exc)})
            return False
        self.sup.stop()
        self.exp.set_run_state(self.run.name, "restarted", ended_step=last_step(self.run))
        resume = req.get("action") == "resume" and req.get("from_checkpoint")
        new = self.exp.new_run(self.opts, req.get("action", "restart"), from_run=self.run.name if resume else None,
                               from_checkpoint=req.get("from_checkpoint") if resume else None)
        ledger.append_line(self.exp.dir, {**line, "status": "honoured", "new_run": new.name})
        self.start_run(new, resume=bool(resume))
        return True

    def tick(self) -> str | None:
        """One pass of the loop; returns the final state when the experiment should end."""
        st = self.sup.poll()
        ledger.sync_applied(self.exp.dir)
        effects.update_effects(self.exp.dir, self.run, self.exp.ws.path, self.opts.window)
        res = self.runner.poll()
        if res is not None:
            self.sched.finished(st.step)
            self.last_session = res
        if st.state == RESTARTED:
            ledger.append_line(self.exp.dir, {"type": "control", "action": "crash-restart",
                                              "run": self.run.name, "status": "honoured",
                                              "why": st.reason, "key": f"crash-{time.time()}"})
        if self.handle_control():
            return None
        if st.state == "running" and not self.runner.running:
            # never while a session runs: it may be editing knobs.json, and an LLM agent's
            # session holds the gate until its commits carry their trailers
            reward_guard.switch_off_failing(self.exp.dir, self.exp.ws, self.run, self.opts.window,
                                            self.switched_off.setdefault(self.run.name, set()))
        if self.opts.agent != "none" and self.opts.control != "inter-run" and st.state == "running" \
                and self.sched.due(st.step):
            self.submit_session(st.step)
        if self.on_tick:
            self.on_tick(self.status(st))
        if st.state in (FINISHED, CRASHED, STOPPED):
            self.runner.wait(self.opts.session_time_s + 30)
            ended = self.run.name
            if self.handle_control():       # the last session asked for another run
                return None
            if st.state == FINISHED and self.opts.agent != "none" and self.opts.control != "intra-run" \
                    and len(self.exp.runs) < self.exp.cap:
                if self.review_between_runs(st):
                    return None
                return FINISHED
            self.close_run(final=st.state == FINISHED)
            self.exp.set_run_state(ended, st.state, ended_step=st.step, end_reason=st.reason)
            return st.state
        if self.stop_event.is_set():
            self.sup.stop()
            if self.on_tick:      # a step whose update was under way at SIGTERM ends before the
                self.on_tick(self.status(self.sup.poll()))    # checkpoint: its line too
            self.runner.wait(self.opts.session_time_s + 30)
            self.close_run()
            self.exp.set_run_state(self.run.name, STOPPED, ended_step=last_step(self.run))
            return STOPPED
        return None

    def review_between_runs(self, st) -> bool:
        """The inter-run loop (paper section 5.5, Figure 7's inter-run-only contrast): one session
        reviews the finished run; what it commits (or a restart it asks for) starts the next run
        from the carried workspace, within the cap. A review that changes nothing ends the
        experiment: another run would repeat this one. True when a run started."""
        ended = self.run.name
        self.close_run(final=True)
        self.exp.set_run_state(ended, FINISHED, ended_step=st.step, end_reason=st.reason)
        live_before = self.exp.ws.rev(LIVE_REF)
        self.submit_session(st.step)
        self.runner.wait(self.opts.session_time_s + 30)
        res = self.runner.poll()
        if res is not None:
            self.last_session = res
        if self.exp.pending_control() is not None:
            return self.handle_control()
        line = {"type": "control", "action": "next", "run": ended, "key": f"review-{ended}",
                "why": "the review between runs"}
        if self.exp.ws.rev(LIVE_REF) == live_before:
            ledger.append_line(self.exp.dir, {**line, "status": "refused", "reason":
                                              "the review changed nothing: another run would repeat this one"})
            return False
        try:
            new = self.exp.new_run(self.opts, "next")
        except UserError as exc:
            ledger.append_line(self.exp.dir, {**line, "status": "refused", "reason": str(exc)})
            return False
        ledger.append_line(self.exp.dir, {**line, "status": "honoured", "new_run": new.name})
        self.start_run(new, resume=False)
        return True

    def close_run(self, final: bool = False) -> None:
        """Last measurements of the run; the built-in agent files what they show in the pool.
        final: the run reached its last step (a stopped or crashed run may still be resumed), so
        what cannot be measured now never will be, and is recorded as unmeasured with the reason."""
        ledger.sync_applied(self.exp.dir)
        effects.update_effects(self.exp.dir, self.run, self.exp.ws.path, self.opts.window,
                               final=final)
        if self.opts.agent == "builtin":
            experience.record_effects(self.exp.dir, self.exp.meta["bench"], self.exp.ws.path,
                                      self.exp.pool)

    def status(self, st) -> dict[str, Any]:
        return {"run": self.run.name, "step": st.step, "state": st.state,
                "total_steps": self.total_steps,
                "session_running": self.runner.running, "sessions": self.sessions}

    def __call__(self) -> str:
        from orchestrator.watcher import GateWatcher

        base.kill_leftover_agents(self.exp.dir)     # a killed orchestrator's session CLI
        stop_orphan_trainer(self.exp)
        self.exp.meta.update(state="running", pid=os.getpid(), agent=self.opts.agent,
                             control=self.opts.control)
        self.exp.save()
        self.watcher = GateWatcher(self.exp.dir).start()
        try:
            self.start_run(*self.exp.pick_run(self.opts))
            while True:
                final = self.tick()
                if final is not None:
                    break
                time.sleep(self.opts.poll_s)
            prune.slim_ended_runs(self.exp.dir, self.exp.meta)   # a finished run never resumes
        finally:
            base.kill_active()          # a session CLI must not outlive `start` (Ctrl-C, an error)
            if self.run is not None:
                hold.clear(self.run)
            if self.sup is not None and self.sup.proc is not None and self.sup.proc.poll() is None:
                self.sup.stop()
            self.watcher.stop()
            self.exp.meta.update(state=final if "final" in locals() and final else "stopped", pid=None)
            self.exp.save()
        return final


def stop_orphan_trainer(exp: Experiment, wait_s: float = 120.0) -> int | None:
    """A trainer a killed orchestrator left running on the newest run (its own session, so it
    outlived it) would train beside the resumed one: SIGTERM it (it checkpoints), then SIGKILL."""
    import signal

    if not exp.runs:
        return None
    run = exp.run_dir(exp.runs[-1]["name"])
    try:
        pid = int((run / "trainer.pid").read_text().strip())
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
    except (OSError, ValueError):
        return None
    if str(run) not in cmdline:          # not our trainer (the pid was reused)
        return None
    os.kill(pid, signal.SIGTERM)
    deadline = time.time() + wait_s
    while time.time() < deadline:
        try:
            if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
                break                    # exited (a zombie of the dead orchestrator's)
        except OSError:
            break
        time.sleep(0.2)
    else:
        try:
            os.killpg(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
    return pid


def _pin_strategy_mix(node: Any, gyms: set[str], value: float) -> None:
    """Every `strategy_mix` property of the knobs schema for one of `gyms` gets minimum and
    maximum `value` (narrowing, not widening)."""
    if isinstance(node, dict):
        for key, sub in node.items():
            if (key == "strategy_mix" and isinstance(sub, dict) and "maximum" in sub
                    and gyms & set(sub.get("x-gyms", gyms))):
                sub["minimum"], sub["maximum"] = value, value
            else:
                _pin_strategy_mix(sub, gyms, value)
    elif isinstance(node, list):
        for sub in node:
            _pin_strategy_mix(sub, gyms, value)


# The user modes of the paper's ColBench ablation (table 3): the share of episodes the symbolic
# user answers (user.<gym>.strategy_mix), the LLM user answering the rest
USER_MODES = {"llm": 0.0, "symbolic": 1.0, "hybrid": 0.5}


def pin_user_mode(exp: Experiment, mode: str, subject: str, why: str) -> str:
    """One commit by the orchestrator, judged by the gate like any other, that sets
    user.<gym>.strategy_mix to the mode's share for every gym of the bench and narrows its schema
    to that value, so no session changes the ablation. Once per experiment, before its first run;
    returns the commit."""
    if mode not in USER_MODES:
        raise UserError(f"unknown user mode {mode!r}: choose llm, symbolic or hybrid.")
    pinned = exp.meta.get("user_mode")
    if pinned:
        if pinned["mode"] != mode:
            raise UserError(f"experiment {exp.dir.name} trains with user mode {pinned['mode']}: start "
                            f"the {mode} mode as a new experiment (--exp ANOTHER_NAME).")
        return pinned["commit"]
    if exp.runs:
        raise UserError(f"experiment {exp.dir.name} already ran with its own user mixture: start "
                        f"user mode {mode} as a new experiment (--exp ANOTHER_NAME).")
    value = USER_MODES[mode]
    knobs_path = exp.ws.path / "knobs.json"
    schema_path = exp.ws.path / "schema" / "knobs.schema.json"
    from orchestrator.gate_context import GateContext

    gyms = set(GateContext.for_experiment(exp.dir).bench_gyms())   # the gate refuses the others
    knobs = json.loads(knobs_path.read_text())
    for gym, gym_knobs in knobs.get("user", {}).items():
        if gym in gyms and isinstance(gym_knobs, dict) and "strategy_mix" in gym_knobs:
            gym_knobs["strategy_mix"] = value
    schema = json.loads(schema_path.read_text())
    _pin_strategy_mix(schema, gyms, value)
    knobs_path.write_text(json.dumps(knobs, indent=2) + "\n")
    schema_path.write_text(json.dumps(schema, indent=2) + "\n")
    from orchestrator import gate
    from orchestrator.workspace import ORCHESTRATOR_IDENTITY, GitError

    try:
        sha = exp.ws.commit_all(
            f"{subject}\n\nWhy: {why} user.<gym>.strategy_mix is {value} for every gym and its "
            f"schema range is narrowed to {value}.\nExpect: user/symbolic_frac near {value}.\n\n"
            "Eau-Author: human\n", ORCHESTRATOR_IDENTITY)
    except GitError as exc:
        exp.ws.run("checkout", "--", "knobs.json", "schema/knobs.schema.json", check=False)
        raise UserError(f"the user mode's workspace commit was refused: {exc}") from None

    gate.judge_pending(exp.dir, exp.ws)     # (the post-commit hook may have judged it already)
    verdict = gate.judged_verdict(exp.ws, sha)
    if verdict is None or verdict.get("verdict") != "accepted":
        reasons = "; ".join(verdict.get("reasons") or []) if verdict is not None else "not judged"
        raise UserError(f"the user mode's workspace commit was refused by the gate: {reasons}")
    exp.meta["user_mode"] = {"mode": mode, "commit": sha}
    exp.save()
    return sha


def pin_generic_baseline(exp: Experiment) -> None:
    """The generic meta-agent baseline (paper section 5.4, table 4; skills/generic/PROMPT.md) has no
    symbolic user: user mode llm, pinned (pin_user_mode). Done once per experiment, before its
    first run."""
    if exp.meta.get("generic_pinned"):
        return
    if exp.runs:
        raise UserError(f"experiment {exp.dir.name} already ran with the EAU skill: start the "
                        "generic baseline as a new experiment (--exp ANOTHER_NAME).")
    exp.meta["generic_pinned"] = pin_user_mode(
        exp, "llm", "Generic meta-agent baseline: no symbolic user",
        "the generic baseline of paper table 4 trains against the LLM user alone;")
    exp.save()


def user_mode_overrides(opts: StartOptions) -> dict[str, Any]:
    """The config the user mode needs: an LLM user in training wherever the LLM arm answers (the
    frozen reference policy, rollout.user_llm reference), unless the person chose one."""
    mode = "llm" if opts.skill == "generic" else opts.user_mode
    chosen = opts.overrides.get("rollout.user_llm")
    if mode is None:
        return {}
    if mode == "symbolic":
        # the bench presets load an LLM user (config.GPU_USER_LLM); with every strategy_mix pinned
        # to 1 it would never answer, so it is not loaded, unless the person asked for one
        return {} if chosen else {"rollout.user_llm": "none"}
    if chosen == "none":
        raise UserError(f"user mode {mode} needs an LLM user in training, but --set "
                        f"rollout.user_llm=none removes it: drop that --set.")
    return {} if chosen else {"rollout.user_llm": "reference"}


def run_experiment(name: str, opts: StartOptions, runs_dir: Path | str,
                   stop: threading.Event | None = None,
                   on_tick: Callable[[dict[str, Any]], None] | None = None) -> tuple[Experiment, str]:
    """Create or continue experiment `name` and run it until its run finishes, crashes or is stopped."""
    if opts.agent not in ("claude-code", "codex", "builtin", "command", "none"):
        raise UserError(f"unknown agent {opts.agent!r}: choose claude-code, codex, builtin, command or none.")
    if opts.agent == "command" and not opts.agent_cmd:
        raise UserError("--agent command needs --agent-cmd \"PROGRAM ARGS\".")
    if opts.skill == "generic" and opts.user_mode not in (None, "llm"):
        raise UserError(f"--skill generic trains against the LLM user alone: drop --user-mode "
                        f"{opts.user_mode}.")
    if opts.control not in ("intra-run", "inter-run", "both"):
        raise UserError(f"unknown control {opts.control!r}: choose intra-run, inter-run or both.")
    if opts.user_mode is not None and opts.user_mode not in USER_MODES:
        raise UserError(f"unknown user mode {opts.user_mode!r}: choose llm, symbolic or hybrid.")
    opts = dataclasses.replace(opts, overrides={**user_mode_overrides(opts), **opts.overrides})
    exp = Experiment.open_or_create(name, opts.bench, runs_dir, opts.max_runs, opts.seed_knobs)
    if opts.skill == "generic":
        pin_generic_baseline(exp)
    elif opts.user_mode is not None:
        pin_user_mode(exp, opts.user_mode, f"User mode {opts.user_mode} (the user ablation)",
                      f"paper table 3 compares LLM, symbolic and hybrid users;")
    final = Loop(exp, opts, stop, on_tick)()
    return exp, final
