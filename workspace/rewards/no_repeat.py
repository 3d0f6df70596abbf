"""Every bench: a small cost for an agent turn that repeats an earlier turn of its episode.

Shipped switched off (knobs.json, reward.modules.no_repeat). `repeated` is the rollout's own mark
(training.rollout.novelty: the same text, whitespace and case aside, as an earlier agent turn of
the episode). A repeated question gets the same answer from a symbolic user, so it spends a turn
and learns nothing; on the H200 comparison a PPO-trained SmolLM2-135M repeated 57-74% of its turns
in TauGym and TravelGym over steps 14-16 (35% and 48% untrained). The built-in meta-agent switches this
on when most of a gym's recent turns repeat (orchestrator.diagnostics.find_loops).
"""
APPLIES_TO = ["travel", "function", "persuade", "tau", "turtle", "intention", "telepathy",
              "colbench", "retail", "airline", "telecom"]


def turn_reward(turn):
    return -0.1 if turn.get("repeated") else 0.0
