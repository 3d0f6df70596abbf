"""tau2: reward looking a record up before changing it.

tau2-bench's domain policies require the agent to verify the user's order, reservation or line
before acting on it. Per turn: a successful read tool call (get_/find_/list_/search_/check_...)
earns 0.05; a turn whose only calls are failed writes earns -0.05. Per episode: 0.1 when the first
successful write came after a successful read.
"""
APPLIES_TO = ["retail", "airline", "telecom"]

READ_PREFIXES = ("get_", "find_", "list_", "search_", "check_", "calculate")


def _is_read(call):
    return str(call.get("name", "")).startswith(READ_PREFIXES)


def turn_reward(turn):
    calls = [c for c in (turn.get("tool_calls") or []) if isinstance(c, dict)]
    reads_ok = [c for c in calls if _is_read(c) and not c.get("error")]
    writes_failed = [c for c in calls if not _is_read(c) and c.get("error")]
    if reads_ok:
        return 0.05
    if writes_failed:
        return -0.05
    return 0.0


def episode_reward(episode):
    """0.1 when the episode's first successful write came after a successful read, else 0."""
    read_seen = False
    for turn in episode.get("turns") or []:
        for call in turn.get("tool_calls") or []:
            if not isinstance(call, dict) or call.get("error"):
                continue
            if _is_read(call):
                read_seen = True
            else:
                return 0.1 if read_seen else 0.0
    return 0.0
