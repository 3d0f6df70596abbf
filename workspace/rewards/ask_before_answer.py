"""ColBench: reward asking the collaborator before writing the function.

Paper appendix A.2: the hidden specification is only reachable through questions, and episodes that
answered at once failed the hidden tests. An episode whose first answering turn comes after at
least one question earns 0.1; an answer with no question before it earns -0.1.
"""
APPLIES_TO = ["colbench"]


def episode_reward(episode):
    asked = False
    for turn in episode.get("turns") or []:
        if turn.get("answered"):
            return 0.1 if asked else -0.1
        asked = asked or bool(turn.get("asked_question"))
    return 0.0
