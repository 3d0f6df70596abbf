"""Findings about whether episodes make progress, read from the agent's turns: the steps a gym's
success needs and the policy never takes, answers given before anything was learnt, turns that
restate the prompt, reward modules that never pay in a gym, and credit farmed by repeated turns.

Each finding names its gym, counts, and quotes two turns, so a person (or a Claude Code or Codex
session running `skills/eau/scripts/diagnose.py`) sees what the built-in agent acts on. They were
missing when the built-in agent of the H200 comparison (2 seeds x 24 steps, README) went quiet
after step 12 while the step-24 trajectories showed travel episodes that never `[search]`ed and
answered option ids they never saw, tau episodes that never identified the user, turtle
"questions" restating the surface and function episodes that guessed; and when the CPU demo's
peak reward (step 7, 0.200) was half paid for one question asked three times, unflagged.
The steps themselves are defined once, in `training.steps` (what the reward modules also see).
"""
from __future__ import annotations

import json
import re
from typing import Any

from orchestrator.finding import Finding, metric_gym
from orchestrator.sentences import quote
from training import steps as S
from training.novelty import repeated_marks

MIN_EPISODES = 2          # a gym's recent episodes below this say nothing about it
MISSING_FRAC = 0.75       # share of a gym's episodes that answered (or ended) without the step
EARLY_FRAC = 0.50         # share of a gym's answering episodes that answered before learning anything
RESTATE_OVERLAP = 0.80    # share of a turn's content words that are the prompt's
RESTATE_WORDS = 4         # content words a turn needs before it can be called a restatement
RESTATE_FRAC = 0.30       # share of a gym's turns to the user that restate its prompt
IDLE_MIN_TURNS = 6        # turns a module was run on in a gym before "never paid" means something
                          # (two episodes of the CPU demo, whose rollout.max_turns is 3)
HACK_SHARE = 0.40         # credit share on repeated turns: 0.14 for elicited_fact at step 1 of the
                          # H200 comparison, 0.47-0.66 once PPO farmed it (steps 8-16)
FARM_MIN_REPEATS = 2      # paid repeated turns: the CPU demo's farmed step 7 had two (a question
                          # asked three times), so the finding shows within its 8 steps
REJECTED_FRAC = 0.20      # share of a gym's well-formed turns whose arguments were rejected: 19
                          # of 49 and 33 of 67 function turns (all turns) at step 24 of the H100
                          # runs of 2026-12-06
REJECTED_MIN_TURNS = 6    # as IDLE_MIN_TURNS: two episodes of the CPU demo
INFO_STEPS = frozenset({"disclosed", "search", "probe", "read", "identify", "lookup"})
# keys of a turn record that a reward module may read (DESIGN.md, trajectories)
TURN_KEYS = ("revealed_facts", "new_facts", "leaked_facts", "asked_question", "answered",
             "invalid_action", "tool_calls", "repeated", "first_steps", "rule_id", "rejected",
             "asked_facts")
_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset("""the and for you your are was were with that this what which from have has had
not but can could would should will into about there their they them then than when where who
how why does did its it's our out any all some more most other such only also very just one
please tell know like want need me my mine yes""".split())


def _by_gym(episodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for ep in episodes:
        out.setdefault(str(ep.get("gym") or "?"), []).append(ep)
    return out


def _turns(ep: dict[str, Any]) -> list[dict[str, Any]]:
    return [t for t in ep.get("turns") or [] if isinstance(t, dict)]


def _quotes(turns: list[dict[str, Any]], n: int = 2) -> list[str]:
    return [quote(t.get("agent")) for t in turns[:n]]


def _eg(quotes: list[str]) -> str:
    return f"; e.g. {' and '.join(quotes)}" if quotes else ""


# ----------------------------------------------------------------------------- missing steps


def find_missing_steps(episodes: list[dict[str, Any]]) -> list[Finding]:
    """A step a gym's success needs (training.steps.NEEDED) that most recent episodes of the gym
    never took before their answer: travel answering ids it never searched for, tau writing
    without identifying the user, ColBench never submitting, tau2 writing before any read."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        if gym not in S.NEEDED or len(eps) < MIN_EPISODES:
            continue
        for step in S.NEEDED[gym]:
            without = [ep for ep in eps if not S.took_before_answer(gym, _turns(ep), step)]
            if len(without) / len(eps) < MISSING_FRAC:
                continue
            took = sum(step in S.taken(gym, _turns(ep)) for ep in eps)    # as took/<gym>/<step>
            shown = [_blind_turn(gym, ep) for ep in without]
            quotes = _quotes([t for t in shown if t])
            what = S.WHAT[step]
            when = "at all" if step == "submit" else "before answering"
            out.append(Finding(
                "missing_step", gym,
                f"{len(without)} of {len(eps)} recent {gym} episodes never used {what} {when} "
                f"({took} used it at any turn){_eg(quotes)}.",
                {"step": step, "what": what, "episodes": len(eps), "without": len(without),
                 "took_at_all": took, "examples": quotes,
                 # the trainer's share of the gym's episodes taking the step: a remedy's Expect
                 # names it (orchestrator.agents.remedies.step_expect; SKILL.md for a CLI agent)
                 "metric": f"took/{gym}/{step}"}))
    return out


def _blind_turn(gym: str, ep: dict[str, Any]) -> dict[str, Any] | None:
    """The turn that shows a missing step best: the episode's first answer, else its last turn."""
    turns = _turns(ep)
    end = S.answer_step(gym)
    return next((t for t in turns if end in S.turn_steps(gym, t)), turns[-1] if turns else None)


# ----------------------------------------------------------------------------- rejected calls


def _rejected(gym: str, t: dict[str, Any]) -> str | None:
    """The step a turn's call was rejected on: the gym's mark (training/rollout.py), else, in
    TauGym records written before the mark, a tool call that carried an argument error (the
    gym counts those against identification, benches/usergym/tau.py)."""
    if t.get("rejected"):
        return str(t["rejected"])
    calls = (t.get("tool_calls") or []) if gym == "tau" else []
    return "identify" if any(isinstance(c, dict) and c.get("error") for c in calls) else None


def find_rejected_calls(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Gyms where many recent turns had the right tag but arguments the environment rejected
    (function's `[action] 7 9`, "A probe needs exactly four integers."; a tau call to a tool that
    does not exist): refused turns do not count them, so no other finding saw them; each is a turn
    spent. The step most of them were on is the one an example should show done right."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        turns = [t for ep in eps for t in _turns(ep) if not t.get("invalid_action")]
        if len(eps) < MIN_EPISODES or len(turns) < REJECTED_MIN_TURNS:
            continue
        bad = [(t, _rejected(gym, t)) for t in turns]
        bad = [(t, st) for t, st in bad if st]
        if len(bad) / len(turns) < REJECTED_FRAC:
            continue
        counts: dict[str, int] = {}
        for _, st in bad:
            counts[st] = counts.get(st, 0) + 1
        step = max(sorted(counts), key=counts.get)
        eg = " and ".join(f"{quote(t.get('agent'), 60)} -> {quote(t.get('user'), 60)}" for t, _ in bad[:2])
        out.append(Finding(
            "rejected_calls", gym,
            f"{len(bad)} of {len(turns)} recent {gym} agent turns ({len(bad) / len(turns):.0%}) were "
            f"calls the environment rejected for their arguments, most on the way to "
            f"{S.WHAT.get(step, step)}; e.g. {eg}.",
            {"step": step, "turns": len(turns), "rejected": len(bad), "by_step": counts,
             "rate": round(len(bad) / len(turns), 3), "metric": f"rejected/{gym}",
             "examples": [(t.get("agent") or "")[:160] for t, _ in bad[:2]]}))
    return out


# ----------------------------------------------------------------------------- copied examples

COPIED_FRAC = 0.50        # share of a gym's calling episodes that call with a shown example's
                          # values: 69 of 91 tau episodes in the H100 runs of 2026-12-07 (EAU
                          # seeds 1 and 2, and seed 0 with 6-step windows) called
                          # find_user_id_by_name_zip with the example's "Souza" or "30301"


def call_values(examples: list[dict[str, Any]]) -> dict[str, str]:
    """value -> example id, for the arguments of the "[answer] {...}" tool calls that the given
    worked examples' assistant turns make (TauGym's calls): the values a policy that copies the
    example writes instead of its own user's."""
    out: dict[str, str] = {}
    for ex in examples:
        for m in ex.get("messages") or []:
            text = str(m.get("content") or "").strip() if m.get("role") == "assistant" else ""
            if not text.startswith("[answer] {"):
                continue
            try:
                args = json.loads(text[len("[answer] "):]).get("arguments") or {}
            except (ValueError, AttributeError):
                continue
            for v in args.values() if isinstance(args, dict) else []:
                if isinstance(v, (str, int)) and len(str(v)) >= 3:
                    out.setdefault(str(v), str(ex.get("id") or "?"))
    return out


def _copied(ep: dict[str, Any], values: dict[str, str]) -> tuple[dict[str, Any], list[str]] | None:
    """The first call turn of an episode carrying shown values that its user never said (in the
    prompt or a reply), with those values; None when it has none."""
    said = " ".join([str(ep.get("prompt") or "")] + [str(t.get("user") or "") for t in _turns(ep)])
    for t in _turns(ep):
        text = str(t.get("agent") or "").strip()
        if not text.startswith("[answer] {"):
            continue
        hit = [v for v in values if f'"{v}"' in text and v not in said]
        if hit:
            return t, hit
    return None


def find_copied_examples(episodes: list[dict[str, Any]],
                         shown: dict[str, dict[str, str]]) -> list[Finding]:
    """Tool calls that carry the shown worked example's own values (its customer's name, zip code
    and user id) instead of what the episode's user told: the policy copies the example's words
    where they should change with the user. `shown`: gym -> call_values of the examples the
    policy is shown now."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        values = shown.get(gym) or {}
        calling = [ep for ep in eps if any(str(t.get("agent") or "").strip().startswith("[answer] {")
                                           for t in _turns(ep))]
        if not values or len(calling) < MIN_EPISODES:
            continue
        copied = [c for c in (_copied(ep, values) for ep in calling) if c]
        if len(copied) < MIN_EPISODES or len(copied) / len(calling) < COPIED_FRAC:
            continue
        turns = [t for t, _ in copied]
        counts: dict[str, int] = {}
        for t in turns:
            for st in S.text_steps(gym, str(t.get("agent") or "")) or ["?"]:
                counts[st] = counts.get(st, 0) + 1
        step = max(sorted(counts), key=counts.get)
        hits = sorted({v for _, vs in copied for v in vs})
        out.append(Finding(
            "copied_example", gym,
            f"{len(copied)} of {len(calling)} recent {gym} episodes that called a tool called it with "
            f"the shown worked example's own values ({', '.join(repr(v) for v in hits[:4])}), which "
            f"their user never told{_eg(_quotes(turns))}.",
            {"step": step, "episodes": len(calling), "copied": len(copied), "values": hits,
             "from": sorted({values[v] for v in hits}), "metric": f"took/{gym}/{step}",
             "examples": _quotes(turns)}))
    return out


# ----------------------------------------------------------------------------- copied questions

COPIED_QUESTION_FRAC = 0.15   # share of a gym's recent episodes that asked a shown example's own
                              # question and got the user's catch-all reply to it: twice the
                              # untrained policy's share (6 of 90 held-out travel episodes, seeds
                              # 0-2, benchmarks/travel_example_probe.py). Of travel's episodes in
                              # steps 19-24 of the H100 runs of 2026-12-07, seeds 1-2: 18-29% under
                              # PPO and EAU and GRPO seed 1, 2-8% in the other three runs; 1-13%
                              # in steps 1-6 of all eight
COPIED_QUESTION_MIN = 3       # such episodes, below which a gym's share says nothing


def _norm_question(text: Any) -> str:
    return " ".join(str(text or "").lower().split())


def example_questions(examples: list[dict[str, Any]]) -> dict[str, str]:
    """question -> example id, for the "[action] ..." turns the given worked examples' assistant
    writes (lower case, spaces collapsed): the words a policy that copies the example asks in
    every task, such as TravelGym's "[action] Do you need parking at the hotel?"."""
    out: dict[str, str] = {}
    for ex in examples:
        for m in ex.get("messages") or []:
            text = str(m.get("content") or "").strip() if m.get("role") == "assistant" else ""
            if text.startswith("[action]"):
                out.setdefault(_norm_question(text), str(ex.get("id") or "?"))
    return out


def find_copied_questions(episodes: list[dict[str, Any]], shown: dict[str, dict[str, str]],
                          catchall: set[str]) -> list[Finding]:
    """Episodes that ask a shown worked example's own question, word for word, in a task it does
    not fit: the user answers it with its catch-all rule (`catchall`), which discloses nothing.
    In the H100 runs of 2026-12-07 travel asked its first example's "Do you need parking at the
    hotel?" in 35-52% of its episodes by steps 19-24, a third of them in tasks with no hotel,
    where the untrained policy asked it in 5 of 30. `shown`: gym -> example_questions of the
    examples the policy is shown now."""
    out = []
    if not catchall:
        return out
    for gym, eps in sorted(_by_gym(episodes).items()):
        questions = shown.get(gym) or {}
        if not questions:
            continue
        caught = []
        for ep in eps:
            turn = next((t for t in _turns(ep) if t.get("rule_id") in catchall
                         and _norm_question(t.get("agent")) in questions), None)
            if turn is not None:
                caught.append(turn)
        if len(caught) < COPIED_QUESTION_MIN or len(caught) / len(eps) < COPIED_QUESTION_FRAC:
            continue
        asked = sorted({_norm_question(t.get("agent")) for t in caught})
        eg = " and ".join(f"{quote(t.get('agent'), 60)} -> {quote(t.get('user'), 60)}"
                          for t in caught[:1])
        out.append(Finding(
            "copied_question", gym,
            f"{len(caught)} of {len(eps)} recent {gym} episodes ({len(caught) / len(eps):.0%}) asked "
            f"a shown worked example's own question word for word and got the user's catch-all "
            f"reply, their task holding nothing it asks about; e.g. {eg}.",
            {"episodes": len(eps), "copied": len(caught), "questions": asked,
             "from": sorted({questions[q] for q in asked}),
             "examples": [(t.get("agent") or "")[:160] for t in caught[:2]]}))
    return out


# ----------------------------------------------------------------------------- early answers


def find_early_answers(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Episodes whose first answer came before the user disclosed anything and before any
    search, probe or read: the answer is a guess (function's `[answer] 7 2 0 10` as a first
    turn, travel's `[answer] H5`, a persuade argument before asking why)."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        answering, early = 0, []
        for ep in eps:
            turns = _turns(ep)
            end = S.answer_step(gym)
            seen: set[str] = set()
            for t in turns:
                taken = set(S.turn_steps(gym, t))
                if end in taken:
                    answering += 1
                    if not (seen & INFO_STEPS):
                        early.append(t)
                    break
                seen |= taken
        if len(early) < MIN_EPISODES or len(early) / answering < EARLY_FRAC:
            continue
        quotes = _quotes(early)
        out.append(Finding(
            "early_answer", gym,
            f"{len(early)} of {answering} recent {gym} episodes that answered did so before any "
            f"disclosure, search or lookup{_eg(quotes)}.",
            {"episodes": len(eps), "answering": answering, "early": len(early), "examples": quotes}))
    return out


# ----------------------------------------------------------------------------- restated prompts


def content_words(text: str) -> list[str]:
    return [w for w in _WORD.findall(str(text).lower()) if len(w) >= 3 and w not in _STOP]


def restates(turn_text: str, prompt: str) -> bool:
    """Whether an agent turn says back its prompt: at least RESTATE_WORDS content words, nearly
    all of them the prompt's (the tool tag and its parse aside)."""
    words = content_words(re.sub(r"^\s*\[\w+\]", "", str(turn_text)))
    if len(words) < RESTATE_WORDS:
        return False
    have = set(content_words(prompt))
    return sum(w in have for w in words) / len(words) >= RESTATE_OVERLAP


def find_restated_prompts(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Turns to the user (or answers) that restate the episode's prompt: a turtle "question"
    repeating the surface, a persuade "argument" repeating the claim. Searches, tool calls and
    refused turns are left out (a search names the prompt's aspect by design)."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        said, restated = 0, []
        for ep in eps:
            prompt = str(ep.get("prompt") or "")
            for t in _turns(ep):
                if t.get("invalid_action") or t.get("tool_calls") or \
                        str(t.get("agent") or "").lstrip().lower().startswith("[search]"):
                    continue
                said += 1
                if prompt and restates(t.get("agent"), prompt):
                    restated.append(t)
        if len(restated) < MIN_EPISODES or len(restated) / said < RESTATE_FRAC:
            continue
        quotes = _quotes(restated)
        out.append(Finding(
            "restated_prompt", gym,
            f"{len(restated)} of {said} recent {gym} turns to the user restate the task's own "
            f"prompt{_eg(quotes)}.",
            {"turns": said, "restated": len(restated), "examples": quotes}))
    return out


# ----------------------------------------------------------------------------- reward modules


def keys_read(source: str) -> list[str]:
    """The turn keys a module's source names in quotes (what it can pay on)."""
    return [k for k in TURN_KEYS if re.search(rf"""["']{k}["']""", source)]


def find_idle_modules(episodes: list[dict[str, Any]], sources: dict[str, str] | None = None
                      ) -> list[Finding]:
    """A reward module that paid nothing in a gym over its recent turns (`module_rewards`), with
    why where its source is known: the turn keys it reads and how many of the gym's turns had
    each (eau_progress pays new_facts, and no function turn of the CPU demo had one). A module
    that only ever charged (a cost, like no_repeat) is not idle."""
    values: dict[tuple[str, str], list[float]] = {}
    eps_of: dict[tuple[str, str], int] = {}
    turns_of: dict[str, list[dict[str, Any]]] = {}
    for ep in episodes:
        gym = str(ep.get("gym") or "?")
        names = set()
        for t in _turns(ep):
            turns_of.setdefault(gym, []).append(t)
            for name, v in (t.get("module_rewards") or {}).items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    values.setdefault((name, gym), []).append(float(v))
                    names.add(name)
        for name in names:
            eps_of[(name, gym)] = eps_of.get((name, gym), 0) + 1
    charged = {n for (n, _), vs in values.items() if any(v < 0 for v in vs)}
    paid = {n for (n, _), vs in values.items() if any(v > 0 for v in vs)}
    out = []
    for (name, gym), vs in sorted(values.items()):
        if len(vs) < IDLE_MIN_TURNS or any(vs) or (name in charged and name not in paid):
            continue
        reads = {k: sum(bool(t.get(k)) for t in turns_of[gym]) for k in keys_read((sources or {}).get(name, ""))}
        never = [k for k, n in reads.items() if n == 0]
        why = (f": it reads {', '.join(reads)}, and no {gym} turn had {' or '.join(never)}" if never
               else f": it reads {', '.join(reads)}, which its conditions never combined" if reads else "")
        out.append(Finding(
            "idle_module", gym,
            f"reward module {name} paid nothing in {len(vs)} recent {gym} turns "
            f"({eps_of[(name, gym)]} episodes){why}.",
            {"module": name, "turns": len(vs), "episodes": eps_of[(name, gym)], "reads": reads}))
    return out


def find_farmed_credit(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Reward modules paying mostly for turns that repeat an earlier turn of their episode: the
    policy farms the module (asking again for a fact already disclosed), not progressing. Judged
    over the recent steps together and step by step, so one farmed step (a peak) shows too; two
    paid repeats are enough, so a short run shows it from its second step on."""
    by_module: dict[str, dict[str, Any]] = {}
    for ep in episodes:
        step = ep.get("step")
        for t, rep in zip(_turns(ep), repeated_marks(_turns(ep))):
            for name, v in (t.get("module_rewards") or {}).items():
                if not isinstance(v, (int, float)) or isinstance(v, bool) or v <= 0:
                    continue
                m = by_module.setdefault(name, {"total": 0.0, "on_rep": 0.0, "paid": 0, "reps": [],
                                                "steps": {}, "gyms": {}})
                m["total"] += v
                m["paid"] += 1
                s = m["steps"].setdefault(step, [0.0, 0.0, 0])
                s[1] += v
                if rep:
                    m["on_rep"] += v
                    m["reps"].append((t, v))
                    s[0] += v
                    s[2] += 1
                    m["gyms"][ep.get("gym", "?")] = m["gyms"].get(ep.get("gym", "?"), 0) + 1
    out = []
    for name, m in sorted(by_module.items()):
        share = m["on_rep"] / m["total"] if m["total"] else 0.0
        per_step = {s: round(a / b, 3) for s, (a, b, _) in m["steps"].items() if b}
        farmed_steps = sorted(s for s, (a, b, n) in m["steps"].items()    # step None: a record
                              if s is not None and b and a / b >= HACK_SHARE  # without its step
                              and n >= FARM_MIN_REPEATS)
        if len(m["reps"]) < FARM_MIN_REPEATS or not (share >= HACK_SHARE or farmed_steps):
            continue
        gyms = ", ".join(f"{g} {n}" for g, n in sorted(m["gyms"].items()))
        quotes = [f"{quote(t.get('agent'))} ({v:.2g})" for t, v in m["reps"][:2]]
        peak = f", {per_step[farmed_steps[-1]]:.0%} at step {farmed_steps[-1]}" if farmed_steps else ""
        out.append(Finding(
            "reward_hack", next(iter(m["gyms"])) if len(m["gyms"]) == 1 else None,
            f"{share:.0%} of the credit reward module {name} paid recently ({m['on_rep']:.2f} of "
            f"{m['total']:.2f}{peak}) went to {len(m['reps'])} agent turns repeating an earlier "
            f"turn of their episode ({gyms}): the policy farms it{_eg(quotes)}.",
            {"module": name, "share": round(share, 3), "paid_turns": m["paid"],
             "repeated_paid_turns": len(m["reps"]), "gyms": sorted(m["gyms"]),
             "by_gym": m["gyms"], "steps": per_step, "farmed_steps": farmed_steps,
             "examples": quotes}))
    return out


def effect_findings(effects: list[dict[str, Any]]) -> list[Finding]:
    """Applied changes measured "inconclusive" over their window (no effect beyond the noise
    floor): help that did not help is taken back (the built-in agent reverts them)."""
    def span(e: dict[str, Any]) -> str:        # the verdict covers its window only
        return f" over the {e['window']} steps after it" if e.get("window") else ""

    return [Finding("no_effect", metric_gym(e.get("metric")),
                    f"commit {e['commit'][:10]} had no effect on {e.get('metric')} "
                    f"({e.get('before')} -> {e.get('after')}{span(e)}, "
                    f"within the noise floor {e.get('noise_floor')}).",
                    {"commit": e["commit"], "metric": e.get("metric"), "delta": e.get("delta"),
                     "window": e.get("window")})
            for e in effects if e.get("label") == "inconclusive"]
