"""The reference's clock (the ``Clock`` seam, ``seams.py``): logical time, and batches cut in advance.

spec section 1 (triggers) and section 2 (async progress, faults at a time). The
reference is untimed: batch ``b`` plans at logical time ``b x max(trigger
interval, LOGICAL_BATCH_MS)``, and where each batch ends is known before the
incarnation runs: the re-runs' logged offsets, the cuts another backend
recorded, or the source's own planned cuts. A timed backend brings its own
clock: it decides an open batch's end when its ``plan`` runs (``cut_now``),
with ``reference.protocol.trigger``'s rule for when the trigger fires.
"""

from __future__ import annotations

from .graph import LOGICAL_BATCH_MS
from .incarnation_state import BatchPlan, IncarnationState
from .real_time import deadline_ms
from .recovery import RestartPlan
from ..language.size import MATERIALISED

# the planner's own guard: a scenario that needs more batches is refused up front, with the numbers, by the
# size check every backend runs first (``size.MATERIALISED.batches``), so this is never the first to say so
MAX_PLANNED_BATCHES = MATERIALISED.batches


class LogicalClock(IncarnationState):
    """The untimed clock of the reference model."""

    def logical_time_ms(self, batch: int) -> int:
        return batch * max(self.cfg.trigger_interval_ms, LOGICAL_BATCH_MS) + self.clock_skew_ms

    def plan_batches(self, restart: RestartPlan) -> None:
        """Every batch this incarnation will run: the logged ones to re-run, then the cuts another backend
        recorded (``recorded_cuts``, to replay its boundaries), then the untimed clock's own cuts. An
        open-ended incarnation plans the re-runs and one open batch; ``plan`` opens the next."""
        start, b = restart.start_offsets, restart.first_batch
        totals = tuple(self.data.totals)
        while True:
            if self.open_ended and b not in restart.fixed_offsets:
                if start != totals:
                    self.plans[b] = BatchPlan(b, tuple(start), None)
                return
            if b in restart.fixed_offsets:
                s, e = restart.fixed_offsets[b]
                plan = BatchPlan(b, tuple(s), tuple(e), rerun=True)
            else:
                cut = self.recorded_cuts.get(b) or self.untimed_cut(b)
                end = tuple(max(x, y) for x, y in zip(cut, start))
                plan = BatchPlan(b, tuple(start), end)
            self.plans[b] = plan
            start = plan.bounds[1]
            b += 1
            if start == totals and b > max(restart.fixed_offsets, default=-1):
                return
            if b > restart.first_batch + MAX_PLANNED_BATCHES:
                raise RuntimeError("planning did not converge on the end of input")

    def untimed_cut(self, b: int) -> tuple[int, ...]:
        """Where the untimed clock ends batch ``b``: the source's planned cut; in real-time mode the batch's
        deadline, ``(b + 1) x`` the batch duration (Spark: ``RealTimeStreamScanExec`` sets the deadline to
        the batch's start plus its duration, and a reader returns no more records once it has passed;
        ``real_time.deadline_ms``)."""
        if self.cfg.real_time:
            ends_ms = deadline_ms(b, self.cfg.real_time_step_ms)
            return self.data.arrived_by(ends_ms - 1, (0,) * len(self.data.partitions))
        return tuple(self.data.planned_end_offsets(b))

    def cut_now(self, b: int) -> tuple[int, ...]:
        """An open batch's end offsets: what has arrived by the time ``plan`` runs (timed backends only)."""
        raise NotImplementedError("an open-ended incarnation needs a clock: a timed backend decides its cuts")

    def await_plan(self, batch: int) -> None:
        """The sequential scheduler runs ``plan`` when its dependencies are met: nothing to wait for."""
