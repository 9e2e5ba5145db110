"""The names this module held before the incarnation was split into its parts; kept so older imports work.

``reference.engine.Incarnation`` is ``reference.incarnation.Incarnation``: a
model variant (a planted bug) that subclasses it from here overrides the same
methods and reads the same state as before. New code imports from the modules
that hold each concept: ``incarnation`` (the composed protocol),
``incarnation_state`` (``BatchPlan``, ``TaskState``), ``clock``,
``task_effects``, ``driver_steps``, ``task_retry`` and ``failures`` (the
exceptions), with the seams in ``seams``. (The PySpark engine is
``spark_impl.engine``; the scenario's ``engine`` section is
``scenario.EngineConfig``.)
"""

from __future__ import annotations

# Every name the module had, public or imported, stays importable from here.
import json  # noqa: F401
import threading  # noqa: F401
from dataclasses import dataclass, field  # noqa: F401
from typing import Any, Mapping  # noqa: F401

from . import layout  # noqa: F401
from .clock import MAX_PLANNED_BATCHES
from .failures import DriverCrash, QueryFailure, TaskAttemptFailed
from .faults import SealedVersion, sealed_versions  # noqa: F401
from .graph import LOGICAL_BATCH_MS, GraphShape, Node, build_graph  # noqa: F401
from .incarnation import Incarnation
from .incarnation_state import BatchPlan, TaskState
from .logs import (CommitEntry, OffsetEntry, PurgeRound, check_metadata, log_batches, purge_round,  # noqa: F401
                   run_purge_round, threshold_of, write_metadata)
from .observer import Observer  # noqa: F401
from .outcome import DURATION_KEYS, ProgressEvent, StateOperatorProgress, digest_rows  # noqa: F401
from .query import (PartitionResult, advance_trackers, apply_partition, initial_trackers,  # noqa: F401
                    operator_watermarks, pipeline_store_ids, route, rows_of, sink_rows, watermarks_of)
from .rebalancing import PlacementTimeline  # noqa: F401
from .recovery import RestartPlan  # noqa: F401
from .redelivery import FetchLayer  # noqa: F401
from .scenario import Scenario  # noqa: F401
from .size import MATERIALISED  # noqa: F401
from .sources import Record, SourceData  # noqa: F401
from .state_store import Sealed, StateStore, cleanup_store  # noqa: F401
from .steps import TASK_STEPS, NodeId  # noqa: F401
from .storage import Storage  # noqa: F401
from .task_retry import MAX_TASK_ATTEMPTS

__all__ = ["MAX_PLANNED_BATCHES", "MAX_TASK_ATTEMPTS", "BatchPlan", "DriverCrash", "Incarnation", "QueryFailure",
           "TaskAttemptFailed", "TaskState"]
