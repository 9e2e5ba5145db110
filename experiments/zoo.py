"""The bug zoo (``lightspeed zoo``): each real state-store bug of spec section 6, planted and caught.

For every bug, the failing sequence of its report (``store_bug_sequences.py``)
runs twice: on a copy of the RocksDB store with the mistake planted
(``planted_stores.py``) and on the real store. Both runs are judged by the
same checks (``zoo_checks.py``). A bug is *caught* when at least one check
fails on the planted run; the real store must pass every check on the same
sequence. The result is one row per bug: the JIRA id, what was planted,
which checks caught it and what the first of them found, how long the planted
run took until a check first failed, and whether the unplanted run passed.
Each run is judged as every step of its sequence ends (``zoo_checks.judge``
with ``between_steps``) and once more at the end, so a row also says after
which step the planted mistake was first caught; the real store must pass at
every step.

Everything runs on the RocksDB store (rocksdict) and the reference's loader,
in a scratch directory (in memory, ``/dev/shm``, where the machine has one);
no JVM.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from spark_impl.state_store import RocksDBStateStore

from .output_paths import write_text
from .planted_stores import PLANTED
from .store_bug_sequences import SEQUENCES, StoreBench, Trace
from .zoo_checks import Finding, judge

DEFAULT_OUT = Path("results") / "zoo" / "zoo.json"
JIRAS: tuple[str, ...] = tuple(SEQUENCES)
assert set(JIRAS) == set(PLANTED), "every bug of the zoo has a sequence and a planted store"


class ZooError(ValueError):
    """A bad request to the zoo (an unknown JIRA id), named in the message."""


@dataclass(frozen=True)
class ZooRow:
    """One bug: what was planted, what caught it, how fast, and whether the real store passes."""

    jira: str
    planted: str
    sequence: str
    caught_by: str                 # the failed checks, comma-separated; "" when nothing caught it
    checks_failed: tuple[str, ...]
    detail: str                    # what the first failed check found
    failures: tuple[str, ...]      # "check: what it found" for every failed check
    seconds: float                 # from the start of the planted run until a check first failed
    caught_at_step: str            # the step after which a check first failed ("" when none did)
    caught_at_step_number: int     # its position among the sequence's steps (1 = the set-up)
    steps: int                     # how many steps the sequence has
    planted_seconds: float         # the whole planted run, judged after every step
    unplanted_passes: bool
    unplanted_seconds: float
    unplanted_failures: tuple[str, ...]
    planted_class: str

    @property
    def caught(self) -> bool:
        return bool(self.checks_failed)

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["checks_failed"] = list(self.checks_failed)
        out["failures"] = list(self.failures)
        out["unplanted_failures"] = list(self.unplanted_failures)
        return out


def resolve(only: list[str] | None) -> list[str]:
    """The JIRA ids asked for (``SPARK-43404``, ``43404`` or ``spark-43404``), in the zoo's order."""
    if not only:
        return list(JIRAS)
    wanted: list[str] = []
    for raw in only:
        for word in (w.strip() for w in raw.split(",")):
            if not word:
                continue
            number = word.upper().removeprefix("SPARK-")
            match = [j for j in JIRAS if word.upper() == j or number in j.replace("SPARK-", "").split("/")]
            if not match:
                raise ZooError(f"--only {word!r}: not a bug of the zoo; expected one of {', '.join(JIRAS)}")
            wanted += [j for j in match if j not in wanted]
    return [j for j in JIRAS if j in wanted]


def scratch_root() -> Path:
    """A fresh scratch directory, in memory where the machine has one (each RocksDB open is ~30x cheaper)."""
    shm = Path("/dev/shm")
    parent = shm if shm.is_dir() and os.access(shm, os.W_OK) else None
    return Path(tempfile.mkdtemp(prefix="lightspeed-zoo-", dir=parent))


DETAIL_CHARS = 300
_ABSOLUTE_DIRS = re.compile(r"(?<![\w.])/(?:[^\s/:'\"]+/)+")


def plain_detail(text: str) -> str:
    """One line, without the scratch directories' absolute paths (they differ from run to run)."""
    line = _ABSOLUTE_DIRS.sub("", text.splitlines()[0] if text else "")
    return line if len(line) <= DETAIL_CHARS else line[:DETAIL_CHARS - 3] + "..."


@dataclass(frozen=True)
class SequenceRun:
    """One sequence on one store class, judged as each step ended and at the end."""

    findings: tuple[Finding, ...]   # the final judgment, every check
    seconds: float                  # the whole run: sequence and judging
    caught_step: str | None         # the first step after which a check failed; None when none did
    caught_seconds: float | None    # from the start of the sequence to that judgment
    steps: tuple[str, ...]          # the steps the sequence went through

    @property
    def failed(self) -> list[Finding]:
        return [f for f in self.findings if not f.ok]


def run_sequence(jira: str, store_class: type[RocksDBStateStore], root: Path) -> SequenceRun:
    """Run one bug's sequence on ``store_class``, judging it as each step ends and once more at the end."""
    _what, sequence = SEQUENCES[jira]
    start = time.perf_counter()
    steps: list[str] = []
    caught: list[tuple[str, float]] = []

    def watch(trace: Trace) -> None:
        steps.append(trace.step)
        if not caught and not all(f.ok for f in judge(trace, bench, between_steps=True)):
            caught.append((trace.step, time.perf_counter() - start))

    bench = StoreBench(store_class, root, watch=watch)
    try:
        trace = sequence(bench)
        steps.append(trace.step)
        findings = judge(trace, bench)
    except Exception as exc:   # a store that throws in the sequence's own thread stops it: that is a finding
        step = bench.last_trace.step if bench.last_trace is not None else "set-up"
        findings = [Finding("steps_complete", False, f"the sequence stopped at {step!r}: "
                                                     f"{type(exc).__name__}: {exc}")]
        steps.append(step)
    finally:
        bench.close_all()
    seconds = time.perf_counter() - start
    if not caught and not all(f.ok for f in findings):
        caught.append((steps[-1], seconds))
    return SequenceRun(tuple(findings), seconds, caught[0][0] if caught else None,
                       caught[0][1] if caught else None, tuple(steps))


def run_bug(jira: str, root: Path) -> ZooRow:
    """Plant one bug, run its sequence on the planted and on the real store, and judge both."""
    planted_what, planted_class = PLANTED[jira]
    planted = run_sequence(jira, planted_class, root / "planted")
    unplanted = run_sequence(jira, RocksDBStateStore, root / "unplanted")
    failed = planted.failed
    return ZooRow(
        jira=jira, planted=planted_what, sequence=SEQUENCES[jira][0],
        caught_by=", ".join(f.check for f in failed), checks_failed=tuple(f.check for f in failed),
        detail=plain_detail(failed[0].detail) if failed else "",
        failures=tuple(f"{f.check}: {plain_detail(f.detail)}" for f in failed),
        seconds=round(planted.caught_seconds if planted.caught_seconds is not None else planted.seconds, 3),
        caught_at_step=planted.caught_step or "", caught_at_step_number=(
            planted.steps.index(planted.caught_step) + 1 if planted.caught_step in planted.steps else 0),
        steps=len(planted.steps), planted_seconds=round(planted.seconds, 3),
        unplanted_passes=unplanted.caught_step is None and not unplanted.failed,
        unplanted_seconds=round(unplanted.seconds, 3),
        unplanted_failures=tuple(f"{f.check}: {plain_detail(f.detail)}" for f in unplanted.failed) + (
            (f"a check failed after step {unplanted.caught_step!r}",)
            if unplanted.caught_step is not None and not unplanted.failed else ()),
        planted_class=planted_class.__name__)


def run_zoo(jiras: list[str], *, seed: int | None = None, root: Path | None = None,
            announce: Any = None) -> list[ZooRow]:
    """Run the given bugs (shuffled by ``seed`` when given: no entry may depend on another's run)."""
    order = list(jiras)
    if seed is not None:
        random.Random(seed).shuffle(order)
    base = root if root is not None else scratch_root()
    try:
        rows = {}
        for i, jira in enumerate(order):
            if announce is not None:
                announce(jira)
            rows[jira] = run_bug(jira, base / f"{i:02d}")
        return [rows[j] for j in jiras]
    finally:
        if root is None:
            shutil.rmtree(base, ignore_errors=True)


def table_lines(rows: list[ZooRow]) -> list[str]:
    """The zoo as a plain-text table, then one line per bug saying what caught it."""
    head = ("JIRA", "caught by", "after step", "seconds", "unplanted passes")
    body = [(r.jira, r.caught_by or "NOT CAUGHT", f"{r.caught_at_step_number} of {r.steps}" if r.caught else "-",
             f"{r.seconds:.2f}", "yes" if r.unplanted_passes else "NO") for r in rows]
    widths = [max(len(str(x[i])) for x in [head, *body]) for i in range(len(head))]
    line = lambda cells: "  ".join(str(c).ljust(w) for c, w in zip(cells, widths)).rstrip()  # noqa: E731
    out = [line(head), line(tuple("-" * w for w in widths))] + [line(b) for b in body]
    out.append("")
    for r in rows:
        out.append(f"{r.jira}: planted: {r.planted}")
        out.append(f"    sequence: {r.sequence}")
        if r.caught:
            out.append(f"    caught after step {r.caught_at_step_number} ({r.caught_at_step}): {r.detail}")
        else:
            out.append("    NOT CAUGHT by any check")
        for failure in r.unplanted_failures:
            out.append(f"    UNPLANTED STORE FAILED {failure}")
    caught = sum(r.caught for r in rows)
    passing = sum(r.unplanted_passes for r in rows)
    out.append("")
    out.append(f"{caught} of {len(rows)} planted bugs caught; the real store passes {passing} of {len(rows)} "
               "sequences")
    return out


def all_held(rows: list[ZooRow]) -> bool:
    """Every planted bug was caught and the real store passed every sequence."""
    return all(r.caught and r.unplanted_passes for r in rows)


def write_rows(rows: list[ZooRow], path: Path) -> None:
    """The rows as the JSON list ``paper/build.py`` (``section_mutation_and_zoo``) reads; ``OutputPathError``
    naming the path when it cannot be written (``--out`` is checked before the zoo runs,
    ``output_paths.output_file``)."""
    write_text(path, json.dumps([r.to_dict() for r in rows], indent=1) + "\n", "the zoo's rows")
