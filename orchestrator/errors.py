"""Errors a user can cause. The CLI prints their message (one sentence saying what to do) and exits
non-zero, never a traceback (STYLE.md, point 10)."""


class UserError(Exception):
    """Bad input from the person or the agent: a missing experiment, a corrupt file, a bad name."""

    exit_code = 2
