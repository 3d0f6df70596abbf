"""Bad writes, generated. Hypothesis makes random and mutated knob files, schema
edits and rule files (seeded: ``); for each the gate

- never crashes (every check returns reasons, never raises);
- never accepts a knob file that breaks the schema, a declared range or an `x-max-delta` (checked
  against an oracle written here from the pristine schema, not with the gate's code), and never
  accepts a non-finite number;
- never accepts an agent's schema edit that admits more than before (a bound loosened or dropped,
  a type or enum widened, a knob's node removed where unknown keys become allowed);
- gives the same verdict through the pre-commit/commit-msg hooks as at promotion (real git).

The bulk runs the gate's own checks (`gate.content_reasons`, `gate.message_reasons`) on trees
held in memory (`MemWorkspace`, the three read methods of orchestrator.workspace.Workspace), so
thousands of cases fit in CI time; the hook-versus-promotion cases run in a real repository.
CASES counts the cases tried; the closing note quotes it.
"""
from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

import jsonschema
import pytest
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from gate_testkit import AGENT, PERSON, make_experiment, ws_of
from orchestrator import gate
from orchestrator.gate_context import GateContext
from orchestrator.paths import project_root

ROOT = project_root()
KNOBS = json.loads((ROOT / "workspace" / "knobs.json").read_text())
SCHEMA = json.loads((ROOT / "workspace" / "schema" / "knobs.schema.json").read_text())
RULES = json.loads((ROOT / "workspace" / "users" / "usergym" / "rules.json").read_text())
RULES_SCHEMA = (ROOT / "workspace" / "schema" / "rules.schema.json").read_text()
MSG = "a write\n\nWhy: generated.\nExpect: the gate's verdict.\n"
CASES = {"knobs": 0, "schema": 0, "rules": 0, "hook_vs_promotion": 0}
SETTINGS = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck))
SEED = 20269                  # every test below is seeded: the same cases on every run


class Case:
    """A generated value with a short repr: Hypothesis reprs every example, and pretty-printing a
    40 kB schema each time cost more than judging it."""

    def __init__(self, value):
        self.value = value

    def __repr__(self) -> str:
        text = self.value if isinstance(self.value, bytes) else json.dumps(self.value, default=repr)
        return f"Case({text[:120]!r}... {len(text)} chars)"


class MemWorkspace:
    """Trees as {path: bytes}; what the gate's content checks read from a workspace."""

    def __init__(self):
        self.trees: dict[str, dict[str, bytes]] = {}

    def add(self, files: dict[str, bytes]) -> str:
        self.count = getattr(self, "count", 0) + 1
        tree = f"tree{self.count}"
        self.trees[tree] = dict(files)
        return tree

    def read_file(self, tree: str, path: str) -> bytes | None:
        return self.trees[tree].get(path)

    def list_files(self, tree: str) -> dict[str, tuple[int, str]]:
        return {p: (0o100644, str(hash(b))) for p, b in self.trees[tree].items()}

    def changed_paths(self, old: str, new: str) -> dict[str, str]:
        a, b = self.trees[old], self.trees[new]
        out = {p: "added" for p in b if p not in a}
        out.update({p: "deleted" for p in a if p not in b})
        out.update({p: "modified" for p in a if p in b and a[p] != b[p]})
        return dict(sorted(out.items()))


BASE = {str(p.relative_to(ROOT / "workspace")): p.read_bytes()
        for p in sorted((ROOT / "workspace").rglob("*")) if p.is_file() and "__pycache__" not in p.parts}
MEM = MemWorkspace()
BASE_TREE = MEM.add(BASE)


def base_files() -> dict[str, bytes]:
    """Every file of the project's workspace, as a new experiment is seeded (the gate accepts it)."""
    return dict(BASE)


def judge(files: dict[str, bytes], author_is_agent: bool = True, message: str = MSG,
          ctx: GateContext | None = None) -> list[str]:
    """The gate's reasons for changing the pristine tree into `files` (what judge_commit runs)."""
    new = MEM.add(files)
    ctx = ctx or GateContext()
    try:
        reasons, _, changed = gate.content_reasons(MEM, BASE_TREE, new, ctx)
        return reasons + gate.message_reasons(MEM, BASE_TREE, new, message, author_is_agent, changed)
    finally:
        del MEM.trees[new]


# ---- the oracle (from the pristine schema; independent of gate_checks) ---------------------
def leaves(value, prefix=""):
    if isinstance(value, dict) and value:
        for k, v in value.items():
            yield from leaves(v, f"{prefix}.{k}" if prefix else k)
    else:
        yield prefix, value


def node_of(dotted: str) -> dict | None:
    node = SCHEMA
    for part in dotted.split("."):
        node = (node.get("properties") or {}).get(part) if isinstance(node, dict) else None
        if node is None:
            return None
    return node


# built once: jsonschema.validate checks the 40 kB schema against its meta-schema on every call,
# 55 ms of the 60 ms a generated knob file cost (the gate's own verdict: 4 ms)
jsonschema.Draft202012Validator.check_schema(SCHEMA)
ORACLE = jsonschema.Draft202012Validator(SCHEMA)


def breaks(new: object) -> str | None:
    """Why `new` (parsed knobs.json) breaks the schema, a range or a delta; None when it does not."""
    error = jsonschema.exceptions.best_match(ORACLE.iter_errors(new))
    if error is not None:
        return f"schema: {error.message}"
    old = dict(leaves(KNOBS))
    for path, v in leaves(new):
        if isinstance(v, float) and not math.isfinite(v):
            return f"{path} is {v}"
        node = node_of(path) or {}
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            lo, hi = node.get("minimum", -math.inf), node.get("maximum", math.inf)
            if not lo <= v <= hi:
                return f"{path} = {v} outside [{lo}, {hi}]"
            delta = node.get("x-max-delta")
            if delta is not None and isinstance(old.get(path), (int, float)) \
                    and not abs(v - old[path]) <= delta + 1e-12:
                return f"{path} {old[path]} -> {v} over delta {delta}"
    return None


# ---- knob files ---------------------------------------------------------------------------
KNOB_PATHS = sorted(p for p, _ in leaves(KNOBS))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-10**6, 10**6),
                         st.floats(allow_nan=True, allow_infinity=True), st.text(max_size=8))
json_values = st.recursive(json_scalars, lambda c: st.one_of(
    st.lists(c, max_size=3), st.dictionaries(st.text(max_size=6), c, max_size=3)), max_leaves=6)


@st.composite
def mutated_knobs(draw):
    knobs = json.loads(json.dumps(KNOBS))
    for _ in range(draw(st.integers(1, 3))):
        path = draw(st.sampled_from(KNOB_PATHS)).split(".")
        node = knobs
        for p in path[:-1]:
            node = node.setdefault(p, {}) if isinstance(node, dict) else {}
        if not isinstance(node, dict):
            continue
        old = node.get(path[-1])
        how = draw(st.sampled_from(["near", "scale", "any", "nan", "delete", "extra", "bool"]))
        if how == "near" and isinstance(old, (int, float)) and not isinstance(old, bool):
            step = draw(st.sampled_from([1e-6, 1e-3, 0.004, 0.0041, 0.01, 0.5, 1, 3]))
            new = old + draw(st.sampled_from([-1, 1])) * step
            node[path[-1]] = int(new) if isinstance(old, int) and float(new).is_integer() else new
        elif how == "scale" and isinstance(old, (int, float)) and not isinstance(old, bool):
            node[path[-1]] = old * draw(st.sampled_from([-1, 0, 0.5, 2, 10, 1e9]))
        elif how == "nan":
            node[path[-1]] = draw(st.sampled_from([math.nan, math.inf, -math.inf]))
        elif how == "delete":
            node.pop(path[-1], None)
        elif how == "extra":
            node[draw(st.text(min_size=1, max_size=8))] = draw(json_scalars)
        elif how == "bool":
            node[path[-1]] = draw(st.booleans())
        else:
            node[path[-1]] = draw(json_values)
    return knobs


raw_files = st.one_of(st.binary(max_size=40), st.text(max_size=40).map(str.encode),
                      json_values.map(lambda v: json.dumps(v).encode()))


@pytest.mark.slow
@seed(SEED)
@settings(max_examples=1450, **SETTINGS)
@given(st.one_of(mutated_knobs().map(lambda k: json.dumps(k).encode()), raw_files).map(Case))
def test_knob_writes_never_crash_and_never_pass_a_break(case):
    raw = case.value
    CASES["knobs"] += 1
    files = {**base_files(), "knobs.json": raw}
    reasons = judge(files)
    assert all(isinstance(r, str) and r for r in reasons)
    try:
        parsed = json.loads(raw)
    except ValueError:
        assert reasons, "a knobs.json that does not parse was accepted"
        return
    why = breaks(parsed)
    if why is not None:
        assert reasons, f"accepted a write that breaks {why}"


# ---- schema edits -------------------------------------------------------------------------
SCHEMA_NODES = sorted(p for p, _ in leaves(KNOBS) if node_of(p) is not None)
BOUND_KEYS = ("minimum", "maximum", "x-max-delta", "type", "enum", "additionalProperties",
              "required", "x-harder")


@st.composite
def schema_edits(draw):
    schema = json.loads(json.dumps(SCHEMA))
    for _ in range(draw(st.integers(1, 3))):
        parts = draw(st.sampled_from(SCHEMA_NODES)).split(".")
        cut = draw(st.integers(1, len(parts)))          # a knob's node, or a group above it
        chain = [schema]
        for p in parts[:cut]:
            props = chain[-1].get("properties")
            if not isinstance(props, dict) or not isinstance(props.get(p), dict):
                break                                   # an earlier edit removed this node
            chain.append(props[p])
        if len(chain) < 2:
            continue
        node, parent = chain[-1], chain[-2]
        key = draw(st.sampled_from(BOUND_KEYS + ("drop_node",)))
        if key == "drop_node":
            parent["properties"].pop(parts[len(chain) - 2], None)
            if draw(st.booleans()):
                parent.pop("additionalProperties", None)
            continue
        old = node.get(key)
        if isinstance(old, (int, float)) and not isinstance(old, bool) and draw(st.booleans()):
            node[key] = old * draw(st.sampled_from([0.5, 0.9, 1, 1.1, 2, -1]))
        elif draw(st.booleans()):
            node.pop(key, None)
        else:
            node[key] = draw(json_values)
    return schema


def as_set(value) -> set[str]:
    items = value if isinstance(value, list) else [] if value is None else [value]
    return {json.dumps(v, sort_keys=True, default=repr) for v in items}


def admits_more(new: dict) -> str | None:
    """Oracle: how the edited schema admits more than the pristine one on a knob (None: it does
    not, as far as these keywords tell)."""
    def walk(old_node, new_node, where):
        if not isinstance(new_node, dict):
            return None
        for key in ("minimum", "exclusiveMinimum"):
            if key in old_node and not (isinstance(new_node.get(key), (int, float))
                                        and new_node[key] >= old_node[key]):
                return f"{where} {key}"
        for key in ("maximum", "exclusiveMaximum", "x-max-delta"):
            if key in old_node and not (isinstance(new_node.get(key), (int, float))
                                        and new_node[key] <= old_node[key]):
                return f"{where} {key}"
        if "enum" in old_node and not (isinstance(new_node.get("enum"), list)
                                       and all(v in old_node["enum"] for v in new_node["enum"])):
            return f"{where} enum"
        if "type" in old_node and new_node.get("type") != old_node["type"]:
            ot, nt = as_set(old_node["type"]), as_set(new_node.get("type"))
            if not nt or not nt <= ot:
                return f"{where} type"
        if old_node.get("additionalProperties") is False and \
                new_node.get("additionalProperties") is not False:
            return f"{where} additionalProperties"
        if not as_set(old_node.get("required", [])) <= as_set(new_node.get("required") or []):
            return f"{where} required"
        for name, child in (old_node.get("properties") or {}).items():
            new_props = new_node.get("properties")
            if not isinstance(new_props, dict) or name not in new_props:
                if new_node.get("additionalProperties") is not False:
                    return f"{where}.{name} removed"
                continue
            found = walk(child, new_props[name], f"{where}.{name}")
            if found:
                return found
        return None
    return walk(SCHEMA, new, "")


@pytest.mark.slow
@seed(SEED)
@settings(max_examples=500, **SETTINGS)
@given(schema_edits().map(Case), st.booleans())
def test_agent_schema_edits_never_widen(case, with_human_line):
    schema = case.value
    CASES["schema"] += 1
    message = MSG + ("Eau-Author: human\n" if with_human_line else "")
    files = {**base_files(), "schema/knobs.schema.json": json.dumps(schema).encode()}
    reasons = judge(files, author_is_agent=True, message=message)
    assert all(isinstance(r, str) and r for r in reasons)
    why = admits_more(schema)
    if why is not None:
        assert reasons, f"an agent's schema edit widened {why} and was accepted"


# ---- rule files ---------------------------------------------------------------------------
REGEXES = ["(a+)+$", "(x|x)*y", "[", "\\b(why|how)\\b", "(?P<n>a)(?P=n)", "a{1,99999}b", "(.*)*z",
           ".*", "\\", "(?i)budget"]


@st.composite
def mutated_rules(draw):
    rules = json.loads(json.dumps(RULES))
    for _ in range(draw(st.integers(1, 3))):
        rule = draw(st.sampled_from(rules["rules"])) if rules["rules"] else {}
        how = draw(st.sampled_from(["regex", "field", "drop", "kinds", "reveal", "junk"]))
        if how == "regex":
            rule.setdefault("when", {})["regex"] = draw(st.sampled_from(REGEXES))
        elif how == "field":
            rule[draw(st.sampled_from(["id", "say", "when", "gyms", "reveal"]))] = draw(json_values)
        elif how == "drop" and rules["rules"]:
            rules["rules"].remove(rule)
        elif how == "kinds":
            rule["kinds"] = draw(st.lists(st.sampled_from(["budget", "shape", "", "rule"]),
                                          max_size=3))
        elif how == "reveal":
            rule["reveal"] = draw(st.sampled_from(["matched", "next", "all", "none", 3]))
        else:
            rules = draw(json_values)
            break
    return rules


@seed(SEED)
@settings(max_examples=60, **SETTINGS)
@given(mutated_rules().map(Case))
def test_rule_writes_never_crash(case):
    rules = case.value
    CASES["rules"] += 1
    files = {**base_files(), "users/usergym/rules.json": json.dumps(rules).encode()}
    reasons = judge(files, ctx=GateContext(bench="usergym"))
    assert all(isinstance(r, str) and r for r in reasons)
    if "(?P=n)" in json.dumps(rules):
        assert reasons, "a backreference, which RE2 lacks, was accepted"


# ---- the hooks and the promotion agree (real git) -----------------------------------------
def test_hook_and_promotion_give_the_same_verdict(tmp_path, monkeypatch):
    """Twelve generated writes (knobs and schema, agent and person): committed through the hooks,
    and the same tree committed without them and judged at promotion; same verdict each time."""
    exp = make_experiment(tmp_path)
    meta = json.loads((exp / "experiment.json").read_text())   # as while `orchestrator start` runs:
    (exp / "experiment.json").write_text(json.dumps(           # the post-commit hook leaves the
        {**meta, "state": "running", "pid": os.getpid()}))      # promotion to judge_pending below
    ws = ws_of(exp)
    knob_cases = mutated_knobs().map(lambda k: ("knobs.json", json.dumps(k, indent=2)))
    schema_cases = schema_edits().map(lambda s: ("schema/knobs.schema.json", json.dumps(s, indent=2)))
    seen = []

    @seed(SEED)
    @settings(max_examples=12, **SETTINGS)
    @given(st.one_of(knob_cases, schema_cases).map(Case), st.sampled_from([AGENT, PERSON]),
           st.booleans())
    def one(case, who, human_line):
        path, text = case.value
        CASES["hook_vs_promotion"] += 1
        (ws.path / path).write_text(text)
        message = MSG + ("Eau-Author: human\n" if human_line else "")
        env = {**os.environ, "GIT_AUTHOR_NAME": who[0], "GIT_AUTHOR_EMAIL": who[1],
               "GIT_COMMITTER_NAME": who[0], "GIT_COMMITTER_EMAIL": who[1]}
        subprocess.run(["git", "-C", str(ws.path), "add", "-A"], check=True)
        if subprocess.run(["git", "-C", str(ws.path), "diff", "--cached", "--quiet"]).returncode == 0:
            return                                   # the mutation changed nothing
        hooked = subprocess.run(["git", "-C", str(ws.path), "commit", "-q", "-m", message],
                                env=env, capture_output=True, text=True)
        if hooked.returncode != 0:
            assert "EAU gate: commit refused" in hooked.stderr, hooked.stderr
            subprocess.run(["git", "-C", str(ws.path), "commit", "-q", "--no-verify", "-m",
                            message], env=env, check=True)
        (v,) = gate.judge_pending(exp)
        seen.append((path, hooked.returncode == 0, v.accepted))
        assert (hooked.returncode == 0) == v.accepted, (path, who, hooked.stderr, v.reasons)
        subprocess.run(["git", "-C", str(ws.path), "checkout", "-q", "--", "."], check=True)

    one()
    assert any(ok for _, ok, _ in seen) and any(not ok for _, ok, _ in seen), seen


def test_pristine_workspace_is_accepted():
    """The base every case mutates passes the gate untouched, so a refusal is the mutation's."""
    files = base_files()
    files["knobs.json"] = json.dumps(KNOBS, indent=1).encode()        # same values, new bytes
    assert judge(files) == []


def test_cases_tried_are_counted(capsys):
    """Runs last in this file: the number of generated cases, for the closing note."""
    total = sum(CASES.values())
    with capsys.disabled():
        print(f"\ngate property cases tried: {CASES} total {total}")
    if CASES["knobs"] and CASES["schema"]:      # the whole file ran (not a -k/-m selection)
        assert total >= 2000, CASES
