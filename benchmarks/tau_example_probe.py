"""Which worked example leads the untrained policy to identify TauGym's user: the shipped one
(`shipped`), the built-in agent's step example (orchestrator/agents/remedies.py `_TAU_IDENTIFY`)
shown first (`step`), or it and the same exchange with another customer shown second (`two`,
`SECOND_EXAMPLES`), with the symbolic user telling `--facts-per-reply` facts a reply.

    python benchmarks/tau_example_probe.py                      # CPU: about 7 min a variant
    python benchmarks/tau_example_probe.py --variants shipped,step --episodes 30 --device cuda

Why: in the H100 run of 2026-12-07 no tau episode of PPO or EAU ever called
find_user_id_by_name_zip (`took/tau/identify` 0 at all 24 steps). The shipped example stops at
"[search] tools", and the agent's step example of that day was taken back after one window
without effect. The walled evaluation reads only the project's own workspace, so each variant
runs in a copy of the project's tracked files whose workspace is edited. Nothing is written
into the source tree. Then `orchestrator eval --model default --gyms tau` runs on the held-out
tau tasks.

It prints per variant the episodes that asked for the zip code (an `[action]` naming it), that
were told it, that wrote an "[answer] {...}" tool call, that named find_user_id_by_name_zip in
one, that called with the shown examples' own values which their user never told (the example's
customer: 69 of 91 calling episodes did in the H100 runs of 2026-12-07), and that identified the
user (training/steps.py: a call that found the user, what `took/tau/identify` counts).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

import example_probe  # noqa: E402

VARIANTS = ("shipped", "step", "two")


def edit_workspace(copy: Path, variant: str, facts_per_reply: int) -> None:
    from orchestrator.agents import remedies

    knobs_file = copy / "workspace" / "knobs.json"
    knobs = json.loads(knobs_file.read_text())
    knobs["user"]["tau"]["facts_per_reply"] = facts_per_reply
    demos_file = copy / "workspace" / "demonstrations" / "usergym.json"
    demos = json.loads(demos_file.read_text())
    if variant in ("step", "two"):  # as the built-in agent puts it: first among tau's examples
        remedies.step_example_first(demos, "tau", "identify", 1)
    if variant == "two":            # and the second customer's, shown second
        demos["tau"].insert(1, remedies.SECOND_EXAMPLES[("tau", "identify")])
        knobs["env"]["tau"]["demonstrations"] = 2
    knobs_file.write_text(json.dumps(knobs, indent=2) + "\n")
    demos_file.write_text(json.dumps(demos, indent=2, ensure_ascii=False) + "\n")


def example_values(copy: Path) -> set[str]:
    """The argument values of the tool calls in the tau examples the policy is shown (what the
    diagnosis's copied_example finding looks for, orchestrator/progress_findings.py)."""
    from orchestrator.progress_findings import call_values

    shown = json.loads((copy / "workspace" / "knobs.json").read_text())["env"]["tau"]["demonstrations"]
    demos = json.loads((copy / "workspace" / "demonstrations" / "usergym.json").read_text())["tau"]
    return set(call_values(demos[:shown]))


def counts(episodes_file: Path, copied: set[str]) -> dict[str, int]:
    """Episodes that did each thing; `copied`: the shown examples' call arguments, which a call
    of this episode carries though its user never said them (the example's customer)."""
    from training import steps

    eps = [json.loads(line) for line in episodes_file.read_text().splitlines() if line.strip()]

    def copies(ep):
        said = " ".join(str(t.get("user") or "") for t in ep.get("turns") or [])
        return any(agent(t).startswith("[answer]") and f'"{v}"' in agent(t) and v not in said
                   for t in ep.get("turns") or [] for v in copied)

    def any_turn(ep, pred):
        return any(pred(t) for t in ep.get("turns") or [])

    agent = lambda t: (t.get("agent") or "").strip()          # noqa: E731
    return {
        "episodes": len(eps),
        # a question to the user that names the zip code (a tool call's "zip" argument is not one)
        "asked zip": sum(any_turn(e, lambda t: agent(t).startswith("[action]")
                                  and "zip" in agent(t).lower()) for e in eps),
        "told zip": sum(any_turn(e, lambda t: "zip code is" in (t.get("user") or "").lower())
                        for e in eps),
        "tool call": sum(any_turn(e, lambda t: agent(t).startswith("[answer] {")) for e in eps),
        "named find_user_id": sum(any_turn(e, lambda t: agent(t).startswith("[answer]") and
                                           "find_user_id_by_name_zip" in agent(t)) for e in eps),
        "copied the example's values": sum(copies(e) for e in eps),
        "identified": sum("identify" in steps.taken("tau", e.get("turns") or []) for e in eps),
    }


def main() -> int:
    p = example_probe.parser(__doc__, VARIANTS, "tau", max_turns=8)
    p.add_argument("--facts-per-reply", type=int, default=2)
    a = p.parse_args()
    rows = example_probe.run(a, example_probe.chosen(p, a, VARIANTS), "tau",
                             lambda copy, v: edit_workspace(copy, v, a.facts_per_reply),
                             lambda episodes, copy: counts(episodes, example_values(copy)))
    example_probe.report(a, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
