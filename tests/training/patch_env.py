"""ColBench with a planted counter bug, for the environment-patch test
(`tests/training/patch_env.py:BENCH` in a run's config).

The planted bug: the built-in counter behind `min_questions` never counts a turn, so every answer
is refused while `env.colbench.min_questions` > 0, a deadlock like appendix A.2's (there the
counter skipped turns that asked and answered at once). The environment still consults the
workspace's patch (`env_patches/colbench.py`, hook `count_question`) after its own counter, as the
real ColBench does, so a patch can repair it.
"""
from __future__ import annotations

from training.benches import colbench
from training.benches.colbench.env import ColBenchEnv
from training.users.mixture import episode_user


class BuggyCounterEnv(ColBenchEnv):
    def counts_as_question(self, message: str, code: str | None) -> bool:
        return False                      # the planted bug: nothing is ever counted


def make_env(task, snapshot, *, seed: int, llm=None) -> BuggyCounterEnv:
    user, arm = episode_user(colbench.GYM, snapshot.knobs, colbench.symbolic_user(snapshot, task),
                             llm, seed=seed, key=task.id)
    env = BuggyCounterEnv(task, snapshot.knobs, user, seed=seed, user_arm=arm)
    env.patches = snapshot.patches
    return env


class _BuggyColBench(type(colbench.BENCH)):
    make_env = staticmethod(make_env)


BENCH = _BuggyColBench()
