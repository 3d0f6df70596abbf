#!/usr/bin/env python3
"""Replay a change on the run's recent trajectories before committing it (JSON).

Usage: replay.py RUN_DIR --module rewards/NAME.py            what the module would pay, per gym
       replay.py RUN_DIR --workspace WS --bench B --knob user.G.K=V [--knob ...]
                                                              what the symbolic user would disclose
A thin CLI over orchestrator.replay (the built-in agent and the gate run the same code). A module
that pays nothing in the gym your Expect line names is refused by the gate; easier disclosure
that discloses nothing more cannot help."""
import argparse
import copy
import json
from pathlib import Path

import _common  # noqa: F401

from orchestrator import diagnostics, replay

p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
p.add_argument("run_dir")
p.add_argument("--module", help="a reward module's source file")
p.add_argument("--workspace", help="the experiment's workspace (for --knob: its rules and knobs)")
p.add_argument("--bench", help="usergym, colbench or tau2 (for --knob)")
p.add_argument("--knob", action="append", default=[], help="user.<gym>.<knob>=<JSON value>")
a = p.parse_args()
episodes = replay.recent_episodes(a.run_dir)
out: dict = {"episodes": len(episodes)}
if a.module:
    pay, err = replay.module_pay(Path(a.module).read_text(), episodes)
    out["module"] = {"error": err} if err else {g: {**vars(v), "pays": v.pays} for g, v in pay.items()}
if a.knob:
    if not (a.workspace and a.bench):
        p.error("--knob needs --workspace and --bench.")
    knobs, _ = diagnostics.load_workspace_knobs(a.workspace)
    after = copy.deepcopy(knobs)
    for item in a.knob:
        path, _, value = item.partition("=")
        diagnostics.set_path(after, path, json.loads(value))
    rules = replay.load_rules(a.workspace, a.bench)
    out["user"] = {name: {"before": replay.user_disclosures(a.bench, rules, knobs["user"], episodes, name),
                          "after": replay.user_disclosures(a.bench, rules, after["user"], episodes, name)}
                   for name in ("disclosed", "known")}
print(json.dumps(out, indent=1))
