"""A stand-in for `python -m training.trainer --run DIR [--resume]` that writes the same files fast.

It follows the trainer's contract (DESIGN.md): metrics.jsonl, events.jsonl (started, applied
{commit, step}, checkpoint, finished), trajectories, checkpoints/step-NNNNNN/ (a `state.json`),
heartbeat; SIGTERM checkpoints and exits 0; --resume continues from the newest checkpoint; the
workspace's refs/eau/live is read at every step boundary, after waiting out a hold
(training/hold.py, `--max-lag`). Its numbers follow the live knobs: a
colbench episode deadlocks while env.colbench.min_questions > 0, so success/colbench is 0 then and
0.6 after; FAKE_TRAINER_NAN_AT=N writes NaN losses from step N; FAKE_TRAINER_CRASH_AT=N exits 1
once at step N. FAKE_TRAINER_STEP_S sets the seconds per step (default 0.05), spent after the
step's line, or before it with FAKE_TRAINER_WORK_FIRST=1: then a SIGTERM during that time ends
the step first, as the real trainer finishes a step whose update is under way."""
import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from training import hold

p = argparse.ArgumentParser()
p.add_argument("--run", required=True)
p.add_argument("--resume", action="store_true")
a = p.parse_args()
run = Path(a.run)
cfg = json.loads((run / "config.json").read_text())
repo = cfg["workspace"]["repo"]
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)


def event(**ev):
    with open(run / "events.jsonl", "a") as fh:
        fh.write(json.dumps({**ev, "time": time.time()}) + "\n")


def live():
    return subprocess.run(["git", "-C", repo, "rev-parse", "refs/eau/live"], capture_output=True,
                          text=True).stdout.strip()


def knobs(commit):
    return json.loads(subprocess.run(["git", "-C", repo, "show", f"{commit}:knobs.json"],
                                     capture_output=True, text=True).stdout)


step, commit = 0, live()
if a.resume:
    ckpts = sorted((run / "checkpoints").glob("step-*"))
    if ckpts:
        state = json.loads((ckpts[-1] / "state.json").read_text())
        step = state["step"]
        with open(run / "metrics.jsonl", "a"):
            pass
        lines = [ln for ln in (run / "metrics.jsonl").read_text().splitlines() if ln.strip()] \
            if (run / "metrics.jsonl").exists() else []
        (run / "metrics.jsonl").write_text("".join(ln + "\n" for ln in lines if json.loads(ln)["step"] <= step))
event(event="started", step=step, commit=commit, resumed=a.resume, pid=os.getpid())
k = knobs(commit)
total, save_freq = cfg["trainer"]["total_steps"], cfg["trainer"]["save_freq"]
step_s = float(os.environ.get("FAKE_TRAINER_STEP_S", "0.05"))


def save(reason):
    d = run / "checkpoints" / f"step-{step:06d}"
    d.mkdir(parents=True, exist_ok=True)
    (d / "state.json").write_text(json.dumps({"step": step, "commit": commit}))
    event(event="checkpoint", step=step, reason=reason)


while step < total and not stop:
    t_hold, held = time.monotonic(), None
    while not stop and (h := hold.blocking(run, step + 1)):
        held = h
        time.sleep(0.05)
    if held:
        event(event="held", step=step + 1, session=held["session"],
              waited_s=round(time.monotonic() - t_hold, 3))
    now = live()
    if now != commit:
        commit, k = now, knobs(now)
        event(event="applied", commit=commit, step=step + 1)
    step += 1
    work_first = os.environ.get("FAKE_TRAINER_WORK_FIRST") == "1"
    if work_first:
        time.sleep(step_s)
    crash_at = os.environ.get("FAKE_TRAINER_CRASH_AT")
    marker = run / ".crashed-once"
    if crash_at and step == int(crash_at) and not marker.exists():
        marker.write_text("x")
        print("simulated crash", file=sys.stderr)
        sys.exit(1)
    deadlock = k["env"]["colbench"]["min_questions"] > 0
    nan = os.environ.get("FAKE_TRAINER_NAN_AT") and step >= int(os.environ["FAKE_TRAINER_NAN_AT"])
    wobble = ((step * 7919) % 13) / 130.0
    row = {"step": step, "success/colbench": (0.0 if deadlock else 0.6) + wobble / 10,
           "reward/mean": (0.0 if deadlock else 0.6) + wobble / 10, "reward/colbench": 0.1,
           "actor/entropy": 1.0 + wobble, "actor/pg_loss": float("nan") if nan else 0.1 + wobble,
           "user/leak_rate": 0.0, "episode/turns": 10.0 if deadlock else 5.0, "workspace/commit": commit,
           "perf/step_s": step_s}
    with open(run / "metrics.jsonl", "a") as fh:
        fh.write(json.dumps(row) + "\n")
    # deadlocked: the answer is written and refused (min_questions); else a question gets a fact
    # disclosed and the answer after it is accepted
    code = "I WANT TO ANSWER: def f(x): return x"

    def turn(n, agent, answered, revealed=()):
        return {"turn": n, "agent": agent, "user": "ok", "reward": 0.0, "revealed_facts": list(revealed),
                "leaked_facts": [], "asked_question": True, "answered": answered, "rule_id": "r",
                "tool_calls": []}
    eps = [{"gym": "colbench", "task_id": f"t{i}", "user_arm": "symbolic", "score": 0.0 if deadlock else 1.0,
            "success": not deadlock, "truncated": deadlock,
            "turns": [turn(1, f"q{i}-{step}? {code}", False)] if deadlock else
            [turn(1, f"q{i}-{step}?", False, ["f1"]), turn(2, code, True)]} for i in range(4)]
    (run / "trajectories").mkdir(exist_ok=True)
    (run / "trajectories" / f"step-{step:06d}.jsonl").write_text("".join(json.dumps(e) + "\n" for e in eps))
    (run / "heartbeat").touch()
    if save_freq and step % save_freq == 0:
        save("save_freq")
    if not work_first:
        time.sleep(step_s)
save("sigterm" if stop else "end")
event(event="finished", step=step, reason="sigterm" if stop else "total_steps")
