"""Volume mode's stages: all tasks of a batch scheduled at once, landed under a handful of SimPy events.

In volume mode a task step's cost is fixed when its batch's counts are drawn
(``volume.BatchVolume``) and its effect is its own task's bookkeeping, so where
nothing can watch the tasks one by one (no fault pending at a step or a time,
no zombie, no trace, no invariant checks: ``IncarnationRun.may_fuse``; no
latency spike still running) and no other batch's task can share the
executors' slots while they run (no pipelining: batch ``b + 1`` plans only
after ``b``'s sink commit, which waits for every task of ``b``), a batch's
tasks form a closed system: they all become ready together, when the batch's
gate (its offset log write, purge or plan) completes, and then only compete
with each other for task slots.

A stage batch's graph (``StageGraph``) therefore holds one ``STAGE`` node in
place of its task steps and gates. When it is ready, ``StageRun`` computes the
tasks' costs at once (``VolumeIncarnation.stage_costs``) and plays their
schedule in plain Python, exactly as the executors and ``TaskRun`` would: the
launch delay, first come first served slots per executor, a task's steps under
one timeout up to the one something outside the task waits for
(``IncarnationRun.run_fused``), the same float operations for every time, and
``commitTimeMs`` summed in the order the tasks start. Each executor is played
on its own (``schedule_by_executor``); only where two commit charges fall at
the same time on two executors does the order of SimPy's event queue (time,
then creation) decide, and then the stage plays that queue (``schedule``).
The stage lands when its last task's timeout would have fired, reached along
the same chain of timeouts (``follow``: SimPy adds a delay to the clock, and
not every time can be reached in one step from the stage's start); the driver
steps that wait for the tasks start then, as they did after the last task's
own event.

What the shape gives up: the tasks' effects (their task records and lineage
ids) land together at the stage's end instead of one by one, and no event of
the stage is visible to the rest of the simulation before then. Nothing reads
them earlier in a stage batch, which is why only such batches run as stages; a
maintenance batch (its snapshot uploads run beside the tasks), asynchronous
state checkpointing, pipelining, a latency spike not yet over, or any fault
still to fire keeps the task-by-task path. ``tests/slow/test_sim_volume_stage.py``
holds both paths, and the simulator before stages, to the same bytes.
"""

from __future__ import annotations

import heapq
import itertools
from collections import deque
from dataclasses import dataclass
from operator import itemgetter
from typing import TYPE_CHECKING, Any, Callable, Hashable, Protocol, Sequence, cast

import simpy

from reference.language.steps import NodeId
from reference.protocol.graph import BatchShape, Node

from .cost_model import Profile
from .executor import Executor
from .storage_service import StorageService
from .graph import EXECUTOR_BG, GATE, TASK_OWNED, BatchGraph, Graph, SimNode, Template, TemplateNode
from .timed_incarnation import COMMIT_STEPS, TimedIncarnation
from .trace import Trace

if TYPE_CHECKING:
    from .volume import VolumeIncarnation

STAGE = 5   # graph kind: every task of one batch (``StageRun``)


class StageHost(Protocol):
    """What stages need of the run of an incarnation (``incarnation_run.IncarnationRun``)."""

    env: simpy.Environment
    inc: TimedIncarnation
    graph: Graph
    profile: Profile
    executors: list[Executor]
    launch_delay_ms: float
    trace: Trace

    @property
    def stopped(self) -> bool: ...

    def may_fuse(self) -> bool: ...

    def complete(self, node: SimNode) -> None: ...

    def _failed(self, exc: Exception) -> None: ...


@dataclass(frozen=True)
class StageTemplate(Template):
    """A batch template whose task steps and gates are one ``STAGE`` node.

    ``tasks``: per partition, its foreground steps in order, cut into the runs
    that share one timeout (``TaskRun._run``'s rule); ``task_slots``: the slots
    of the replaced steps, which name the stage node for later batches.
    """

    tasks: tuple[tuple[int, tuple[tuple[str, ...], ...]], ...] = ()
    task_slots: tuple[int, ...] = ()
    steps: tuple[str, ...] = ()
    charging: tuple[tuple[int, tuple[int, ...]], ...] = ()   # per partition: the runs that charge a commit
    commits: tuple[tuple[int, tuple[tuple[int, ...], ...]], ...] = ()   # ... and per run, its commit steps
    step_count: int = 0


def stage_template(plain: Template) -> StageTemplate | None:
    """``plain`` with its tasks as one stage node, or None when a step of the batch runs beside the tasks."""
    if any(t.kind == EXECUTOR_BG for t in plain.nodes):
        return None
    gates = [t for t in plain.nodes if t.kind == GATE]
    owned = {t.slot: t for t in plain.nodes if t.kind == TASK_OWNED}
    if not gates:
        return None
    stage_slot = plain.slots
    # The gates' dependencies within the batch (its plan, offset log write, purge). Those on earlier batches'
    # task steps are left out: without pipelining the batch plans only after the previous batch's sink commit
    # (or source commit), which waits for every one of its tasks, so they are always met by then.
    deps = dict.fromkeys(dep for gate in gates for dep in gate.deps if dep[0] == 0)
    stage = TemplateNode("stage", -1, False, STAGE, stage_slot, tuple(deps))
    nodes: list[TemplateNode] = []
    for t in plain.nodes:
        if t.kind == TASK_OWNED:
            if not any(n is stage for n in nodes):
                nodes.append(stage)
            continue
        if t.kind == GATE:
            continue
        rewritten = dict.fromkeys((0, stage_slot) if delta == 0 and slot in owned else (delta, slot)
                                  for delta, slot in t.deps)
        nodes.append(TemplateNode(t.step, t.partition, t.background, t.kind, t.slot, tuple(rewritten)))
    tasks = tuple((gate.partition, _runs([owned[slot] for slot in gate.task])) for gate in gates)
    steps = tuple(dict.fromkeys(owned[slot].step for gate in gates for slot in gate.task))
    charging = tuple((p, tuple(k for k, run in enumerate(runs) if COMMIT_STEPS.intersection(run))) for p, runs in tasks)
    commits = tuple((p, tuple(tuple(i for i, step in enumerate(run) if step in COMMIT_STEPS) for run in runs))
                    for p, runs in tasks)
    return StageTemplate(tuple(nodes), plain.slots + 1, tasks, tuple(owned), steps, charging, commits,
                         sum(len(run) for _p, runs in tasks for run in runs))


def _runs(steps: Sequence[TemplateNode]) -> tuple[tuple[str, ...], ...]:
    """A task's steps cut as ``TaskRun._run`` cuts them when it may fuse: up to and including the first step
    something outside the task waits for, one run per timeout."""
    out, i = [], 0
    while i < len(steps):
        j = i
        while j < len(steps) - 1 and steps[j].fusable:
            j += 1
        out.append(tuple(t.step for t in steps[i:j + 1]))
        i = j + 1
    return tuple(out)


class StageGraph(Graph):
    """A volume incarnation's graph whose batches run as stages where that gives the same run (module docs)."""

    def __init__(self, shape: BatchShape, nodes: dict[NodeId, Node], pipelining: bool, service: StorageService,
                 run: StageHost):
        super().__init__(shape, nodes)
        self.run, self.service = run, service
        self.stages_allowed = not pipelining
        self.stage_templates: dict[Hashable, tuple[Template, StageTemplate | None]] = {}
        self.stages: dict[int, StageTemplate] = {}   # live stage batches: the template each was made from
        self._adding: tuple[int, Template] | None = None

    def template(self, b: int) -> Template:
        """Batch ``b``'s template: as a stage when nothing can tell (module docs), else the plain one."""
        if self._adding is not None and self._adding[0] == b:
            return self._adding[1]   # the one ``add_batch`` chose, whatever happens while it wires the batch
        plain = super().template(b)
        run = self.run
        if not (self.stages_allowed and self.fusion and run.may_fuse() and self._spikes_over()):
            return plain
        key = self.shape.batch_variant(b)
        found = self.stage_templates.get(key)
        if found is None or found[0] is not plain:   # a new variant can change which steps are watched
            found = self.stage_templates[key] = (plain, stage_template(plain))
        return found[1] or plain

    def _spikes_over(self) -> bool:
        """Whether every latency spike has ended: a step that starts later waits for none (``spike_wait_ms``)."""
        now = self.run.env.now
        return all(end <= now for _start, end in self.service.spikes)

    def add_batch(self, b: int, ready: Callable[[SimNode], None]) -> BatchGraph:
        template = self.template(b)
        self._adding = (b, template)
        try:
            graph = super().add_batch(b, ready)
        finally:
            self._adding = None
        if isinstance(template, StageTemplate):
            self.stages[b] = template
            stage = graph.by_slot[template.slots - 1]
            for slot in template.task_slots:   # later batches name the tasks' steps: they wait for the stage
                graph.by_slot[slot] = stage
        return graph

    def forget(self, b: int) -> None:
        super().forget(b)
        self.stages.pop(b, None)


class StageRun:
    """Plays one stage's task schedule and lands it at its last task's end (module docs)."""

    def __init__(self, run: StageHost):
        self.run = run
        self._homes: dict[int, int] | None = None

    def homes(self, b: int) -> dict[int, int]:
        """Where each partition's task of batch ``b`` runs (``slot_executor_of``; the same in every batch unless
        the scenario places its executors by name)."""
        inc = self.run.inc
        if inc.executor_index:
            return {p: inc.slot_executor_of(b, p) for p in range(inc.parts)}
        if self._homes is None:
            self._homes = {p: inc.slot_executor_of(b, p) for p in range(inc.parts)}
        return self._homes

    def start(self, node: SimNode) -> None:
        """The stage's gate is met: play its tasks' schedule now, land it at its last task's end."""
        run, b = self.run, node.batch
        inc = cast_volume(run.inc)
        graph = run.graph
        assert isinstance(graph, StageGraph) and b in graph.stages, f"batch {b} is not a stage"
        template = graph.stages[b]
        cores = run.profile.cores_per_executor
        for ex in run.executors:
            assert ex.free_slots == cores and not ex.waiting, "a stage's tasks have the executors to themselves"
        costs = inc.volume_costs.stage_costs(b, template.steps)
        # per partition, per run of steps under one timeout: the steps' costs, in order (one zip per shape of task)
        by_shape = {runs: dict(enumerate(zip(*(zip(*(costs[step] for step in steps)) for steps in runs))))
                    for runs in {runs for _p, runs in template.tasks}}
        run_costs = {p: by_shape[runs][p] for p, runs in template.tasks}
        charging = dict(template.charging)
        home = self.homes(b)
        arrive_ms = run.env.now + run.launch_delay_ms
        found = self.schedule_by_executor([p for p, _runs in template.tasks], run_costs, charging, home, cores,
                                          arrive_ms)
        if found is None:   # simultaneous charges on two executors: SimPy's order decides, so play it
            last, started, chain = self.schedule(template, run_costs, home, [cores] * len(run.executors), arrive_ms)
            started = [(p, k) for p, k in started if k in charging[p]]
        else:
            last, started, chain = found
        commit = inc.times.commit_ms.get(b)
        commits = dict(template.commits)
        for p, k in started:   # commitTimeMs: the tasks' commit costs summed in the order the tasks charge them
            costs_of_run = run_costs[p][k]
            for i in commits[p][k]:
                commit = (0.0 if commit is None else commit) + costs_of_run[i]
        if commit is not None:
            inc.times.commit_ms[b] = commit
        # the stage lands when its last task's timeout fires: reached along the same chain of timeouts (the launch
        # delay, then each run that led to it), as an absolute time may lie between two sums SimPy can form
        follow(run, [run.launch_delay_ms, *chain], last, lambda: self.land(node, template))

    @staticmethod
    def schedule_by_executor(launched: list[int], run_costs: dict[int, Sequence[tuple[float, ...]]],
                             charging: dict[int, tuple[int, ...]], home: dict[int, int], cores: int,
                             arrive_ms: float) -> tuple[float, list[tuple[int, int]], list[float]] | None:
        """``schedule``'s result without its event queue, or None when its order of charges needs one.

        Each executor alone: its tasks take its ``cores`` slots in launch order and
        then the earliest freed one (a task holds its slot through all its runs).
        The runs that charge a commit cost are ordered by the time they start,
        after the first wave (launch order, at ``arrive_ms``); where two charge at
        the same time, only SimPy's order of creation tells them apart, so
        ``schedule`` decides (None).
        """
        per_executor: dict[int, list[int]] = {}
        for p in launched:
            per_executor.setdefault(home[p], []).append(p)
        wave: list[tuple[int, int]] = []
        later: list[tuple[float, int, int]] = []
        start: dict[int, float] = {}   # per task: when it took its slot
        after: dict[int, int] = {}     # per task: the task whose slot it took (-1: a free one)
        last, last_task = arrive_ms, -1
        push, pop = heapq.heappush, heapq.heappop
        for tasks in per_executor.values():
            slots: list[tuple[float, int]] = []
            for i, p in enumerate(tasks):
                if i < cores:
                    now, after[p] = arrive_ms, -1
                else:
                    now, after[p] = pop(slots)
                start[p] = now
                charges = charging[p]
                k = 0
                for steps in run_costs[p]:
                    if k in charges:
                        if i < cores and k == 0:
                            wave.append((p, k))
                        else:
                            later.append((now, p, k))
                    if len(steps) == 1:   # ``run_delay``, inline: this loop is the stage's hot path
                        now = now + (steps[0] + 0.0)
                    else:
                        at = now
                        for cost in steps:
                            at += cost
                        now = now + (at - now)
                    k += 1
                push(slots, (now, p))
                if now > last:
                    last, last_task = now, p
        later.sort(key=itemgetter(0))
        times = [t for t, _p, _k in later]
        if (times and times[0] <= arrive_ms) or len(set(times)) < len(times):
            return None
        order = {p: i for i, p in enumerate(launched)}
        wave.sort(key=lambda pk: order[pk[0]])
        chain: list[float] = []
        while last_task >= 0:   # the last task's runs, after those of the tasks whose slots it inherited
            now, delays = start[last_task], []
            for steps in run_costs[last_task]:
                delays.append(run_delay(steps, now))
                now = now + delays[-1]
            chain[:0] = delays
            last_task = after[last_task]
        return last, wave + [(p, k) for _t, p, k in later], chain

    @staticmethod
    def schedule(template: StageTemplate, run_costs: dict[int, Sequence[tuple[float, ...]]], home: dict[int, int],
                 free: list[int], arrive_ms: float) -> tuple[float, list[tuple[int, int]], list[float]]:
        """The stage's last end and the order in which its runs start, as executors and ``TaskRun`` give them.

        Every task arrives at ``arrive_ms`` in launch order and takes a free slot
        of its executor or waits for one, first come first served; a run of steps
        ends at its start plus its costs, in ``run_step``'s or ``run_fused``'s
        float operations; a task's next run starts at its previous one's end and
        a finished task hands its slot to the first waiting one. Events at one
        time are taken in the order they were created, as SimPy takes them. Also
        returns the delays of the chain of timeouts that led to the last end, each
        made when the one before it fired (``follow``).
        """
        heap: list[tuple[float, int, int, int]] = []
        started: list[tuple[int, int]] = []
        queues: list[deque[int]] = [deque() for _ in free]
        order = itertools.count()
        push, pop = heapq.heappush, heapq.heappop
        delay_of: dict[int, float] = {}   # per event: its timeout's delay, and the event whose handling made it
        parent_of: dict[int, int] = {}
        handling = -1

        def begin(p: int, k: int, now: float) -> None:
            delay = run_delay(run_costs[p][k], now)
            event = next(order)
            delay_of[event], parent_of[event] = delay, handling
            push(heap, (now + delay, event, p, k))
            started.append((p, k))

        for p, _runs in template.tasks:
            e = home[p]
            if free[e]:
                free[e] -= 1
                begin(p, 0, arrive_ms)
            else:
                queues[e].append(p)
        last = arrive_ms
        while heap:
            last, handling, p, k = pop(heap)
            if k + 1 < len(run_costs[p]):
                begin(p, k + 1, last)
            else:
                queue = queues[home[p]]
                if queue:
                    begin(queue.popleft(), 0, last)
                else:
                    free[home[p]] += 1
        chain: list[float] = []
        while handling >= 0:   # the timeouts that led to the last one, each made when the one before it fired
            chain.insert(0, delay_of[handling])
            handling = parent_of[handling]
        return last, started, chain

    def land(self, node: SimNode, template: StageTemplate) -> None:
        run = self.run
        if run.stopped:
            return
        try:
            cast_volume(run.inc).land_stage(node.batch, template.steps)
            run.trace.count += template.step_count
            run.complete(node)
        except Exception as exc:
            run._failed(exc)


def cast_volume(inc: Any) -> "VolumeIncarnation":
    """The incarnation of a stage graph: only a mode that runs stages (``run_stages``) builds one."""
    return cast("VolumeIncarnation", inc)


def run_delay(costs: tuple[float, ...], now: float) -> float:
    """The delay of the timeout of one run of a task's steps starting at ``now``, in the float operations of
    ``IncarnationRun.run_step`` (the cost plus no fault time) or ``run_fused`` (each step from the previous
    one's end, then the end less the start)."""
    if len(costs) == 1:
        return costs[0] + 0.0
    at = now
    for cost in costs:
        at += cost
    return at - now


def follow(run: StageHost, delays: list[float], at_ms: float, then: Callable[[], None]) -> None:
    """Timeouts of ``delays``, each made when the one before it fires, then ``then`` (at ``at_ms``)."""
    env = run.env
    remaining = iter(delays)

    def hop(_event: object = None) -> None:
        if run.stopped:
            return
        delay = next(remaining, None)
        if delay is None:
            assert env.now == at_ms, f"a stage landed at {env.now!r}, not at its last task's end {at_ms!r}"
            then()
        else:
            env.timeout(delay).callbacks.append(hop)

    hop()
