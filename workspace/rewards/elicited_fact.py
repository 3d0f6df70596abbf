"""UserGym: reward a question that made the user disclose a hidden fact it had not volunteered.

Paper section 4.3: intermediate rewards for states indicative of progress when the final reward is
sparse. A turn earns 0.2 per fact disclosed in answer to the agent's question (`revealed_facts`),
minus facts the user leaked unasked (`leaked_facts`), so volunteering is not rewarded.
"""
APPLIES_TO = ["travel", "function", "persuade", "tau", "turtle", "intention", "telepathy"]

PER_FACT = 0.2


def turn_reward(turn):
    if not turn.get("asked_question"):
        return 0.0
    revealed = set(turn.get("revealed_facts") or [])
    leaked = set(turn.get("leaked_facts") or [])
    return PER_FACT * len(revealed - leaked)
