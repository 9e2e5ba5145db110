"""The paper's figure of the step graph, drawn from ``reference/protocol/graph.py`` itself: two batches of a running count
on two state partitions, synchronous, and with pipelining and asynchronous state checkpointing.

Each node is a (step, batch, partition) of ``build_graph``; a column is the node's depth (the longest chain of
dependencies before it), a lane is the driver or a partition; an arrow is a dependency the graph keeps after
removing the ones implied by others (its transitive reduction); a dashed box is a background step. The figure is
drawn, not copied: ``paper/build.py`` draws it at every build, and the same graph gives the same bytes.
"""

from __future__ import annotations

import io
from typing import Any

from experiments.figures import LABEL_PT, PALETTE, WIDE, figure_context
from experiments.writeup import Writeup
from reference.protocol.graph import GraphShape, Node, build_graph
from reference.language.scenario import Scenario
from reference.language.steps import NodeId

SOURCE = "reference/protocol/graph.py"
SHORT = {"plan": "plan", "offset_log_write": "offset\nlog", "purge": "purge", "state_load": "state\nload",
         "task_apply": "task\napply", "changelog_write": "change-\nlog", "state_commit": "state\ncommit",
         "snapshot_upload": "snap-\nshot", "sink_write": "sink\nwrite", "sink_commit": "sink\ncommit",
         "commit_log_write": "commit\nlog", "source_commit": "source\ncommit"}
LANE = 1.45          # vertical distance between lanes
BOX = (0.72, 1.12)   # a node's width and height
GAP = (0.08, 0.12)   # between nodes of one depth, between depths
MODES: tuple[tuple[str, dict[str, Any]], ...] = (
    ("synchronous (inline purge)", {"log_purge": {"mode": "inline", "min_batches_to_retain": 3}}),
    ("pipelining and asynchronous state checkpointing (async purge)",
     {"pipelining": True, "state_checkpoint": "async", "log_purge": {"mode": "async", "min_batches_to_retain": 3}}),
)


def scenario(engine: dict[str, Any]) -> Scenario:
    """A running count on two state partitions, two batches, maintenance after the second."""
    return Scenario.from_dict({
        "name": "step-graph", "seed": 1,
        "source": {"kind": "generated", "partitions": 2, "keys": 4, "records_per_partition_per_batch": 2,
                   "batches": 2, "event_time": {"start_ms": 0, "step_ms": 10, "max_disorder_ms": 0}},
        "query": {"operator": {"kind": "aggregate", "agg": "count"}, "state_partitions": 2},
        "sink": {"mode": "exactly_once"},
        "engine": {"state_store": {"provider": "changelog", "min_deltas_for_snapshot": 2,
                                   "maintenance_interval_ms": 200}, **engine},
        "faults": []})


def reduced_edges(nodes: dict[NodeId, Node]) -> list[tuple[NodeId, NodeId]]:
    """Every dependency not implied by another path (the transitive reduction of a DAG)."""
    reach: dict[NodeId, set[NodeId]] = {}
    for n in nodes:                        # creation order is a topological order
        reach[n] = set(nodes[n].deps)
        for d in nodes[n].deps:
            reach[n] |= reach[d]
    out = []
    for n, node in nodes.items():
        for d in node.deps:
            if not any(d in reach[other] for other in node.deps if other != d):
                out.append((d, n))
    return out


def depths(nodes: dict[NodeId, Node]) -> dict[NodeId, int]:
    out: dict[NodeId, int] = {}
    for n, node in nodes.items():
        out[n] = 1 + max((out[d] for d in node.deps), default=-1)
    return out


def layout(nodes: dict[NodeId, Node]) -> dict[NodeId, tuple[float, float]]:
    """Each node's (x, y): a column per depth, as wide as its lane with the most nodes at that depth, so that no
    two boxes overlap; a lane per driver and partition."""
    depth = depths(nodes)
    lanes: dict[tuple[int, int], list[NodeId]] = {}
    for n in nodes:
        lanes.setdefault((depth[n], n.partition), []).append(n)
    widths = {d: max(len(v) for (dd, _p), v in lanes.items() if dd == d) for d in set(depth.values())}
    start, x = {}, 0.0
    for d in sorted(widths):
        start[d] = x
        x += widths[d] * (BOX[0] + GAP[0]) + GAP[1]
    place = {}
    for (d, partition), members in lanes.items():
        for i, n in enumerate(members):
            place[n] = (start[d] + i * (BOX[0] + GAP[0]), (1 - partition) * LANE)
    return place


def draw() -> bytes:
    """The figure as PNG bytes."""
    import matplotlib
    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyBboxPatch
    with figure_context({"axes.grid": False}):
        fig, axes = plt.subplots(len(MODES), 1, figsize=(WIDE, 3.3 * len(MODES)), layout="constrained")
        graphs = [build_graph(GraphShape.of(scenario(engine)), range(2)) for _title, engine in MODES]
        places = [layout(nodes) for nodes in graphs]
        right = max(x for place in places for x, _y in place.values()) + BOX[0]
        for ax, (title, _engine), nodes, place in zip(axes, MODES, graphs, places):
            for a, b in reduced_edges(nodes):
                (x0, y0), (x1, y1) = place[a], place[b]
                ax.annotate("", (x1, y1), (x0, y0), arrowprops={"arrowstyle": "-|>", "color": "0.55", "lw": 0.6,
                                                                 "shrinkA": 9, "shrinkB": 9, "mutation_scale": 6})
            for n, (x, y) in place.items():
                colour = PALETTE[0] if n.batch == 0 else PALETTE[1]
                ax.add_patch(FancyBboxPatch((x - BOX[0] / 2, y - BOX[1] / 2), BOX[0], BOX[1],
                                            boxstyle="round,pad=0.02", facecolor="white", edgecolor=colour,
                                            linewidth=0.9, linestyle="--" if nodes[n].background else "-"))
                ax.text(x, y, SHORT[n.step], rotation=90, ha="center", va="center", fontsize=LABEL_PT, color=colour,
                        linespacing=0.95)
            ax.set_xlim(-BOX[0], right)
            ax.set_ylim(-BOX[1] / 2 - 0.15, 2 * LANE + BOX[1] / 2 + 0.15)
            ax.set_yticks([2 * LANE, LANE, 0.0])
            ax.set_yticklabels(["driver", "partition 0", "partition 1"], fontsize=LABEL_PT)
            ax.set_xticks([])
            for spine in ax.spines.values():
                spine.set_visible(False)
            ax.set_title(title, fontsize=9, loc="left")
        handles = [plt.Line2D([], [], color=PALETTE[0], lw=1.5, label="batch 0"),
                   plt.Line2D([], [], color=PALETTE[1], lw=1.5, label="batch 1"),
                   plt.Line2D([], [], color="0.3", lw=1.0, linestyle="--", label="background step")]
        fig.legend(handles=handles, loc="outside lower center", ncol=3, fontsize=LABEL_PT)
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png", dpi=150, metadata={"Software": None}, bbox_inches="tight")
        plt.close(fig)
    return buffer.getvalue()


def write(w: Writeup) -> None:
    w.drawn["step_graph"] = (draw(), SOURCE)
