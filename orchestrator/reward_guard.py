"""Switching off a reward module whose calls mostly fail, by a commit the gate judges.

The gate runs a reward module on replayed turns before it accepts it, but a module can pass there
and fail in training: one written to turn hostile after its first calls passed the gate, was
contained by the sandbox, and failed 9 of its 18 calls. Each failed call scores 0 and the trainer
goes on (training.rewards): the run then trains on a reward that is partly missing, which the
trainer itself may not change, since it runs exactly the live workspace tree (DESIGN.md).

The experiment can: `Loop.tick` (orchestrator.experiment) asks `switch_off_failing` between
sessions, which reads the run's `reward/module_errors/<name>` and `reward/module_calls/<name>`
(orchestrator.diagnostics.module_failures) over the steps trained on the live commit, and for a
module that failed at least half of at least MIN_CALLS calls there commits
`reward.modules.<name>.enabled: false` on main as the EAU orchestrator, with the failures in its
`Why:` line. The gate judges that commit like any other, and the trainer applies it at its next
step boundary. Steps trained on an earlier commit do not count: a session's fix of the module
(a new commit) starts the count afresh.
"""
from __future__ import annotations

import json
from pathlib import Path

from orchestrator import diagnostics, gate
from orchestrator.workspace import LIVE_REF, MAIN, ORCHESTRATOR_IDENTITY, Workspace

# At least half of a module's calls failed: half its turns or more already trained without it,
# and nothing says the rest will not follow (the module above failed every call from a set time
# on). Fewer than eight calls say little either way; one step of the CPU demo (4 episodes of
# several agent turns) makes more than that for a module that applies to its gyms.
FAIL_FRAC = 0.5
MIN_CALLS = 8


def failing_modules(run_dir: Path, live: str, window: int) -> list[diagnostics.Finding]:
    """The module_errors findings of the last `window` steps trained on commit `live` whose
    module failed at least FAIL_FRAC of at least MIN_CALLS calls."""
    rows = [r for r in diagnostics.read_metrics(run_dir) if r.get("workspace/commit") == live]
    names = {name for name, rec in diagnostics.module_failures(rows, window).items()
             if rec["calls"] >= MIN_CALLS and rec["errors"] >= FAIL_FRAC * rec["calls"]}
    if not names:                     # the usual case, every tick: no trajectory is read
        return []
    findings = diagnostics.find_module_errors(rows, diagnostics.read_episodes(run_dir), window)
    return [f for f in findings if f.evidence["module"] in names]


def message(f: diagnostics.Finding, run: str) -> str:
    name, errors, calls = f.evidence["module"], f.evidence["errors"], f.evidence["calls"]
    return (f"Switch off reward module {name}: {errors} of its {calls} calls failed\n\n"
            f"Why: in {run}, {f.message[0].lower()}{f.message[1:]} The orchestrator switches "
            f"off a module once at least {FAIL_FRAC:.0%} of its calls on the live commit fail "
            f"(orchestrator/reward_guard.py); fix rewards/{name}.py and enable it again.\n"
            f"Expect: reward/module_errors falls to 0.\n\nEau-Author: orchestrator\n")


def switch_off_failing(exp_dir: Path, ws: Workspace, run_dir: Path, window: int,
                       done: set[str]) -> list[gate.Verdict]:
    """One gate-judged commit per module that mostly fails (and is not in `done`, the modules
    already tried in this run, which it extends); the verdicts of what was judged."""
    live = ws.rev(LIVE_REF)
    if live is None:
        return []
    judged: list[gate.Verdict] = []
    for f in failing_modules(run_dir, live, window):
        name = f.evidence["module"]
        if name in done:
            continue
        done.add(name)
        knobs = json.loads(ws.read_file(MAIN, "knobs.json") or b"{}")
        spec = knobs.get("reward", {}).get("modules", {}).get(name)
        if not isinstance(spec, dict) or spec.get("enabled", True) is False:
            continue                  # already off on main (a session's or a person's commit)
        spec["enabled"] = False
        sha = ws.commit_file("knobs.json", (json.dumps(knobs, indent=2) + "\n").encode(),
                             message(f, run_dir.name), ORCHESTRATOR_IDENTITY)
        if sha is None:               # main moved under us: the next tick tries again
            done.discard(name)
            continue
        judged += [v for v in gate.judge_pending(exp_dir, ws) if v.commit == sha]
    return judged
