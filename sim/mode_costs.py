"""What each execution mode's steps cost in the simulator: one cost hook per mode, looked up by the mode.

The modes themselves (their graphs, rules and restarts) are the reference's
(``reference.protocol.modes``); what a step costs in simulated time is the
simulator's. ``costs_of(mode)`` finds the hook of a mode by its name, so a new
mode adds one class here (and its entry in ``COSTS``), nothing elsewhere in
``sim/``. A mode without an entry is refused by name.

- ``MicroBatchCosts`` (micro-batch, sync or async progress): a batch plans at
  the first trigger that finds its input arrived; a task applies its batch's
  records and writes its output once it is done;
- ``RealTimeCosts``: a batch plans as soon as the last one committed (Spark
  runs it with ``ProcessingTimeTrigger(0)``); its long-running tasks deliver
  each record as it arrives (``real_time.long_running_task``), so the sink
  write costs nothing more; volume mode cannot hold records, so it refuses it;
- real-time mode with asynchronous progress tracking costs as real-time mode
  (its log writes are background steps of its graph);
- ``BoundedReplayCosts``: as real-time mode, and a persisted progress point
  inside a batch is no new plan (the long-running tasks go on), so it costs
  nothing.
"""

from __future__ import annotations

from typing import Callable, Sequence

from reference.protocol.backend import BackendError
from reference.protocol.modes import MicroBatch
from reference.protocol.modes.bounded_replay import BoundedReplay
from reference.protocol.modes.real_time import RealTime

from .cost_model import Profile
from .real_time import long_running_task


class MicroBatchCosts:
    """Micro-batch execution, sync or async progress."""

    runs_in_volume_mode = True
    needs_data_mode = ""

    def __init__(self, mode: MicroBatch):
        self.mode = mode

    def plan_ready_ms(self, now_ms: float, trigger_ms: Callable[[], float]) -> float:
        """When batch b may plan: at the trigger that finds its (fixed) input arrived (``trigger_ms``)."""
        return trigger_ms()

    def plan_is_free(self, b: int, first_batch: int) -> bool:
        """Whether ``plan`` of graph batch ``b`` is no new plan (and costs nothing): never."""
        return False

    def long_running(self) -> bool:
        """Whether a task runs for the whole batch, delivering each record as it arrives (``task_apply_ms``)."""
        return False

    def task_apply_ms(self, arrivals_ms: Sequence[float], now_ms: float, b: int, profile: Profile,
                      stateful: bool, straggler: float, delivered: Callable[[int, float], None]) -> float:
        """A long-running task's time (only asked when ``long_running``)."""
        raise NotImplementedError(f"{self.mode.name}: a task applies its batch at once")


class RealTimeCosts(MicroBatchCosts):
    """Spark's real-time mode: long-running tasks, each record delivered on its own."""

    runs_in_volume_mode = False
    needs_data_mode = ("real-time mode needs data mode: its long-running tasks deliver each record on its own, "
                       "and volume mode holds counts, not records")
    mode: RealTime

    def plan_ready_ms(self, now_ms: float, trigger_ms: Callable[[], float]) -> float:
        """The next long-running batch plans as soon as the last one committed: its tasks read records as they
        arrive."""
        return now_ms

    def long_running(self) -> bool:
        return True

    def task_apply_ms(self, arrivals_ms: Sequence[float], now_ms: float, b: int, profile: Profile,
                      stateful: bool, straggler: float, delivered: Callable[[int, float], None]) -> float:
        """The task reads its records of batch ``b`` as they arrive (``arrivals_ms``, in arrival order),
        delivers each to the sink on its own (``delivered(i, visible_ms)`` ends record i's latency), and stops
        at the batch's deadline; each record costs what it costs a micro-batch task (``real_time.py``)."""
        task = long_running_task(arrivals_ms, now_ms, self.mode.deadline_ms(b), profile, stateful, straggler)
        for i, visible_ms in enumerate(task.delivered_ms):
            delivered(i, visible_ms)
        return task.end_ms - now_ms


class BoundedReplayCosts(RealTimeCosts):
    """Real-time mode persisting its progress inside a batch."""

    mode: BoundedReplay

    def plan_is_free(self, b: int, first_batch: int) -> bool:
        """A persisted progress point inside a batch is no new plan: the long-running tasks go on."""
        return b != first_batch and not self.mode.opens_batch(b)


COSTS: dict[str, type[MicroBatchCosts]] = {"micro_batch": MicroBatchCosts, "async_progress": MicroBatchCosts,
                                           "real_time": RealTimeCosts, "real_time_async": RealTimeCosts,
                                           "bounded_replay": BoundedReplayCosts}


def costs_of(mode: MicroBatch) -> MicroBatchCosts:
    """The simulator's cost hook of ``mode``."""
    hook = COSTS.get(mode.name)
    if hook is None:
        raise BackendError(f"the simulator has no costs for the {mode.name!r} execution mode "
                           f"(sim/mode_costs.py knows {', '.join(sorted(COSTS))})")
    return hook(mode)
