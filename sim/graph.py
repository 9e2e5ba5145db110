"""The step graph of one batch as a reusable template (the reference's graph, built once per shape).

The reference (``reference.engine.Incarnation._build_graph``) builds one node
per (step, batch, partition) with the edges every mode asks for. Within one
incarnation the graph of batch ``b`` has the same shape as that of batch
``b - 1`` shifted by one batch, except for maintenance: ``snapshot_upload``
nodes exist only in every ``maintenance_every()``-th batch. So the simulator
asks the reference for the graph of a batch once per shape and stores it with
batch-relative edges: a ``TemplateNode`` names its dependencies as
``(batch delta, slot)`` pairs, where a slot numbers (step, partition) pairs.

Capture runs the reference's own graph builder with every dependency it names
counted as present. Whether a named dependency exists is then decided when a
batch is instantiated (``BatchGraph``): a node of a batch before this
incarnation's first batch, of a batch whose nodes are all done and forgotten,
or of a step the batch's shape lacks (a stateless query's state steps) is
satisfied, exactly as the reference drops dependencies on steps its graph does
not have. The reference chains each partition's snapshot uploads (a snapshot
waits for the previous snapshot of that partition): capture seeds the previous
maintenance batch's snapshot nodes so the reference's builder names them.

Each instantiated node (``SimNode``) counts its unmet dependencies and lists
its dependents, so finishing a node costs one decrement per dependent. A
``SimNode`` has the ``batch``/``step``/``partition``/``tag`` fields of a
``reference.engine.NodeId`` (cost and fault matching read only those); the
real ``NodeId`` is made on demand (``node_id``) for fault handling and traces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Callable

from reference.engine import ORDER, Node, NodeId
from reference.steps import TASK_STEPS

if TYPE_CHECKING:
    from .engine import TimedIncarnation

# What happens to a node once its dependencies are met.
GATE = 0          # launch the task of one partition (its foreground steps run back to back in one slot)
TASK_OWNED = 1    # a task's foreground step: run by the task, never dispatched on its own
EXECUTOR_BG = 2   # an executor's background step (async state commit, maintenance)
PLAN = 3          # the micro-batch thread, once the batch's input is there
DRIVER = 4        # a driver step: the micro-batch thread, the async log writer or the async purger

TASK_STEP_SET = frozenset(TASK_STEPS)


class _EveryNode(dict):  # type: ignore[type-arg]
    """The node table the reference's builder sees during capture: every dependency counts as present."""

    def __contains__(self, key: object) -> bool:
        return True


@dataclass(frozen=True)
class TemplateNode:
    step: str
    partition: int
    background: bool
    kind: int
    slot: int
    deps: tuple[tuple[int, int], ...]   # (batch delta, slot) of every dependency the reference names
    task: tuple[int, ...] = ()          # GATE: slots of the task's foreground steps, in order
    fusable: bool = False               # TASK_OWNED: only its own task's later steps wait for it


@dataclass(frozen=True)
class Template:
    """The graph of one batch, batch-relative: nodes in the reference's creation order, then the gates."""

    nodes: tuple[TemplateNode, ...]
    slots: int

    def __len__(self) -> int:
        return len(self.nodes)


def slot_of(step: str, partition: int, parts: int) -> int:
    return ORDER[step] * (parts + 1) + partition + 1


def capture_template(inc: "TimedIncarnation", b: int) -> Template:
    """Ask the reference for batch ``b``'s graph and make it batch-relative (the shape of ``b``)."""
    parts = inc.parts
    seeds: dict[Any, None] = {}
    if inc.store_ids and inc.cfg.provider != "snapshot" and (b + 1) % inc.maintenance_every() == 0:
        previous = b - inc.maintenance_every()
        seeds = {inc.nid("snapshot_upload", previous, p): None for p in range(parts)}
    captured = inc.capture_reference_graph(b, _EveryNode(seeds))
    created = [(nid, node) for nid, node in captured.items() if nid not in seeds]
    assert all(nid.batch == b and not nid.tag for nid, _n in created), "a batch's graph holds its own nodes only"

    def rel(dep: NodeId) -> tuple[int, int]:
        return (dep.batch - b, slot_of(dep.step, dep.partition, parts))

    foreground = {(nid.step, nid.partition) for nid, node in created
                  if nid.step in TASK_STEP_SET and not node.background}
    out: list[TemplateNode] = []
    for nid, node in created:
        if (nid.step, nid.partition) in foreground:
            kind = TASK_OWNED
        elif nid.partition >= 0:
            kind = EXECUTOR_BG
        elif nid.step == "plan":
            kind = PLAN
        else:
            kind = DRIVER
        out.append(TemplateNode(nid.step, nid.partition, node.background, kind,
                                slot_of(nid.step, nid.partition, parts), tuple(rel(d) for d in node.deps)))
    gate_base = len(ORDER) * (parts + 1)
    by_id = dict(created)
    for p in range(parts):
        steps = [s for s in TASK_STEPS if (s, p) in foreground]
        if not steps:
            continue
        own = {inc.nid(s, b, p) for s in steps}
        external: dict[NodeId, None] = {}
        for s in (steps[0], "task_apply"):
            for dep in by_id[inc.nid(s, b, p)].deps:
                if dep not in own:
                    external[dep] = None
        out.append(TemplateNode("launch", p, False, GATE, gate_base + p, tuple(rel(d) for d in external),
                                tuple(slot_of(s, p, parts) for s in steps)))
    return Template(tuple(out), gate_base + parts)


class SimNode:
    """One node of one batch in the running simulation (a ``NodeId``'s fields plus its bookkeeping)."""

    __slots__ = ("batch", "step", "partition", "template", "graph", "done", "waiting", "dependents", "_id",
                 "start_ms", "skip", "on_done")
    tag = ""

    def __init__(self, template: TemplateNode, batch: int, graph: "BatchGraph"):
        self.batch = batch
        self.step = template.step
        self.partition = template.partition
        self.template = template
        self.graph = graph
        self.done = False
        self.waiting = 0
        self.dependents: list[SimNode] = []
        # set when used: _id (node_id), start_ms, skip and on_done (run_step)

    @property
    def kind(self) -> int:
        return self.template.kind

    @property
    def background(self) -> bool:
        return self.template.background

    @property
    def node_id(self) -> NodeId:
        try:
            return self._id
        except AttributeError:
            self._id = NodeId(self.batch, ORDER[self.step], self.step, self.partition)
            return self._id

    def __str__(self) -> str:
        return str(self.node_id)

    def __repr__(self) -> str:
        return f"SimNode({self})"


class BatchGraph:
    """The nodes of one batch, by slot; ``outstanding`` counts those not yet done."""

    __slots__ = ("batch", "by_slot", "nodes", "outstanding", "materialized")

    def __init__(self, batch: int, template: Template):
        self.batch = batch
        self.by_slot: list[SimNode | None] = [None] * template.slots
        self.nodes: list[SimNode] = []
        self.outstanding = 0
        self.materialized = False


class Graph:
    """The live part of one incarnation's step graph: batches instantiated from templates, counters, dependents."""

    def __init__(self, inc: "TimedIncarnation"):
        self.inc = inc
        self.templates: dict[bool, Template] = {}
        self.batches: dict[int, BatchGraph] = {}

    def mark_fusable(self) -> None:
        """Flag the task steps that nothing outside their own task waits for, in any batch shape.

        Such a step's end is seen by its own task only, so a task may run it and
        the steps after it under one timeout (``IncarnationRun.run_fused``).
        """
        inc = self.inc
        for b in (0, inc.maintenance_every() - 1):   # every shape a batch can have
            if self.shape(b) not in self.templates:
                self.templates[self.shape(b)] = capture_template(inc, b)
        watched: set[int] = set()
        for template in self.templates.values():
            by_slot = {t.slot: t for t in template.nodes}
            for t in template.nodes:
                for delta, slot in t.deps:
                    target = by_slot.get(slot)
                    own_task = (delta == 0 and t.kind == TASK_OWNED and target is not None
                                and target.kind == TASK_OWNED and target.partition == t.partition)
                    if not own_task:
                        watched.add(slot)
        for shape, template in list(self.templates.items()):
            nodes = tuple(replace(t, fusable=t.kind == TASK_OWNED and t.slot not in watched) for t in template.nodes)
            self.templates[shape] = Template(nodes, template.slots)

    def shape(self, b: int) -> bool:
        inc = self.inc
        return bool(inc.store_ids) and inc.cfg.provider != "snapshot" and (b + 1) % inc.maintenance_every() == 0

    def node(self, batch: int, slot: int) -> SimNode | None:
        graph = self.batches.get(batch)
        return graph.by_slot[slot] if graph is not None else None

    def add_batch(self, b: int, ready: Callable[[SimNode], None]) -> BatchGraph:
        """Instantiate batch ``b``, wire its unmet dependencies, and hand every ready node to ``ready``."""
        shape = self.shape(b)
        template = self.templates.get(shape)
        if template is None:
            template = self.templates[shape] = capture_template(self.inc, b)
        graph = BatchGraph(b, template)
        self.batches[b] = graph
        by_slot, batches = graph.by_slot, self.batches
        fresh = []
        for t in template.nodes:
            node = SimNode(t, b, graph)
            by_slot[t.slot] = node
            fresh.append(node)
            if t.kind == TASK_OWNED:
                continue   # run by its task, whose gate waits for what it needs
            waiting = 0
            for delta, slot in t.deps:
                if delta:
                    other = batches.get(b + delta)
                    dep = other.by_slot[slot] if other is not None else None
                else:
                    dep = by_slot[slot]
                if dep is not None and not dep.done:
                    dep.dependents.append(node)
                    waiting += 1
            node.waiting = waiting
        graph.nodes = [n for n in fresh if n.template.kind != GATE]
        graph.outstanding = len(graph.nodes)
        for node in fresh:
            if node.waiting == 0 and node.template.kind != TASK_OWNED:
                ready(node)
        return graph

    def task_steps(self, gate: SimNode) -> list[SimNode]:
        by_slot = gate.graph.by_slot
        return [by_slot[slot] for slot in gate.template.task]  # type: ignore[misc]

    def unmet(self, node: SimNode) -> list[SimNode]:
        """Dependencies of ``node`` not yet done (the invariant check of data mode)."""
        out = []
        for delta, slot in node.template.deps:
            dep = self.node(node.batch + delta, slot) if delta else node.graph.by_slot[slot]
            if dep is not None and not dep.done:
                out.append(dep)
        return out

    def forget(self, b: int) -> None:
        graph = self.batches.pop(b)
        if graph.materialized:
            for node in graph.nodes:
                self.inc.nodes.pop(node.node_id, None)

    def materialize(self, b: int) -> None:
        """Put batch ``b``'s nodes in the incarnation's node table, as the reference's fault handling reads it."""
        graph = self.batches.get(b)
        if graph is None or graph.materialized:
            return
        graph.materialized = True
        inc = self.inc
        for node in graph.nodes:
            deps = tuple(d.node_id for d in (self.node(b + delta, slot) if delta else graph.by_slot[slot]
                                             for delta, slot in node.template.deps) if d is not None)
            inc.nodes[node.node_id] = Node(node.node_id, deps, inc.step_call(node), node.background)
