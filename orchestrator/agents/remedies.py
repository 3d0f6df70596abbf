"""The built-in agent's remedies for episodes that make no progress, and the replay every
intervention passes before it is committed.

Remedies, of the kinds the paper names (sections 4.2 and 4.3):
- a worked example that shows the missing step (demonstrations/<bench>.json): one of the file's
  examples that takes the step is moved first, or an invented one is added first, so the
  examples the policy is shown take it;
- a reward for the missing step (rewards/eau_step_<gym>_<step>.py), paid once per episode at the
  turn that first takes it (`first_steps`, marked by the trainer: training.steps); it and the
  worked example are judged by `took/<gym>/<step>`, the share of the gym's episodes that take
  the step (the trainer's metric), then by `score/<gym>`, the environment's own score, which no
  module adds to;
- curriculum through the user's knobs: easier disclosure (one more fact per reply, else a lower
  match threshold) while a gym's success is 0 and its episodes run to the turn cap; judged by
  the facts known after each recorded turn, summed (a fact disclosed sooner counts more: three
  "why?" turns get three concerns either way, but two of them a turn sooner at two per reply);
- taking back what did not help (a revert of a change measured "harmed" or "no effect"), and
  help no longer needed once a gym's success passes 0.80 (eased disclosure goes back first).

Nothing that cannot work (`vet`): an intervention that switches on or adds a reward module is
replayed on the recent trajectories (orchestrator.replay) and dropped, with the reason in the
session's record, when it would pay nothing in the gyms it is for; a user-knob change is replayed
with the symbolic user and dropped when it would disclose nothing more (or, reining in leaks,
nothing less). Environment knobs and worked examples change what the policy sees, which no
replay of recorded turns can show, and pass as they are.
"""
from __future__ import annotations

import copy
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from orchestrator import diagnostics, effects, gitops, replay
from orchestrator.finding import Finding
from orchestrator.gate_context import GYM_BENCH
from orchestrator.progress_findings import example_questions
from training import steps as S
from training.benches.usergym.tau import tool_listing as tau_tool_listing

STEP_PAY = 0.1     # TravelGym pays 0.1 per preference elicited; a step is worth no more than that
STEP_SOURCE = '''"""Step reward written by the built-in meta-agent: {pay} once per {gym} episode, at the turn
that first takes the step "{step}" ({what}), which the gym's success needs (or, for
"disclosed", which comes before any answer that is not a guess) and which most recent episodes
never took before answering. The trainer marks each turn's `first_steps`
(training/steps.py), so a step taken again earns nothing more. Judge it by took/{gym}/{step}
where the trainer logs it (the share of episodes that take a step the gym's success needs), then
by score/{gym}, the environment's own score, which no module adds to."""

APPLIES_TO = [{gym!r}]
STEP = {step!r}
PAY = {pay}


def turn_reward(turn):
    return PAY if STEP in (turn.get("first_steps") or []) else 0.0
'''
# Invented worked examples for a step no shipped example takes (never a task of a split); the
# gate checks that every assistant turn parses under the gym's own parser.
_TRAVEL_SEARCH_FIRST = {"id": "eau-travel-car-porto-search-first", "messages": [
    {"role": "user", "content": "I need a rental car in Porto.\nAs long as my preferences are "
                                "satisfied, I would like the cheapest option for each."},
    {"role": "assistant", "content": "[search] car Porto"},
    {"role": "user", "content": "C1 | Zipp | Porto | gps: no | size: compact | transmission: manual"
                                " | $48\nC2 | Drivo | Porto | gps: yes | size: suv | transmission: "
                                "automatic | $71\nC3 | Metro | Porto | gps: yes | size: suv | "
                                "transmission: automatic | $95"},
    {"role": "assistant", "content": "[action] Which size of car do you need, and do you want an "
                                     "automatic?"},
    {"role": "user", "content": "For the car, I want size: suv."},
    {"role": "assistant", "content": "[action] And the transmission?"},
    {"role": "user", "content": "For the car, I want transmission: automatic."},
    {"role": "assistant", "content": "[answer] C2"}]}
# The tool list exactly as TauGym's "[search] tools" answers it
_TAU_TOOLS = tau_tool_listing()
# The shipped tau example's first two turns (the H100 policies trained with it asked its
# question word for word, 2026-12-07), carried on to the tool call that the shipped example
# never shows (it stops at "[search] tools", and the policy then asks again). Measured with the
# untrained SmolLM2 on the 30 held-out tau tasks (8 turns of 64 tokens, seed 0, the user
# telling two facts a reply; benchmarks/tau_example_probe.py, 2026-12-07), the episodes that
# wrote an "[answer] {...}" call to find_user_id_by_name_zip:
# - with the shipped example shown: 0 of 30 (none wrote any tool call; 7 asked for the zip);
# - with this file's earlier example, which asked for the name and the zip code in two turns:
#   0 (1 wrote a tool call, and no episode asked for the zip code at all);
# - with this example: 11 of 30 (14 wrote a tool call; 3 asked for the zip code). None had
#   valid arguments yet: a list of argument names, the example's own Ana Souza, or a call cut
#   at 64 tokens; a call's reward is what training adds.
# The user tells both facts when user.tau.facts_per_reply is 2, which the stale_disclosure
# remedy sets once asking for both gets the name again (in the H100 run of 2026-12-07,
# stale/tau went 0.82 -> 0.0).


def _tau_identify(example_id: str, first: str, last: str, zip_code: str, user_id: str,
                  orders: list[str]) -> dict[str, Any]:
    """The tau step example with one customer's facts (two customers: `SECOND_EXAMPLES`)."""
    listed = " and ".join(orders)
    return {"id": example_id, "messages": [
        {"role": "user", "content": "Here is my request: Hello, something is wrong with my order.\n"
                                    "Try to fulfill it step by step by calling the internal tools "
                                    "and communicating with me!"},
        {"role": "assistant", "content": "[action] I can help with that. Could you tell me your "
                                         "first name, last name and zip code?"},
        {"role": "user", "content": f"My name is {first} {last}. My zip code is {zip_code}."},
        {"role": "assistant", "content": "[search] tools"},
        {"role": "user", "content": _TAU_TOOLS},
        {"role": "assistant", "content": '[answer] {"name": "find_user_id_by_name_zip", "arguments": '
                                         + json.dumps({"first_name": first, "last_name": last,
                                                       "zip": zip_code}) + "}"},
        {"role": "user", "content": f'Tool result: "{user_id}"'},
        {"role": "assistant", "content": '[answer] {"name": "get_user_details", "arguments": '
                                         + json.dumps({"user_id": user_id}) + "}"},
        {"role": "user", "content": "Tool result: " + json.dumps({"orders": orders})},
        {"role": "assistant", "content": f"[action] I see orders {listed}. Which order is it, and "
                                         f"what should I do with it?"}]}


_TAU_IDENTIFY = _tau_identify("eau-tau-identify-then-lookup", "Ana", "Souza", "30301",
                              "ana_souza_4821", ["#W5550123", "#W5550456"])
# The same exchange with another customer, shown second: in the H100 runs of 2026-12-07 (EAU
# seeds 1 and 2, and seed 0 with 6-step windows), 91 tau episodes wrote an "[answer]" call to
# find_user_id_by_name_zip after the example above was shown, and 69 of them called it with the
# example's own "Souza" or "30301" although the user was someone else; 4 called it with the
# user's own facts and identified the user. Two customers show which words of the exchange
# change with the user. Measured as above (benchmarks/tau_example_probe.py, untrained SmolLM2,
# 30 held-out tau tasks, two facts a reply), seeds 0-2 together (90 episodes): shown the first
# example alone, 26 episodes named the call, 19 with the example's values, 0 identified the
# user, 6 asked for the zip code; shown both, 23 named it, 10 with an example's values, 5
# identified the user (3, 0 and 2 by seed), 18 asked for the zip code.
_TAU_IDENTIFY_2 = _tau_identify("eau-tau-identify-then-lookup-2", "Kenji", "Okafor", "60614",
                                "kenji_okafor_1377", ["#W7013388"])
STEP_EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("travel", "search"): _TRAVEL_SEARCH_FIRST, ("tau", "identify"): _TAU_IDENTIFY,
    ("tau", "lookup"): _TAU_IDENTIFY}
# A second example of the same step with other values, for a policy that copies the first's
SECOND_EXAMPLES: dict[tuple[str, str], dict[str, Any]] = {
    ("tau", "identify"): _TAU_IDENTIFY_2, ("tau", "lookup"): _TAU_IDENTIFY_2}
MAX_EXAMPLES = 10            # schema/demonstrations.schema.json: maxItems per gym
_METRIC = effects.METRIC_GYM


@dataclass
class Intervention:
    """One change: knob writes and/or files, with the rationale its commit carries."""

    subject: str
    why: str
    expect: str
    knobs: dict[str, Any] = field(default_factory=dict)      # knob path -> new value
    files: dict[str, str] = field(default_factory=dict)      # workspace path -> content
    reverts: str | None = None
    # it takes back a change its window measured "no effect": taking it back is expected to
    # change nothing either, so it needs no window of its own and the gyms' own changes may go
    # in the same session (the H200 run of 2026-12-06 spent whole sessions on such reverts)
    settled: bool = False

    def message(self) -> str:
        msg = f"{self.subject}\n\nWhy: {self.why}\nExpect: {self.expect}\n"
        if self.reverts:
            msg += f"Reverts: {self.reverts}\n"
        return msg


# ----------------------------------------------------------------------------- worked examples


def step_expect(gym: str, step: str) -> str:
    """The Expect line of a remedy for a missing step: the share of the gym's episodes that take
    it (the trainer's `took/<gym>/<step>`) first, then the gym's score. The CPU run of 16 steps
    took the tau worked example back after 4 steps as "no effect on score/tau", which stayed 0
    while the policy had begun asking for name and zip code: the step moves first. A step the
    trainer logs no share of (`disclosed`) is judged by score/<gym> alone."""
    if step in S.NEEDED.get(gym, ()):
        return f"took/{gym}/{step} rises, then score/{gym}."
    return f"score/{gym} rises."


def example_takes(gym: str, step: str, example: dict[str, Any]) -> bool:
    """Whether a worked example's assistant turns take `step` (by their text)."""
    return any(step in S.text_steps(gym, str(m.get("content", "")))
               for m in example.get("messages") or [] if m.get("role") == "assistant")


def worked_example(p, gym: str, step: str, why: str) -> Intervention | None:
    """Put a worked example that takes `step` first among the gym's examples (one of the file's,
    else an invented one), showing at least one; None when the shown examples take it already
    or there is none to show. `p` is the planner (knob values, limits, busy paths)."""
    rel, knob = f"demonstrations/{GYM_BENCH.get(gym)}.json", f"env.{gym}.demonstrations"
    path = p.ws / rel
    if {rel, f"{rel}#{gym}", knob} & p.busy or {rel, f"{rel}#{gym}"} & p.avoid_files or not path.exists():
        return None
    data = json.loads(path.read_text())
    shown = int(p.value(knob) or 0)
    first = step_example_first(data, gym, step, shown)
    if first is None:
        return None
    knobs = {}
    if shown == 0:
        new = p.step(knob, +1)
        if new is None:
            return None
        knobs[knob] = new
    what = S.WHAT[step]
    return Intervention(
        f"Show {gym} a worked example that uses {what} first ({first['id']})",
        f"{why} None of the {shown} worked example(s) the policy is shown uses it; a worked "
        f"exchange in the context is how this 135M policy learnt the action format (0 -> 81% of "
        f"valid turns on held-out IntentionGym tasks).",
        step_expect(gym, step),
        knobs=knobs, files={rel: json.dumps(data, indent=2, ensure_ascii=False) + "\n"})


def step_example_first(data: dict[str, Any], gym: str, step: str, shown: int) -> dict[str, Any] | None:
    """Put an example that takes `step` first among `data[gym]` (one of the file's, else an
    invented one) and return it; None, and `data` unchanged, when one of the first `shown` takes
    it already or there is none to show."""
    examples = list(data.get(gym) or [])
    if any(example_takes(gym, step, ex) for ex in examples[:shown]):
        return None
    at = next((i for i, ex in enumerate(examples) if example_takes(gym, step, ex)), None)
    if at is not None:
        first = examples.pop(at)
    elif (gym, step) in STEP_EXAMPLES:
        first = copy.deepcopy(STEP_EXAMPLES[(gym, step)])
        examples = examples[:MAX_EXAMPLES - 1]
    else:
        return None
    data[gym] = [first, *examples]
    return first


def _next_example(p, gym: str) -> tuple[str, int, int, dict[str, Any]] | None:
    """(knob, shown, new, the example that would be shown next) for one more of the gym's
    examples; None while its examples file is being measured, or where there is no next one
    (the knob at its limit or the file's examples all shown)."""
    rel, knob = f"demonstrations/{GYM_BENCH.get(gym)}.json", f"env.{gym}.demonstrations"
    if {rel, f"{rel}#{gym}"} & p.busy:
        return None
    shown = int(p.value(knob) or 0)
    try:
        examples = json.loads((p.ws / rel).read_text()).get(gym) or []
    except (OSError, ValueError, AttributeError):
        return None
    new = p.step(knob, +1)
    if new is None or new > len(examples):
        return None
    return knob, shown, new, examples[new - 1]


def more_examples(p, gym: str, step: str, why: str) -> Intervention | None:
    """One more shown example, when the next example of the file takes the step too."""
    nxt = _next_example(p, gym)
    if nxt is None or not example_takes(gym, step, nxt[3]):
        return None
    knob, shown, new, _ = nxt
    return Intervention(f"Show {gym} one more worked example that uses {S.WHAT[step]} ({shown} -> {new})",
                        f"{why} The examples shown use it, yet the policy does not; one more shows "
                        f"it again.", step_expect(gym, step), knobs={knob: new})


def other_example(p, gym: str, copied: list[str], why: str) -> Intervention | None:
    """One more shown example, when the next example of the file does not ask the question the
    policy copies (`copied`, as progress_findings.example_questions writes them): two examples
    asking about different things show that the question depends on the task. Judged by the
    first step the gym's success needs, which the copied question stood in for.
    Measured (2026-12-07): travel's first example's "Do you need parking at the hotel?" was asked
    by 0 of 96 GRPO+EAU training episodes after a second example was shown at step 18 (36 of 232
    before), and `[search]` rose from 22% to 41% of them. The untrained SmolLM2 on the 30
    held-out travel tasks, seeds 0-2 (benchmarks/travel_example_probe.py), asked it in 0 of 90
    episodes shown the first two examples against 11 shown the first alone, and searched in 52
    against 22."""
    nxt = _next_example(p, gym)
    if nxt is None or set(copied) & set(example_questions([nxt[3]])):
        return None
    knob, shown, new, _ = nxt
    first = S.NEEDED.get(gym, ())[:1]
    return Intervention(
        f"Show {gym} one more worked example, whose questions differ from the one it copies "
        f"({shown} -> {new})",
        f"{why} The policy asks the example's question whatever the task; a second example that "
        f"asks about something else shows that the question depends on the task.",
        step_expect(gym, first[0]) if first else f"score/{gym} rises.", knobs={knob: new})


def second_example(p, gym: str, step: str, why: str) -> Intervention | None:
    """The step's second example (SECOND_EXAMPLES: the same exchange with another customer),
    shown right after those shown now, one more shown; None when it is shown already, there is
    none, or the knob is at its limit. For a policy that calls with the first example's values."""
    rel, knob = f"demonstrations/{GYM_BENCH.get(gym)}.json", f"env.{gym}.demonstrations"
    path, second = p.ws / rel, SECOND_EXAMPLES.get((gym, step))
    if second is None or {rel, f"{rel}#{gym}", knob} & p.busy or \
            {rel, f"{rel}#{gym}"} & p.avoid_files or not path.exists():
        return None
    data = json.loads(path.read_text())
    shown = int(p.value(knob) or 0)
    examples = list(data.get(gym) or [])
    if any(ex.get("id") == second["id"] for ex in examples[:shown]):
        return None
    new = p.step(knob, +1)
    if new is None:
        return None
    examples = [ex for ex in examples if ex.get("id") != second["id"]]
    examples.insert(shown, copy.deepcopy(second))
    data[gym] = examples[:MAX_EXAMPLES]
    return Intervention(
        f"Show {gym} a second worked example with another customer ({second['id']}, {shown} -> {new})",
        f"{why} The policy writes what its context shows; a second exchange whose values differ "
        f"shows which of its words come from the user.",
        step_expect(gym, step),
        knobs={knob: new}, files={rel: json.dumps(data, indent=2, ensure_ascii=False) + "\n"})


# ----------------------------------------------------------------------------- step rewards


def step_module_name(gym: str, step: str) -> str:
    return f"eau_step_{gym}_{step}"


def step_reward(p, gym: str, step: str, why: str) -> Intervention | None:
    """A module paying STEP_PAY at the first `step` of each `gym` episode (vetted by replay)."""
    name = step_module_name(gym, step)
    rel = f"rewards/{name}.py"
    if name in (p.value("reward.modules") or {}) or rel in p.avoid_files or rel in p.busy:
        return None
    source = STEP_SOURCE.format(gym=gym, step=step, what=S.WHAT.get(step, step), pay=STEP_PAY)
    return Intervention(
        f"Add step reward {name}: {STEP_PAY} at a {gym} episode's first {S.NOUN.get(step, step)}",
        f"{why} Paid once per episode at its first occurrence, the step earns more than skipping it "
        f"and cannot be farmed by repeating it.",
        step_expect(gym, step),
        knobs={f"reward.modules.{name}": {"enabled": True, "weight": 1.0}}, files={rel: source})


# ----------------------------------------------------------------------------- curriculum


def runs_to_cap(episodes: list[dict[str, Any]], gym: str) -> bool:
    """Most of the gym's recent episodes ended at the turn limit, none of them a success."""
    eps = [ep for ep in episodes if ep.get("gym") == gym]
    return len(eps) >= 2 and not any(ep.get("success") for ep in eps) and \
        sum(bool(ep.get("truncated")) for ep in eps) >= 0.5 * len(eps)


def ease_disclosure(p, gym: str, why: str) -> list[Intervention]:
    """Easier disclosure for `gym`, one knob and one allowed step at a time: one more fact per
    reply, else a lower match threshold (the schema's x-harder says which way is easier). The
    caller vets each by replay and takes the first that discloses more."""
    out = []
    for name, direction in (("facts_per_reply", +1), ("match_threshold", -1)):
        path = f"user.{gym}.{name}"
        harder = diagnostics.knob_spec(p.schema, path).get("x-harder")
        if harder not in ("up", "down") or direction != (-1 if harder == "up" else +1):
            continue
        new = p.step(path, direction)
        if new is None:
            continue
        out.append(Intervention(
            f"Ease disclosure in {gym}: {path} {p.value(path)} -> {new}",
            f"{why} Every recent {gym} episode ran to the turn limit without a success: the user "
            f"discloses too little for the policy to finish (curriculum, paper section 4.2).",
            f"score/{gym} rises.", knobs={path: new}))
    return out


# ----------------------------------------------------------------------------- taking back


def revert(p, sha: str, f: Finding) -> Intervention | None:
    """The knob values and files `sha` changed, put back where they still read as it left
    them, with a `Reverts:` line (the next sessions read it and do not redo the change)."""
    try:
        parents = gitops.git(p.ws, "rev-list", "--parents", "-n1", sha).split()[1:]
        old = gitops.knobs_at(p.ws, parents[0]) if parents else {}
        changed = diagnostics.knob_changes(old, gitops.knobs_at(p.ws, sha))
    except gitops.GitError:
        return None
    writes = {k: a for k, (a, b) in changed.items() if a is not None and p.value(k) == b}
    # a module the commit added is switched off (its file stays, unused)
    writes |= {k: False for k, (a, b) in changed.items()
               if a is None and b is True and k.endswith(".enabled") and p.value(k) is True}
    files = files_before(p.ws, sha, parents[0]) if parents else {}
    if not writes and not files:
        return None
    return Intervention(f"Revert {sha[:10]}: it harmed {f.evidence.get('metric')}",
                        f.message, f"{f.evidence.get('metric')} back to its level before {sha[:10]}.",
                        knobs=writes, files=files, reverts=sha)


def files_before(ws: Path, sha: str, parent: str) -> dict[str, str]:
    """The parent's text of each file (knobs.json aside) that `sha` modified and that still
    reads as `sha` left it: a harmful guard on a reward module goes back with its commit."""
    out = {}
    try:
        names = gitops.git(ws, "diff", "--name-only", "--diff-filter=M", parent, sha).split()
        for rel in names:
            if rel == "knobs.json" or not (ws / rel).exists():
                continue
            if (ws / rel).read_text() == gitops.git(ws, "show", f"{sha}:{rel}"):
                out[rel] = gitops.git(ws, "show", f"{parent}:{rel}")
    except (gitops.GitError, OSError, UnicodeDecodeError):
        return {}
    return out


def taken_back(ws: Path) -> tuple[set[tuple[str, str]], set[str]]:
    """What reverts took back: ((knob, "old -> new") pairs, files) of every commit a `Reverts:`
    line names, so no later session makes the same change again."""
    pairs, files = set(), set()
    for sha in effects.reverted_commits(ws):
        try:
            parents = gitops.git(ws, "rev-list", "--parents", "-n1", sha).split()[1:]
            old = gitops.knobs_at(ws, parents[0]) if parents else {}
            changed = diagnostics.knob_changes(old, gitops.knobs_at(ws, sha))
            if parents:
                for rel in gitops.git(ws, "diff", "--name-only", parents[0], sha).split():
                    if rel != "knobs.json":
                        files |= _taken_back_file(ws, rel, parents[0], sha)
        except gitops.GitError:
            continue
        pairs |= {(k, f"{a} -> {b}") for k, (a, b) in changed.items()}
        # a module the commit added switched on, which its revert switched off: switching it on
        # again is the same change (the H100 run of 2026-12-06 re-enabled persuade's step reward
        # one session after its revert as "harmed")
        pairs |= {(k, "False -> True") for k, (a, b) in changed.items()
                  if a is None and b is True and k.endswith(".enabled")}
    return pairs, files


def _taken_back_file(ws: Path, rel: str, parent: str, sha: str) -> set[str]:
    """What a revert of `sha` took back of the file `rel`: the file, or for a demonstrations file
    (one file holds every gym's examples) `rel#<gym>` for each gym whose examples `sha` changed;
    reverting tau's example once kept every gym's examples from changing again."""
    if not rel.startswith("demonstrations/") or not rel.endswith(".json"):
        return {rel}
    try:
        old, new = (json.loads(gitops.git(ws, "show", f"{c}:{rel}")) for c in (parent, sha))
    except (gitops.GitError, ValueError):
        return {rel}
    if not isinstance(old, dict) or not isinstance(new, dict):
        return {rel}
    return {f"{rel}#{g}" for g in set(old) | set(new) if old.get(g) != new.get(g)} or {rel}


def eased(p, gym: str) -> list[str]:
    """The gym's user knobs that sit on the easier side of the experiment's first commit
    (the seed): disclosure a curriculum step eased, to be taken back first."""
    try:
        root = gitops.git(p.ws, "rev-list", "--max-parents=0", "HEAD").split()[-1]
        seed = gitops.knobs_at(p.ws, root)
    except (gitops.GitError, IndexError):
        return []
    out = []
    for name in ("facts_per_reply", "match_threshold"):
        path = f"user.{gym}.{name}"
        harder = diagnostics.knob_spec(p.schema, path).get("x-harder")
        try:
            was = diagnostics.get_path(seed, path)
        except KeyError:
            continue
        now = p.value(path)
        if isinstance(now, (int, float)) and isinstance(was, (int, float)) and \
                ((harder == "up" and now < was) or (harder == "down" and now > was)):
            out.append(path)
    return out


# ----------------------------------------------------------------------------- replay before commit


def target_gyms(act: Intervention, gyms: list[str]) -> list[str]:
    """The gyms an intervention is for: the gym its Expect line names, else the run's gyms."""
    m = _METRIC.search(act.expect)
    return [m.group(1)] if m and m.group(1) in gyms else list(gyms)


def gym_scope(act: Intervention, gyms: list[str], ws: Path | None = None) -> str | None:
    """The one gym an intervention changes, or None when it reaches further: every knob under
    env.<gym>/user.<gym> or a step reward of that gym (rewards/eau_step_<gym>_*), every file that
    module or the bench's demonstrations file (whose other gyms' examples, read from `ws`, stay
    as they are), and its Expect line that gym's metric. Changes to different gyms in one session
    are measured apart, each on its own gym's metric; a change that reaches every gym (a shared
    reward module, a global knob) goes alone. A revert is scoped as the change it takes back: the
    H100 run of 2026-12-06 spent its last session on persuade's revert alone, while tau's and
    travel's unhelpful changes and turtle's early answers waited for a session that never came."""
    target = target_gyms(act, gyms)
    if len(target) != 1:
        return None
    gym = target[0]
    step_prefix = f"eau_step_{gym}_"
    for path in act.knobs:
        parts = path.split(".")
        if parts[0] in ("env", "user") and parts[1:2] == [gym]:
            continue
        if parts[:2] == ["reward", "modules"] and len(parts) > 2 and parts[2].startswith(step_prefix):
            continue
        return None
    for rel, text in act.files.items():
        if rel == f"demonstrations/{GYM_BENCH.get(gym)}.json" and _examples_of_one_gym(ws, rel, text, gym, act.reverts):
            continue
        if rel.startswith(f"rewards/{step_prefix}") and rel.endswith(".py"):
            continue
        return None
    return gym if act.knobs or act.files else None


def _examples_of_one_gym(ws: Path | None, rel: str, text: str | None, gym: str,
                         reverts: str | None) -> bool:
    """Whether writing `text` to the demonstrations file `rel` changes `gym`'s examples alone.
    Without a workspace to compare with, only a change written for one gym (not a revert, which
    puts back a whole earlier file) is taken at its word."""
    if ws is None:
        return reverts is None
    if not (ws / rel).exists() or text is None:
        return False
    try:
        now, new = json.loads((ws / rel).read_text()), json.loads(text)
    except (OSError, ValueError):
        return False
    if not isinstance(now, dict) or not isinstance(new, dict):
        return False
    return {g for g in set(now) | set(new) if now.get(g) != new.get(g)} <= {gym}


def _module_changes(p, act: Intervention) -> dict[str, str]:
    """name -> source of each reward module the intervention switches on or adds."""
    out = {}
    for path, value in act.knobs.items():
        parts = path.split(".")
        if parts[:2] != ["reward", "modules"] or len(parts) < 3:
            continue
        name = parts[2]
        if parts[3:] == ["enabled"]:
            on = value is True
        elif len(parts) == 3:
            on = isinstance(value, dict) and value.get("enabled", True) is True
        else:
            on = False
        if not on:
            continue
        rel = f"rewards/{name}.py"
        source = act.files.get(rel) or ((p.ws / rel).read_text() if (p.ws / rel).exists() else "")
        out[name] = source
    return out


def vet(p, act: Intervention, episodes: list[dict[str, Any]], bench: str) -> tuple[str | None, str]:
    """(why it cannot work, or None; what the replay showed, for the commit's Why)."""
    gyms = target_gyms(act, p.gyms)
    shown = []
    modules = _module_changes(p, act)
    run_dir = getattr(p, "run_dir", None)
    unseen = [g for g in gyms if not any(ep.get("gym") == g for ep in episodes)]
    if modules and unseen and run_dir is not None:
        episodes = episodes + replay.older_episodes(run_dir, unseen)
    for name, source in modules.items():
        pay, err = replay.module_pay(source, episodes)
        if err:
            return f"{act.subject}: {name} {err}.", ""
        seen = [g for g in gyms if g in pay]
        if not seen:
            # The CPU run of 24 steps (2026-12-05) added eau_progress "for function" with no
            # function episode among the newest files: what cannot be shown to pay is not
            # committed, as easier disclosure the replay cannot judge is not
            return (f"{act.subject}: not committed, because no {'/'.join(gyms)} episode of the "
                    f"last {replay.RECENT_FILES + replay.OLDER_FILES} steps' trajectories could be "
                    f"replayed to show that {name} would pay there.", "")
        if not any(pay[g].pays for g in seen):
            return (f"{act.subject}: not committed, because replayed on the recent trajectories "
                    f"{name} would pay nothing in {', '.join(seen)} "
                    f"({'; '.join(pay[g].text(g) for g in seen)}).", "")
        shown.append(f"replayed on the recent trajectories, {name} pays "
                     + "; ".join(pay[g].text(g) for g in seen if pay[g].pays))
    why_not, note = _vet_user_knobs(p, act, episodes, bench)
    if why_not:
        return why_not, ""
    why_not = _vet_reopened_farm(p, act, episodes)
    if why_not:
        return why_not, ""
    return None, "; ".join(shown + ([note] if note else []))


def _vet_reopened_farm(p, act: Intervention, episodes: list[dict[str, Any]]) -> str | None:
    """A revert that would give a reward module back credit for repeated turns is not made. The
    CPU run of 16 steps (2026-12-05) guarded elicited_fact against a farm (40% of its pay on
    repeated tau questions), measured the guard "no effect" on episode/repeat_rate, and took it
    back: a guard stops paying repeats, which the repeat rate of a policy not yet trained on the
    change does not show. So the module as the revert leaves it is replayed against the module
    now; if it would pay more on repeated turns, the guard stays and the record says why."""
    if not act.reverts:
        return None
    modules = p.value("reward.modules") or {}
    for rel, old in act.files.items():
        m = re.fullmatch(r"rewards/(\w+)\.py", rel)
        if not m or not (modules.get(m.group(1)) or {}).get("enabled") \
                or act.knobs.get(f"reward.modules.{m.group(1)}.enabled") is False \
                or not (p.ws / rel).exists():
            continue
        then, err = replay.module_pay(old, episodes)
        now, err_now = replay.module_pay((p.ws / rel).read_text(), episodes)
        if err or err_now:
            continue                  # the gate's replay names a module that cannot run
        n_then, x_then = sum(v.repeat_turns for v in then.values()), sum(v.on_repeats for v in then.values())
        n_now, x_now = sum(v.repeat_turns for v in now.values()), sum(v.on_repeats for v in now.values())
        if x_then > x_now + 1e-9:
            return (f"{act.subject}: not committed, because replayed on the recent trajectories "
                    f"{m.group(1)} as it was before {act.reverts[:10]} would pay {n_then} turns "
                    f"repeating an earlier turn of their episode ({x_then:+.2f} in all) where it "
                    f"pays {n_now} now ({x_now:+.2f}): taking it back would pay repeats again.")
    return None


def _easing(p, act: Intervention) -> dict[str, Any]:
    """The user-knob writes of an intervention that ease disclosure (against x-harder)."""
    out = {}
    for path, new in act.knobs.items():
        parts = path.split(".")
        old = p.value(path)
        if parts[0] != "user" or len(parts) != 3 or not isinstance(new, (int, float)) \
                or not isinstance(old, (int, float)):
            continue
        harder = diagnostics.knob_spec(p.schema, path).get("x-harder")
        if (harder == "up" and new < old) or (harder == "down" and new > old):
            out[path] = new
    return out


def _vet_user_knobs(p, act: Intervention, episodes: list[dict[str, Any]], bench: str
                    ) -> tuple[str | None, str]:
    """Easier disclosure is replayed: the symbolic user on the recorded agent turns with the
    knobs before and after; a change that discloses nothing more in its gym cannot work, and
    one the replay cannot judge (no recent episode of the gym has a task the bench loads, or an
    LLM user answered them: the replay speaks for the symbolic arm only) is not shown to work
    either. Knobs that rein disclosure in (the leak remedies) answer leaks the logs show and
    pass as they are."""
    easing = _easing(p, act)
    if not easing:
        return None, ""
    gyms = sorted({path.split(".")[1] for path in easing})
    rules = replay.load_rules(p.ws, bench)
    eps = [ep for ep in episodes if ep.get("gym") in gyms]
    before = copy.deepcopy(p.value("user") or {})
    after = copy.deepcopy(before)
    for path, value in easing.items():
        diagnostics.set_path({"user": after}, path, value)
    llm = any(ep.get("user_arm") == "llm" for ep in eps)
    a = None if llm or rules is None else replay.user_disclosures(bench, rules, before, eps, "known")
    b = None if a is None else replay.user_disclosures(bench, rules, after, eps, "known")
    for gym in gyms:
        if a is None or b is None or gym not in a or gym not in b:
            return (f"{act.subject}: not committed, because the symbolic user could not be "
                    f"replayed on the recent {gym} episodes"
                    f"{' (an LLM user answered them)' if llm else ''}, so nothing shows it "
                    f"would disclose more.", "")
        if b[gym] <= a[gym]:
            return (f"{act.subject}: not committed, because the symbolic user replayed on the "
                    f"recent {gym} turns discloses no more with it than without it ({a[gym]} "
                    f"fact-turns known either way): the policy's turns ask for nothing more it "
                    f"would give.", "")
    return None, "; ".join(f"replayed on the recent {g} turns, the facts the symbolic user has "
                           f"disclosed, summed over the turns, go {a[g]} -> {b[g]}" for g in gyms)


def recent(run_dir: Path) -> list[dict[str, Any]]:
    return replay.recent_episodes(run_dir)
