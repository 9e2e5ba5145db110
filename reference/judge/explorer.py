"""The exhaustive explorer: every single-fault placement, every crash cut.

Crashes. After a driver crash only the checkpoint survives, and the checkpoint
depends only on which file-writing steps ran. So the explorer enumerates every
down-closed set of the writing steps of the step graph (every consistent cut:
every interleaving of the concurrent steps, up to reordering of steps that
touch no file), runs each as a schedule that crashes right after it, recovers,
and judges the outcome with every oracle. Cuts that leave byte-identical
checkpoints are recovered once.

Other faults (``task_failure``, ``executor_loss``, ``storage_write_error``,
``zombie_write``) are placed at every step x batch x partition they apply to,
before and after the step (those that fail the whole query are crash cuts
already and are not repeated), under two schedules: eager (background steps as
soon as they are ready) and lazy (background steps as late as possible). A
zombie write is landed at several later points.

``depth=2`` adds a second crash at every cut of the recovery incarnation's
canonical schedule.
"""

from __future__ import annotations

import concurrent.futures
import hashlib
import multiprocessing
import os
import signal
import threading
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterator

from . import checkpoint_rules
from ..protocol.incarnation import Incarnation
from ..protocol.modes import mode_of
from .oracles import Context, Verdict, check_outcome, failures
from ..protocol.observer import Observer
from ..protocol.recovery import plan_restart
from ..protocol.run import FinishedRun, Run, Schedule, run_scenario
from ..language.scenario import Fault, FaultAt, Scenario
from ..protocol.sources import SourceData
from ..language.steps import TASK_STEPS, NodeId
from ..protocol.storage import DurableStorage
from .tightness import Reach, Tally, combined, crash_reproduce, describe

WRITING = ("offset_log_write", "purge", "changelog_write", "snapshot_upload", "sink_write", "sink_commit",
           "commit_log_write")
MAX_CUTS = 200_000   # crash cuts explored at most (the 6-batch running count at pipeline depth 3 has 64,285)


def writing_steps(scenario: Scenario) -> tuple[str, ...]:
    """The steps whose effect reaches the checkpoint: with a redelivering source, ``plan`` too (it writes the
    fetch state, ``sources/<sp>/<b>``), so a crash between the fetch and the offset log write is a cut."""
    return WRITING + ("plan",) if SourceData.of(scenario).redelivering else WRITING


@dataclass
class Violation:
    schedule: str
    verdicts: list[Verdict]
    reproduce: dict[str, Any]
    order: int = 0  # position in the exploration, for a stable report

    def describe(self) -> str:
        lines = [f"VIOLATION under {self.schedule}"]
        lines += ["  " + v.describe().replace("\n", "\n  ") for v in self.verdicts]
        return "\n".join(lines)


@dataclass
class Report:
    """What an exploration did: the schedules it ran, and the distinct crash checkpoints they reached (as TLC
    reports distinct states beside the states it generated). ``checkpoint_fingerprint`` identifies that set of
    checkpoints: two explorations reached the same ones exactly when their fingerprints are equal."""

    scenario: str
    schedules: int = 0
    distinct_checkpoints: int = 0
    violations: list[Violation] = field(default_factory=list)
    truncated: bool = False
    seconds: float = 0.0
    interrupted_violations: int | None = None   # set when an interrupt stopped the run (violations found so far)
    checkpoint_fingerprint: str = ""
    # per bound of ``bounds.py``: the most extreme value a schedule reached, and that schedule (``tightness.py``)
    tightness: dict[str, Reach] = field(default_factory=dict)

    def summary(self) -> str:
        rate = self.schedules / self.seconds if self.seconds else 0.0
        text = (f"{self.scenario}: explored {self.schedules} schedules "
                f"({self.distinct_checkpoints} distinct crash checkpoints) in {self.seconds:.2f} s "
                f"({rate:.0f}/s); {len(self.violations)} violation(s)")
        if self.truncated:
            text += f"; STOPPED at {MAX_CUTS} cuts, exploration incomplete"
        return text

    def tightness_lines(self) -> list[str]:
        """Per bound: its value, what the exploration reached, whether that is the bound, and the schedule."""
        return ["bounds (reference/judge/bounds.py) and the schedules that reach them:"] + describe(self.tightness)

    def tightness_dict(self) -> dict[str, dict[str, object]]:
        return {name: r.to_dict() for name, r in self.tightness.items()}


@dataclass
class Model:
    """The implementation under exploration: the reference, or a copy with a planted mistake."""

    incarnation_class: type[Incarnation] = Incarnation
    plan_restart_fn: Callable[..., Any] = plan_restart

    def run(self, scenario: Scenario, schedule: Schedule | None = None) -> FinishedRun:
        return run_scenario(scenario, schedule=schedule, incarnation_class=self.incarnation_class,
                            plan_restart_fn=self.plan_restart_fn)


def _judge(model: Model, scenario: Scenario, schedule: Schedule | None) -> tuple[list[Verdict], FinishedRun]:
    result = model.run(scenario, schedule)
    return failures(check_outcome(scenario, result.outcome(), result.storage)), result


def _note_outcome(tally: Tally, scenario: Scenario, result: FinishedRun, label: str, order: int,
                  reproduce: Callable[[], dict[str, Any]]) -> None:
    """Measure an outcome's re-runs, retained versions and (at-least-once) row copies for the tightness report."""
    outcome = result.outcome()
    expected = None
    if scenario.sink_mode == "at_least_once":
        try:
            expected = Context(scenario, outcome).expected.outputs
        except (KeyError, TypeError, ValueError):
            expected = None   # an outcome the oracles cannot judge is a violation already
    tally.note_outcome(outcome, expected, label, order, reproduce)


def first_graph(scenario: Scenario, model: Model) -> Incarnation:
    data = SourceData.of(scenario)
    restart = plan_restart(DurableStorage(), mode_of(scenario), len(data.partitions))
    return model.incarnation_class(scenario, data, DurableStorage(), restart, 0, Observer())


def ancestors_of(inc: Incarnation) -> dict[NodeId, frozenset[NodeId]]:
    ancestors: dict[NodeId, frozenset[NodeId]] = {}
    for n in inc.nodes:
        acc = set()
        for d in inc.nodes[n].deps:
            acc.add(d)
            acc |= ancestors[d]
        ancestors[n] = frozenset(acc)
    return ancestors


def _writer_poset(inc: Incarnation, ancestors: dict[NodeId, frozenset[NodeId]]) -> tuple[list[NodeId], list[list[int]]]:
    """The writing steps in creation order, and for each the positions of the writing steps it waits for."""
    writing = writing_steps(inc.sc)
    writers = [n for n in inc.nodes if n.step in writing]
    position = {w: i for i, w in enumerate(writers)}
    return writers, [[position[x] for x in writers if x in ancestors[w]] for w in writers]


def _down_sets(preds: list[list[int]]) -> Iterator[list[bool]]:
    """Every down-closed subset of a poset given by predecessor positions, as a membership list.

    A depth-first walk deciding each element in order, "out" before "in" (an element may be in only when
    everything it waits for is); iterative, so each subset costs a few steps, not a stack of generators.
    The same list is yielded each time: copy what you keep.
    """
    n = len(preds)
    chosen = [False] * n
    tried = [0] * (n + 1)      # per level: 0 nothing tried, 1 "out" tried, 2 "in" tried
    level = 0
    while level >= 0:
        if level == n:
            yield chosen
            level -= 1
        elif tried[level] == 0:
            tried[level], chosen[level] = 1, False
            tried[level + 1] = 0
            level += 1
        elif tried[level] == 1 and all(chosen[p] for p in preds[level]):
            tried[level], chosen[level] = 2, True
            tried[level + 1] = 0
            level += 1
        else:
            chosen[level] = False
            level -= 1


def writing_cuts(inc: Incarnation) -> Iterator[list[NodeId]]:
    """Every non-empty down-closed set of writing steps, each as a runnable prefix (a topological order)."""
    index = {n: i for i, n in enumerate(inc.nodes)}
    ancestors = ancestors_of(inc)
    writers, preds = _writer_poset(inc, ancestors)
    for member in _down_sets(preds):
        chosen = [w for w, inside in zip(writers, member) if inside]
        if not chosen:
            continue
        needed = set(chosen)
        for w in chosen:
            needed |= ancestors[w]
        assert all(n.step not in writing_steps(inc.sc) or n in chosen for n in needed), "cuts are down-closed"
        yield sorted(needed, key=index.__getitem__)


def fingerprint(digests: set[str]) -> str:
    """One digest of a set of checkpoint digests (``Report.checkpoint_fingerprint``)."""
    return hashlib.sha256("\n".join(sorted(digests)).encode()).hexdigest()


def _digest(storage: DurableStorage) -> str:
    h = hashlib.sha256()
    for path in sorted(storage.files):
        h.update(path.encode() + b"\0" + storage.files[path] + b"\0")
    return h.hexdigest()


def single_faults(scenario: Scenario, inc: Incarnation) -> Iterator[tuple[Fault, NodeId | None]]:
    """(fault, zombie landing point) for every non-crash fault placement that is not a crash in disguise.

    A fault that fails the query (a storage error on a driver write, any fault
    in a background step) restarts it from the checkpoint exactly as a driver
    crash before or after that step would, and every such crash is already a
    crash cut; so only faults a task or maintenance survives are placed here.
    """
    placed: set[tuple[str, int, int]] = set()
    for node in inc.nodes:
        step, b, p = node.step, node.batch, node.partition
        if inc.nodes[node].background and step != "snapshot_upload" or (step, b, p) in placed:
            continue
        placed.add((step, b, p))   # a fault names no store: it fires at the first store's node of its step
        for when in ("before", "after"):
            at = FaultAt(step, b, p if p >= 0 else None, when)
            if step in TASK_STEPS:
                yield Fault(at, "task_failure"), None
                yield Fault(at, "executor_loss"), None
            if step in ("changelog_write", "sink_write", "snapshot_upload"):
                yield Fault(at, "storage_write_error"), None
        if step in ("changelog_write", "sink_write"):
            landings = [inc.nid("commit_log_write", b), inc.nid("state_load", b + 1, p), None]
            for lands in landings:
                if lands is None or lands in inc.nodes:
                    yield Fault(FaultAt(step, b, p, "before"), "zombie_write"), lands


@dataclass(frozen=True)
class ExplorePlan:
    """What an exploration will do, counted before it starts: crash cuts (up to ``MAX_CUTS``) and the
    single-fault placements, each run under an eager and, where different, a lazy background schedule."""

    cuts: int
    cuts_capped: bool
    fault_schedules: int

    @property
    def schedules(self) -> int:
        return self.cuts + self.fault_schedules

    def describe(self) -> str:
        cuts = f"more than {MAX_CUTS:,} crash cuts (only the first {MAX_CUTS:,} will be explored: the exploration " \
               "will be INCOMPLETE)" if self.cuts_capped else f"{self.cuts:,} crash cuts"
        return f"{cuts} and {self.fault_schedules:,} single-fault schedules"


@dataclass(frozen=True)
class ExploreProgress:
    done: int
    planned: int
    violations: int
    seconds: float


class ExplorationInterrupted(Exception):
    """The exploration was interrupted (SIGINT); ``report`` holds what was explored until then."""

    def __init__(self, report: "Report"):
        super().__init__(f"interrupted after {report.schedules} schedules; {len(report.violations)} violation(s) "
                         "found so far")
        self.report = report


def count_writing_cuts(inc: Incarnation, cap: int = MAX_CUTS) -> tuple[int, bool]:
    """How many crash cuts ``writing_cuts`` yields (stopping past ``cap``), without building or running any."""
    _writers, preds = _writer_poset(inc, ancestors_of(inc))
    count = -1   # the empty set is not a cut
    for _member in _down_sets(preds):
        count += 1
        if count > cap:
            return cap, True
    return count, False


def plan_exploration(scenario: Scenario, model: Model | None = None) -> ExplorePlan:
    base = replace(scenario, faults=())
    inc = first_graph(base, model or Model())
    cuts, capped = count_writing_cuts(inc)
    placements = sum(1 for _ in single_faults(base, inc))
    passes = 2 if _lazy_order(inc) != list(inc.nodes) else 1
    return ExplorePlan(cuts, capped, placements * passes)


def explore(scenario: Scenario, *, depth: int = 1, model: Model | None = None,
            progress: Callable[[ExploreProgress], None] | None = None, workers: int | None = None) -> Report:
    """Explore every single-fault schedule of ``scenario`` (its own faults are ignored).

    The schedules are shared among ``workers`` processes (default: one per
    core, at most 4); the report is the same whatever the number of workers,
    except for ``seconds``. ``progress`` is called about once a second. An
    interrupt stops every worker and raises ``ExplorationInterrupted`` with
    what was explored so far.
    """
    model = model or Model()
    workers = max(1, workers if workers is not None else min(os.cpu_count() or 1, 4))
    planned = plan_exploration(scenario, model).schedules
    started = time.perf_counter()
    context = multiprocessing.get_context("fork")
    done, found = context.Value("q", 0), context.Value("q", 0)
    tick = _Ticker(progress, planned, done, found, started)
    if workers == 1:
        try:
            shares = [_explore_share(scenario, depth, model, 0, 1, (done, found), tick)]
        except KeyboardInterrupt:
            raise ExplorationInterrupted(_partial(scenario, done, found, started)) from None
    else:
        shares = _explore_in_workers(scenario, depth, model, workers, context, (done, found), tick, started)
    report = merged(scenario.name, shares)
    report.seconds = time.perf_counter() - started
    return report


def merged(name: str, shares: list["Share"]) -> Report:
    """One report from the shares of an exploration, the same however the schedules were shared out.

    A share judges the first cut of its own that reaches a checkpoint; an exploration in one share judges
    the first cut of all. So of the cuts that reached one checkpoint only the first in exploration order
    keeps its violations and, at depth 2, its second crashes: with several shares, a later one judged again
    elsewhere is dropped."""
    report = Report(name)
    first: dict[str, int] = {}
    for share in shares:
        report.schedules += share.schedules
        report.truncated |= share.truncated
        for digest, order in share.digests.items():
            first[digest] = min(order, first.get(digest, order))
    for share in shares:
        again = {order for digest, order in share.digests.items() if first[digest] != order}
        report.violations.extend(v for v in share.violations if v.order not in again)
        report.schedules -= sum(share.second_crashes.get(order, 0) for order in again)
    report.distinct_checkpoints = len(first)
    report.checkpoint_fingerprint = fingerprint(set(first))
    report.tightness = combined(share.reach for share in shares)
    report.violations.sort(key=lambda v: v.order)
    return report


def _explore_in_workers(scenario: Scenario, depth: int, model: Model, workers: int, context: Any,
                        counters: tuple[Any, Any], tick: "_Ticker", started: float) -> list["Share"]:
    # forked workers inherit the job, so models defined anywhere (even in a test) need no pickling
    _FORKED_JOB[:] = [scenario, depth, model, counters]
    interrupted = threading.Event()
    previous = _on_sigint(interrupted)
    pool = ProcessPoolExecutor(workers, mp_context=context, initializer=_die_with_parent)
    try:
        futures = [pool.submit(_explore_forked_share, share, workers) for share in range(workers)]
        while not all(f.done() for f in futures) and not interrupted.is_set():
            concurrent.futures.wait(futures, timeout=0.5)
            tick()
        if interrupted.is_set():
            for process in list(getattr(pool, "_processes", {}).values()):
                process.terminate()
            raise ExplorationInterrupted(_partial(scenario, *counters, started))
        return [f.result() for f in futures]
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        _FORKED_JOB.clear()
        if previous is not None:
            signal.signal(signal.SIGINT, previous)


def _on_sigint(interrupted: threading.Event) -> Any:
    """While workers explore, SIGINT only sets ``interrupted`` (a KeyboardInterrupt raised inside the pool's
    own locks can leave it broken); the loop then stops the workers. None outside the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return None
    return signal.signal(signal.SIGINT, lambda _signum, _frame: interrupted.set())


def _partial(scenario: Scenario, done: Any, found: Any, started: float) -> "Report":
    report = Report(scenario.name, schedules=done.value, truncated=True)
    report.seconds = time.perf_counter() - started
    report.interrupted_violations = found.value
    return report


def _die_with_parent() -> None:
    """A worker ends when the exploring process ends, however it ends (Linux: PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        import signal
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
    except (OSError, AttributeError):
        pass   # not Linux: the pool's own shutdown still stops workers on a normal exit


class _Ticker:
    """Calls ``progress`` at most once a second with the shared counters."""

    def __init__(self, progress: Callable[[ExploreProgress], None] | None, planned: int, done: Any, found: Any,
                 started: float):
        self.progress, self.planned, self.done, self.found, self.started = progress, planned, done, found, started
        self.last = 0.0

    def __call__(self) -> None:
        now = time.perf_counter()
        if self.progress is None or now - self.last < 1.0:
            return
        self.last = now
        self.progress(ExploreProgress(self.done.value, self.planned, self.found.value, now - self.started))


_FORKED_JOB: list[Any] = []


def _explore_forked_share(share: int, workers: int) -> "Share":
    scenario, depth, model, counters = _FORKED_JOB
    return _explore_share(scenario, depth, model, share, workers, counters, None)


@dataclass
class Share:
    """What one share of an exploration found (``explore_share``); ``merged`` makes the report of all shares."""

    schedules: int = 0
    truncated: bool = False
    digests: dict[str, int] = field(default_factory=dict)   # each crash checkpoint judged -> its cut's position
    violations: list[Violation] = field(default_factory=list)
    second_crashes: dict[int, int] = field(default_factory=dict)   # depth 2: a judged cut's position -> its runs
    reach: dict[str, Reach] = field(default_factory=dict)   # per bound, what this share's schedules reached


def explore_share(scenario: Scenario, share: int, shares: int, *, depth: int = 1,
                  model: Model | None = None) -> Share:
    """One of ``shares`` parts of an exploration, to run anywhere (a worker process, a Spark task): the
    schedules whose position is ``share`` modulo ``shares``. ``merged`` of every part is the report
    ``explore`` gives."""
    if not 0 <= share < shares:
        raise ValueError(f"share {share} is not one of 0..{shares - 1}")
    return _explore_share(scenario, depth, model or Model(), share, shares, None, None)


def _explore_share(scenario: Scenario, depth: int, model: Model, share: int, workers: int,
                   counters: tuple[Any, Any] | None, tick: Callable[[], None] | None) -> Share:
    """The schedules whose index is ``share`` modulo ``workers``; counts them in the shared ``counters``."""

    def tally(schedules: int = 1, violations: int = 0) -> None:
        if counters is not None:
            done, found = counters
            with done.get_lock():
                done.value += schedules
            if violations:
                with found.get_lock():
                    found.value += violations
        if tick is not None:
            tick()

    base = replace(scenario, faults=())
    out = Share()
    measured = Tally(base)
    inc = first_graph(base, model)
    order = 0
    for count, prefix in enumerate(writing_cuts(inc)):
        order += 1
        if count >= MAX_CUTS:
            out.truncated = True
            break
        if order % workers != share:
            continue
        run = Run(base, schedule=Schedule(prefix=prefix, crash_after_prefix=True),
                  incarnation_class=model.incarnation_class, plan_restart_fn=model.plan_restart_fn)
        run.life()
        out.schedules += 1
        before = len(out.violations)
        tally()
        label = f"driver_crash after [{', '.join(str(n) for n in prefix[-3:])}]"
        measured.note_cut(base, run.storage, prefix, f"{label} (cut {order})", order)
        crash_state = _digest(run.storage)
        if crash_state in out.digests:
            continue
        out.digests[crash_state] = order
        broken = checkpoint_rules.violations(run.storage, base)
        if broken:
            rule, message = broken[0]
            verdict = Verdict("checkpoint", "fail", f"crash checkpoint breaks {rule}: {message}")
            out.violations.append(Violation(label, [verdict], {"schedule": [n.to_json() for n in prefix],
                                                               "crash_after_prefix": True}, order))
        result = run.finish()
        _note_outcome(measured, base, result, f"{label} (cut {order})", order, lambda: crash_reproduce(prefix))
        bad = failures(check_outcome(base, result.outcome(), result.storage, external_crashes=1))
        if bad:
            out.violations.append(Violation(label, bad, {"schedule": [n.to_json() for n in prefix],
                                                         "crash_after_prefix": True}, order))
        if depth >= 2:
            _second_crashes(model, base, result, out, label, order, measured)
        if len(out.violations) > before:
            tally(0, len(out.violations) - before)
    lazy_order = _lazy_order(inc)
    for lazy in ((False, True) if lazy_order != list(inc.nodes) else (False,)):
        for fault, lands in single_faults(base, inc):
            order += 1
            if order % workers != share:
                continue
            faulted = replace(base, faults=(fault,))
            schedule = Schedule(zombie_lands_after=lands) if lands is not None else None
            if lazy:
                schedule = Schedule(prefix=lazy_order, zombie_lands_after=lands)
            bad, result = _judge(model, faulted, schedule)
            out.schedules += 1
            tally(1, 1 if bad else 0)
            label = f"{fault.kind} {fault.at.when} {fault.at.step} b{fault.at.batch}" + \
                    (f" p{fault.at.partition}" if fault.at.partition is not None else "") + \
                    (" (lazy background)" if lazy else "") + (f" landing after {lands}" if lands else "")
            _note_outcome(measured, faulted, result, label, order,
                          lambda: {"faults": [fault.to_dict()],
                                   "schedule": [n.to_json() for n in lazy_order] if lazy else [],
                                   "zombie_lands_after": lands.to_json() if lands else None})
            if bad:
                out.violations.append(Violation(label, bad, {"faults": [fault.to_dict()]}, order))
    out.reach = measured.reach
    return out


def _lazy_order(inc: Incarnation) -> list[NodeId]:
    """A topological order that runs background steps only when nothing else is ready."""
    done: set[NodeId] = set()
    pending = list(inc.nodes)
    order = []
    while pending:
        ready = [n for n in pending if all(d in done for d in inc.nodes[n].deps)]
        fore = [n for n in ready if not inc.nodes[n].background]
        pick = (fore or ready)[0]
        pending.remove(pick)
        done.add(pick)
        order.append(pick)
    return order


def _second_crashes(model: Model, scenario: Scenario, first: FinishedRun, report: "Share", label: str,
                    order: int, measured: Tally) -> None:
    """Depth 2: crash again at every writing step of the recovery incarnation."""
    if len(first.executed) < 2:
        return
    recovery_steps = first.executed[1]
    writes = [i for i, n in enumerate(recovery_steps) if n.step in writing_steps(scenario)]
    for i in writes:
        crash = recovery_steps[i]
        fault = Fault(FaultAt(crash.step, crash.batch, crash.partition if crash.partition >= 0 else None, "after",
                              restart=1), "driver_crash")
        result = model.run(replace(scenario, faults=(fault,)),
                           Schedule(prefix=first.executed[0], crash_after_prefix=True))
        report.schedules += 1
        report.second_crashes[order] = report.second_crashes.get(order, 0) + 1
        again = f"{label}, then driver_crash after {crash} during recovery"
        _note_outcome(measured, scenario, result, again, order,
                      lambda: {"faults": [fault.to_dict()], **crash_reproduce(first.executed[0])})
        bad = failures(check_outcome(scenario, result.outcome(), result.storage, external_crashes=2))
        if bad:
            report.violations.append(Violation(again, bad, {"faults": [fault.to_dict()]}, order))
