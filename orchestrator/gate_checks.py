"""The write gate's checks on one change (old tree -> new tree) of an experiment workspace.

Each check returns reasons: one sentence each, naming the file, the knob or rule, the value and
the limit (DESIGN.md, "Gate checks"; paper appendix A, "Write checks"). An empty list accepts.
The flow around them (which commits, live ref, reverts, notes, ledger) is in `orchestrator.gate`;
the facts the checks need from the running experiment (recent success, recent trajectories, the
bench's fact kinds) come from `orchestrator.gate_context.GateContext`.
"""
from __future__ import annotations

import functools
import json
import math
import re
from typing import Any

from orchestrator import gate_knobs
from orchestrator.gate_context import ALL_GYMS, SUCCESS_BAR, GateContext, replay_pairs
from orchestrator.workspace import SUBMODULE_MODE, SYMLINK_MODE, Workspace

KNOBS = "knobs.json"
KNOB_SCHEMA = "schema/knobs.schema.json"
RULES_SCHEMA = "schema/rules.schema.json"
DEMOS_SCHEMA = "schema/demonstrations.schema.json"
BENCH_DIRS = ("usergym", "colbench", "tau2")
LAYOUT = [re.compile(p) for p in (
    r"knobs\.json", r"control\.json", r"schema/[A-Za-z0-9_.-]+\.json",
    r"users/(usergym|colbench|tau2)/(rules\.json|persona\.md)", r"rewards/[a-z_][a-z0-9_]*\.py",
    r"demonstrations/(usergym|colbench|tau2)\.json", r"[A-Za-z0-9_.-]+\.md",
    r"env_patches/(" + "|".join(ALL_GYMS) + r")\.py")]
LAYOUT_TEXT = ("knobs.json, control.json, schema/*.json, users/<bench>/rules.json or persona.md, "
               "rewards/<name>.py, demonstrations/<bench>.json, env_patches/<gym>.py, top-level *.md")
PERSONA_MAX_CHARS = 8000
REWARD_LOAD_S = 2.0          # import of a reward module (sandbox wall clock)
REWARD_CALL_S = 1.5          # all replayed turns (or episodes) of one module, one call


# -- helpers ----------------------------------------------------------------------------------
def short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value) if not isinstance(value, str) else repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def load_json(ws: Workspace, tree: str, path: str) -> tuple[Any, str | None]:
    """(parsed, None) or (None, reason) for a JSON file of the tree; (None, None) when absent."""
    raw = ws.read_file(tree, path)
    if raw is None:
        return None, None
    try:
        return json.loads(raw), None
    except ValueError as exc:
        return None, f"{path}: not valid JSON ({exc})."


def flatten(value: Any, prefix: str = "") -> dict[str, Any]:
    """Dotted leaves of nested dicts ("env.travel.max_steps" -> 16); lists are leaves."""
    if isinstance(value, dict) and value:
        out: dict[str, Any] = {}
        for k, v in value.items():
            out.update(flatten(v, f"{prefix}.{k}" if prefix else str(k)))
        return out
    return {prefix: value}


def schema_node(schema: dict, dotted: str) -> dict:
    node = schema
    for part in dotted.split("."):
        props = node.get("properties", {}) if isinstance(node, dict) else {}
        if part in props:
            node = props[part]
        elif isinstance(node, dict) and isinstance(node.get("additionalProperties"), dict):
            node = node["additionalProperties"]
        else:
            return {}
    return node if isinstance(node, dict) else {}


def is_number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


# -- files ------------------------------------------------------------------------------------
def check_paths(ws: Workspace, new_tree: str, files: dict[str, str]) -> list[str]:
    """Only workspace files: plain files of the layout; no links, no submodules, no .git."""
    reasons = []
    modes = ws.list_files(new_tree)
    for path, status in files.items():
        if ".git" in path.split("/") or path.startswith(".git"):
            reasons.append(f"{path}: git's own files are not workspace files.")
            continue
        if status == "deleted":
            if path in (KNOBS, KNOB_SCHEMA):
                reasons.append(f"{path}: deleted, but the trainer cannot run without it.")
            continue
        mode = modes[path][0]
        if mode == SYMLINK_MODE:
            target = (ws.read_file(new_tree, path) or b"").decode(errors="replace")
            reasons.append(f"{path}: a symbolic link (to {target!r}); workspace files must be plain "
                           f"files inside the workspace.")
        elif mode == SUBMODULE_MODE:
            reasons.append(f"{path}: a submodule; workspace files must be plain files.")
        elif not any(p.fullmatch(path) for p in LAYOUT):
            reasons.append(f"{path}: outside the workspace (allowed: {LAYOUT_TEXT}).")
        elif path.endswith("persona.md"):
            text = (ws.read_file(new_tree, path) or b"").decode(errors="replace")
            if len(text) > PERSONA_MAX_CHARS:
                reasons.append(f"{path}: {len(text)} characters, over the limit of {PERSONA_MAX_CHARS}.")
    return reasons


# -- commit message and schema widening -------------------------------------------------------
def check_message(message: str) -> list[str]:
    reasons = []
    for key in ("Why", "Expect"):
        if not re.search(rf"^\s*{key}:\s*\S", message, re.M | re.I):
            reasons.append(f"commit message: no `{key}:` line; every write carries its rationale "
                           f"(a `Why: ...` line and an `Expect: ...` line).")
    return reasons


_LOWER_BOUNDS = ("minimum", "exclusiveMinimum", "minItems", "minLength", "minProperties")
_UPPER_BOUNDS = ("maximum", "exclusiveMaximum", "maxItems", "maxLength", "maxProperties", "x-max-delta")


def _names(value: Any) -> set[str]:
    """A keyword's value (a name or a list of them) as a set of strings; anything an edit put
    there (a dict, a number) compares as its JSON text instead of crashing the gate."""
    items = value if isinstance(value, list) else [] if value in (None, "") else [value]
    return {v if isinstance(v, str) else json.dumps(v, sort_keys=True, default=repr) for v in items}


def widenings(old: Any, new: Any, where: str = "") -> list[str]:
    """Each way `new` admits more than `old` (a range, a delta, an enum, a type, a property set)."""
    out: list[str] = []
    if isinstance(old, list) and isinstance(new, list):
        for i, (a, b) in enumerate(zip(old, new)):
            out += widenings(a, b, f"{where}[{i}]")
        return out
    if not (isinstance(old, dict) and isinstance(new, dict)):
        return out
    at = where or "(top)"
    for key in _LOWER_BOUNDS:
        if is_number(old.get(key)) and not (is_number(new.get(key)) and new[key] >= old[key]):
            out.append(f"{at} {key} {old[key]} -> {new.get(key, 'removed')}")
    for key in _UPPER_BOUNDS:
        if is_number(old.get(key)) and not (is_number(new.get(key)) and new[key] <= old[key]):
            out.append(f"{at} {key} {old[key]} -> {new.get(key, 'removed')}")
    if isinstance(old.get("enum"), list):
        added = [v for v in new.get("enum", ["(any)"]) if v not in old["enum"]]
        if added or "enum" not in new:
            out.append(f"{at} enum gains {short(added or 'any value')}")
    if "type" in old:
        ot, nt = _names(old["type"]), _names(new.get("type")) or {"any"}
        if nt - ot:
            out.append(f"{at} type {sorted(ot)} -> {sorted(nt)}")
    if old.get("additionalProperties") is False and new.get("additionalProperties") is not False:
        out.append(f"{at} additionalProperties false -> {short(new.get('additionalProperties', True))}")
    dropped = _names(old.get("required", [])) - _names(new.get("required", []))
    if dropped:
        out.append(f"{at} required drops {sorted(dropped)}")
    if "x-harder" in old and new.get("x-harder") != old["x-harder"]:
        out.append(f"{at} x-harder {old['x-harder']} -> {new.get('x-harder', 'removed')}")
    for key in old:
        if key in new and isinstance(old[key], (dict, list)):
            out += widenings(old[key], new[key], f"{where}.{key}" if where else key)
    return out


def check_schema_widening(ws: Workspace, old_tree: str, new_tree: str, files: dict[str, str],
                          human: bool) -> list[str]:
    """Schema edits that widen an existing range or delta need `Eau-Author: human` from a person."""
    reasons = []
    for path, status in files.items():
        if not (path.startswith("schema/") and path.endswith(".json")) or status == "added":
            continue
        old, _ = load_json(ws, old_tree, path)
        new, err = load_json(ws, new_tree, path) if status != "deleted" else ({}, None)
        if err or old is None:
            continue                  # an unparsable schema is refused by the knob/rule checks
        found = widenings(old, new if status != "deleted" else {"deleted": True})
        if status == "deleted":
            found = ["the whole schema deleted"]
        if found and not human:
            reasons.append(f"{path}: widens {'; '.join(found[:5])}; only a person may widen a "
                           f"schema (commit message line `Eau-Author: human`, not as an agent).")
    return reasons


# -- knobs ------------------------------------------------------------------------------------
def _touched_gyms(path: str, node: dict, bench_gyms: tuple[str, ...]) -> list[str]:
    parts = path.split(".")
    if parts[0] in ("env", "user") and len(parts) > 2:
        return [parts[1]]
    if parts[:2] == ["reward", "per_gym_scale"] and len(parts) > 2:
        return [parts[2]]
    gyms = node.get("x-gyms") or list(ALL_GYMS)
    return [g for g in gyms if g in bench_gyms] or list(gyms)


def _harder(node: dict, old: Any, new: Any) -> bool:
    way = node.get("x-harder")
    if is_number(old) and is_number(new):
        return (way == "up" and new > old) or (way == "down" and new < old)
    if isinstance(old, list) and isinstance(new, list):
        grew = bool(set(map(str, new)) - set(map(str, old)))
        shrank = bool(set(map(str, old)) - set(map(str, new)))
        return (way == "up" and grew) or (way == "down" and shrank)
    return False


def _knob_change_reasons(path: str, old: Any, new: Any, node: dict, ctx: GateContext) -> list[str]:
    reasons = []
    gyms = node.get("x-gyms")
    if ctx.bench and isinstance(gyms, list) and not set(gyms) & set(ctx.bench_gyms()):
        reasons.append(f"{KNOBS}: {path} has effect only on {', '.join(gyms)} (x-gyms), none of which "
                       f"this {ctx.bench} experiment trains on ({', '.join(ctx.bench_gyms())}).")
    delta = node.get("x-max-delta")
    if is_number(delta) and is_number(old) and is_number(new) and abs(new - old) > delta + 1e-12:
        reasons.append(f"{KNOBS}: {path} {old} -> {new} changes by {abs(new - old):g}, over the "
                       f"per-write limit x-max-delta {delta:g}.")
    if _harder(node, old, new):
        for gym in _touched_gyms(path, node, ctx.bench_gyms()):
            value, source = ctx.recent_success(gym)
            if value is None:
                reasons.append(f"{KNOBS}: {path} {short(old)} -> {short(new)} makes {gym} harder "
                               f"(x-harder {node['x-harder']}), but {source}; a harder write needs "
                               f"recent success >= {SUCCESS_BAR:.2f}.")
            elif value < SUCCESS_BAR:
                reasons.append(f"{KNOBS}: {path} {short(old)} -> {short(new)} makes {gym} harder "
                               f"(x-harder {node['x-harder']}), but its recent success is {value:.3f} "
                               f"({source}), below the limit {SUCCESS_BAR:.2f}.")
    if path.startswith("env.") and path.endswith(".max_steps") and is_number(old) and is_number(new) \
            and new > old:
        cap, run = ctx.turn_cap()
        if cap is not None and new > cap:
            reasons.append(f"{KNOBS}: {path} {short(old)} -> {short(new)} changes nothing: {run}'s "
                           f"rollout.max_turns {cap} (config.json) ends every episode at {cap} turns "
                           f"first; a longer episode needs a new run with --set rollout.max_turns.")
    if path.startswith("user.") and path.endswith(".llm") and isinstance(new, str) and new != "default":
        names, run = ctx.user_llm_names()
        if names is not None and new not in names:
            reasons.append(f"{KNOBS}: {path} names LLM user {new!r}, which {run}'s config does not "
                           f"define (rollout.user_llms: {', '.join(n for n in names if n != 'default') or 'none'}); "
                           f"a new run defines it with --set 'rollout.user_llms={{...}}'.")
    if path.endswith(".withhold_kinds") and isinstance(new, list) and new:
        gym = path.split(".")[1]
        kinds = ctx.gym_fact_kinds(gym)
        for kind in new:
            # kinds of hidden facts only (Task.fact_kinds): a kind the prompt states, telepathy's
            # category ("I am thinking of a fruit"), is confirmed whatever withhold_kinds says
            if kinds is not None and kind not in kinds:
                reasons.append(f"{KNOBS}: {path} names fact kind {kind!r}, which no {gym} task has "
                               f"as a hidden fact (kinds: {', '.join(sorted(kinds)) or 'none'}).")
    return reasons


def knob_write_reasons(writes: dict[str, tuple[Any, Any]], schema: dict,
                       ctx: GateContext, knobs: Any = None) -> list[str]:
    """The reasons check_knobs would give for knob writes {path: (old, new)} alone (delta,
    harder direction, the run's turn cap and LLM users), before any commit exists: a meta-agent
    that asks first does not commit what the gate refuses (the CPU run of 2026-12-05 tried to
    take back a worked example, 2 -> 1, at each of two sessions, refused both times as harder
    while success was 0)."""
    reasons = []
    for path, (old, new) in writes.items():
        reasons += _knob_change_reasons(path, old, new, schema_node(schema, path), ctx)
    changes = [{"path": p, "old": o, "new": n} for p, (o, n) in writes.items()]
    return reasons + gate_knobs.llm_only_reasons(changes, ctx) + \
        gate_knobs.reply_penalty_reasons(changes, knobs, ctx)


def check_knobs(ws: Workspace, old_tree: str, new_tree: str,
                ctx: GateContext) -> tuple[list[str], list[dict]]:
    """Schema, ranges, per-write deltas, harder direction, semantic cross-checks; and the changes."""
    knobs, err = load_json(ws, new_tree, KNOBS)
    if err or knobs is None:
        return [err or f"{KNOBS}: missing; the trainer cannot run without it."], []
    schema, err = load_json(ws, new_tree, KNOB_SCHEMA)
    if err or schema is None:
        return [err or f"{KNOB_SCHEMA}: missing; knobs cannot be checked without it."], []
    import jsonschema                # here, not at the top: the commit-msg hook never needs it
    # the old tree's schema passed the meta-schema check when it was accepted (and the seed's at
    # init): the same bytes again skip it, the costliest part of a hook (0.36 of 0.5 CPU-s)
    same = ws.read_file(old_tree, KNOB_SCHEMA) == ws.read_file(new_tree, KNOB_SCHEMA)
    try:
        validator = _validator(json.dumps(schema, sort_keys=True), check=not same)
        errors = sorted(validator.iter_errors(knobs), key=lambda e: list(map(str, e.absolute_path)))
    except jsonschema.SchemaError as exc:
        return [f"{KNOB_SCHEMA}: not a valid JSON Schema ({exc.message})."], []
    except Exception as exc:          # a valid schema the validator still cannot apply
        return [f"{KNOB_SCHEMA}: cannot be applied to {KNOBS} ({type(exc).__name__}: {exc})."], []
    reasons = [f"{KNOBS}: {'.'.join(map(str, e.absolute_path)) or '(top)'} = {short(e.instance)}: "
               f"{e.message}." for e in errors[:10]]
    # NaN passes every minimum/maximum and x-max-delta comparison (all are False): refuse it,
    # and infinities, before any range is trusted (found by tests/faults/test_fault_gate_props.py)
    reasons += [f"{KNOBS}: {where} = {value}: not a finite number." for where, _, value in
                _walk(knobs) if isinstance(value, float) and not math.isfinite(value)][:10]
    old_knobs, _ = load_json(ws, old_tree, KNOBS)
    old_flat = flatten(old_knobs) if isinstance(old_knobs, dict) else {}
    new_flat = flatten(knobs)
    changes = [{"path": p, "old": old_flat.get(p), "new": new_flat.get(p)}
               for p in sorted(set(old_flat) | set(new_flat)) if old_flat.get(p) != new_flat.get(p)]
    if not reasons:
        for ch in changes:
            reasons += _knob_change_reasons(ch["path"], ch["old"], ch["new"],
                                            schema_node(schema, ch["path"]), ctx)
        reasons += _knob_semantics(ws, new_tree, knobs)
        # writes that would change nothing: no LLM user to mix in, a knob no code reads
        reasons += gate_knobs.llm_only_reasons(changes, ctx)
        reasons += gate_knobs.reply_penalty_reasons(changes, knobs, ctx)
        reasons += gate_knobs.unread_knob_reasons(changes, old_knobs)
    return reasons, changes


@functools.lru_cache(maxsize=16)
def _validator(schema_text: str, check: bool = True):
    """A validator per schema text, checked against the meta-schema first unless the schema is
    known good: the validator itself crashes on e.g. "maximum": null; cached, as the
    same schema judges commit after commit."""
    import jsonschema
    schema = json.loads(schema_text)
    if check:
        jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _knob_semantics(ws: Workspace, new_tree: str, knobs: dict) -> list[str]:
    reasons = []
    clip = knobs.get("reward", {}).get("turn_reward_clip", {})
    if is_number(clip.get("min")) and is_number(clip.get("max")) and clip["min"] > clip["max"]:
        reasons.append(f"{KNOBS}: reward.turn_reward_clip.min {clip['min']} is above "
                       f"reward.turn_reward_clip.max {clip['max']}.")
    reasons += _demonstration_counts(ws, new_tree, knobs)
    for name, mod in (knobs.get("reward", {}).get("modules") or {}).items():
        if isinstance(mod, dict) and mod.get("enabled") and ws.read_file(new_tree, f"rewards/{name}.py") is None:
            reasons.append(f"{KNOBS}: reward.modules.{name} is enabled but rewards/{name}.py does not exist.")
    return reasons


# -- demonstrations ---------------------------------------------------------------------------
def _demo_file(ws: Workspace, tree: str, bench: str) -> Any:
    data, _ = load_json(ws, tree, f"demonstrations/{bench}.json")
    return data if isinstance(data, dict) else {}


def _demonstration_counts(ws: Workspace, new_tree: str, knobs: dict) -> list[str]:
    """env.<gym>.demonstrations may not ask for more examples than demonstrations/<bench>.json
    holds for the gym: the trainer would silently show fewer than the knob says."""
    from orchestrator.gate_context import GYM_BENCH

    reasons, files = [], {}
    for gym, env in (knobs.get("env") or {}).items():
        want = env.get("demonstrations") if isinstance(env, dict) else None
        if not isinstance(want, int) or isinstance(want, bool) or want <= 0 or gym not in GYM_BENCH:
            continue
        bench = GYM_BENCH[gym]
        if bench not in files:
            files[bench] = _demo_file(ws, new_tree, bench)
        have = files[bench].get(gym)
        have = len(have) if isinstance(have, list) else 0
        if want > have:
            reasons.append(f"{KNOBS}: env.{gym}.demonstrations = {want}, but demonstrations/{bench}.json "
                           f"has {have} example(s) for {gym}: add examples or lower the knob.")
    return reasons


def check_demonstrations(ws: Workspace, new_tree: str, path: str) -> list[str]:
    """demonstrations/<bench>.json: its JSON schema, then what the schema cannot say (roles
    alternate and end with the assistant; every assistant turn parses under that gym's own action
    parser, `BENCH.check_action`), so a worked example never teaches a refused format."""
    data, err = load_json(ws, new_tree, path)
    if err:
        return [err]
    if data is None:
        return []
    schema, err = load_json(ws, new_tree, DEMOS_SCHEMA)
    if err or schema is None:
        return [err or f"{DEMOS_SCHEMA}: missing; demonstrations cannot be checked without it."]
    import jsonschema
    try:
        errors = sorted(_validator(json.dumps(schema, sort_keys=True)).iter_errors(data),
                        key=lambda e: list(map(str, e.absolute_path)))
    except jsonschema.SchemaError as exc:
        return [f"{DEMOS_SCHEMA}: not a valid JSON Schema ({exc.message})."]
    if errors:
        return [f"{path}: {'.'.join(map(str, e.absolute_path)) or '(top)'} = {short(e.instance)}: "
                f"{e.message}." for e in errors[:10]]
    from training import demonstrations              # plain Python: no torch
    from training.benches import get_bench

    bench = path.split("/")[-1].removesuffix(".json")
    return demonstrations.problems(get_bench(bench), bench, data)[:10]


# -- reward modules ---------------------------------------------------------------------------
_META = "(APPLIES_TO, callable(globals().get('turn_reward')), callable(globals().get('episode_reward')))"
_CALLS = ("(lambda P: [(type(v).__name__, repr(v)) for v in [{fn}(x) for g, x in P if g in APPLIES_TO]]"
          " if callable(globals().get('{fn}')) else None)({pairs})")


def _values_reason(path: str, fn: str, res) -> str | None:
    if not res.ok:
        what = {"timeout": f"did not return within {REWARD_CALL_S:g} s (the limit)",
                "memory": "ran out of memory (the limit is 512 MB)"}.get(res.kind, f"failed: {res.error}")
        return f"{path}: {fn} {what} on replayed {'turns' if fn == 'turn_reward' else 'episodes'}."
    pairs = res.value or []
    if not isinstance(pairs, list) or not all(isinstance(p, list) and len(p) == 2 and
                                              all(isinstance(x, str) for x in p) for p in pairs):
        # the code wrote its own line on the result pipe, within the sandbox's limits
        return f"{path}: {fn} gave the gate a result it cannot read on replayed turns."
    for tname, text in pairs:
        shown = text if len(text) <= 60 else text[:57] + "..."     # a reason, not a dump
        if tname not in ("float", "int"):
            return f"{path}: {fn} returned {shown} ({tname[:60]}), not a float."
        try:
            finite = math.isfinite(float(text))
        except (ValueError, OverflowError):    # a repr() the module's own class wrote
            return f"{path}: {fn} returned {shown} ({tname}), not a float."
        if not finite:
            return f"{path}: {fn} returned {shown}, not a finite float."
    return None


def check_reward_module(path: str, source: str, ctx: GateContext) -> list[str]:
    """Import and run the module in the sandbox on replayed turns/episodes (DESIGN.md)."""
    from training.sandbox import Limits, run_calls   # no torch: the sandbox is plain Python

    turns, episodes = replay_pairs(ctx.trajectory_episodes())
    limits = Limits(wall_s=REWARD_LOAD_S, cpu_s=2 * (REWARD_LOAD_S + 2 * REWARD_CALL_S), memory_mb=512)
    meta, on_turns, on_eps = run_calls(source, [
        _META, _CALLS.format(fn="turn_reward", pairs=repr(turns)),
        _CALLS.format(fn="episode_reward", pairs=repr(episodes))], limits, per_call_wall_s=REWARD_CALL_S)
    if not meta.ok:
        if "APPLIES_TO" in (meta.error or ""):
            return [f"{path}: defines no APPLIES_TO (a list of gyms the module applies to)."]
        what = "did not finish within {:g} s".format(REWARD_LOAD_S) if meta.kind == "timeout" \
            else f"failed ({meta.error})"
        return [f"{path}: importing the module {what}."]
    if not isinstance(meta.value, list) or len(meta.value) != 3:
        return [f"{path}: importing the module gave the gate a result it cannot read."]
    applies, has_turn, has_episode = meta.value
    if not isinstance(applies, list) or not applies or not all(g in ALL_GYMS for g in applies):
        return [f"{path}: APPLIES_TO = {short(applies)} must be a non-empty list of gyms from "
                f"{', '.join(ALL_GYMS)}."]
    if not (has_turn or has_episode):
        return [f"{path}: defines neither turn_reward(turn) nor episode_reward(episode)."]
    reasons = []
    for fn, res, present in (("turn_reward", on_turns, has_turn), ("episode_reward", on_eps, has_episode)):
        reason = _values_reason(path, fn, res) if present else None
        if reason:
            reasons.append(reason)
    return reasons


# -- rules and control ------------------------------------------------------------------------
def _walk(value: Any, where: str = ""):
    if isinstance(value, dict):
        for k, v in value.items():
            yield f"{where}.{k}" if where else k, k, v
            yield from _walk(v, f"{where}.{k}" if where else k)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _walk(v, f"{where}[{i}]")


def check_rules(ws: Workspace, new_tree: str, path: str, ctx: GateContext) -> list[str]:
    """users/<bench>/rules.json: its schema, regexes RE2 compiles (training/users/rule_regex.py:
    linear-time matching, so no regex needs a replay to prove it finishes), `compile_rules` (fact
    kinds the bench's tasks have, knob references), and a replay of the symbolic user on recent
    transcripts (orchestrator.rule_replay)."""
    rules, err = load_json(ws, new_tree, path)
    if err:
        return [err]
    if rules is None:
        return []
    schema, _ = load_json(ws, new_tree, RULES_SCHEMA)
    if isinstance(schema, dict):
        import jsonschema
        try:
            jsonschema.Draft202012Validator.check_schema(schema)
            errors = list(jsonschema.Draft202012Validator(schema).iter_errors(rules))[:5]
        except jsonschema.SchemaError as exc:
            return [f"{RULES_SCHEMA}: not a valid JSON Schema ({exc.message})."]
        except Exception as exc:      # a valid schema the validator still cannot apply
            return [f"{RULES_SCHEMA}: cannot be applied to {path} ({type(exc).__name__}: {exc})."]
        if errors:
            return [f"{path}: {'.'.join(map(str, e.absolute_path)) or '(top)'} = {short(e.instance)}: "
                    f"{e.message} ({RULES_SCHEMA})." for e in errors]
    from training.users.rule_regex import RuleRegexError, compile_pattern

    reasons = []
    for where, key, value in _walk(rules):
        if key in ("regex", "not_regex") and isinstance(value, str):
            try:
                compile_pattern(value)     # the engine the trainer matches with: RE2, linear time
            except RuleRegexError as exc:
                reasons.append(f"{path}: {where} = {value!r}: {exc}.")
    if reasons:
        return reasons
    bench = path.split("/")[1]
    kinds = ctx.bench_fact_kinds(bench)
    try:
        from training.users.symbolic import compile_rules
    except ImportError:
        return reasons
    if kinds is None:                # the bench cannot tell its kinds: do not refuse on kinds
        kinds = {v for _, k, vs in _walk(rules) if k == "kinds" and isinstance(vs, list) for v in vs}
    try:
        compile_rules(rules, kinds)
    except ValueError as exc:
        return [f"{path}: {exc}"]
    episodes = ctx.trajectory_episodes()
    if episodes:
        from orchestrator.rule_replay import replay
        knobs, _ = load_json(ws, new_tree, KNOBS)
        user_knobs = knobs.get("user", {}) if isinstance(knobs, dict) else {}
        result = replay(bench, rules, user_knobs, episodes)
        reasons += [f"{path}: replayed on recent transcripts, the symbolic user failed at {e}."
                    for e in result["errors"]]
    return reasons


def check_control(ws: Workspace, new_tree: str, ctx: GateContext) -> list[str]:
    """control.json: {"action": "restart"|"resume", "from_checkpoint": "step-000050", "why": "..."}."""
    ctl, err = load_json(ws, new_tree, "control.json")
    if err or ctl is None:
        return [err] if err else []
    if not isinstance(ctl, dict):
        return [f"control.json: expected an object, got {short(ctl)}."]
    reasons = []
    extra = set(ctl) - {"action", "from_checkpoint", "why"}
    if extra:
        reasons.append(f"control.json: unknown field(s) {', '.join(sorted(extra))} (allowed: action, "
                       f"from_checkpoint, why).")
    if ctl.get("action") not in ("restart", "resume"):
        reasons.append(f"control.json: action = {short(ctl.get('action'))}, expected \"restart\" or \"resume\".")
    if not isinstance(ctl.get("why"), str) or not ctl["why"].strip():
        reasons.append("control.json: why must say why the run should restart or resume.")
    ckpt = ctl.get("from_checkpoint")
    if ckpt is None and ctl.get("action") == "resume":
        reasons.append("control.json: a resume needs from_checkpoint (e.g. \"step-000050\").")
    elif ckpt is not None:
        if not isinstance(ckpt, str) or not re.fullmatch(r"step-\d{6}", ckpt):
            reasons.append(f"control.json: from_checkpoint = {short(ckpt)} is not a checkpoint name "
                           f"like \"step-000050\".")
        else:
            run = ctx.run_dir()
            if run is not None and not (run / "checkpoints" / ckpt).is_dir():
                reasons.append(f"control.json: from_checkpoint {ckpt} does not exist in "
                               f"{run.name}/checkpoints.")
    return reasons
