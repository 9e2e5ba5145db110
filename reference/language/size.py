"""How big an input is, judged before anything is spent on it: the one place for every size guard.

A backend that materialises every record (the reference, the simulator's data
mode, the Spark engine, native Spark) holds the input, one step-graph node
per step, batch and partition, and every retained state version in memory.
The simulator's volume mode counts records instead of holding them, so only
the batches, partitions and graph nodes bound it. The estimate counts
records, batches, state partitions and graph nodes from the scenario alone;
``too_large`` compares it with a backend's limits and says which limit it
passes, by how much; ``refusal`` adds where the scenario would fit instead
(the simulator's volume mode, when it would). Nothing here allocates the
input.

The same module bounds what is read from outside: a file named on the command
line (``MAX_INPUT_FILE_BYTES``, a scenario ``MAX_SCENARIO_FILE_BYTES``), one
checkpoint file (``MAX_CHECKPOINT_FILE_BYTES``) and the nesting of any JSON
document (``MAX_JSON_DEPTH``), and what an exploration enumerates
(``MAX_EXPLORE_GRAPH_NODES``), so a hostile input is refused with the size and
the limit, before memory is spent on it. The bounds a scenario's parser applies
as it reads live with it: ``field_reader.MAX_INTEGER`` (every integer field),
``scenario.MAX_NAME_CHARS`` and ``scenario.MAX_FAULTS``.
"""

from __future__ import annotations

from dataclasses import dataclass

from .scenario import Scenario
from .source_spec import source_batches, source_records   # re-exported: a source's size is the source's own
from .steps import DRIVER_STEPS, TASK_STEPS

MAX_INPUT_FILE_BYTES = 256 * 2**20        # an outcome, results or profile file named on the command line
MAX_SCENARIO_FILE_BYTES = 16 * 2**20      # a scenario file (ours are under 1 KB; a million faults are 80 MB)
MAX_CHECKPOINT_FILE_BYTES = 1 * 2**30     # one file of a checkpoint directory (a snapshot of a large state)
MAX_JSON_DEPTH = 64                       # nesting of any JSON document read (ours nest fewer than 10 deep)


# An exploration enumerates every crash cut of the step graph, and their number grows much faster than the
# graph: counting them took 12 s for 360 steps (a 20-batch running count), 226 s for 720, and a 1,500-batch
# scenario filled 6 GB before its plan was printed. A larger graph is refused before anything is built.
MAX_EXPLORE_GRAPH_NODES = 400


@dataclass(frozen=True)
class SizeEstimate:
    records: int
    batches: int
    state_partitions: int
    graph_nodes: int
    source_partitions: int = 1

    def describe(self) -> str:
        return (f"{self.records:,} records in {self.batches:,} batches from {self.source_partitions:,} source "
                f"partitions over {self.state_partitions:,} state partitions ({self.graph_nodes:,} protocol steps)")


@dataclass(frozen=True)
class SizeLimits:
    """What a backend can hold on this machine (24 GiB, Python objects); ``what`` names the kind of backend."""

    records: int = 5_000_000
    batches: int = 100_000
    state_partitions: int = 4_096
    graph_nodes: int = 5_000_000
    source_partitions: int = 4_096            # every backend keeps offsets (or counts) per batch and partition
    what: str = "a backend that holds every record in memory"


MATERIALISED = SizeLimits()
# The simulator's volume mode keeps a count per batch and partition, never a record: the records are bounded
# only by what a count can say (every step's cost is computed from it).
VOLUME = SizeLimits(records=10**15, what="the simulator's volume mode")
VOLUME_HINT = "lightspeed run SCENARIO --backend sim --sim-mode volume"


def estimate(scenario: Scenario) -> SizeEstimate:
    records = sum(source_records(src) for src in scenario.sources.values())
    batches = max(source_batches(src) for src in scenario.sources.values())
    parts = scenario.state_partitions
    per_batch = len(DRIVER_STEPS) + parts * (len(TASK_STEPS) + 1)
    sources = sum(src.partitions for src in scenario.sources.values())
    return SizeEstimate(records, batches, parts, batches * per_batch, sources)


def too_large(scenario: Scenario, limits: SizeLimits = MATERIALISED) -> str | None:
    """None when the scenario fits ``limits``; else which limit it passes, with the numbers."""
    size = estimate(scenario)
    for name in ("records", "batches", "state_partitions", "source_partitions", "graph_nodes"):
        have, allowed = getattr(size, name), getattr(limits, name)
        if have > allowed:
            return (f"{size.describe()}: {name.replace('_', ' ')} {have:,} exceed the {allowed:,} "
                    f"{limits.what} can run here")
    return None


def refusal(scenario: Scenario, limits: SizeLimits = MATERIALISED) -> str | None:
    """``too_large``, and what to do about it: the simulator's volume mode where the scenario fits it (and
    the limits passed are not already its own), else shrinking the scenario."""
    why = too_large(scenario, limits)
    if why is None:
        return None
    volume_fits = limits != VOLUME and too_large(scenario, VOLUME) is None \
        and not any(src.kind == "redelivering" for src in scenario.sources.values())
    if volume_fits:
        return f"{why}; it fits the simulator's volume mode, which counts records instead of holding them " \
               f"({VOLUME_HINT})"
    return f"{why}; shrink the scenario (fewer records, batches or state partitions)"


def file_too_large(size_bytes: int, limit_bytes: int) -> str | None:
    """None when a file of ``size_bytes`` may be read; else the size and the limit, in words."""
    if size_bytes <= limit_bytes:
        return None
    return f"{size_bytes:,} bytes, more than the {limit_bytes:,} bytes this reads"


def explore_refusal(scenario: Scenario) -> str | None:
    """None when an exploration of ``scenario`` is within ``MAX_EXPLORE_GRAPH_NODES`` (and the reference can
    hold it); else why not, with the numbers and the limit."""
    why = too_large(scenario, MATERIALISED)
    if why is not None:
        return f"{why}; shrink the scenario"
    nodes = estimate(scenario).graph_nodes
    if nodes > MAX_EXPLORE_GRAPH_NODES:
        return (f"its step graph has about {nodes:,} steps; an exploration enumerates every crash cut of it, and "
                f"explores at most {MAX_EXPLORE_GRAPH_NODES:,} steps (about 20 batches of 2 state partitions) "
                "before the count alone takes minutes: shrink the scenario (fewer batches or state partitions)")
    return None
