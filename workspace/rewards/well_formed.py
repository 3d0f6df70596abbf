"""Every bench: a small credit for each agent turn the environment accepted as an action.

Shipped switched off (knobs.json, reward.modules.well_formed). Why it exists: a policy whose every
turn is refused for its format (`invalid_action` in the trajectories; episode/invalid_rate 1.0,
as the untrained SmolLM2-135M-Instruct had with no worked example in its context) earns 0 on every
episode, so PPO has no difference between episodes to learn from; 0.05 per accepted turn is one.
It credits the format, not the content, so it is help to withdraw: the built-in meta-agent
switches it off again once at most 5% of recent turns are refused, before the policy learns to
fill episodes with well-formed turns for their own sake. A turn repeating an earlier turn of its
episode earns nothing: on the H200 comparison of 2026-12-05 (benchmarks/RESULTS-learning.md), 41-44%
of what this module paid went to repeated turns (`[search] test` ten times in one function
episode) while held-out success did not move.
"""
APPLIES_TO = ["travel", "function", "persuade", "tau", "turtle", "intention", "telepathy",
              "colbench", "retail", "airline", "telecom"]


def turn_reward(turn):
    return 0.0 if turn.get("invalid_action") or turn.get("repeated") else 0.05
