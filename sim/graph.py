"""The step graph of one batch as a reusable template (the reference's graph, as data).

The reference describes one batch's nodes as values:
``reference.protocol.graph.GraphShape.batch_nodes(b)`` gives every node of batch ``b``
(one per step and partition) with every dependency it may have, in creation
order. Within one incarnation the graph of batch ``b`` has the same shape as
that of batch ``b - 1`` shifted by one batch, except for maintenance:
``snapshot_upload`` nodes exist only in maintenance batches
(``GraphShape.is_maintenance_batch``), and under asynchronous state
checkpointing the state load of a partition that moves to another executor
waits for its previous commit (``GraphShape.moved``): the batch's variant,
``BatchShape.batch_variant``. So the simulator turns the nodes of one
batch of each variant into a ``Template`` with batch-relative edges: a
``TemplateNode`` names its dependencies as ``(batch delta, slot)`` pairs,
where a slot numbers (step, partition) pairs.

Whether a named dependency exists is decided when a batch is instantiated
(``Graph.add_batch``): a node of a batch before this incarnation's first
batch, of a batch whose nodes are all done and forgotten, or of a step the
batch's shape lacks (a stateless query's state steps, the snapshot of a batch
that is not a maintenance batch) is satisfied, exactly as
``reference.protocol.graph.build_graph`` keeps only the dependencies on nodes that exist.

Each instantiated node (``SimNode``) counts its unmet dependencies and lists
its dependents, so finishing a node costs one decrement per dependent. A
``SimNode`` has the ``batch``/``step``/``partition`` fields of a
``reference.language.steps.NodeId`` (cost and fault matching read only those); the
real ``NodeId`` is made on demand (``node_id``) for fault handling and traces.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Callable, Hashable

from reference.protocol.graph import BatchShape, Node
from reference.language.steps import STEP_ORDER, TASK_STEPS, NodeId

# What happens to a node once its dependencies are met.
GATE = 0          # launch the task of one partition (its foreground steps run back to back in one slot)
TASK_OWNED = 1    # a task's foreground step: run by the task, never dispatched on its own
EXECUTOR_BG = 2   # an executor's background step (async state commit, maintenance)
PLAN = 3          # the micro-batch thread, once the batch's input is there
DRIVER = 4        # a driver step: the micro-batch thread, the async log writer or the async purger

TASK_STEP_SET = frozenset(TASK_STEPS)


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
    return STEP_ORDER[step] * (parts + 1) + partition + 1


def batch_template(shape: BatchShape, b: int) -> Template:
    """Batch ``b``'s nodes (``shape.batch_nodes(b)``), batch-relative, plus one gate per task."""
    parts = shape.partitions
    created = shape.batch_nodes(b)
    assert all(node.id.batch == b and not node.id.tag for node in created), "a batch's graph holds its own nodes"

    def rel(dep: NodeId) -> tuple[int, int]:
        return (dep.batch - b, slot_of(dep.step, dep.partition, parts))

    foreground = {(node.id.step, node.id.partition) for node in created
                  if node.id.step in TASK_STEP_SET and not node.background}
    out = [TemplateNode(node.id.step, node.id.partition, node.background, _kind(node, foreground),
                        slot_of(node.id.step, node.id.partition, parts), tuple(rel(d) for d in node.deps))
           for node in created]
    gate_base = len(STEP_ORDER) * (parts + 1)
    by_id = {node.id: node for node in created}
    for p in range(parts):
        steps = [s for s in TASK_STEPS if (s, p) in foreground]
        if not steps:
            continue
        own = {NodeId.of(s, b, p) for s in steps}
        external: dict[NodeId, None] = {}
        for s in (steps[0], "task_apply"):
            for dep in by_id[NodeId.of(s, b, p)].deps:
                if dep not in own:
                    external[dep] = None
        out.append(TemplateNode("launch", p, False, GATE, gate_base + p, tuple(rel(d) for d in external),
                                tuple(slot_of(s, p, parts) for s in steps)))
    return Template(tuple(out), gate_base + parts)


def _kind(node: Node, foreground: set[tuple[str, int]]) -> int:
    nid = node.id
    if (nid.step, nid.partition) in foreground:
        return TASK_OWNED
    if nid.partition >= 0:
        return EXECUTOR_BG
    return PLAN if nid.step == "plan" else DRIVER


class SimNode:
    """One node of one batch in the running simulation (a ``NodeId``'s fields plus its bookkeeping)."""

    __slots__ = ("batch", "step", "partition", "template", "graph", "done", "waiting", "dependents", "_id",
                 "start_ms", "skip", "on_done")
    tag = ""
    # set when the node runs (``IncarnationRun.run_step``)
    start_ms: float
    skip: bool
    on_done: Callable[[], None]
    _id: NodeId

    def __init__(self, template: TemplateNode, batch: int, graph: "BatchGraph"):
        self.batch = batch
        self.step = template.step
        self.partition = template.partition
        self.template = template
        self.graph = graph
        self.done = False
        self.waiting = 0
        self.dependents: list[SimNode] = []

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
            self._id = NodeId(self.batch, STEP_ORDER[self.step], self.step, self.partition)
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
    """The live part of one incarnation's step graph: batches instantiated from templates, counters, dependents.

    It holds what it uses of the incarnation: the shape of its batches and its node table (``nodes``, which
    ``materialize`` fills for the reference's task retry)."""

    def __init__(self, shape: BatchShape, nodes: dict[NodeId, Node]):
        self.shape = shape
        self.node_table = nodes
        self.templates: dict[Hashable, Template] = {}
        self.batches: dict[int, BatchGraph] = {}
        self.fusion = False

    def template(self, b: int) -> Template:
        """The template of batch ``b``'s variant (built from the first batch of that variant asked for)."""
        key = self.shape.batch_variant(b)
        found = self.templates.get(key)
        if found is None:
            found = self.templates[key] = batch_template(self.shape, b)
            if self.fusion:
                self.mark_fusable()
                found = self.templates[key]
        return found

    def mark_fusable(self) -> None:
        """Flag the task steps that nothing outside their own task waits for, in any batch shape.

        Such a step's end is seen by its own task only, so a task may run it and
        the steps after it under one timeout (``IncarnationRun.run_fused``).
        """
        for b in self.shape.variant_batches():   # every variant a batch can have (and moves, when met)
            self.template(b)                      # (before ``fusion`` is on: one marking pass, not one per variant)
        self.fusion = True
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

    def node(self, batch: int, slot: int) -> SimNode | None:
        graph = self.batches.get(batch)
        return graph.by_slot[slot] if graph is not None else None

    def add_batch(self, b: int, ready: Callable[[SimNode], None]) -> BatchGraph:
        """Instantiate batch ``b``, wire its unmet dependencies, and hand every ready node to ``ready``."""
        template = self.template(b)
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

    def dependencies(self, node: SimNode) -> list[SimNode]:
        """The nodes ``node`` waits for that exist (in this incarnation, not yet forgotten)."""
        found = (self.node(node.batch + delta, slot) if delta else node.graph.by_slot[slot]
                 for delta, slot in node.template.deps)
        return [dep for dep in found if dep is not None]

    def unmet(self, node: SimNode) -> list[SimNode]:
        """Dependencies of ``node`` not yet done (the invariant check of data mode)."""
        return [dep for dep in self.dependencies(node) if not dep.done]

    def forget(self, b: int) -> None:
        graph = self.batches.pop(b)
        if graph.materialized:
            for node in graph.nodes:
                self.node_table.pop(node.node_id, None)

    def materialize(self, b: int) -> None:
        """Put batch ``b``'s nodes in the incarnation's node table, which the reference's task retry reads
        (``Incarnation.previous_task_step`` and ``retry_task_steps``)."""
        graph = self.batches.get(b)
        if graph is None or graph.materialized:
            return
        graph.materialized = True
        for node in graph.nodes:
            deps = tuple(d.node_id for d in self.dependencies(node))
            self.node_table[node.node_id] = Node(node.node_id, deps, node.background)
