"""The names this module held before it was split; kept so older imports work.

``timed_incarnation.TimedIncarnation`` is the reference's incarnation with a
simulated clock and step costs; ``incarnation_run.IncarnationRun`` executes
one incarnation's step graph on the simulated cluster. (The PySpark engine is
``spark_impl.engine``.)
"""

from __future__ import annotations

from .incarnation_run import PRUNE_LAG_BATCHES, STORAGE_STEPS, IncarnationRun
from .timed_incarnation import COMMIT_STEPS, SMALL_FILE_BYTES, TimedIncarnation

__all__ = ["COMMIT_STEPS", "PRUNE_LAG_BATCHES", "SMALL_FILE_BYTES", "STORAGE_STEPS", "IncarnationRun",
           "TimedIncarnation"]
