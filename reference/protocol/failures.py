"""How an incarnation ends before its input does (spec section 2): the exceptions the supervisor restarts on.

A step raises one of these; the backend's scheduler stops the incarnation and
``supervisor.Supervisor`` decides what follows (``supervisor.RESTARTABLE``).
"""

from __future__ import annotations


class DriverCrash(Exception):
    """The driver process dies: everything but storage is lost."""


class QueryFailure(Exception):
    """The query stops with an error (a failed log write, a lost pending commit). Restartable."""


class TaskAttemptFailed(Exception):
    """A task attempt failed; Spark retries it (up to ``task_retry.MAX_TASK_ATTEMPTS``)."""
