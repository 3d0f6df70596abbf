"""UserGym: reward a question that made the user disclose a hidden fact it had not volunteered.

Paper section 4.3: intermediate rewards for states indicative of progress when the final reward is
sparse. A turn earns 0.2 per fact disclosed in answer to the agent's question (`revealed_facts`),
minus facts the user leaked unasked (`leaked_facts`), so volunteering is not rewarded.

It pays a fact each time it is disclosed, a question asked again included (the symbolic users
answer a repeated question again). Measured on the H200 comparison (benchmarks/RESULTS-learning.md):
PPO learned to farm it, the share of its credit going to turns that repeat an earlier turn of the
episode rising from 0.14 at step 1 to 0.47-0.66 at steps 8-16 (three seeds) while held-out success
stayed near 0.
The built-in meta-agent watches for that (orchestrator.diagnostics.find_reward_hacks) and limits
the module to first disclosures (the rollout's `new_facts`) when it happens.
"""
APPLIES_TO = ["travel", "function", "persuade", "tau", "turtle", "intention", "telepathy"]

PER_FACT = 0.2


def turn_reward(turn):
    if not turn.get("asked_question"):
        return 0.0
    revealed = set(turn.get("revealed_facts") or [])
    leaked = set(turn.get("leaked_facts") or [])
    return PER_FACT * len(revealed - leaked)
