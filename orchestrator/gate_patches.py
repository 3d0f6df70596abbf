"""The write gate's check of an environment patch, `env_patches/<gym>.py` (training/env_patches.py).

Like a reward module (DESIGN.md, "Gate checks"), a patch is imported and run in the sandbox,
never in the gate's process: it must import, define at least one of its gym's hooks, and every
hook it defines must return its type, within the time limit, on the turns of the run's newest
trajectories of that gym (or, before any exists, on a short synthetic episode). Each failure is
one sentence naming the file, the hook and what went wrong.
"""
from __future__ import annotations

import json

from orchestrator.gate_context import GateContext, synthetic_episode

PATCH_LOAD_S = 2.0          # import of a patch (sandbox wall clock)
PATCH_CALL_S = 2.0          # all replayed turns of one hook, one call
MAX_TURNS = 64
_CALLS = "(lambda P: [{fn}(x) for x in P])({inputs})"


def check_env_patch(path: str, source: str, knobs: object, ctx: GateContext) -> list[str]:
    """Reasons to refuse the patch at `path` (empty: accept)."""
    from training import env_patches                       # plain Python: no torch
    from training.sandbox import Limits, run_calls

    gym = path.split("/")[-1].removesuffix(".py")
    hooks = env_patches.gym_hooks(gym)
    if not hooks:
        have = sorted({g for gyms in env_patches.HOOKS.values() for g in gyms})
        return [f"{path}: {gym} has no hooks a patch can replace (patches exist for "
                f"{', '.join(have)})."]
    if ctx.bench and gym not in ctx.bench_gyms():
        return [f"{path}: patches {gym}, which this {ctx.bench} experiment does not train on "
                f"({', '.join(ctx.bench_gyms())})."]
    episodes = [e for e in ctx.trajectory_episodes() if e.get("gym") == gym] or [synthetic_episode(gym)]
    env_knobs = knobs.get("env", {}).get(gym, {}) if isinstance(knobs, dict) else {}
    inputs = env_patches.replay_inputs(gym, episodes, env_knobs if isinstance(env_knobs, dict) else {})
    inputs = {h: json.loads(json.dumps(v[:MAX_TURNS], default=str)) for h, v in inputs.items()}
    limits = Limits(wall_s=PATCH_LOAD_S, cpu_s=PATCH_LOAD_S + len(hooks) * PATCH_CALL_S + 2,
                    memory_mb=512)
    # a hook the module does not define fails its call: that result is ignored below
    exprs = [f"[n for n in {list(hooks)!r} if callable(globals().get(n))]"] + \
        [_CALLS.format(fn=h, inputs=repr(inputs[h])) for h in hooks]
    results = run_calls(source, exprs, limits, per_call_wall_s=PATCH_CALL_S)
    meta = results[0]
    if not meta.ok:
        what = f"did not finish within {PATCH_LOAD_S:g} s" if meta.kind == "timeout" \
            else f"failed ({(meta.error or meta.kind).strip().splitlines()[-1][:200]})"
        return [f"{path}: importing the patch {what}."]
    defined = [h for h in (meta.value if isinstance(meta.value, list) else []) if h in hooks]
    if not defined:
        return [f"{path}: defines none of {gym}'s hooks ({', '.join(hooks)}); see "
                f"training/env_patches.py for what each takes and returns."]
    reasons = []
    for hook, res in zip(hooks, results[1:]):
        if hook not in defined:
            continue
        if not res.ok:
            what = {"timeout": f"did not return within {PATCH_CALL_S:g} s (the limit)",
                    "memory": "ran out of memory (the limit is 512 MB)"}.get(
                res.kind, f"failed ({(res.error or res.kind).strip().splitlines()[-1][:200]})")
            reasons.append(f"{path}: {hook} {what} on replayed turns.")
            continue
        values = res.value if isinstance(res.value, list) else [res.value]
        problem = next((p for p in (env_patches.value_problem(hook, v) for v in values) if p), None)
        if problem:
            reasons.append(f"{path}: {hook} {problem} on a replayed turn.")
    return reasons
