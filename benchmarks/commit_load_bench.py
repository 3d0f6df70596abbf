"""Commit load: a meta-agent commits 200 times in a minute while a person
commits too, with the gate watcher judging and the real trainer hot-reloading, and then checks
that every commit was judged once, in order, that none was lost, that the live ref never pointed
at an unjudged commit, and how much the trainer's step time moved.

    .venv/bin/python benchmarks/commit_load_bench.py [--commits 200] [--seconds 60]
        [--person-every 3] [--quiet-s 90] [--rounds 2] [--threads 1] [--max-load-s 300]
        [--plumbing] [--set KEY=JSON]
        [--out benchmarks/RESULTS-commit-load.md]

Phases alternate, quiet/load/quiet/load/quiet for --rounds 2, so that other work on a shared
machine hits both kinds alike: a quiet phase is the trainer alone for --quiet-s; a load phase is
the agent's --commits over --seconds plus the person's, and lasts until the gate has judged them
all. The trainer is the tiny model on ColBench with the CPU preset's rollout (6 turns x 128
tokens; the figures in RESULTS-commit-load.md were taken at 3 x 32, a ~5 s step here, before
ColBench got turns that can hold an answer) and a batch of 4 tasks, on --threads 1 (the other core left to
everything else; --threads 2 is the preset's: every core), hot reloading the experiment's
workspace. Step time is both the wall time between consecutive metrics.jsonl lines (it includes
the hot reloads) and the trainer's own perf/step_s, counted for steps that start and end inside
one phase; medians per phase, pooled per kind, and each load phase against the quiet phases
beside it. Per phase: loadavg, and the CPUs' worth used by the trainer (with its workers), by the
load (this process's tree less the trainer: committers, hooks, gate), by other work on the
machine, idle and steal (/proc).

Committers work as two separate tools would: each in its own linked worktree of the workspace,
`git commit` on a detached HEAD at main (the workspace's pre-commit and commit-msg hooks run),
then main moved by compare-and-swap (git update-ref main NEW OLD), redone when the other (or the
gate's revert) moved it first. The agent's thread lowers its priority the way a session's thread
does in `orchestrator start` (nice 19 by default, orchestrator/priority.py;
EAU_BACKGROUND_PRIORITY=idle for SCHED_IDLE, off to compare) and stops after --max-load-s if the CPU it gets does not let it keep pace; the
person's commits run at normal priority (the hooks lower themselves to nice 19), the gate
watcher at nice 19. Every 25th agent commit breaks the entropy delta and skips the hooks
(`--no-verify`): the gate must reject and revert it. --plumbing commits with commit-tree instead
(no hooks, no worktree). The process exits non-zero when an invariant fails.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from orchestrator import gate, ledger, priority  # noqa: E402
from orchestrator.experiment_init import init_experiment  # noqa: E402
from orchestrator.supervisor import Supervisor  # noqa: E402
from orchestrator.watcher import GateWatcher  # noqa: E402
from orchestrator.workspace import LIVE_REF, MAIN, Workspace, identity_env  # noqa: E402
from training import live  # noqa: E402

AGENT = ("claude (s-load)", "claude-s-load@agents.eau")
PERSON = ("Pat Person", "pat@example.org")


class Committer:
    """One tool committing knob changes to the workspace's main from its own worktree."""

    def __init__(self, ws: Workspace, name: str, identity: tuple[str, str], hooks: bool):
        self.ws, self.identity, self.hooks = ws, identity, hooks
        self.refused = 0                # commits the hooks refused as built on a bad one, redone
        self.dir = Path(tempfile.mkdtemp(prefix=f"eau-load-{name}-")) / "wt"
        if hooks:
            ws.run("worktree", "add", "-q", "--detach", str(self.dir), MAIN)

    def _main_moves(self, head: str, timeout_s: float = 600.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.ws.main() != head:
                return True
            time.sleep(0.2)
        return False

    def git(self, *args: str, check: bool = True) -> subprocess.CompletedProcess:
        env = {**os.environ, **identity_env(*self.identity)}
        return subprocess.run(["git", *args], cwd=self.dir, env=env, capture_output=True,
                              text=True, check=check)

    def commit_knob(self, path: tuple[str, str], value, message: str, verify: bool = True) -> str:
        """A commit on top of the current main changing one knob; main moved by compare-and-swap."""
        while True:
            head = self.ws.main()
            knobs = json.loads(self.ws.read_file(head, "knobs.json"))
            knobs[path[0]][path[1]] = value
            text = json.dumps(knobs, indent=2) + "\n"
            if self.hooks:
                self.git("reset", "-q", "--hard", head)
                (self.dir / "knobs.json").write_text(text)
                done = self.git("commit", "-q", "-a", "--allow-empty", "-m", message,
                                *([] if verify else ["--no-verify"]), check=False)
                if done.returncode != 0:
                    # main holds a bad commit the gate has not reverted yet: the hook measures
                    # this change from it and refuses; redo it once the gate has moved main
                    if not self._main_moves(head):
                        raise RuntimeError(f"git commit refused: "
                                           f"{(done.stderr + done.stdout).strip()[-500:]}")
                    self.refused += 1
                    continue
                sha = self.git("rev-parse", "HEAD").stdout.strip()
            else:
                sha = self._plumbing(head, text, message)
            if self.ws.set_ref(MAIN, sha, head):
                return sha

    def _plumbing(self, head: str, text: str, message: str) -> str:
        blob = self.ws.run("hash-object", "-w", "--stdin", input=text)
        with tempfile.TemporaryDirectory() as tmp:
            env = {"GIT_INDEX_FILE": str(Path(tmp) / "index")}
            self.ws.run("read-tree", head, env=env)
            self.ws.run("update-index", "--cacheinfo", f"100644,{blob},knobs.json", env=env)
            tree = self.ws.run("write-tree", env=env)
        return self.ws.commit_tree(tree, head, message, self.identity)


def agent_loop(c: Committer, n: int, seconds: float, made: list, stop: threading.Event,
               round_no: int, max_s: float):
    priority.lower_this_thread()        # as a session's thread in `orchestrator start`
    t0 = time.monotonic()
    for i in range(n):
        if time.monotonic() - t0 > max_s:
            break                       # the CPU it got did not allow more: reported as made
        bad = i % 25 == 24
        value = 0.5 if bad else (0.002 if i % 2 else 0.001)
        msg = (f"entropy {value} ({round_no}.{i})\n\nWhy: load test.\nExpect: the gate judges it.\n\n"
               f"Eau-Agent: claude\nEau-Session: s-load\n")
        made.append(("agent", c.commit_knob(("agent", "entropy_coeff"), value, msg, verify=not bad),
                     bad))
        wait = t0 + (i + 1) * seconds / n - time.monotonic()
        if wait > 0:
            time.sleep(wait)
    stop.set()


def person_loop(c: Committer, every: float, made: list, stop: threading.Event, round_no: int):
    i = 0
    while not stop.wait(every):
        value = 0.002 if i % 2 else 0.001
        msg = f"kl {value} ({round_no}.{i})\n\nWhy: a person's tweak.\nExpect: the gate judges it.\n"
        made.append(("person", c.commit_knob(("agent", "kl_loss_coef"), value, msg), False))
        i += 1


def live_monitor(ws_path: Path, seen: set, stop: threading.Event):
    """Every value the live ref takes, read from the ref files (no git process, idle priority)."""
    priority.lower_this_thread()
    gdir = live.git_dir(ws_path)
    while not stop.is_set():
        seen.add(live.read_ref(gdir, LIVE_REF))
        time.sleep(0.05)


def tree_cpu(root_pid: int) -> float:
    """CPU seconds used so far by a process and its descendants, the ended ones included (each
    live process's own time plus that of the children it reaped), from /proc."""
    tick = os.sysconf("SC_CLK_TCK")
    stats: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                f = (d / "stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            stats[int(d.name)] = (int(f[1]), sum(map(float, f[11:15])) / tick)
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in stats.items():
        children.setdefault(ppid, []).append(pid)
    total, todo = 0.0, [root_pid]
    while todo:
        pid = todo.pop()
        total += stats.get(pid, (0, 0.0))[1]
        todo += children.get(pid, [])
    return total


def cpu_times() -> dict[str, float]:
    """The machine's CPU time so far (seconds, all CPUs): busy, idle, steal (/proc/stat)."""
    try:
        f = [float(x) / os.sysconf("SC_CLK_TCK") for x in
             Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    except (OSError, ValueError, IndexError):
        return {}
    return {"busy": sum(f[:3]) + sum(f[5:7]), "idle": f[3] + f[4], "steal": f[7] if len(f) > 7 else 0.0}


def metric_rows(run: Path) -> list[dict]:
    rows = []
    if (run / "metrics.jsonl").exists():
        for line in (run / "metrics.jsonl").read_text().splitlines():
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    return rows


def step_times(rows: list[dict], t_from: float, t_to: float) -> tuple[list[float], list[float]]:
    """(wall time between consecutive metric lines, perf/step_s) of the steps that started and
    ended within [t_from, t_to)."""
    walls, own = [], []
    for a, b in zip(rows, rows[1:]):
        if t_from <= a["time"] and b["time"] < t_to:
            walls.append(b["time"] - a["time"])
            own.append(b["perf/step_s"])
    return walls, own


def check(exp: Path, ws: Workspace, made: list, live_seen: set) -> list[str]:
    """The invariants; returns the failures."""
    failures = []
    verdicts = ledger.read_lines(exp, "verdict")
    counts: dict[str, int] = {}
    for v in verdicts:
        counts[v["commit"]] = counts.get(v["commit"], 0) + 1
    history = ws.first_parent_history()[::-1]
    index = {sha: i for i, sha in enumerate(history)}
    for who, sha, bad in made:
        if sha not in index:
            failures.append(f"{who} commit {sha[:10]} is not on main's first-parent history (lost)")
        if counts.get(sha, 0) != 1:
            failures.append(f"{who} commit {sha[:10]} judged {counts.get(sha, 0)} times")
        v = next((x for x in verdicts if x["commit"] == sha), None)
        stale = v is not None and any("does not apply on the live tree" in r for r in v["reasons"])
        if v is not None and (v["verdict"] == "rejected") != bad and not stale:
            failures.append(f"{who} commit {sha[:10]}: verdict {v['verdict']} (expected "
                            f"{'rejected' if bad else 'accepted'}): {v['reasons'][:1]}")
    order = [index[v["commit"]] for v in verdicts if v["commit"] in index]
    if order != sorted(order):
        failures.append("verdicts are not in main's order")
    for sha in live_seen - {None}:
        note = gate.judged_verdict(ws, sha)
        if not note or note.get("verdict") != "accepted":
            failures.append(f"live pointed at {sha[:10]}, which the gate had not accepted")
    return failures


def med(xs: list[float]) -> float | None:
    xs = [x for x in xs if x is not None]
    return round(statistics.median(xs), 3) if xs else None


def change(new: float | None, base: float | None) -> float | None:
    return round(new / base - 1, 4) if new and base else None


def guarded(fn, errors: list, stop: threading.Event):
    """A committer thread: its exception is an invariant failure, and stops the other one."""
    def run(*args):
        try:
            fn(*args)
        except Exception as exc:
            errors.append(f"{fn.__name__}: {type(exc).__name__}: {exc}")
        finally:
            stop.set()
    return run


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commits", type=int, default=200)
    p.add_argument("--seconds", type=float, default=60.0)
    p.add_argument("--person-every", type=float, default=3.0)
    p.add_argument("--quiet-s", type=float, default=90.0)
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--threads", type=int, default=1,
                   help="trainer.threads (1: a core of this 2-core machine left to the rest)")
    p.add_argument("--max-load-s", type=float, default=300.0,
                   help="the agent stops committing after this long (when it cannot keep pace)")
    p.add_argument("--catch-up-s", type=float, default=300.0,
                   help="longest wait for the gate to judge a load phase's commits")
    p.add_argument("--plumbing", action="store_true", help="commit-tree, no hooks (as before)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=JSON",
                   help="more trainer config overrides (default: data.train_batch_size=4, a ~5 s "
                        "step on this machine)")
    p.add_argument("--out", default=str(ROOT / "benchmarks" / "RESULTS-commit-load.md"))
    a = p.parse_args(argv)

    from training.config import resolve
    from training.smollm2 import tiny_model_dir

    tmp = Path(tempfile.mkdtemp(prefix="eau-commit-load-"))
    exp = init_experiment("load", "colbench", tmp / "runs")
    ws = gate.open_experiment_workspace(exp)
    run = exp / "run-001"
    run.mkdir()
    overrides = {"model.path": str(tiny_model_dir()), "workspace.repo": str(ws.path),
                 "trainer.total_steps": 100_000, "trainer.save_freq": 0,
                 "trainer.threads": a.threads, "workspace.poll_s": 0.5, "data.train_batch_size": 4}
    for item in a.set:
        key, _, value = item.partition("=")
        overrides[key] = json.loads(value)
    cfg = resolve("colbench", "cpu", overrides)
    (run / "config.json").write_text(json.dumps(cfg.to_dict(), indent=1))
    sup = Supervisor(run, stall_s=600).start()
    watcher = GateWatcher(exp, poll_s=0.5).start()
    agent = Committer(ws, "agent", AGENT, hooks=not a.plumbing)
    person = Committer(ws, "person", PERSON, hooks=not a.plumbing)
    made: list = []
    errors: list[str] = []
    live_seen: set = set()
    phases: list[dict] = []
    stop_mon = threading.Event()
    mon = threading.Thread(target=live_monitor, args=(ws.path, live_seen, stop_mon), daemon=True)

    def load(round_no: int) -> dict:
        n0 = len(made)
        t0 = time.time()
        stop = threading.Event()
        threads = [threading.Thread(target=guarded(agent_loop, errors, stop),
                                    args=(agent, a.commits, a.seconds, made, stop, round_no,
                                          a.max_load_s)),
                   threading.Thread(target=guarded(person_loop, errors, stop),
                                    args=(person, a.person_every, made, stop, round_no))]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        t1 = time.time()
        deadline = t1 + a.catch_up_s                   # the phase lasts until all are judged
        while gate.pending_commits(Workspace(ws.path)) and time.time() < deadline:
            time.sleep(1.0)
        mine = made[n0:]
        return {"commits": {"agent": sum(w == "agent" for w, _, _ in mine),
                            "person": sum(w == "person" for w, _, _ in mine)},
                "commits_s": round(t1 - t0, 1), "gate_behind_at_end_s": round(time.time() - t1, 1)}

    def phase(kind: str, body) -> None:
        t0, c0, l0 = time.time(), cpu_times(), os.getloadavg()[0]
        ours0, trainer0 = tree_cpu(os.getpid()), tree_cpu(sup.proc.pid)
        extra = body() or {}
        t1, c1 = time.time(), cpu_times()
        ours, trainer = tree_cpu(os.getpid()) - ours0, tree_cpu(sup.proc.pid) - trainer0
        cpu = {k: (c1[k] - c0[k]) / (t1 - t0) for k in c0}      # CPUs' worth
        phases.append({"kind": kind, "t0": t0, "t1": t1, "seconds": round(t1 - t0, 1),
                       "loadavg_1m": [round(l0, 2), round(os.getloadavg()[0], 2)],
                       # CPUs' worth over the phase: the trainer (and its workers), the rest of
                       # this benchmark (committers, hooks, gate), everything else on the machine
                       "cpus": {"trainer": round(trainer / (t1 - t0), 2),
                                "load": round((ours - trainer) / (t1 - t0), 2),
                                "other_work": round(cpu.get("busy", 0) - ours / (t1 - t0), 2),
                                "idle": round(cpu.get("idle", 0), 2),
                                "steal": round(cpu.get("steal", 0), 2)},
                       **extra})
        print(f"{kind}: {phases[-1]['seconds']} s {extra}", file=sys.stderr, flush=True)

    try:
        while len(metric_rows(run)) < 3:                      # warm up: model loaded, steps going
            if sup.proc.poll() is not None:
                raise SystemExit(f"the trainer exited: {(run / 'trainer.log').read_text()[-2000:]}")
            time.sleep(1)
        mon.start()
        for r in range(a.rounds):
            phase("quiet", lambda: time.sleep(a.quiet_s))
            phase("load", lambda r=r: load(r))
        phase("quiet", lambda: time.sleep(a.quiet_s))
    finally:
        stop_mon.set()
        watcher.stop()
        sup.stop(timeout_s=120)
    gate.judge_pending(exp)                                   # anything the watcher left
    failures = errors + check(exp, Workspace(ws.path), made, live_seen)
    rows = metric_rows(run)
    applied = [e["time"] for e in map(json.loads, (run / "events.jsonl").read_text().splitlines())
               if e.get("event") == "applied"]
    pooled: dict[str, tuple[list, list]] = {"quiet": ([], []), "load": ([], [])}
    t_start = phases[0]["t0"]
    for ph in phases:
        walls, own = step_times(rows, ph["t0"], ph["t1"])
        pooled[ph["kind"]][0].extend(walls)
        pooled[ph["kind"]][1].extend(own)
        ph.update(steps=len(walls), step_wall_s_median=med(walls), step_perf_s_median=med(own),
                  hot_reloads=sum(ph["t0"] <= t < ph["t1"] for t in applied),
                  starts_at_s=round(ph.pop("t0") - t_start, 1))
        ph.pop("t1")
    rounds = []
    for i in range(1, len(phases) - 1, 2):
        before, load_ph, after = phases[i - 1], phases[i], phases[i + 1]
        rounds.append({k: change(load_ph[f"step_{k}_s_median"],
                                 med([before[f"step_{k}_s_median"], after[f"step_{k}_s_median"]]))
                       for k in ("wall", "perf")})
    wall = {k: med(v[0]) for k, v in pooled.items()}
    perf = {k: med(v[1]) for k, v in pooled.items()}
    result = {
        "trainer": {"model": "tiny (2 layers, 64 wide)", "bench": "colbench", "preset": "cpu",
                    "threads": a.threads, "overrides": {k: v for k, v in overrides.items()
                                                        if k not in ("model.path", "workspace.repo")},
                    "rollout": f"{cfg.rollout.max_turns} turns x "
                    f"{cfg.rollout.response_length} tokens, batch {cfg.data.train_batch_size} x n "
                    f"{cfg.rollout.n}"},
        "background_priority": priority.mode() if priority.supported() else "unsupported",
        "commits_via": "commit-tree (no hooks)" if a.plumbing else "git commit in a worktree (hooks run)",
        "redone_after_a_hook_refusal": agent.refused + person.refused,
        "commits": {"agent": sum(w == "agent" for w, _, _ in made),
                    "person": sum(w == "person" for w, _, _ in made),
                    "meant_to_be_rejected": sum(b for _, _, b in made),
                    # built on a rejected commit before the gate reverted it: refused, by design
                    "rejected_as_built_on_a_rejected_one": sum(
                        any("does not apply on the live tree" in r for r in v["reasons"])
                        for v in ledger.read_lines(exp, "verdict"))},
        "phases": phases,
        "step_wall_s_median": wall,
        "step_perf_s_median": perf,
        "steps": {k: len(v[0]) for k, v in pooled.items()},
        "step_wall_change": change(wall["load"], wall["quiet"]),
        "step_perf_change": change(perf["load"], perf["quiet"]),
        "per_round_change_vs_quiet_beside": rounds,
        "gate_watcher_errors": watcher.errors[:5],
        "failures": failures,
    }
    text = json.dumps(result, indent=1)
    print(text)
    args = " ".join(argv if argv is not None else sys.argv[1:])
    Path(a.out).write_text(
        "# Commit load (issue 9, item 7)\n\n"
        f"`.venv/bin/python benchmarks/commit_load_bench.py {args}` on "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())} (this 2-core machine, shared):\n\n"
        f"```json\n{text}\n```\n")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
