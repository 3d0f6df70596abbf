"""The built-in meta-agent: offline, no network, runs the skill's diagnostics and acts on them.

It makes one intervention per gym per session (so each measured effect has one cause: a change
to one gym is judged on that gym's metric, and a change that reaches every gym goes alone), choosing
among the interventions the paper records (appendix A.2, Table 7; section 4.6), most urgent first:

  nan / irreversible collapse -> ask for a resume from the last good checkpoint, else a restart
  harm (a measured effect)    -> revert that commit's knob changes
  deadlock                    -> lower min_questions, else raise max_steps (within its delta)
  leak / replies growing      -> withhold the leaking fact kind, lower facts_per_reply, stop volunteering
  user loop (an LLM user      -> answer more of the gym's episodes with the symbolic user
    repeating a sentence)        (user.<gym>.strategy_mix up 0.25, where the run does not pin it),
                                 else raise its repetition penalty (1.0 -> 1.3)
  stale disclosure            -> raise facts_per_reply, so the asked fact comes with the told one
                                 (the user told again what it told, an asked fact never told)
  entropy / template collapse -> raise entropy_coeff within its 0.004 delta
  invalid actions             -> show one more worked example (env.<gym>.demonstrations), else
                                 switch on the shipped format reward (rewards/well_formed.py)
  success near zero           -> switch on an intermediate reward module (writing one if none fits)
  success past 0.80           -> make the gym harder along a knob's x-harder direction, taking back
                                 demonstrations first
  format learned              -> switch the format reward off again (help goes once not needed)
  reward hack                 -> limit a module the policy farms by repeating itself to first
                                 disclosures (a guard appended to its source), else switch it off
  loop (most turns repeated)  -> switch on the shipped repeat cost (rewards/no_repeat.py)

Order: nan, harm, invalid actions, reward hack, stale disclosure, loop, leak, user loop, deadlock, collapse,
success extremes, format learned (orchestrator.diagnostics.diagnose). After a session whose change
reached every gym, the gyms' own findings go first (URGENT_KINDS excepted), so that a shared remedy
cannot hold back a gym's own for good.

A session whose findings have no remedy says which finding and why (e.g. episodes ending at the
trainer's own rollout.max_turns, which no workspace file moves), never just "nothing to change".

Knob limits come from the workspace schema (`orchestrator.diagnostics.knob_spec`); a change the
experience pool records as harmful is not repeated; a knob changed by a commit whose effect is not
measured yet is left alone. Every measured effect becomes a finding in the pool first.
"""
from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

from orchestrator import diagnostics, effects, experience, replay
from orchestrator import gitops
from orchestrator.agents import base, remedies
from orchestrator.agents.remedies import Intervention
from orchestrator.diagnostics import Finding
from orchestrator.gate_context import BENCH_GYMS, TRAIN_GYMS

PROGRESS_MODULE = "eau_progress"
FORMAT_MODULE = "well_formed"        # shipped in workspace/rewards/, switched off
PROGRESS_SOURCE = '''"""Intermediate reward written by the built-in meta-agent: credit for a hidden fact the user
discloses for the first time in the episode, so that progress shows before the first success
(paper section 4.3). Nothing for asking as such, nor for a fact asked for again (the rollout's
`new_facts` and `repeated`): a version that paid 0.1 a question and 0.1 a disclosure, repeats
included, was farmed on the H200 comparison (ColBench: one question asked 8 times an episode,
training reward 0.00 -> 0.29, held-out success 0)."""

APPLIES_TO = {gyms!r}


def turn_reward(turn):
    if turn.get("repeated"):
        return 0.0
    return 0.1 * min(len(turn.get("new_facts") or []), 2)
'''
# appended to a reward module the policy farms by asking again (find_reward_hacks): the module then
# sees only the facts a turn disclosed for the first time, and a repeated turn earns nothing
GUARD_MARK = "# Guarded by the built-in meta-agent"
GUARD_SOURCE = '''

{mark}: {why}
_unguarded_turn_reward = turn_reward


def turn_reward(turn):
    if turn.get("repeated"):
        return 0.0
    return _unguarded_turn_reward({{**turn, "revealed_facts": list(turn.get("new_facts") or [])}})
'''
NO_REPEAT_MODULE = "no_repeat"     # shipped in workspace/rewards/, switched off
# what the built-in agent acts on under --skill generic (findings any RL practitioner would read
# from losses and curves, with no EAU skill)
GENERIC_KINDS = frozenset({"nan", "harm", "entropy_collapse", "template_collapse"})
# findings whose remedy does not wait for a gym's turn (run(): a session after one whose change
# reached every gym serves the gyms' own findings first): lost training, measured harm, credit
# farmed by repeats, episodes looping on one turn, users leaking answers
URGENT_KINDS = GENERIC_KINDS | {"reward_hack", "loop", "leak", "user_loop"}


class Planner:
    """Turns findings into an intervention, within the knobs' limits (run() asks again for the
    findings of the gyms not yet changed)."""

    def __init__(self, knobs: dict[str, Any], schema: dict[str, Any] | None, ws: Path,
                 bench_gyms: list[str], avoid: set[tuple[str, str]], busy: set[str],
                 avoid_files: set[str] = frozenset(), bench: str = "",
                 episodes: list[dict[str, Any]] | None = None, window: int = 10):
        self.knobs, self.schema, self.ws = knobs, schema, ws
        self.gyms, self.avoid, self.busy = bench_gyms, avoid, busy
        self.avoid_files = set(avoid_files)   # files a revert took back: not written again
        self.bench = bench or next((b for b, g in BENCH_GYMS.items() if set(bench_gyms) <= set(g)), "")
        self.episodes = episodes or []        # the recent trajectories every remedy is replayed on
        self.window = window                  # W: the steps "recent success" is the mean of
        self.metrics: list[dict[str, Any]] = []
        self.run_dir: Path | None = None        # the run plan() reads (older trajectories for a replay)
        self.unremedied: list[str] = []     # findings left alone this session, with the reason
        self.findings: list[Finding] = []
        self.waiting: str | None = None       # a remedy still measured stops this session
        # interventions their replay already passed, kept alive so that their ids are not reused:
        # a set of bare ids let a later, unvetted act that got a freed act's id skip the replay
        self._vetted: dict[int, Intervention] = {}
        self._dropped: set[str] = set()       # subjects their replay showed cannot work
        self._grouped_example_subject: str | None = None   # the example for every refusing gym
        # gyms whose refusals wait on their examples' measurement: for the whole session, as the
        # pooled finding that names them is not planned again after the session's first commit
        self.held: set[str] = set()
        self.defer_global = False             # gyms' own remedies before one reaching every gym

    # ---- helpers
    def value(self, path: str) -> Any:
        try:
            return diagnostics.get_path(self.knobs, path)
        except KeyError:
            return None

    def step(self, path: str, direction: int, default_delta: float | None = None) -> Any | None:
        """The knob moved one allowed step up (+1) or down (-1), or None when it cannot move.
        The step is the knob's x-max-delta, else a twentieth of its range (at least 1 for integers)."""
        cur = self.value(path)
        if path in self.busy or not isinstance(cur, (int, float)) or isinstance(cur, bool):
            return None
        spec = diagnostics.knob_spec(self.schema, path)
        delta = spec.get("x-max-delta", default_delta)
        if delta is None:
            span = spec.get("maximum", cur + 20) - spec.get("minimum", 0)
            delta = max(1, round(span / 20)) if isinstance(cur, int) else span / 20
        new = cur + direction * delta
        new = min(new, spec.get("maximum", new)) if direction > 0 else max(new, spec.get("minimum", new))
        if isinstance(cur, int):
            new = int(round(new))
        else:
            new = round(new, 6)
        if new == cur or (path, f"{cur} -> {new}") in self.avoid:
            return None
        return new

    def _latest_refusals(self, gym: str | None) -> tuple[int, float] | None:
        """(step, share of refused turns) at the newest step of the recent trajectories that
        sampled the gym (every gym when None); None when no turn there says."""
        eps = [ep for ep in self.episodes if gym is None or ep.get("gym") == gym]
        newest = max((ep["step"] for ep in eps if isinstance(ep.get("step"), int)), default=None)
        turns = [t for ep in eps if ep.get("step") == newest for t in ep.get("turns") or []
                 if "invalid_action" in t]
        if newest is None or not turns:
            return None
        return newest, sum(bool(t["invalid_action"]) for t in turns) / len(turns)

    def _gyms_for(self, f: Finding) -> list[str]:
        return [f.gym] if f.gym and f.gym in self.gyms else list(self.gyms)

    # ---- one method per finding kind
    def plan(self, findings: list[Finding], run_dir: Path) -> Intervention | None:
        handlers = {"nan": self.on_nan, "harm": self.on_harm, "deadlock": self.on_deadlock,
                    "leak": self.on_leak, "reply_growth": self.on_reply_growth,
                    "user_loop": self.on_user_loop,
                    "entropy_collapse": self.on_entropy_collapse,
                    "template_collapse": self.on_template_collapse,
                    "low_success": self.on_low_success, "high_success": self.on_high_success,
                    "invalid_actions": self.on_invalid_actions,
                    "format_learned": self.on_format_learned,
                    "reward_hack": self.on_reward_hack, "loop": self.on_loop,
                    "missing_step": self.on_missing_step, "early_answer": self.on_early_answer,
                    "rejected_calls": self.on_rejected_calls,
                    "copied_example": self.on_copied_example,
                    "copied_question": self.on_copied_question,
                    "stale_disclosure": self.on_stale_disclosure,
                    "no_effect": self.on_no_effect}
        self.unremedied, self.findings, self.waiting = [], findings, None
        self.run_dir = run_dir
        self.metrics = diagnostics.read_metrics(run_dir)
        deferred: Intervention | None = None
        held = self.held
        for f in findings:
            if f.gym in held and f.kind not in URGENT_KINDS:
                continue
            said = len(self.unremedied)
            act = handlers[f.kind](f, run_dir) if f.kind in handlers else None
            if act is not None and id(act) not in self._vetted:
                act = self.vetted([act])
            if act is not None and self.defer_global and f.kind not in URGENT_KINDS \
                    and remedies.gym_scope(act, self.gyms, self.ws) is None:
                # the H100 rerun: the format reward's on/off ranked first at every session, and
                # tau's curriculum never came; a gym's own finding gets this session first
                deferred = deferred or act
                if f.kind == "invalid_actions":
                    # refused turns cause the deadlocks after them: a refusing gym whose example
                    # waits here gets no second remedy meanwhile (a test of the CPU run's pooled
                    # finding raised persuade's turn cap, its example deferred, before this)
                    held |= self._refusing(f)
                continue
            if act is not None:
                return act
            if self.waiting:        # refused turns cause the deadlocks and zero success after
                self.unremedied.append(self.waiting)       # them: no second cause meanwhile
                # for the gyms that refuse alone: the CPU run of 16 steps (2026-12-06) waited
                # two whole sessions on travel's examples while persuade's and tau's findings had
                # remedies; a pooled finding (gym None) holds back each gym it names as refusing
                refusing = self._refusing(f)
                if not refusing:
                    return None
                held |= refusing
                self.waiting = None
                continue
            # observations, not problems; a remedy dropped by its replay has said why already
            if f.kind not in ("format_learned", "idle_module"):
                why = self.why_not(f, run_dir, said=len(self.unremedied) > said)
                self.unremedied[said:said] = [why] if why else []    # the finding's reason first
        if deferred is not None:
            self.unremedied.append(f"{deferred.subject}: not committed before the gyms' own "
                                   f"findings, as the last session's change reached every gym; "
                                   f"no gym's own remedy could be committed, so it goes now.")
        return deferred

    def _refusing(self, f: Finding) -> set[str]:
        """The gyms a refusal finding names as refusing: its own, or those of a pooled one."""
        return {f.gym} if f.gym else {g for g, rate in (f.evidence.get("by_gym") or {}).items()
                                      if g in self.gyms and rate >= diagnostics.INVALID_FRAC}

    def vetted(self, candidates: list[Intervention | None]) -> Intervention | None:
        """The first candidate the gate would accept (gate_refusal) and whose replay on the recent
        trajectories shows it can work (orchestrator.agents.remedies.vet); each one dropped is
        recorded with the reason."""
        for act in candidates:
            if act is None or act.subject in self._dropped:
                continue
            why_not = self.gate_refusal(act)
            # the gym its effect is judged on: its own, or the one its Expect line names (a
            # shared module "for tau" is measured on score/tau). The CPU run of 16 steps
            # (2026-12-06, second) added eau_progress for tau two steps after tau's example, so
            # neither could be told apart and tau waited two sessions on both
            scope = remedies.gym_scope(act, self.gyms, self.ws)
            judged = remedies.target_gyms(act, self.gyms)
            scope = scope or (judged[0] if len(judged) == 1 and len(self.gyms) > 1 else None)
            # a change taken back once is not made again on the same finding: the H200 run of
            # 2026-12-06 (seeds 1 and 2) switched no_repeat on, off after its window measured no
            # effect, and on again, four sessions running, each ending the session for every gym
            again = [f"{p} {change}" for p, v in act.knobs.items()
                     if (p, change := f"{self.value(p)} -> {v}") in self.avoid]
            if not why_not and again:
                why_not = (f"{act.subject}: not committed, as the same change ({', '.join(again)}) "
                           f"was taken back before: reverted after its window in this workspace "
                           f"(git log, Reverts:), or recorded as harmful in the experience pool.")
            if not why_not and scope and f"gym:{scope}" in self.busy:
                why_not = (f"{act.subject}: not committed yet, as the last change to {scope} is "
                           f"still being measured on {scope}'s metric.")
            if not why_not:
                why_not, shown = remedies.vet(self, act, self.episodes, self.bench)
            if why_not:
                self._dropped.add(act.subject)
                self.unremedied.append(why_not)
                continue
            if shown:
                act.why = f"{act.why} Before committing: {shown}."
            self._vetted[id(act)] = act
            return act
        return None

    def gate_refusal(self, act: Intervention) -> str:
        """Why the gate would refuse the intervention's knob writes, in its own words (its first
        reason), or "": asked before committing, as the gate's per-knob checks need no commit.
        Outside an experiment (a bare workspace) nothing is known, and the gate judges alone."""
        from orchestrator import gate_checks
        from orchestrator.gate_context import GateContext

        exp_dir = self.ws.parent
        if not act.knobs or not (exp_dir / "experiment.json").exists():
            return ""
        writes = {p: (self.value(p), v) for p, v in act.knobs.items()}
        reasons = gate_checks.knob_write_reasons(writes, self.schema or {},
                                                 GateContext.for_experiment(exp_dir),
                                                 knobs=self.knobs)
        if not reasons:
            return ""
        first = reasons[0].removeprefix("knobs.json: ")
        more = f" (and {len(reasons) - 1} more)" if len(reasons) > 1 else ""
        return f"{act.subject}: not committed, because the gate would refuse it: {first}{more}"

    def why_not(self, f: Finding, run_dir: Path, said: bool = False) -> str | None:
        """One line: a finding this session leaves alone, and why (the session's summary); None
        where its remedies' replays have said why already (`said`) and nothing more is known."""
        if f.kind == "deadlock" and f.evidence.get("at_rollout_cap"):
            cap = diagnostics.rollout_turn_cap(run_dir)
            return (f"Every such episode ends at the trainer's rollout.max_turns {cap} (config.json), "
                    f"which no workspace file moves, so a new run with a larger --set "
                    f"rollout.max_turns is needed: {f.message}")
        if f.kind == "restated_prompt":
            return (f"No remedy of the built-in agent's kinds targets it (the examples shown ask "
                    f"questions of their own, and a turn's record lacks the prompt a reward module "
                    f"would compare it with): {f.message}")
        if f.kind == "uninformative_user":
            return (f"No remedy of the built-in agent's kinds targets it: a user that names what it "
                    f"may be asked about would leak where the word is the answer (telepathy, "
                    f"turtle), so the rule to add, for {f.gym} alone, is for a person or a Claude "
                    f"Code or Codex session (users/<bench>/rules.json): {f.message}")
        if f.kind == "loop" and self._stalled_by_user(f.gym):
            return (f"No repeat cost while the {f.gym} user tells again what it told to a question "
                    f"that asks for a fact it never told (the stale_disclosure finding): the "
                    f"policy repeats a question the user left unanswered: {f.message}")
        if f.kind == "stale_disclosure" and not said:
            return (f"user.{f.gym}.facts_per_reply is at its maximum or still being measured, and "
                    f"no rule can make the user tell an asked fact before a told one: {f.message}")
        if f.kind == "stale_rollouts":
            return (f"No workspace file moves the trainer's weight copy; the run's rollouts are "
                    f"not the trained policy's until a person fixes the trainer: {f.message}")
        if f.kind == "user_loop" and self.value(f"user.{f.gym}.repetition_penalty") is None:
            return (f"The mixture is pinned or at its maximum, and this workspace has no "
                    f"user.{f.gym}.repetition_penalty (it was made before the knob existed): "
                    f"copy the knob and its schema entry from the project's workspace/ to repair "
                    f"the LLM user: {f.message}")
        if f.kind == "module_errors":
            return (f"The experiment switches the module off once half its calls fail "
                    f"(orchestrator/reward_guard.py), and its code is for a person to fix: {f.message}")
        if said:
            return None
        return f"No remedy within the knobs' limits, or its knobs are still being measured: {f.message}"

    # ---- invalid actions: help the policy find the format, and take the help back
    def demo_examples(self, gym: str) -> int:
        """Examples demonstrations/<bench>.json holds for `gym` (the knob's real ceiling)."""
        bench = next((b for b, gyms in BENCH_GYMS.items() if gym in gyms), None)
        try:
            data = json.loads((self.ws / "demonstrations" / f"{bench}.json").read_text())
        except (OSError, ValueError):
            return 0
        return len(data.get(gym) or []) if isinstance(data, dict) else 0

    def _refusal_evidence(self, gyms: list[str], f: Finding) -> str:
        """The refusal findings of the gyms an example goes to, in their own words; a gym no
        finding judged is said to be one. The finding that led here may be another gym's: on the
        H100 rerun of 2026-12-05 an example for function quoted tau's refusals, tau being at its
        example limit."""
        said = {x.gym: x.message for x in self.findings if x.kind == "invalid_actions" and x.gym}
        pooled = [x for x in self.findings if x.kind == "invalid_actions" and not x.gym]
        parts = [said[g] for g in gyms if g in said]
        unjudged = [g for g in gyms if g not in said and not any(
            g in (x.evidence.get("by_gym") or {}) for x in pooled)]
        parts += [x.message for x in pooled]
        if unjudged:
            parts.append(f"No finding judged the refusals of {', '.join(unjudged)} (too few recent "
                         f"turns, or not sampled lately), so {'it gets' if len(unjudged) == 1 else 'they get'} "
                         f"an example as the gyms that refuse do.")
        return " ".join(dict.fromkeys(parts)) or f.message

    @property
    def _grouped_example_dropped(self) -> bool:
        return self._grouped_example_subject in self._dropped

    def _step_examples_first(self, writes: dict[str, int]) -> tuple[dict[str, str], str]:
        """For each gym a refusal example goes to that also never takes a step its success needs
        (a missing_step finding), the example that takes the step first among those shown, as
        the same commit's file change; the files and a sentence for the Why. The H100 run of
        2026-12-06 (seed 0, second run) showed tau its examples that ask but never identify the
        user at steps 12 and 20, for its refusals, and the identification example only at step
        24, after the refusals had fallen: too late to be measured."""
        datas: dict[str, dict[str, Any]] = {}
        moved: list[str] = []
        for path, new in writes.items():
            gym = path.split(".")[1]
            rel = f"demonstrations/{remedies.GYM_BENCH.get(gym)}.json"
            if {rel, f"{rel}#{gym}"} & (self.busy | self.avoid_files) or not (self.ws / rel).exists():
                continue
            for step in dict.fromkeys(x.evidence.get("step") for x in self.findings
                                      if x.kind == "missing_step" and x.gym == gym):
                if not step:
                    continue
                data = datas.get(rel) or json.loads((self.ws / rel).read_text())
                first = remedies.step_example_first(data, gym, step, new)
                if first is not None:
                    datas[rel] = data
                    moved.append(f"{gym}'s first example is now {first['id']}, which uses "
                                 f"{remedies.S.WHAT[step]}, a step no recent {gym} episode took")
                    break
        files = {rel: json.dumps(d, indent=2, ensure_ascii=False) + "\n" for rel, d in datas.items()}
        return files, (" " + "; ".join(moved) + "." if moved else "")

    def on_invalid_actions(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Most turns refused: the policy has not seen the format. One more worked example for
        each gym concerned (the whole run's gyms when the finding pools them), within the knob's
        delta and the examples the file holds; else the shipped format reward. Not when the
        newest step's refusals are below the finding's threshold already: the finding pools three
        steps, and the CPU demo once added a second example at step 6 with refusals at 0.00."""
        latest = self._latest_refusals(f.gym)
        if latest is not None and latest[1] < diagnostics.INVALID_FRAC:
            self.unremedied.append(f"Refusals fell to {latest[1]:.2f} at step {latest[0]}, so no worked "
                                   f"example is added (those shown already work): {f.message}")
            return None
        # every gym some refusal finding names (one remedy, one cause), and the run's gyms whose
        # refusals no finding judged (too few recent turns, or not sampled lately): they have not
        # seen the format either
        seen = {x.gym for x in self.findings if x.gym and x.kind in ("invalid_actions", "format_learned")} | \
            {g for x in self.findings for g in (x.evidence.get("by_gym") or {})}
        gyms = [x for x in self.gyms if x not in seen]
        for g in [x for x in self.findings if x.kind == "invalid_actions"] or [f]:
            by_gym = g.evidence.get("by_gym") or {}
            gyms += [g.gym] if g.gym else [x for x, rate in by_gym.items()
                                           if rate >= diagnostics.INVALID_FRAC]
        gyms = [g for g in self.gyms if g in gyms]
        if f.gym in gyms and self._grouped_example_dropped:
            # the example for every refusing gym was left for a later session, as this one has
            # changed other gyms: this gym's own example goes beside them, judged on its own
            # refusals (the H100 run of 2026-12-06, step 24: turtle refused 43% and got nothing)
            gyms = [f.gym]
        busy = [g for g in gyms if f"env.{g}.demonstrations" in self.busy]
        if busy and (f.gym in busy or len(busy) == len(gyms)):
            # the reason first: a session line keeps its first sentences (orchestrator/sentences.py)
            # and the CPU demo's s002 line once showed only the stale finding
            self.waiting = (f"The worked examples just shown to {', '.join(busy)} are still being "
                            f"measured, so none is added meanwhile: {f.message}")
            return None     # one cause at a time
        if busy:
            # a pooled finding: the gyms whose examples are being measured wait, the others get
            # theirs now. The CPU run of 16 steps (2026-12-06) held persuade's example (refusals
            # 0.65) two sessions on travel's, which the finding named beside it.
            self.unremedied.append(f"The worked examples just shown to {', '.join(busy)} are still "
                                   f"being measured, so {', '.join(busy)} {'gets' if len(busy) == 1 else 'get'} none "
                                   f"more meanwhile.")
            gyms = [g for g in gyms if g not in busy]
            self.held |= set(busy)      # their refusals cause their other findings: no second cause
        refusing = [g for g in gyms if g in self._refusing(f)]
        if f.gym is None and self.defer_global and refusing:
            # after a change that reached every gym, an example for several gyms would wait on
            # the gyms' own findings (and be left for a later session once one is committed):
            # the gym that refuses most gets its own now, judged on its own refusals
            rates = f.evidence.get("by_gym") or {}
            first = max(refusing, key=lambda g: rates.get(g, 0.0))
            rest = [g for g in gyms if g != first]
            if rest:
                self.unremedied.append(f"{', '.join(rest)}: no worked example added this session, as "
                                       f"the last session's change reached every gym and this one "
                                       f"goes gym by gym ({first} refuses most).")
            gyms = [first]
        writes = {}
        for gym in gyms:
            path = f"env.{gym}.demonstrations"
            new = self.step(path, +1)
            if new is not None and new <= self.demo_examples(gym):
                writes[path] = new
        if writes:
            files, moved = self._step_examples_first(writes)
            names = ", ".join(sorted({p.split(".")[1] for p in writes}))
            old = sorted({self.value(p) for p in writes})
            # one gym's example is judged on that gym's refusals, whichever finding named it
            one = next(iter(writes)).split(".")[1] if len(writes) == 1 else None
            expect = (f"invalid/{one} falls, then score/{one} rises." if one and len(self.gyms) > 1
                      else "episode/invalid_rate falls, then reward/mean rises.")
            act = Intervention(
                f"Show one more worked example to {names} ({'/'.join(map(str, old))} -> "
                f"{'/'.join(map(str, sorted(set(writes.values()))))})",
                f"{self._refusal_evidence([p.split('.')[1] for p in writes], f)} Refused turns "
                f"earn nothing, so PPO has no signal; a worked exchange in "
                f"the context made an untrained 135M policy write valid actions (0 -> 81% of turns "
                f"on held-out IntentionGym tasks).{moved}", expect, knobs=writes, files=files)
            if len(writes) > 1:
                self._grouped_example_subject = act.subject
            return act
        path = f"reward.modules.{FORMAT_MODULE}.enabled"
        modules = self.value("reward.modules") or {}
        if (path, "False -> True") in self.avoid:
            # a revert took it back (measured "no effect" or "harmed"): switching it on again on
            # the same finding loops (the H100 rerun of 2026-12-05: on at 16, off at 20, on at 24)
            self.unremedied.append(f"The format reward {FORMAT_MODULE} is not switched on again: a "
                                   f"revert took it back after its window (git log, Reverts:).")
            return None
        if FORMAT_MODULE in modules and not modules[FORMAT_MODULE].get("enabled") \
                and (self.ws / "rewards" / f"{FORMAT_MODULE}.py").exists() and path not in self.busy:
            return Intervention(f"Enable the format reward {FORMAT_MODULE}",
                                f"{f.message} The worked examples are at their limit; a small "
                                f"credit for an accepted action gives PPO a difference to learn from.",
                                "episode/invalid_rate falls.", knobs={path: True})
        return None

    # ---- a farmed reward module, and turns spent repeating
    def on_reward_hack(self, f: Finding, run_dir: Path) -> Intervention | None:
        """A module pays mostly for repeated turns: limit it to first disclosures and unrepeated
        turns (a guard appended to its source), or, where it has no turn reward or is guarded
        already, switch it off."""
        name = f.evidence.get("module")
        rel, path = f"rewards/{name}.py", f"reward.modules.{name}.enabled"
        src_path = self.ws / rel
        if not name or rel in self.busy or path in self.busy or not src_path.exists():
            return None
        src = src_path.read_text()
        gyms = ", ".join(f.evidence.get("gyms") or self.gyms)
        expect = "episode/repeat_rate falls; score/mean does not fall."
        if GUARD_MARK not in src and re.search(r"^def turn_reward\(", src, re.M):
            why = (f"{f.evidence.get('share', 0):.0%} of its credit went to repeated turns "
                   f"({gyms}); it now pays first disclosures only.")
            return Intervention(f"Pay {name} for first disclosures only",
                                f"{f.message} A question asked again is answered again, so the "
                                f"policy earns more by repeating itself than by progressing.",
                                expect, files={rel: src.rstrip() + "\n" + GUARD_SOURCE.format(mark=GUARD_MARK, why=why)})
        if (self.value("reward.modules") or {}).get(name, {}).get("enabled"):
            return Intervention(f"Disable reward module {name}: the policy farms it",
                                f"{f.message} It is guarded against repeats already (or pays whole "
                                f"episodes), so it goes.", expect, knobs={path: False})
        return None

    def on_stale_disclosure(self, f: Finding, run_dir: Path) -> Intervention | None:
        """The user tells again what it told while the question asks for a fact it never told:
        one more fact a reply, so that the asked fact comes with the told one (the rule engine
        takes the best matches first, told or not; no rule can reorder them). Replayed on the
        recent turns before committing: it must disclose more there."""
        gym = f.gym
        if gym not in self.gyms:
            return None
        why = (f"{f.message} The policy asked for the right facts; the user's one fact a reply "
               f"went to the one it had told, so the same question got the same reply until the "
               f"turn limit or the reveal budget ended the episode.")
        # the curriculum's own step of facts_per_reply (a lower match_threshold would not help)
        expect = f"stale/{gym} falls, then score/{gym} rises."
        return self.vetted([dataclasses.replace(a, why=why, expect=expect)
                            for a in remedies.ease_disclosure(self, gym, why)
                            if f"user.{gym}.facts_per_reply" in a.knobs])

    def _stalled_by_user(self, gym: str | None) -> bool:
        return any(x.kind == "stale_disclosure" and x.gym == gym for x in self.findings)

    def on_loop(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Most of a gym's turns repeat: switch on the shipped cost for a repeated turn; not where
        the user's re-telling makes the policy ask again (a stale_disclosure finding of the gym):
        the cost would charge the policy for a question the user left unanswered."""
        if self._stalled_by_user(f.gym):
            return None
        path = f"reward.modules.{NO_REPEAT_MODULE}.enabled"
        modules = self.value("reward.modules") or {}
        if NO_REPEAT_MODULE not in modules or modules[NO_REPEAT_MODULE].get("enabled") \
                or path in self.busy or not (self.ws / "rewards" / f"{NO_REPEAT_MODULE}.py").exists():
            return None
        return Intervention(f"Enable the repeat cost {NO_REPEAT_MODULE} ({f.gym} loops)",
                            f"{f.message} A repeated question gets the same answer: the turn is "
                            f"spent and the episode runs to its turn limit.",
                            f"episode/repeat_rate falls, then score/{f.gym or 'mean'} rises.",
                            knobs={path: True})

    # ---- episodes that make no progress: the missing step, guesses, and what did not help
    def on_missing_step(self, f: Finding, run_dir: Path) -> Intervention | None:
        """A step the gym's success needs, never taken: a worked example that takes it, first
        among those shown; else a reward at its first occurrence (it must pay on the recent
        turns, so some episodes must take it); else one more example that takes it."""
        gym, step = f.gym, f.evidence.get("step")
        if gym not in self.gyms or not step:
            return None
        return self.vetted([remedies.worked_example(self, gym, step, f.message),
                            remedies.step_reward(self, gym, step, f.message),
                            remedies.more_examples(self, gym, step, f.message)])

    def _copied_example_of(self, msg: str, gym: str | None) -> Finding | None:
        """The copied_example finding of `gym` whose copied values come from the example the
        commit (its message `msg`) put in, while the step's second example can still go in."""
        for x in self.findings:
            if x.kind != "copied_example" or x.gym != gym or \
                    not any(i in msg for i in x.evidence.get("from") or []):
                continue
            if remedies.second_example(self, x.gym, str(x.evidence.get("step")), "") is not None:
                return x
        return None

    def on_copied_example(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Calls that carry the shown example's own values: the same exchange with another
        customer, shown next (in the H100 runs of 2026-12-07, 69 of 91 tau episodes that called
        find_user_id_by_name_zip after the step example was shown called it with its "Souza"
        or "30301"; 4 used their user's facts and identified the user)."""
        gym, step = f.gym, f.evidence.get("step")
        if gym not in self.gyms or not step:
            return None
        return self.vetted([remedies.second_example(self, gym, step, f.message)])

    def on_copied_question(self, f: Finding, run_dir: Path) -> Intervention | None:
        """A shown example's question asked where the task does not fit it: one more example,
        whose questions differ (remedies.other_example says what it changed when measured)."""
        if f.gym not in self.gyms:
            return None
        return self.vetted([remedies.other_example(self, f.gym, f.evidence.get("questions") or [],
                                                   f.message)])

    def on_rejected_calls(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Calls with the right tag whose arguments the environment rejects: an example that
        makes the call right, first among those shown, else one more shown, judged by the share
        of the gym's turns rejected (function's probes of two integers were half its turns at
        step 24 of the H100 runs of 2026-12-06, while its shown example probes with four)."""
        gym, step = f.gym, f.evidence.get("step")
        if gym not in self.gyms or step not in remedies.S.NEEDED.get(gym, ()):
            return None
        expect = f"rejected/{gym} falls, then score/{gym} rises."
        acts = [remedies.worked_example(self, gym, step, f.message),
                remedies.more_examples(self, gym, step, f.message)]
        return self.vetted([dataclasses.replace(a, expect=expect) for a in acts if a is not None])

    def on_early_answer(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Answers before anything was learnt: a reward at the first disclosure of an episode,
        else easier disclosure where the gym's episodes run to the cap (both replayed)."""
        if f.gym not in self.gyms:
            return None
        return self.vetted([remedies.step_reward(self, f.gym, "disclosed", f.message),
                            *self._curriculum(f.gym, f.message)])

    def _curriculum(self, gym: str, why: str) -> list[Intervention]:
        """Easier disclosure while the gym's success is 0 (its recent episodes and its
        success/<gym> over the window) and its episodes run to the turn cap."""
        success = diagnostics.recent_mean(self.metrics, f"success/{gym}", self.window)
        if (success or 0.0) > 0.0 or not remedies.runs_to_cap(self.episodes, gym):
            return []
        return remedies.ease_disclosure(self, gym, why)

    def on_no_effect(self, f: Finding, run_dir: Path) -> Intervention | None:
        """A change of an agent's measured "no effect" over its window goes back, by a commit
        that says so: help that does not help leaves the next change's effect one cause."""
        sha = f.evidence["commit"]
        try:
            by_agent = gitops.author_email(self.ws, sha).endswith("@agents.eau")
            msg = gitops.message(self.ws, sha)
        except gitops.GitError:
            return None
        if not by_agent or re.search(r"^Reverts: ", msg, re.M):
            return None        # a person's change stays; a revert is not reverted back
        guarded = self._guarded_modules(sha)
        if guarded:
            self.unremedied.append(
                f"Revert {sha[:10]}: not committed, because it guards {', '.join(guarded)} against "
                f"farmed credit (it stops paying turns that repeat an earlier turn of their episode): "
                f"its effect is the credit it no longer pays, which a repeat rate within a window "
                f"does not show until the policy has learnt to farm (on the H200, 0.14 -> 0.47-0.66 "
                f"of elicited_fact's credit over 8-16 steps): {f.message}")
            return None
        copied = self._copied_example_of(msg, f.gym)
        if copied is not None:
            self.unremedied.append(
                f"Revert {sha[:10]}: not committed, because the policy follows the worked example "
                f"it shows, down to its customer's values ({copied.message.rstrip('.')}): the same "
                f"exchange with another customer goes in instead. In the H100 runs of 2026-12-07 such an "
                f"example was taken back as \"no effect\" (0 -> 0) while most of its calls copied "
                f"it: {f.message}")
            return None
        act = remedies.revert(self, sha, f)
        if act is not None:
            # "within N steps": the verdict covers its window only. In the H100 runs of
            # 2026-12-07 the search shares went on rising after three step rewards so taken
            # back, to 2.2-3.5 times PPO's of the same seed (benchmarks/RESULTS-learning.md)
            within = f" within {f.evidence['window']} steps" if f.evidence.get("window") else ""
            act.subject = f"Revert {sha[:10]}: no effect on {f.evidence.get('metric')}{within}"
            act.expect = f"{f.evidence.get('metric')} stays within its noise floor."
            act.settled = True
        return act

    def _guarded_modules(self, sha: str) -> list[str]:
        """The reward modules `sha` guarded against farmed credit (GUARD_MARK added to them)."""
        try:
            parent = gitops.git(self.ws, "rev-parse", f"{sha}^").strip()
            names = gitops.git(self.ws, "diff", "--name-only", parent, sha).split()
        except gitops.GitError:
            return []
        return [Path(rel).stem for rel in names if rel.startswith("rewards/") and rel.endswith(".py")
                and GUARD_MARK in (gitops.show_file(self.ws, sha, rel) or "")
                and GUARD_MARK not in (gitops.show_file(self.ws, parent, rel) or "")]

    def on_format_learned(self, f: Finding, run_dir: Path) -> Intervention | None:
        """The policy writes valid actions: switch the format reward off (it credits form, not
        content). Demonstrations go later, through the harder direction (on_high_success)."""
        path = f"reward.modules.{FORMAT_MODULE}.enabled"
        modules = self.value("reward.modules") or {}
        if not (modules.get(FORMAT_MODULE) or {}).get("enabled") or path in self.busy:
            return None
        return Intervention(f"Disable the format reward {FORMAT_MODULE}: the format is learned",
                            f"{f.message} Credit for form alone would soon reward long episodes "
                            f"of valid but useless turns.",
                            "episode/invalid_rate stays low; reward/mean follows the task reward.",
                            knobs={path: False})

    def on_nan(self, f: Finding, run_dir: Path) -> Intervention | None:
        return self._restart(f, run_dir)

    def _restart_refused(self, run_dir: Path) -> bool:
        """The experiment refused a restart of this run (its cap is reached): do not ask again."""
        return any(c.get("run") == run_dir.name and c.get("status") == "refused"
                   for c in effects.ledger_read(run_dir.parent, "control"))

    def on_entropy_collapse(self, f: Finding, run_dir: Path) -> Intervention | None:
        if f.irreversible:
            return self._restart(f, run_dir)
        return self._entropy(f)

    def on_template_collapse(self, f: Finding, run_dir: Path) -> Intervention | None:
        return self._entropy(f)

    def _restart(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Resume from the newest checkpoint before the failure, else restart (section 4.6)."""
        if self._restart_refused(run_dir):
            return None
        first_bad = min((f.evidence.get("first_step") or {}).values(), default=None)
        ckpts = sorted(p.name for p in (run_dir / "checkpoints").glob("step-*") if p.is_dir())
        good = [c for c in ckpts if first_bad is None or int(c.split("-")[1]) < first_bad]
        req: dict[str, Any] = {"action": "resume", "from_checkpoint": good[-1]} if good and first_bad \
            else {"action": "restart"}
        req["why"] = f"{run_dir.name}: {f.message}"       # the gate allows action, from_checkpoint, why
        return Intervention(f"Request a {req['action']} of {run_dir.name} after {f.kind}",
                            f"{f.message} The run cannot recover in place.",
                            "a new run from the carried workspace; reward/mean finite again.",
                            files={"control.json": json.dumps(req, indent=2) + "\n"})

    def on_harm(self, f: Finding, run_dir: Path) -> Intervention | None:
        return remedies.revert(self, f.evidence["commit"], f)

    def on_deadlock(self, f: Finding, run_dir: Path) -> Intervention | None:
        if f.evidence.get("at_rollout_cap"):
            # the trainer's rollout.max_turns ends them and no workspace knob moves it; what
            # helps is getting the facts sooner: easier disclosure (replayed before it is committed)
            return self.vetted([a for g in self._gyms_for(f) for a in self._curriculum(g, f.message)])
        for gym in self._gyms_for(f):
            mq = f"env.{gym}.min_questions"
            new = self.step(mq, -1) if (self.value(mq) or 0) > 0 else None
            if new is not None:
                return Intervention(f"Lower {mq} {self.value(mq)} -> {new} to end deadlocks",
                                    f"{f.message} Episodes wait for questions they never get credited.",
                                    f"success/{gym} rises; fewer truncated episodes.", knobs={mq: new})
            ms = f"env.{gym}.max_steps"
            new = self.step(ms, +1)
            cap = diagnostics.rollout_turn_cap(run_dir)
            if new is not None and cap is not None and new > cap:
                new = None      # the rollout ends episodes at its own cap first (the gate refuses)
            if new is not None:
                return Intervention(f"Raise {ms} {self.value(ms)} -> {new} to end deadlocks",
                                    f"{f.message} Episodes run out of turns before they can answer.",
                                    f"success/{gym} rises; fewer truncated episodes.", knobs={ms: new})
        return None

    def on_leak(self, f: Finding, run_dir: Path) -> Intervention | None:
        kinds = sorted((f.evidence.get("kinds") or {}).items(), key=lambda kv: -kv[1])
        for gym in self._gyms_for(f):
            wk = f"user.{gym}.withhold_kinds"
            held = self.value(wk)
            if kinds and isinstance(held, list) and wk not in self.busy and kinds[0][0] not in held \
                    and kinds[0][0] != "?":
                new = sorted([*held, kinds[0][0]])
                return Intervention(f"Withhold fact kind {kinds[0][0]!r} from {gym} user replies",
                                    f"{f.message} The leaked facts are mostly of kind {kinds[0][0]!r}.",
                                    "user/leak_rate falls.", knobs={wk: new})
            act = self._rein_in_rule(f, gym) or self._fewer_facts(f, gym)
            if act is not None:
                return act
        return None

    def on_user_loop(self, f: Finding, run_dir: Path) -> Intervention | None:
        """An LLM user saying one sentence over and over (section 4.2: the meta-agent repairs the
        user): more of the gym's episodes go to the symbolic user, whose replies are its rules'
        templates and never loop, where the run's mixture may move. A run of `--user-mode` pins
        the mixture (the user trained against is what that run measures): there the LLM user's
        repetition penalty is raised instead."""
        gym = f.gym
        if gym not in self.gyms:
            return None
        # the mixture pinned, the LLM user itself is repaired: a sentence its reply has said made
        # less likely (1.0 -> 1.3 at the schema's x-max-delta; 10 of 48 recorded replies looped
        # without it and 0 with it, benchmarks/user_loop_probe.py)
        for path, delta, subject, how in (
                (f"user.{gym}.strategy_mix", 0.25,
                 f"Answer more {gym} episodes with the symbolic user",
                 "the symbolic user's replies are its rules' templates, which do not loop"),
                (f"user.{gym}.repetition_penalty", None,
                 f"Raise the {gym} LLM user's repetition penalty",
                 "a penalty on the tokens its reply has said makes the user less likely to say "
                 "a sentence again")):
            new = self.step(path, +1, default_delta=delta)
            if new is not None:
                return Intervention(f"{subject} ({path} {self.value(path)} -> {new})",
                                    f"{f.message} The policy hears a loop instead of an answer, "
                                    f"and copies it; {how}.",
                                    f"looped/{gym} falls.", knobs={path: new})
        return None

    def _rein_in_rule(self, f: Finding, gym: str) -> Intervention | None:
        """The symbolic rule that fires on most leaking turns, when it discloses facts nobody asked
        about: restrict it to facts the agent's message matched (section 4.2: edit the user)."""
        counts = sorted((f.evidence.get("rules") or {}).items(), key=lambda kv: -kv[1])
        if not counts or counts[0][1] < 0.5 * sum(n for _, n in counts):
            return None
        bench = next((b for b, gyms in BENCH_GYMS.items() if gym in gyms), None)
        rel = f"users/{bench}/rules.json"
        path = self.ws / rel
        if bench is None or not path.exists() or rel in self.busy:
            return None
        data = json.loads(path.read_text())
        rule = next((r for r in data.get("rules", []) if r.get("id") == counts[0][0]), None)
        if rule is None or rule.get("reveal") in (None, "none", "matched") or \
                rule.get("when", {}).get("matched") is True:
            return None
        rule["reveal"] = "matched"
        rule.setdefault("when", {})["matched"] = True
        return Intervention(f"Rein in user rule {rule['id']!r}: reveal only facts the agent asked about",
                            f"{f.message} Rule {rule['id']!r} fires on {counts[0][1]} of the leaking "
                            f"replies and discloses the next hidden fact unasked.",
                            "user/leak_rate falls.",
                            files={rel: json.dumps(data, indent=2, ensure_ascii=False) + "\n"})

    def on_reply_growth(self, f: Finding, run_dir: Path) -> Intervention | None:
        for gym in self._gyms_for(f):
            act = self._fewer_facts(f, gym)
            if act is not None:
                return act
        return None

    def _fewer_facts(self, f: Finding, gym: str) -> Intervention | None:
        fp = f"user.{gym}.facts_per_reply"
        new = self.step(fp, -1) if (self.value(fp) or 0) > 1 else None
        if new is not None:
            return Intervention(f"Lower {fp} {self.value(fp)} -> {new} to rein in leaks",
                                f"{f.message} Replies disclose more than was asked.",
                                "user/leak_rate falls.", knobs={fp: new})
        vi = f"user.{gym}.volunteer_interval"
        if (self.value(vi) or 0) > 0 and vi not in self.busy and (vi, f"{self.value(vi)} -> 0") not in self.avoid:
            return Intervention(f"Stop {gym} users volunteering facts ({vi} {self.value(vi)} -> 0)",
                                f"{f.message} Volunteered facts are revealed unasked.",
                                "user/leak_rate falls.", knobs={vi: 0})
        return None

    def _entropy(self, f: Finding) -> Intervention | None:
        path = "agent.entropy_coeff"
        new = self.step(path, +1, default_delta=0.004)
        if new is None:
            return None
        return Intervention(f"Raise {path} {self.value(path)} -> {new} against collapse",
                            f"{f.message} The policy is collapsing onto one behaviour.",
                            "actor/entropy rises.", knobs={path: new})

    def on_low_success(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Success near zero: easier disclosure where the episodes run to the turn cap, else an
        intermediate reward (a shipped module switched on, or eau_progress written), each replayed
        on the recent trajectories first; eau_progress applies only where its replay pays."""
        target = f.gym or "mean"       # gym None: the all-gym success/mean was near zero
        gyms = [f.gym] if f.gym else list(self.gyms)
        candidates: list[Intervention | None] = [a for g in gyms for a in self._curriculum(g, f.message)]
        modules = self.value("reward.modules") or {}
        for name in sorted(modules):
            src = (self.ws / "rewards" / f"{name}.py")
            path = f"reward.modules.{name}.enabled"
            # the format reward credits form and the repeat cost only charges, neither is
            # progress: refused turns and loops call for them (on_invalid_actions, on_loop)
            if name not in (FORMAT_MODULE, NO_REPEAT_MODULE) and not modules[name].get("enabled") \
                    and src.exists() and path not in self.busy and (path, "False -> True") not in self.avoid \
                    and f"rewards/{name}.py" not in self.avoid_files \
                    and any(re.search(rf"['\"]{g}['\"]", src.read_text()) for g in gyms):
                candidates.append(Intervention(
                    f"Enable reward module {name} for {', '.join(gyms)}",
                    f"{f.message} The policy sees no signal before its first success.",
                    f"score/{target} rises, then success/{target}.", knobs={path: True}))
        rel = f"rewards/{PROGRESS_MODULE}.py"
        if PROGRESS_MODULE not in modules and f"reward.modules.{PROGRESS_MODULE}.enabled" not in self.busy \
                and rel not in self.avoid_files:
            # it pays first disclosures: only where the recent turns had some can it pay
            pay, _ = replay.module_pay(PROGRESS_SOURCE.format(gyms=list(gyms)), self.episodes)
            paying = [g for g in gyms if g in pay and pay[g].pays] or list(gyms)
            candidates.append(Intervention(
                f"Add intermediate reward {PROGRESS_MODULE} for {', '.join(paying)}",
                f"{f.message} The policy sees no signal before its first success.",
                f"score/{target} rises, then success/{target}.",
                knobs={f"reward.modules.{PROGRESS_MODULE}": {"enabled": True, "weight": 0.5}},
                files={rel: PROGRESS_SOURCE.format(gyms=paying)}))
        return self.vetted(candidates)

    def on_high_success(self, f: Finding, run_dir: Path) -> Intervention | None:
        """Past 0.80: one step harder (the gate allows it only there). Help goes first: worked
        examples, then the user's disclosure where an earlier session eased it (curriculum),
        then the environment's knobs, max_steps last (A.2: 10 -> 6 harmed)."""
        gym = f.gym or self.gyms[0]
        env = self.value(f"env.{gym}") or {}
        names = sorted(env, key=lambda n: (n != "demonstrations", n == "max_steps"))
        paths = [f"env.{gym}.{names[0]}"] if names[:1] == ["demonstrations"] else []
        paths += remedies.eased(self, gym) + [f"env.{gym}.{n}" for n in names if n != "demonstrations"]
        for path in paths:
            harder = diagnostics.knob_spec(self.schema, path).get("x-harder")
            if harder not in ("up", "down"):
                continue
            new = self.step(path, +1 if harder == "up" else -1)
            if new is not None:
                return Intervention(f"Make {gym} harder: {path} {self.value(path)} -> {new}",
                                    f"{f.message} Easy episodes teach little.",
                                    f"success/{gym} falls somewhat and then recovers; reward/mean stays.",
                                    knobs={path: new})
        return None


def _busy_knobs(ctx: base.SessionContext) -> set[str]:
    """Knobs (and files) changed by an agent commit whose effect is not measured yet."""
    measured = {e["commit"] for e in effects.ledger_read(ctx.exp_dir, "effect")}
    gyms = bench_gyms(ctx.bench, ctx.run_dir)
    busy: set[str] = set()
    for s in effects.ledger_read(ctx.exp_dir, "session"):
        for sha in s.get("commits") or []:
            if sha in measured:
                continue
            try:
                parents = gitops.git(ctx.workspace, "rev-list", "--parents", "-n1", sha).split()[1:]
            except gitops.GitError:
                continue
            old = gitops.knobs_at(ctx.workspace, parents[0]) if parents else {}
            busy |= set(diagnostics.knob_changes(old, gitops.knobs_at(ctx.workspace, sha)))
            if parents:     # other files (rules, reward modules) count by path
                for rel in gitops.git(ctx.workspace, "diff", "--name-only", parents[0], sha).split():
                    busy |= demo_marks(ctx.workspace, rel, parents[0], sha) or {rel}
            # the gym whose metric it is judged on: no second change to that gym meanwhile, or
            # two changes would share one measured effect (the CPU demo of 2026-12-06 showed
            # function a second example while its step reward was still measured on the same
            # took/function/probe)
            gym = effects.expect_gym(ctx.workspace, sha, gyms)
            if gym:
                busy.add(f"gym:{gym}")
    return busy


def last_change_reached_every_gym(ctx: base.SessionContext, gyms: list[str]) -> bool:
    """Whether the newest agent session that committed anything committed only changes whose
    Expect line names no gym of this run (a shared module, a global knob, a revert judged on
    reward/mean or episode/invalid_rate)."""
    for s in reversed(effects.ledger_read(ctx.exp_dir, "session")):
        commits = s.get("commits") or []
        if not commits:
            continue
        try:
            return not any(effects.expect_gym(ctx.workspace, sha, gyms) for sha in commits)
        except gitops.GitError:
            return False
    return False


def demo_marks(ws: Path, rel: str, old: str, new: str) -> set[str]:
    """A demonstrations file holds every gym of a bench: a commit that changed one gym's examples
    makes `<file>#<gym>` busy for that gym alone, so that another gym's worked example can go in
    meanwhile (each is measured on its own gym's metrics). Empty for other files, or when the
    file cannot be read at both commits (then the whole file counts as busy)."""
    if not rel.startswith("demonstrations/"):
        return set()
    try:
        before = json.loads(gitops.git(ws, "show", f"{old}:{rel}", check=False).strip() or "{}")
        after = json.loads(gitops.git(ws, "show", f"{new}:{rel}"))
    except (gitops.GitError, ValueError):
        return set()
    if not isinstance(before, dict) or not isinstance(after, dict):
        return set()
    return {f"{rel}#{g}" for g in set(before) | set(after) if before.get(g) != after.get(g)}


def bench_gyms(bench: str, run_dir: Path) -> list[str]:
    """The gyms this run trains on: config.json's `gyms`, else the bench's training gyms, else
    those with success metrics."""
    try:
        configured = list(json.loads((run_dir / "config.json").read_text()).get("gyms") or [])
    except (OSError, ValueError):
        configured = []
    return configured or list(TRAIN_GYMS.get(bench, ())) or \
        diagnostics.metric_gyms(diagnostics.read_metrics(run_dir))


def apply(ws: Path, act: Intervention, knobs: dict[str, Any]) -> dict[str, str | None]:
    """Write the intervention's files; returns the previous contents (None: the file was new)."""
    previous: dict[str, str | None] = {}
    if act.knobs:
        for path, value in act.knobs.items():
            diagnostics.set_path(knobs, path, value)
        previous["knobs.json"] = (ws / "knobs.json").read_text()
        (ws / "knobs.json").write_text(json.dumps(knobs, indent=2) + "\n")
    for rel, text in act.files.items():
        target = ws / rel
        previous[rel] = target.read_text() if target.exists() else None
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text)
    return previous


def undo(ws: Path, previous: dict[str, str | None]) -> None:
    for rel, text in previous.items():
        if text is None:
            (ws / rel).unlink(missing_ok=True)
        else:
            (ws / rel).write_text(text)


def run(ctx: base.SessionContext) -> base.SessionResult:
    """One built-in session: record findings, diagnose, plan an intervention and commit it; then,
    while what was committed changes one gym alone, the same for the next gym's findings."""
    ws, log = ctx.workspace, []
    written = experience.record_effects(ctx.exp_dir, ctx.bench, ws, ctx.experience_dir)
    log += [f"finding recorded: {p}" for p in written]
    # measured effects not yet taken back: "harmed" and "inconclusive" (no effect) are reverted
    findings = diagnostics.diagnose(ctx.run_dir, ctx.window, effects.open_effects(ctx.exp_dir, ws))
    if ctx.skill_path.parent.name == "generic":
        # the generic meta-agent baseline (paper table 4) has no EAU skill: what any RL
        # practitioner reads from the curves is left (NaN, measured harm, collapsing entropy);
        # the skill's diagnoses of users, environments and rewards are not
        findings = [f for f in findings if f.kind in GENERIC_KINDS]
        log.append("generic meta-agent: no EAU skill, only " + ", ".join(sorted(GENERIC_KINDS)))
    log += [f"diagnosis: [{f.kind}/{f.gym}] {f.message}" for f in findings]
    knobs, schema = diagnostics.load_workspace_knobs(ws)
    undone, undone_files = remedies.taken_back(ws)
    planner = Planner(knobs, schema, ws, bench_gyms(ctx.bench, ctx.run_dir),
                      experience.harmful_changes(ctx.experience_dir, ctx.bench) | undone,
                      _busy_knobs(ctx), avoid_files=undone_files, bench=ctx.bench,
                      episodes=replay.recent_episodes(ctx.run_dir), window=ctx.window)
    # a finding of a name the run has no gym of (a metric like reward/module_calls/x) is run-wide
    findings = [f if f.gym is None or f.gym in planner.gyms else dataclasses.replace(f, gym=None)
                for f in findings]
    # after a session whose change reached every gym, the gyms' own findings come first, so that
    # a remedy for every gym (a format reward, its revert) cannot hold back one gym's for good
    planner.defer_global = last_change_reached_every_gym(ctx, planner.gyms)
    transcript = ctx.session_dir / "transcript.md"
    made: list[Intervention] = []
    touched: set[str] = set()
    remaining, left = findings, []
    refused = None
    while remaining:
        act = planner.plan(remaining, ctx.run_dir)
        left += [why for why in planner.unremedied if why not in left]
        if act is None:
            break
        deferred_note = bool(left) and left[-1].startswith(f"{act.subject}: not committed before")
        if deferred_note:
            left.pop()
        scope = remedies.gym_scope(act, planner.gyms, ws)
        if deferred_note and not made:
            log.append(f"{act.subject}: goes after the gyms' own findings were tried, as none of "
                       f"them had a remedy that could be committed this session.")
        if made and scope is None and not act.settled:
            left.append(f"{act.subject}: left for a later session, as it reaches more than one gym "
                        f"and this session has committed a change to "
                        f"{', '.join(sorted(touched)) or 'every gym (a revert of a change without effect)'}.")
            # the other gyms' own findings may still have remedies of their own (the H100 run of
            # 2026-12-06 at step 24: after tau's and travel's reverts, a shared example for every
            # gym came next and ended the session before turtle's or persuade's remedy was tried)
            planner._dropped.add(act.subject)
            continue
        previous = apply(ws, act, knobs)
        log.append(f"intervention: {act.subject}")
        try:
            sha = gitops.commit_all(ws, act.message(), ctx.agent, ctx.session_id)
        except gitops.GitError as exc:       # the pre-commit hook (the gate) refused it
            undo(ws, previous)
            log.append(f"commit refused: {exc}")
            refused = f"commit refused: {exc}"
            break
        log.append(f"committed {sha}")
        made.append(act)
        if scope is None and act.settled:
            # a revert of a change measured "no effect": the gyms' own findings may follow it
            # (a gym whose own knobs it moves back gets no other change meanwhile)
            reached = {parts[1] for parts in (p.split(".") for p in act.knobs)
                       if parts[0] in ("env", "user") and len(parts) > 2} & set(planner.gyms)
            touched |= reached
            planner.busy |= set(act.knobs) | set(act.files) | {f"gym:{g}" for g in reached}
            rest = [f for f in remaining if f.gym not in reached and (
                f.kind != "no_effect" or f.evidence.get("commit") != act.reverts)]
            if len(rest) == len(remaining):
                break
            remaining = rest
            continue
        if scope is None:           # it reaches every gym: its effect must have one cause
            break
        # one intervention per gym: the next finding of another gym gets its own commit,
        # measured on that gym's metric, while what this one changed counts as busy
        touched.add(scope)
        planner.busy |= {f"gym:{scope}", *act.knobs} | {f"{rel}#{scope}" if rel.startswith("demonstrations/")
                                          else rel for rel in act.files}
        remaining = [f for f in remaining if f.gym and f.gym in planner.gyms and f.gym not in touched]
    # the session's record: every finding left alone and every remedy its replay dropped, why
    log += [f"left alone: {why}" for why in left]
    if not made:
        if refused:
            summary, status = refused, base.REFUSED
        elif left:                    # a finding is never answered with "nothing to change"
            summary, status = f"left alone: {left[0]}", base.OK
        else:
            log.append("no intervention: no finding in the recent steps.")
            summary, status = "nothing to change: no finding in the recent steps", base.OK
    else:
        summary, status = "; ".join([a.subject for a in made] + ([refused] if refused else [])), base.OK
    transcript.write_text("\n".join(log) + "\n")
    return base.SessionResult(ctx.agent, ctx.session_id, status, summary,
                              transcript=str(transcript), cost_usd=0.0)
