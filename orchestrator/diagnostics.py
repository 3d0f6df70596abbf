"""Diagnostics over a run folder: the one module shared by the built-in meta-agent and the skill's scripts.

What an LLM agent can run by hand (`skills/eau/scripts/diagnose.py`) is exactly what the built-in
agent runs (DESIGN.md, "The parts"). It reads only training-side files of a run folder
(`metrics.jsonl`, `events.jsonl`, `trajectories/*.jsonl`) and the workspace's knobs and schema,
never `runs/NAME/eval/` (paper section 5: evaluation is walled off). No torch.

The failure modes are the ones the paper's intervention record names (appendix A.2, Table 7):
deadlocked episodes, user leaks and growing replies, entropy and template collapse, success stuck
near zero or past the 0.80 difficulty threshold, and irreversible failures (NaN).
"""
from __future__ import annotations

import json
import math
import statistics
import warnings
from pathlib import Path
from typing import Any

from orchestrator import progress_findings as progress
from orchestrator.finding import Finding, metric_gym
from orchestrator.sentences import quote
from training.novelty import repeated_marks
from training.users.leak import disclosing_replies, looped_reply, stale_replies

# Thresholds: fractions of the recent episodes or steps that make a finding.
DEADLOCK_FRAC = 0.30        # the paper's min_questions counter deadlocked 41% of episodes (A.2)
LEAK_RATE = 0.10            # share of user turns revealing a hidden fact unasked
REPLY_GROWTH = 1.5          # user replies 1.5x longer than at the start of the window history
CATCHALL_FRAC = 0.80        # share of a gym's questions the user's catch-all rule answered: 37 of
                            # 37, 51 of 59 and 119 of 134 travel questions at steps 1, 9 and 24 of
                            # the H100 run of 2026-12-07 (EAU seed 3)
CATCHALL_MIN_QUESTIONS = 6  # as progress_findings.REJECTED_MIN_TURNS: two episodes of the CPU demo
ENTROPY_DROP = 0.35         # recent entropy below 35% of the run's early entropy
TEMPLATE_DISTINCT = 0.25    # fewer than 25% distinct first agent turns
LOW_SUCCESS = 0.05          # "success stays near zero"
INVALID_FRAC = 0.30         # agent turns refused for their format: an untrained SmolLM2-135M had
                            # 100% refused with no worked example, 19% with one (test split, T 0.7)
FORMAT_LEARNED = 0.05       # at most 5% refused: the format help may be taken back
MIN_TURNS = 8               # fewer recent agent turns than this say nothing about a gym
HARDER_SUCCESS = 0.80       # difficulty may rise once recent success reaches 0.80 (A, write checks)
# H200 comparison (benchmarks/RESULTS-learning.md), SmolLM2-135M: untrained, 18-48% of a UserGym
# gym's turns and 36% of ColBench's repeat an earlier turn of their episode; over PPO steps 14-16
# TauGym and TravelGym reached 57-74% (three seeds). Most turns repeated is past anything the
# untrained model did.
LOOP_FRAC = 0.50
# a user that tells again a fact it has told, while the question also asks for one it has not,
# stalls the episode (training.users.leak.stale_replies): 37 of 45 of the tau user's disclosing
# replies at step 24 of the GRPO run of 2026-12-07 (seed 0), 4 of 7 at step 3
STALE_FRAC = 0.30           # share of a gym's disclosing replies
STALE_MIN = 4               # as many re-tellings at least (two episodes' worth)

# An LLM user caught in a loop (training.users.leak.looped_reply): 17-26% of the 135M reference
# user's replies a 6-step window of the H100 run of 2026-12-08 (it answered every turn), 20-32% of
# the LLM arm's under the hybrid user; the symbolic user's templates never loop. One reply in 7
# the policy hears (and copies: "I'm not sure I'm right." came back as its [answer]) is repaired.
USER_LOOP_FRAC = 0.15       # share of a gym's recent LLM-user replies
USER_LOOP_MIN = 5           # as many looping replies at least

# Knob facts the paper gives (appendix A, Tables 6 and 8), used only where the workspace's
# schema/knobs.schema.json does not say (it is the authority once present).
_FALLBACK_KNOBS: dict[str, dict[str, Any]] = {
    "agent.entropy_coeff": {"minimum": 0.0, "maximum": 0.05, "x-max-delta": 0.004},
    "agent.kl_loss_coef": {"minimum": 0.0, "maximum": 0.1},
    "agent.lr_multiplier": {"minimum": 0.1, "maximum": 10.0},
    "env.*.max_steps": {"minimum": 3, "maximum": 60, "x-max-delta": 4, "x-harder": "down"},
    "env.*.min_questions": {"minimum": 0, "maximum": 3, "x-max-delta": 1, "x-harder": "up"},
    "env.*.noise_choice_number": {"minimum": 0, "maximum": 30, "x-harder": "up"},
    "env.*.wrong_choice_number": {"minimum": 0, "maximum": 30, "x-harder": "up"},
    "user.*.facts_per_reply": {"minimum": 1, "maximum": 3, "x-max-delta": 1},
    "user.*.match_threshold": {"minimum": 0.0, "maximum": 1.0},
    "user.*.volunteer_interval": {"minimum": 0, "maximum": 10},
    "user.*.max_reveals": {"minimum": 0, "maximum": 20},
    "user.*.strategy_mix": {"minimum": 0.0, "maximum": 1.0},
    "user.*.repetition_penalty": {"minimum": 1.0, "maximum": 2.0, "x-max-delta": 0.3},
    "reward.predicate_weight": {"minimum": 0.0, "maximum": 1.0},
}


# ----------------------------------------------------------------------------- reading a run


def _read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Whole JSON lines only: a line being written (no newline yet, or cut) or a corrupt one is
    skipped with a warning (a trainer killed mid-write leaves a half line)."""
    if not path.exists():
        return []
    out = []
    for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            obj = None
        if isinstance(obj, dict):
            out.append(obj)
        else:
            warnings.warn(f"{path}: line {n} skipped (corrupt or truncated)", stacklevel=2)
    return out


def read_metrics(run_dir: Path | str) -> list[dict[str, Any]]:
    """metrics.jsonl as a list of step records, ordered by step."""
    rows = _read_jsonl(Path(run_dir) / "metrics.jsonl")
    return sorted((r for r in rows if isinstance(r.get("step"), (int, float))
                   and not isinstance(r["step"], bool) and math.isfinite(r["step"])),
                  key=lambda r: r["step"])


def read_events(run_dir: Path | str) -> list[dict[str, Any]]:
    return _read_jsonl(Path(run_dir) / "events.jsonl")


def read_episodes(run_dir: Path | str, last_files: int = 3) -> list[dict[str, Any]]:
    """The sampled episodes of the newest `last_files` trajectory files, oldest first."""
    files = sorted((Path(run_dir) / "trajectories").glob("step-*.jsonl"))[-last_files:]
    episodes = []
    for f in files:
        step = int(f.stem.split("-")[1])
        for ep in _read_jsonl(f):
            ep.setdefault("step", step)
            episodes.append(ep)
    return episodes


def metric_series(metrics: list[dict[str, Any]], name: str) -> list[tuple[int, float]]:
    """(step, value) pairs of one metric, skipping steps that lack it."""
    out = []
    for row in metrics:
        v = row.get(name)
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out.append((int(row["step"]), float(v)))
    return out


def recent_mean(metrics: list[dict[str, Any]], name: str, window: int) -> float | None:
    vals = [v for _, v in metric_series(metrics, name)[-window:] if math.isfinite(v)]
    return statistics.fmean(vals) if vals else None


# ----------------------------------------------------------------------------- knobs


def get_path(tree: dict[str, Any], dotted: str) -> Any:
    node: Any = tree
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            raise KeyError(dotted)
        node = node[part]
    return node


def set_path(tree: dict[str, Any], dotted: str, value: Any) -> None:
    parts = dotted.split(".")
    node = tree
    for part in parts[:-1]:
        node = node.setdefault(part, {})
    node[parts[-1]] = value


def _schema_node(schema: dict[str, Any] | None, dotted: str) -> dict[str, Any]:
    """The JSON-Schema node of one knob (following `properties`, then `additionalProperties`)."""
    node: Any = schema or {}
    for part in dotted.split("."):
        if not isinstance(node, dict):
            return {}
        props = node.get("properties", {})
        if part in props:
            node = props[part]
        elif isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
        if "$ref" in node and schema is not None:
            ref = node["$ref"].lstrip("#/").split("/")
            target: Any = schema
            for r in ref:
                target = target.get(r, {})
            node = {**target, **{k: v for k, v in node.items() if k != "$ref"}}
    return node if isinstance(node, dict) else {}


def knob_spec(schema: dict[str, Any] | None, dotted: str) -> dict[str, Any]:
    """Range, per-write delta and harder direction of a knob: the schema's, else the paper's."""
    node = _schema_node(schema, dotted)
    spec = {k: node[k] for k in ("minimum", "maximum", "x-max-delta", "x-harder", "x-gyms")
            if k in node}
    if node:                       # the schema knows this knob: it alone is the authority
        return spec
    parts = dotted.split(".")
    generic = ".".join([parts[0], "*", *parts[2:]]) if len(parts) == 3 else dotted
    return dict(_FALLBACK_KNOBS.get(dotted, _FALLBACK_KNOBS.get(generic, {})))


def load_workspace_knobs(workspace: Path | str) -> tuple[dict[str, Any], dict[str, Any] | None]:
    ws = Path(workspace)
    knobs = json.loads((ws / "knobs.json").read_text())
    schema_path = ws / "schema" / "knobs.schema.json"
    schema = json.loads(schema_path.read_text()) if schema_path.exists() else None
    return knobs, schema


def knob_table(workspace: Path | str, gyms: list[str] | None = None) -> list[dict[str, Any]]:
    """Every scalar knob with its current value and limits, for the skill and the prompt."""
    knobs, schema = load_workspace_knobs(workspace)
    rows: list[dict[str, Any]] = []

    def walk(node: Any, prefix: str) -> None:
        if isinstance(node, dict):
            for k, v in node.items():
                walk(v, f"{prefix}.{k}" if prefix else k)
            return
        parts = prefix.split(".")
        if gyms and parts[0] in ("env", "user") and len(parts) > 1 and parts[1] not in gyms:
            return
        if gyms and parts[:2] == ["reward", "per_gym_scale"] and parts[2] not in gyms:
            return
        rows.append({"knob": prefix, "value": node, **knob_spec(schema, prefix)})

    walk(knobs, "")
    return rows


# ----------------------------------------------------------------------------- detectors


def metric_gyms(metrics: list[dict[str, Any]]) -> list[str]:
    """Gyms with a `success/<gym>` metric anywhere in the run (a step samples only some gyms);
    `success/mean` is the trainer's all-gym mean, not a gym."""
    return sorted({k.split("/", 1)[1] for row in metrics for k in row
                   if k.startswith("success/") and k.count("/") == 1 and k != "success/mean"})


def _gyms_of(episodes: list[dict[str, Any]], metrics: list[dict[str, Any]]) -> list[str]:
    return sorted({ep["gym"] for ep in episodes if ep.get("gym")} | set(metric_gyms(metrics)))


def _answered(ep: dict[str, Any]) -> bool:
    return any(t.get("answered") for t in ep.get("turns", []))


def rollout_turn_cap(run_dir: Path | str) -> int | None:
    """The trainer's own turn cap (config.json rollout.max_turns), which no workspace knob moves."""
    try:
        return int(json.loads((Path(run_dir) / "config.json").read_text())["rollout"]["max_turns"])
    except (OSError, ValueError, KeyError, TypeError):
        return None


def find_deadlocks(episodes: list[dict[str, Any]], turn_cap: int | None = None) -> list[Finding]:
    """Episodes that end at the turn limit without an answer (the min_questions counter, A.2).
    `at_rollout_cap` says the limit hit was the trainer's rollout.max_turns, not env max_steps."""
    out = []
    by_gym: dict[str, list[dict[str, Any]]] = {}
    for ep in episodes:
        by_gym.setdefault(ep.get("gym", "?"), []).append(ep)
    for gym, eps in sorted(by_gym.items()):
        stuck = [ep for ep in eps if ep.get("truncated") and not _answered(ep)]
        frac = len(stuck) / len(eps)
        if frac >= DEADLOCK_FRAC:
            out.append(Finding("deadlock", gym,
                               f"{frac:.0%} of recent {gym} episodes hit the turn limit without an answer.",
                               {"frac": round(frac, 3), "episodes": len(eps),
                                "examples": [ep.get("task_id") for ep in stuck[:3]],
                                "at_rollout_cap": turn_cap is not None and all(
                                    len(ep.get("turns", [])) >= turn_cap for ep in stuck)}))
    return out


def _by_gym(episodes: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for ep in episodes:
        out.setdefault(ep.get("gym", "?"), []).append(ep)
    return out


def find_invalid_actions(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Agent turns the environment refused for their format (`invalid_action` in the trajectories:
    no tool prefix, a tool the gym lacks, a malformed tool call). Refused turns earn nothing and
    teach nothing, so a gym where most are refused has no learning signal at all; the remedy is
    upstream (a worked example in the context, a format reward), not more steps. Per gym: the
    rate, two refused turns with the environment's answer, and how many demonstrations the
    episodes were shown. Also `format_learned` where at most 5% are refused (help may go)."""
    out, few = [], []
    for gym, eps in sorted(_by_gym(episodes).items()):
        turns = [t for ep in eps for t in ep.get("turns", [])]
        if not any("invalid_action" in t for t in turns):
            continue
        if len(turns) < MIN_TURNS:
            few += eps
            continue
        bad = [t for t in turns if t.get("invalid_action")]
        rate = len(bad) / len(turns)
        shown = sorted({int(ep.get("demonstrations") or 0) for ep in eps})
        evidence = {"rate": round(rate, 3), "turns": len(turns), "refused": len(bad),
                    "demonstrations": shown[-1] if shown else 0,
                    "examples": [{"agent": (t.get("agent") or "")[:160],
                                  "env": (t.get("user") or "")[:120]} for t in bad[:2]]}
        if rate >= INVALID_FRAC:
            eg = " and ".join(quote(e["agent"], 72) for e in evidence["examples"])
            out.append(Finding("invalid_actions", gym,
                               f"{rate:.0%} of recent {gym} agent turns ({len(bad)} of {len(turns)}) "
                               f"were refused for their format, with {evidence['demonstrations']} "
                               f"demonstration(s) shown; e.g. {eg}.", evidence))
        elif rate <= FORMAT_LEARNED:
            out.append(Finding("format_learned", gym,
                               f"only {rate:.0%} of recent {gym} agent turns were refused for their "
                               f"format: the policy writes valid actions.", evidence))
    return out + _pooled_invalid(few)


def _repeated(ep: dict[str, Any]) -> list[bool]:
    """Per agent turn: does it repeat an earlier turn of the episode (training.novelty)?"""
    return repeated_marks(ep.get("turns", []))


def find_loops(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Gyms where most recent agent turns repeat an earlier turn of their episode word for word:
    the same question gets the same answer, so the turn is spent and nothing is learned."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        marks = [(t, r) for ep in eps for t, r in zip(ep.get("turns", []), _repeated(ep))]
        if len(marks) < MIN_TURNS:
            continue
        rep = [t for t, r in marks if r]
        rate = len(rep) / len(marks)
        if rate >= LOOP_FRAC:
            eg = " and ".join(quote(t.get("agent"), 72) for t in rep[:2])
            out.append(Finding("loop", gym,
                               f"{rate:.0%} of recent {gym} agent turns ({len(rep)} of {len(marks)}) "
                               f"repeat an earlier turn of their episode; e.g. {eg}.",
                               {"rate": round(rate, 3), "turns": len(marks), "repeated": len(rep),
                                "examples": [(t.get("agent") or "")[:160] for t in rep[:2]]}))
    return out


def _pooled_invalid(episodes: list[dict[str, Any]]) -> list[Finding]:
    """The gyms with too few recent turns to judge one by one, together (the CPU demo samples 4
    episodes a step over 7 gyms): one finding (gym None) naming the rate of each gym in it."""
    by_gym = {}
    turns_all, bad_all = [], []
    for gym, eps in sorted(_by_gym(episodes).items()):
        turns = [t for ep in eps for t in ep.get("turns", []) if "invalid_action" in t]
        if turns:
            bad = [t for t in turns if t.get("invalid_action")]
            by_gym[gym] = round(len(bad) / len(turns), 3)
            turns_all += turns
            bad_all += bad
    if len(turns_all) < MIN_TURNS:
        return []
    rate = len(bad_all) / len(turns_all)
    if rate < INVALID_FRAC:
        return []
    shown = max((int(ep.get("demonstrations") or 0) for ep in episodes), default=0)
    eg = " and ".join(quote(t.get("agent"), 72) for t in bad_all[:2])
    return [Finding("invalid_actions", None,
                    f"{rate:.0%} of recent agent turns ({len(bad_all)} of {len(turns_all)}, "
                    f"{len(by_gym)} gyms) were refused for their format, with {shown} "
                    f"demonstration(s) shown; e.g. {eg}.",
                    {"rate": round(rate, 3), "turns": len(turns_all), "refused": len(bad_all),
                     "demonstrations": shown, "by_gym": by_gym,
                     "examples": [{"agent": (t.get("agent") or "")[:160],
                                   "env": (t.get("user") or "")[:120]} for t in bad_all[:2]]})]


def _user_turns(eps: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The turns the simulated user answered. A turn's `user` also holds the environment's
    observation where no user spoke (a search's table, a refusal of the format): counted as
    replies, travel's "user replies grew from 56 to 89 characters" of the H100 run of 2026-12-07
    (EAU seed 3, step 12) came from more searches, and leaks were diluted by tool turns. Records
    written before `user_replied` existed count every turn with a `user`, as they did."""
    return [t for ep in eps for t in ep.get("turns", [])
            if t.get("user") is not None and t.get("user_replied", True)]


def find_leaks(episodes: list[dict[str, Any]], metrics: list[dict[str, Any]],
               window: int) -> list[Finding]:
    """Hidden facts revealed unasked, and user replies growing (facts_per_reply 1->3, A.2)."""
    out = []
    by_gym: dict[str, list[dict[str, Any]]] = {}
    for ep in episodes:
        by_gym.setdefault(ep.get("gym", "?"), []).append(ep)
    for gym, eps in sorted(by_gym.items()):
        turns = _user_turns(eps)
        if not turns:
            continue
        leaky = [t for t in turns if t.get("leaked_facts")]
        rate = len(leaky) / len(turns)
        if rate >= LEAK_RATE:
            kinds: dict[str, int] = {}
            rules: dict[str, int] = {}
            for t in leaky:
                rules[str(t.get("rule_id"))] = rules.get(str(t.get("rule_id")), 0) + 1
            for t in leaky:     # trainer logs hold fact ids; a kind only where a fact dict says it
                for f in t["leaked_facts"]:
                    if isinstance(f, dict) and f.get("kind"):
                        kinds[f["kind"]] = kinds.get(f["kind"], 0) + 1
            out.append(Finding("leak", gym,
                               f"{rate:.0%} of recent {gym} user replies reveal hidden facts unasked.",
                               {"rate": round(rate, 3), "turns": len(turns), "kinds": kinds,
                                "rules": rules}))
        lengths = [len(t.get("user") or "") for t in turns]
        half = len(lengths) // 2
        if half >= 4:
            early, late = statistics.fmean(lengths[:half]), statistics.fmean(lengths[half:])
            if early > 0 and late / early >= REPLY_GROWTH:
                out.append(Finding("reply_growth", gym,
                                   f"{gym} user replies grew from {early:.0f} to {late:.0f} characters.",
                                   {"early_chars": round(early), "late_chars": round(late)}))
    leak = recent_mean(metrics, "user/leak_rate", window)
    if leak is not None and leak >= LEAK_RATE and not any(f.kind == "leak" for f in out):
        out.append(Finding("leak", None, f"user/leak_rate averages {leak:.2f} over the last {window} steps.",
                           {"rate": round(leak, 3)}))
    return out


def find_user_loops(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Gyms whose LLM user says one sentence three times or more in at least USER_LOOP_FRAC of its
    recent replies: the policy hears a loop instead of an answer, and learns to loop back."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        replies = [t for t in _user_turns(eps) if t.get("user_arm") == "llm"]
        looped = [t for t in replies if looped_reply(t.get("user") or "")]
        if len(looped) < USER_LOOP_MIN or len(looped) < USER_LOOP_FRAC * len(replies):
            continue
        eg = " and ".join(quote(t.get("user"), 72) for t in looped[:2])
        out.append(Finding("user_loop", gym,
                           f"{len(looped)} of {len(replies)} recent {gym} replies of the LLM user "
                           f"({len(looped) / len(replies):.0%}) say one sentence three times or "
                           f"more; e.g. {eg}.",
                           {"rate": round(len(looped) / len(replies), 3), "replies": len(replies),
                            "looped": len(looped),
                            "examples": [(t.get("user") or "")[:160] for t in looped[:2]]}))
    return out


def find_stale_disclosures(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Gyms whose user answers a question by telling again what it has told, while the question
    also asks for a fact it never told: the policy gets the same reply to the same question and
    loops until the turn limit or the reveal budget (max_reveals counts every disclosure) ends
    it. The cause is the user's disclosure (one fact a reply, the best match first, told or not),
    not the policy, which asked for the right thing."""
    out = []
    for gym, eps in sorted(_by_gym(episodes).items()):
        disclosing = disclosing_replies(t for ep in eps for t in ep.get("turns", []))
        stale = [s for ep in eps for s in stale_replies(ep.get("turns", []))]
        if not disclosing or len(stale) < STALE_MIN or len(stale) / len(disclosing) < STALE_FRAC:
            continue
        again: dict[str, int] = {}
        never: dict[str, int] = {}
        for _, revealed, untold in stale:
            for f in revealed:
                again[f] = again.get(f, 0) + 1
            for f in untold:
                never[f] = never.get(f, 0) + 1
        t, _, _ = stale[0]
        rate = len(stale) / len(disclosing)
        out.append(Finding(
            "stale_disclosure", gym,
            f"{len(stale)} of {len(disclosing)} recent {gym} user replies that disclosed a fact "
            f"({rate:.0%}) told again one already told ({', '.join(sorted(again))}) while the "
            f"question also asked for one never told ({', '.join(sorted(never))}); e.g. "
            f"{quote(t.get('agent'), 72)} -> {quote(t.get('user'), 60)}.",
            {"rate": round(rate, 3), "disclosing": len(disclosing), "stale": len(stale),
             "told_again": again, "never_told": never,
             "examples": [(s[0].get("agent") or "")[:160] for s in stale[:2]]}))
    return out


def catchall_rules(run_dir: Path | str) -> set[str]:
    """Ids of the symbolic user's catch-all rules in the run's newest workspace snapshot: rules
    for every gym that disclose nothing and look at nothing but the kind of turn (the shipped
    `unknown`, "I'm not sure; could you ask about something more specific?", and `fallback`).
    A rule of some gyms only (telepathy's and turtle's "No.") answers what was asked."""
    newest = _newest_snapshot(run_dir)
    if newest is None:
        return set()
    out = set()
    for f in sorted(newest.glob("users/*/rules.json")):
        try:
            rules = json.loads(f.read_text()).get("rules", [])
        except (OSError, ValueError, AttributeError):
            continue
        for r in rules:
            if isinstance(r, dict) and not r.get("gyms") and r.get("reveal", "none") == "none" \
                    and set(r.get("when") or {}) <= {"act"} and r.get("id"):
                out.add(str(r["id"]))
    return out


def find_uninformative_user(episodes: list[dict[str, Any]], catchall: set[str]) -> list[Finding]:
    """Gyms where the user answered most recent questions with a catch-all rule: those turns
    teach the policy nothing, whatever it asked (paper section 1: EAU diagnoses "uninformative
    interactions"; the user's disclosure behaviour is the thing to refine). In the H100 run of
    2026-12-07 the travel user disclosed a preference only to a question naming its attribute,
    and the policy, asking "Do you have a discount?", got the fallback at 86-100% of its
    questions at the steps read (1-24); the policy then wrote that fallback as its own turn."""
    out = []
    if not catchall:
        return out
    for gym, eps in sorted(_by_gym(episodes).items()):
        asked = [t for ep in eps for t in ep.get("turns", [])
                 if t.get("asked_question") and t.get("user_replied", True) and t.get("rule_id")]
        if len(eps) < 2 or len(asked) < CATCHALL_MIN_QUESTIONS:
            continue
        caught = [t for t in asked if t.get("rule_id") in catchall]
        if len(caught) / len(asked) < CATCHALL_FRAC:
            continue
        rules: dict[str, int] = {}
        for t in caught:
            rules[t["rule_id"]] = rules.get(t["rule_id"], 0) + 1
        eg = " and ".join(f"{quote(t.get('agent'), 60)} -> {quote(t.get('user'), 60)}"
                          for t in caught[:2])
        out.append(Finding(
            "uninformative_user", gym,
            f"{len(caught)} of {len(asked)} recent {gym} questions ({len(caught) / len(asked):.0%}) "
            f"got the user's catch-all reply, which discloses nothing whatever was asked; e.g. {eg}.",
            {"questions": len(asked), "caught": len(caught), "rules": rules,
             "rate": round(len(caught) / len(asked), 3),
             "examples": [(t.get("agent") or "")[:160] for t in caught[:2]]}))
    return out


def find_collapse(episodes: list[dict[str, Any]], metrics: list[dict[str, Any]],
                  window: int) -> list[Finding]:
    """Entropy collapse (actor/entropy falls) and template collapse (the same first turn everywhere)."""
    out = []
    ent = [v for _, v in metric_series(metrics, "actor/entropy") if math.isfinite(v)]
    if len(ent) >= 2 * window:
        early, late = statistics.fmean(ent[:window]), statistics.fmean(ent[-window:])
        if early > 0 and late < ENTROPY_DROP * early:
            out.append(Finding("entropy_collapse", None,
                               f"actor/entropy fell from {early:.3f} to {late:.3f}.",
                               {"early": round(early, 4), "late": round(late, 4)},
                               irreversible=late < 0.05 * early))
    firsts = [ep["turns"][0].get("agent", "") for ep in episodes if ep.get("turns")]
    if len(firsts) >= 8:
        distinct = len(set(firsts)) / len(firsts)
        if distinct < TEMPLATE_DISTINCT:
            out.append(Finding("template_collapse", None,
                               f"only {distinct:.0%} of recent episodes open with a distinct agent turn.",
                               {"distinct": round(distinct, 3), "episodes": len(firsts)}))
    return out


def find_success_extremes(metrics: list[dict[str, Any]], gyms: list[str],
                          window: int) -> list[Finding]:
    """Success stuck near zero (add an intermediate reward) or past 0.80 (raise difficulty)."""
    out = []
    for gym in gyms:
        series = metric_series(metrics, f"success/{gym}")
        if len(series) < window:
            continue
        mean = statistics.fmean(v for _, v in series[-window:])
        if mean <= LOW_SUCCESS:
            out.append(Finding("low_success", gym,
                               f"success/{gym} averages {mean:.2f} over the last {window} steps.",
                               {"mean": round(mean, 3), "window": window}))
        elif mean >= HARDER_SUCCESS:
            out.append(Finding("high_success", gym,
                               f"success/{gym} averages {mean:.2f}: tasks may be made harder.",
                               {"mean": round(mean, 3), "window": window}))
    # a step samples only some gyms, so per-gym series fill slowly: the all-gym mean speaks sooner
    overall = metric_series(metrics, "success/mean")
    if not any(f.kind == "low_success" for f in out) and len(overall) >= window:
        mean = statistics.fmean(v for _, v in overall[-window:])
        if mean <= LOW_SUCCESS:
            out.append(Finding("low_success", None,
                               f"success/mean averages {mean:.2f} over the last {window} steps.",
                               {"mean": round(mean, 3), "window": window}))
    return out


def find_nan(metrics: list[dict[str, Any]], window: int) -> list[Finding]:
    """A NaN or infinite loss or reward: the run cannot recover in place (section 4.6)."""
    recent = {k for row in metrics[-window:] for k, v in row.items()
              if isinstance(v, float) and not math.isfinite(v)}
    if not recent:
        return []
    bad: dict[str, int] = {}       # the first non-finite step of each such metric: a resume goes before it
    for row in metrics:
        for k in recent:
            v = row.get(k)
            if isinstance(v, float) and not math.isfinite(v):
                bad.setdefault(k, int(row["step"]))
    return [Finding("nan", None, f"non-finite values in {', '.join(sorted(bad))}.",
                    {"first_step": bad}, irreversible=True)]


def find_stale_rollouts(metrics: list[dict[str, Any]], window: int) -> list[Finding]:
    """Recent steps whose rollout decoded older weights than the update before it: the KV
    engine's copy (`rollout/weights_copied`, logged on CUDA) took nothing after an update. Every
    H200 run up to 2026-12-06 trained so, the fused optimiser's step unseen by the copy: PPO and
    EAU rollouts stayed identical step by step while their rewards differed."""
    recent = metrics[-(window + 1):]
    stale = [row["step"] for prev, row in zip(recent, recent[1:])
             if (prev.get("actor/updates") or 0) > 0 and row.get("rollout/weights_copied") == 0]
    judged = sum(1 for prev, row in zip(recent, recent[1:])
                 if (prev.get("actor/updates") or 0) > 0 and "rollout/weights_copied" in row)
    if not stale:
        return []
    return [Finding("stale_rollouts", None,
                    f"At {len(stale)} of {judged} recent steps the rollout decoded weights older "
                    f"than the update before it (rollout/weights_copied 0 after actor/updates > 0, "
                    f"first at step {stale[0]}): the policy is trained on another policy's samples, "
                    f"a trainer fault for a person to fix.",
                    {"steps": stale})]


def find_harm(effects: list[dict[str, Any]]) -> list[Finding]:
    """Applied changes whose measured effect was harm (written by orchestrator.effects), each of
    the gym its metric names (score/persuade: persuade), so that its revert is that gym's one
    change of the session and other gyms' remedies may go beside it."""
    return [Finding("harm", metric_gym(e.get("metric")),
                    f"commit {e['commit'][:10]} harmed {e.get('metric')} "
                    f"({e.get('before')} -> {e.get('after')}, floor {e.get('noise_floor')}).",
                    {"commit": e["commit"], "metric": e.get("metric"), "delta": e.get("delta")})
            for e in effects if e.get("label") == "harmed"]


def module_failures(metrics: list[dict[str, Any]], window: int) -> dict[str, dict[str, Any]]:
    """Reward modules with failed calls in the last `window` steps: name -> {errors, calls, steps
    (those with a failure)}, from the trainer's `reward/module_errors/<name>` and
    `reward/module_calls/<name>` (training.rewards). A failed call scores 0 and training goes on,
    so these counts are the only trace of it in the metrics."""
    out: dict[str, dict[str, Any]] = {}
    for row in metrics[-window:]:
        for key, calls in row.items():
            if not key.startswith("reward/module_calls/") or not isinstance(calls, (int, float)):
                continue
            name = key.rsplit("/", 1)[1]
            errors = row.get(f"reward/module_errors/{name}") or 0
            rec = out.setdefault(name, {"errors": 0, "calls": 0, "steps": []})
            rec["calls"] += int(calls)
            rec["errors"] += int(errors)
            if errors:
                rec["steps"].append(int(row["step"]))
    return {name: rec for name, rec in sorted(out.items()) if rec["errors"]}


def find_module_errors(metrics: list[dict[str, Any]], episodes: list[dict[str, Any]],
                       window: int) -> list[Finding]:
    """Reward modules whose calls failed in the recent steps (an exception, a timeout, a value
    that is not a finite number): each failed call scored 0, so the turns it should have rewarded
    trained without it. The example is the failure's line from the trajectories."""
    out = []
    for name, rec in module_failures(metrics, window).items():
        example = next((t["module_errors"][name] for ep in reversed(episodes)
                        for t in ep.get("turns", []) if name in (t.get("module_errors") or {})), None)
        steps = rec["steps"]
        where = f"step {steps[0]}" if len(steps) == 1 else f"steps {steps[0]}-{steps[-1]}"
        out.append(Finding("module_errors", None,
                           f"reward module {name} failed {rec['errors']} of its {rec['calls']} calls "
                           f"in the last {min(window, len(metrics))} steps ({where}), each scored 0"
                           + (f"; e.g. {example}" if example else "") + ".",
                           {"module": name, **rec, "example": example}))
    return out


def diagnose(run_dir: Path | str, window: int = 10,
             effects: list[dict[str, Any]] | None = None) -> list[Finding]:
    """All findings for a run, most urgent first (irreversible, harm, deadlock, leak, ...)."""
    metrics = read_metrics(run_dir)
    episodes = read_episodes(run_dir)
    gyms = _gyms_of(episodes, metrics)
    invalid = find_invalid_actions(episodes)
    shown, catchall = shown_examples(run_dir), catchall_rules(run_dir)    # read once: two findings each
    # refused turns come before deadlocks and low success, which they cause; a learned format
    # (help that may be withdrawn) comes last
    # a farmed reward module trains the farming every step it pays: it is guarded before any
    # other change is measured or made (the H200 comparison of 2026-12-05: elicited_fact paid 47%
    # of its credit to repeated turns at step 20 while each EAU session acted on refused turns
    # or on reverting, and it was never guarded in 24 steps)
    findings = (find_nan(metrics, window) + find_stale_rollouts(metrics, window) + find_harm(effects or [])
                + progress.find_farmed_credit(episodes)
                + progress.effect_findings(effects or [])
                + find_module_errors(metrics, episodes, window)
                + [f for f in invalid if f.kind == "invalid_actions"]
                # a user telling again what it told makes the policy ask again: it comes before
                # the loops it causes
                + find_stale_disclosures(episodes)
                # repeated turns come before deadlocks, which they cause (looping episodes run to
                # the turn limit)
                + find_loops(episodes)
                # a user disclosing hidden facts unasked corrupts every signal after it: it is
                # repaired before the policy is coached through the steps it misses
                + find_leaks(episodes, metrics, window)
                # so does an LLM user repeating itself: the turn tells the policy nothing
                + find_user_loops(episodes)
                # a call with the shown example's values takes no step: it comes before the
                # missing step it leaves missing, whose remedies (the example first) are in place
                + progress.find_copied_examples(
                    episodes, {g: progress.call_values(ex) for g, ex in shown.items()})
                # a question copied from the example into tasks it does not fit gets the user's
                # catch-all: it comes before the catch-all's own finding, which has no remedy
                + progress.find_copied_questions(
                    episodes, {g: progress.example_questions(ex) for g, ex in shown.items()}, catchall)
                + _progress_findings(episodes)
                + find_deadlocks(episodes, rollout_turn_cap(run_dir))
                + find_collapse(episodes, metrics, window)
                + find_success_extremes(metrics, gyms, window)
                + progress.find_idle_modules(episodes, module_sources(run_dir))
                + find_uninformative_user(episodes, catchall)
                + [f for f in invalid if f.kind == "format_learned"])
    return sorted(findings, key=lambda f: not f.irreversible)   # stable: keeps the order above


def _progress_findings(episodes: list[dict[str, Any]]) -> list[Finding]:
    """Steps a gym's success needs and never taken, guesses, restated prompts
    (orchestrator.progress_findings): they cause the deadlocks and zero success after them."""
    return (progress.find_missing_steps(episodes) + progress.find_rejected_calls(episodes)
            + progress.find_early_answers(episodes) + progress.find_restated_prompts(episodes))


def _newest_snapshot(run_dir: Path | str) -> Path | None:
    """The workspace tree the trainer loaded last (it copies each to snapshots/<commit>/)."""
    snaps = [p for p in (Path(run_dir) / "snapshots").glob("*") if p.is_dir()]
    return max(snaps, key=lambda p: p.stat().st_mtime) if snaps else None


def shown_examples(run_dir: Path | str) -> dict[str, list[dict[str, Any]]]:
    """gym -> the worked examples it is shown (`env.<gym>.demonstrations` of them, first first)
    in the run's newest workspace snapshot, {} before any."""
    newest = _newest_snapshot(run_dir)
    if newest is None:
        return {}
    try:
        knobs = json.loads((newest / "knobs.json").read_text())
    except (OSError, ValueError):
        return {}
    out = {}
    for f in sorted((newest / "demonstrations").glob("*.json")):
        try:
            demos = json.loads(f.read_text())
        except (OSError, ValueError):
            continue
        for gym, examples in demos.items() if isinstance(demos, dict) else []:
            try:
                shown = get_path(knobs, f"env.{gym}.demonstrations")
            except KeyError:
                continue
            if isinstance(examples, list) and isinstance(shown, int) and shown > 0:
                out[gym] = [ex for ex in examples[:shown] if isinstance(ex, dict)]
    return out


def module_sources(run_dir: Path | str) -> dict[str, str]:
    """name -> source of the reward modules in the run's newest workspace snapshot (the trainer
    copies each tree it loads to snapshots/<commit>/), {} before any."""
    newest = _newest_snapshot(run_dir)
    if newest is None:
        return {}
    return {f.stem: f.read_text(errors="replace") for f in sorted((newest / "rewards").glob("*.py"))}


# ----------------------------------------------------------------------------- summary

SUMMARY_METRICS = ("reward/mean", "score/mean", "episode/turns", "episode/invalid_rate",
                   "episode/repeat_rate", "episode/question_rate", "user/leak_rate",
                   "actor/entropy", "actor/approx_kl", "critic/value_loss", "kl/ref")


def summarize(run_dir: Path | str, window: int = 10, samples: int = 2) -> dict[str, Any]:
    """Trends (first and last window means of the main metrics), failure modes, sample episodes."""
    metrics = read_metrics(run_dir)
    episodes = read_episodes(run_dir)
    names = list(SUMMARY_METRICS) + sorted({k for r in metrics[-1:] for k in r
                                            if k.startswith(("success/", "score/", "reward/", "invalid/", "repeat/",
                                                             "took/"))
                                            and k not in ("reward/mean", "score/mean")})
    trends = {}
    for name in names:
        vals = [v for _, v in metric_series(metrics, name)]
        if vals:
            trends[name] = {"first": round(statistics.fmean(vals[:window]), 4),
                            "last": round(statistics.fmean(vals[-window:]), 4),
                            "latest": round(vals[-1], 4)}
    failed = [ep for ep in episodes if not ep.get("success")]
    return {
        "run": str(run_dir),
        "steps": int(metrics[-1]["step"]) if metrics else 0,
        "trends": trends,
        "findings": [f.to_dict() for f in diagnose(run_dir, window)],
        "events": [e for e in read_events(run_dir) if e.get("event") != "checkpoint"][-10:],
        "sample_failures": [_short_episode(ep) for ep in failed[-samples:]],
        "sample_successes": [_short_episode(ep) for ep in episodes if ep.get("success")][-samples:],
    }


def _short_episode(ep: dict[str, Any], chars: int = 160) -> dict[str, Any]:
    turns = [{"agent": (t.get("agent") or "")[:chars], "user": (t.get("user") or "")[:chars],
              "reward": t.get("reward"), "leaked": t.get("leaked_facts") or [],
              "invalid": bool(t.get("invalid_action"))}
             for t in ep.get("turns", [])[:6]]
    return {"gym": ep.get("gym"), "task_id": ep.get("task_id"), "user_arm": ep.get("user_arm"),
            "score": ep.get("score"), "truncated": ep.get("truncated"), "turns": turns}


def flatten(tree: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}} -> {"a.b": 1}; lists stay values."""
    out: dict[str, Any] = {}
    for k, v in tree.items():
        key = f"{prefix}.{k}" if prefix else k
        if isinstance(v, dict) and v:
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def knob_changes(old: dict[str, Any], new: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Knob path -> (old value, new value) for every knob that differs (None where absent)."""
    a, b = flatten(old), flatten(new)
    return {k: (a.get(k), b.get(k)) for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)}
