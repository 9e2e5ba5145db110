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
from .records import BatchBook, BatchPlan, QueryFacts
from .recovery import RestartPlan
from ..language.size import MATERIALISED

# the planner's own guard: a scenario that needs more batches is refused up front, with the numbers, by the
# size check every backend runs first (``size.MATERIALISED.batches``), so this is never the first to say so
MAX_PLANNED_BATCHES = MATERIALISED.batches


class LogicalClock:
    """The untimed clock of the reference model: it reads the facts and writes the batch book's plans."""

    def __init__(self, facts: QueryFacts, book: BatchBook):
        self.facts, self.book = facts, book
        self.interval_ms = max(facts.cfg.trigger_interval_ms, LOGICAL_BATCH_MS)

    def logical_time_ms(self, batch: int) -> int:
        return batch * self.interval_ms + self.book.clock_skew_ms

    def plan_batches(self, restart: RestartPlan) -> None:
        """Every batch this incarnation will run: the logged ones to re-run, then the cuts another backend
        recorded (``recorded_cuts``, to replay its boundaries), then the untimed clock's own cuts. An
        open-ended incarnation plans the re-runs and one open batch; ``plan`` opens the next."""
        facts, plans = self.facts, self.book.plans
        start, b = restart.start_offsets, restart.first_batch
        totals = tuple(facts.data.totals)
        while True:
            if facts.open_ended and b not in restart.fixed_offsets:
                if start != totals:
                    plans[b] = BatchPlan(b, tuple(start), None)
                return
            if b in restart.fixed_offsets:
                s, e = restart.fixed_offsets[b]
                plan = BatchPlan(b, tuple(s), tuple(e), rerun=True)
            else:
                cut = facts.recorded_cuts.get(b) or self.untimed_cut(b)
                end = tuple(max(x, y) for x, y in zip(cut, start))
                plan = BatchPlan(b, tuple(start), end)
            plans[b] = plan
            start = plan.bounds[1]
            b += 1
            if start == totals and b > max(restart.fixed_offsets, default=-1):
                return
            if b > restart.first_batch + MAX_PLANNED_BATCHES:
                raise RuntimeError("planning did not converge on the end of input")

    def untimed_cut(self, b: int) -> tuple[int, ...]:
        """Where the untimed clock ends batch ``b``: the mode says (the source's planned cut; in real-time mode
        the batch's deadline)."""
        return self.facts.mode.untimed_cut(b, self.facts.data)

    def cut_now(self, b: int) -> tuple[int, ...]:
        """An open batch's end offsets: what has arrived by the time ``plan`` runs (timed backends only)."""
        raise NotImplementedError("an open-ended incarnation needs a clock: a timed backend decides its cuts")

    def await_plan(self, batch: int) -> None:
        """The sequential scheduler runs ``plan`` when its dependencies are met: nothing to wait for."""
