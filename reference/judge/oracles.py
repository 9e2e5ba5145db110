"""The oracles of spec section 5: the judge of every backend's outcome.

Each oracle is a named function of a ``Context``: the scenario, the outcome,
and, given the scenario's input and the outcome's committed batch boundaries,
the failure-free, in-order recomputation of what every committed version,
every batch's output and every batch's watermark must be
(``query.run_sequential``). A verdict names the check and, when it fails,
where (operator store, partition, version, batch), what was expected against
what was found, and the first key that differs.

Beyond spec section 5's checks: ``identity`` (the outcome is of this scenario:
name, seed, stores, partitions), ``watermarks`` (every committed batch carries
the watermark the failure-free run gives it) and ``checkpoint`` (the
checkpoint is this outcome's: its metadata names this query, it holds every
file the outcome lists, it obeys the rules of ``checkpoint_rules.py`` (which
name every file that is not part of the layout and read every file that is),
its offset and commit logs log the outcome's batches, its sink files hold the
outcome's sink, and the state it loads is the outcome's state),
``rebalancing`` (the outcome records exactly the state moves the scenario's
executor events call for, by the placement rule of ``placement.py``) and
``recoveries`` (the outcome's restarts, re-runs, attempts and deliveries are
what the faults that fired explain, ``fault_effects.py``). ``reconstruction``, ``lineage``
and ``checkpoint`` read files, so they need the checkpoint (a ``Storage``);
without one they say so (status ``n/a``) rather than pass.
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable

from . import checkpoint_rules
from ..protocol import layout
from .bounds import bounds_of
from ..protocol.logs import CommitEntry, OffsetEntry, log_batches, read_metadata
from ..protocol.outcome import Outcome, canonical_rows, digest_rows
from ..protocol.query import BatchBounds, SequentialRun, pipeline_store_ids, run_sequential
from ..protocol.rebalancing import PlacementTimeline
from ..protocol.retained import committed_chain, latest_lineage, retained_range, retained_states
from .fault_effects import unexplained
from ..language.scenario import Scenario
from ..protocol.sink_files import visible_output
from ..protocol.sources import SourceData
from ..protocol.state_store import load_version, read_state_file
from ..protocol.storage import CheckpointFormatError, Storage

PASS, FAIL, NA = "pass", "fail", "n/a"
MAX_FINDINGS = 50   # the checkpoint check lists this many of its findings, then says how many more
_EXPECTED: dict[tuple[Any, ...], SequentialRun] = {}  # failure-free runs, memoized


@dataclass(frozen=True)
class Verdict:
    check: str
    status: str
    message: str = ""
    operator: str | None = None
    partition: int | None = None
    version: int | None = None
    batch: int | None = None
    key: str | None = None
    expected: Any = None
    actual: Any = None

    @property
    def ok(self) -> bool:
        return self.status != FAIL

    def to_dict(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if v is not None}

    def describe(self) -> str:
        where = ", ".join(f"{k} {v}" for k, v in (("operator", self.operator), ("partition", self.partition),
                                                  ("version", self.version), ("batch", self.batch),
                                                  ("key", self.key)) if v is not None)
        text = f"[{self.status.upper()}] {self.check}"
        if where:
            text += f" ({where})"
        if self.message:
            text += f": {self.message}"
        if self.status == FAIL and (self.expected is not None or self.actual is not None):
            text += f"\n    expected: {json.dumps(self.expected)[:300]}\n    actual:   {json.dumps(self.actual)[:300]}"
        return text


@dataclass
class Context:
    """What every oracle shares: the scenario's input and the failure-free recomputation."""

    scenario: Scenario
    outcome: Outcome
    storage: Storage | None = None
    external_crashes: int = 0     # driver crashes the caller brought about outside the scenario's faults
    data: SourceData = field(init=False)
    bounds: list[BatchBounds] = field(init=False)
    expected: SequentialRun = field(init=False)

    def __post_init__(self) -> None:
        self.data = SourceData.of(self.scenario)
        self.bounds = []
        sources = len(self.data.partitions)
        for b in self.outcome.batches:
            if b.start_offsets is None:
                raise ValueError(f"batch {b.id} has no start_offsets: its boundaries cannot be recomputed")
            if not len(b.start_offsets) == len(b.end_offsets) == sources:
                raise ValueError(f"batch {b.id}'s offsets name {len(b.start_offsets)} and {len(b.end_offsets)} "
                                 f"source partitions; the scenario has {sources}")
            self.bounds.append(BatchBounds(b.id, b.start_offsets, b.end_offsets))
        # the failure-free run depends on the input, the operators and the partitions alone (not on the modes,
        # the faults or the sink), so every schedule of an exploration over the same boundaries shares it
        key = (self.scenario.sources_key, self.scenario.operator, self.scenario.state_partitions, tuple(self.bounds))
        if key not in _EXPECTED:
            if len(_EXPECTED) > 256:
                _EXPECTED.clear()
            _EXPECTED[key] = run_sequential(self.scenario, self.data, self.bounds)
        self.expected = _EXPECTED[key]

    def expected_state(self, sid: str, partition: int, version: int) -> list[list[Any]]:
        """State after every committed batch with id < version (folded ids leave gaps)."""
        before = [b.batch for b in self.bounds if b.batch < version]
        if not before:
            return []
        return self.expected.states[max(before) + 1][sid][partition]

    @property
    def store_ids(self) -> list[str]:
        return pipeline_store_ids(self.scenario.operator.flatten())


def _first_diff(expected: list[list[Any]], actual: list[list[Any]]) -> str | None:
    e, a = dict(map(tuple, expected)), dict(map(tuple, actual))
    for key in sorted(set(e) | set(a)):
        if e.get(key) != a.get(key):
            return key
    return None


# --------------------------------------------------------------- oracles


def identity(ctx: Context) -> Verdict:
    """The outcome is of this scenario: its name and seed, its stores and partitions, its source partitions."""
    sc, out = ctx.scenario, ctx.outcome
    if out.scenario != sc.name:
        return Verdict("identity", FAIL, "the outcome is of another scenario", expected=sc.name, actual=out.scenario)
    if out.seed != sc.seed:
        return Verdict("identity", FAIL, "the outcome was run with another seed", expected=sc.seed, actual=out.seed)
    extra = sorted(set(out.state) - set(ctx.store_ids))
    if extra:
        return Verdict("identity", FAIL, "the outcome has state of an operator store this query does not have",
                       operator=extra[0], expected=ctx.store_ids, actual=sorted(out.state))
    for sid, parts in out.state.items():
        bad = sorted((p for p in parts if not 0 <= int(p) < sc.state_partitions), key=int)
        if bad:
            return Verdict("identity", FAIL, f"partition {bad[0]} is not one of the scenario's "
                                             f"{sc.state_partitions} state partitions (0 to "
                                             f"{sc.state_partitions - 1})", operator=sid, partition=int(bad[0]))
    return Verdict("identity", PASS, f"outcome of {sc.name!r}, seed {sc.seed}")


def watermarks(ctx: Context) -> Verdict:
    """Every committed batch carries the watermark the failure-free run gives it (the one commits/b holds)."""
    for b in ctx.outcome.batches:
        want = ctx.expected.watermarks[b.id]
        if b.watermark_ms is None:
            return Verdict("watermarks", FAIL, "a committed batch reports no watermark", batch=b.id, expected=want)
        if b.watermark_ms != want:
            return Verdict("watermarks", FAIL, "the batch's watermark differs from the failure-free run",
                           batch=b.id, expected=want, actual=b.watermark_ms)
    return Verdict("watermarks", PASS, f"{len(ctx.outcome.batches)} batches carry the failure-free watermark")


def state_equivalence(ctx: Context) -> Verdict:
    state = ctx.outcome.state
    checked = 0
    for sid in ctx.store_ids:
        for p in range(ctx.scenario.state_partitions):
            versions = state.get(sid, {}).get(str(p), {})
            for v_text in sorted(versions, key=int):
                v = int(v_text)
                expected, actual = ctx.expected_state(sid, p, v), versions[v_text]
                checked += 1
                if expected != actual:
                    key = _first_diff(expected, actual)
                    e, a = dict(map(tuple, expected)), dict(map(tuple, actual))
                    return Verdict("state_equivalence", FAIL, "committed version differs from the failure-free run",
                                   sid, p, v, v - 1, key, e.get(key), a.get(key))
    return Verdict("state_equivalence", PASS, f"{checked} retained versions equal the failure-free run")


def output_semantics(ctx: Context) -> Verdict:
    sink = ctx.outcome.sink_by_batch()
    batches = [b.batch for b in ctx.bounds]
    if ctx.scenario.sink_mode == "exactly_once":
        for b in batches:
            expected = ctx.expected.outputs[b]
            entry = sink.get(b)
            if entry is None:
                return Verdict("output_semantics", FAIL, "committed batch has no sink commit", batch=b,
                               expected=expected, actual=None)
            if canonical_rows(entry.rows) != canonical_rows(expected):
                return Verdict("output_semantics", FAIL, "sink rows differ from the failure-free output", batch=b,
                               expected=expected, actual=list(entry.rows))
            digests = list(entry.delivery_digests)
            want = digest_rows(expected)
            if any(d != want for d in digests):
                return Verdict("output_semantics", FAIL, "a delivery of this batch had other rows than the final "
                                                         "one: a re-run did not replace it identically", batch=b,
                               expected=want, actual=digests)
        extra = sorted(set(sink) - set(batches))
        if extra:
            return Verdict("output_semantics", FAIL, "sink commits for batches that are not committed", batch=extra[0],
                           actual=list(sink[extra[0]].rows))
        return Verdict("output_semantics", PASS, f"{len(batches)} batches delivered exactly once")
    rerun = _rerun_batches(ctx.outcome)
    anywhere = Counter(json.dumps(r) for rows in ctx.expected.outputs.values() for r in rows)
    for b in batches:
        have = Counter(json.dumps(r) for r in (sink[b].rows if b in sink else ()))
        wanted = Counter(json.dumps(r) for r in ctx.expected.outputs[b])
        missing = wanted - have
        if missing:
            return Verdict("output_semantics", FAIL, "at-least-once sink lost rows", batch=b,
                           expected=sorted(wanted.elements())[:10], actual=sorted(missing.elements())[:10])
        foreign = sorted(set(have) - set(wanted))
        if foreign:
            return Verdict("output_semantics", FAIL, "rows the failure-free run never produces for this batch",
                           batch=b, actual=foreign[:10])
        if have - wanted and b not in rerun:
            return Verdict("output_semantics", FAIL, "duplicate rows outside any re-run range", batch=b,
                           actual=sorted((have - wanted).elements())[:10])
        copies = _copies_allowed(ctx, b)
        beyond = sorted(r for r in have if have[r] > wanted[r] * copies)
        if beyond:
            return Verdict("output_semantics", FAIL, f"a row delivered more often than the batch's {copies} "
                                                     "attempt(s) can deliver it", batch=b, expected=copies,
                           actual=[[r, have[r]] for r in beyond[:10]])
    for b in sorted(set(sink) - set(batches)):
        if b not in rerun:
            return Verdict("output_semantics", FAIL, "output of a batch that was neither committed nor re-run",
                           batch=b, actual=list(sink[b].rows)[:10])
        strangers = sorted(r for r in {json.dumps(x) for x in sink[b].rows} if r not in anywhere)
        if strangers:
            return Verdict("output_semantics", FAIL, "a re-run batch delivered rows no committed batch produces",
                           batch=b, actual=strangers[:10])
    return Verdict("output_semantics", PASS, "at-least-once: all output present, duplicates only from re-runs")


def _copies_allowed(ctx: Context, batch: int) -> int:
    """At-least-once: the copies of each of a batch's rows its attempts can deliver: the first, and
    ``copies_per_rerun`` more for each restart that re-ran it (or each time it was planned again) and each
    task attempt Spark retried."""
    again = sum(batch in r.rerun_batches for r in ctx.outcome.recoveries)
    for b in ctx.outcome.batches:
        if b.id == batch:   # planned again (the recoveries oracle asks a restart to explain it), or retried
            again = max(again, b.attempts - 1) + b.task_retries
    return 1 + bounds_of(ctx.scenario).copies_per_rerun * again


def _rerun_batches(outcome: Outcome) -> set[int]:
    """Batches a restart re-ran, planned more than once, or whose tasks Spark retried."""
    out = {b for r in outcome.recoveries for b in r.rerun_batches}
    out |= {b.id for b in outcome.batches if b.attempts > 1 or b.task_retries > 0}
    return out


def replay_bound(ctx: Context) -> Verdict:
    """A restart re-runs at most what the step graph lets be in flight (spec section 5, ``bounds.py``)."""
    e = ctx.scenario.engine
    if e.real_time:
        return _real_time_bound(ctx)
    if e.progress_mode == "async":
        return _async_progress_bound(ctx)
    bound = bounds_of(ctx.scenario).in_flight   # batches planned but not committed
    for r in ctx.outcome.recoveries:
        if len(r.rerun_batches) > bound:
            return Verdict("replay_bound", FAIL, f"a restart re-ran {len(r.rerun_batches)} batches; at most {bound} "
                                                 "allowed in these modes", expected=bound, actual=list(r.rerun_batches))
    return Verdict("replay_bound", PASS, f"every restart re-ran at most {bound} batch(es)")


def _real_time_bound(ctx: Context) -> Verdict:
    """Real-time mode: a restart replays everything since the last commit entry, from its end offsets
    (``real_time.py``): as many batches as the step graph lets be planned and not committed, which is one
    (``real_time.uncommitted_at_most``), and always the batches right after the last commit."""
    bound = checkpoint_rules.in_flight_limit(ctx.scenario)
    for r in ctx.outcome.recoveries:
        rerun = list(r.rerun_batches)
        if len(rerun) > bound:
            return Verdict("replay_bound", FAIL, f"a real-time restart re-ran {len(rerun)} batches; the step graph "
                                                 f"leaves at most {bound} uncommitted", expected=bound, actual=rerun)
        if rerun and r.resumed_at != rerun[0]:
            return Verdict("replay_bound", FAIL, "a real-time restart must replay from the last committed offsets, "
                                                 "starting with the first uncommitted batch",
                           batch=r.resumed_at, expected=rerun[0], actual=r.resumed_at)
    return Verdict("replay_bound", PASS, f"real-time mode: every restart replayed at most {bound} batch(es), from "
                                         "the last committed offsets")


def async_progress_replay_limit(scenario: Scenario) -> int:
    """Async progress, untimed clock: batches planned since the last persisted offset entry, plus those in
    flight (``bounds.Bounds.async_progress_rerun``)."""
    limit = bounds_of(scenario).async_progress_rerun
    assert limit is not None, "async progress has a re-run limit"
    return limit


def _async_progress_bound(ctx: Context) -> Verdict:
    limit = async_progress_replay_limit(ctx.scenario) if ctx.outcome.timing is None else None
    for r in ctx.outcome.recoveries:
        rerun = list(r.rerun_batches)
        if rerun and rerun != list(range(rerun[0], rerun[-1] + 1)):
            return Verdict("replay_bound", FAIL, "async progress re-ran a non-contiguous range", actual=rerun)
        if limit is not None and len(rerun) > limit:
            return Verdict("replay_bound", FAIL, f"async progress re-ran {len(rerun)} batches; with "
                                                 f"checkpoint_interval_ms {ctx.scenario.engine.checkpoint_interval_ms}"
                                                 f" at most {limit} can be unpersisted or in flight",
                           expected=limit, actual=rerun)
    bound = f"at most {limit} batches" if limit is not None else "a contiguous range (timed clock)"
    return Verdict("replay_bound", PASS, f"async progress: every restart re-ran {bound} since the last persisted "
                                         "offset entry")


def no_loss(ctx: Context) -> Verdict:
    damaging = any(f.kind in ("corrupt_file", "delete_file") for f in ctx.scenario.faults)
    error = ctx.outcome.error
    if error:
        if damaging:
            return Verdict("no_loss", PASS, f"failed loudly after a damaged checkpoint file: {error}")
        return Verdict("no_loss", FAIL, f"the run stopped with an error: {error}")
    parts = len(ctx.data.partitions)
    position = (0,) * parts
    for b in ctx.bounds:
        if b.start != position:
            return Verdict("no_loss", FAIL, "batch does not start where the previous one ended", batch=b.batch,
                           expected=list(position), actual=list(b.start))
        position = b.end
    totals = tuple(ctx.data.totals)
    if position != totals:
        return Verdict("no_loss", FAIL, "committed offsets do not reach the end of input",
                       expected=list(totals), actual=list(position))
    if ctx.bounds and ctx.store_ids:
        latest = ctx.bounds[-1].batch + 1
        for sid in ctx.store_ids:
            for p in range(ctx.scenario.state_partitions):
                if str(latest) not in ctx.outcome.state.get(sid, {}).get(str(p), {}):
                    return Verdict("no_loss", FAIL, "the newest committed version is not in the outcome", sid, p,
                                   latest)
    return Verdict("no_loss", PASS, "all input up to the committed offsets is reflected")


def retention(ctx: Context) -> Verdict:
    """The last ``min_batches_to_retain`` committed versions load: in the outcome, and from the checkpoint when
    there is one (a version whose files are gone fails, naming them)."""
    errors = list(ctx.outcome.state_errors)
    if ctx.storage is not None and ctx.store_ids and not errors:
        errors = retained_states(ctx.storage, ctx.store_ids, ctx.scenario.state_partitions,
                                 ctx.scenario.engine.min_batches_to_retain)[1]
        missing = _no_committed_state(ctx, latest_lineage(ctx.storage), "retention")
        if missing is not None:
            return missing
    if errors and not any(f.kind in ("corrupt_file", "delete_file") for f in ctx.scenario.faults):
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return Verdict("retention", FAIL, f"a retained version would not load: {errors[0]}{more}")
    if not ctx.bounds or not ctx.store_ids or ctx.outcome.error:
        return Verdict("retention", PASS, "nothing to retain")
    retain = ctx.scenario.engine.min_batches_to_retain
    committed = {b.batch + 1 for b in ctx.bounds}
    latest = max(committed)
    want = sorted(v for v in committed if v > latest - retain)
    for sid in ctx.store_ids:
        for p in range(ctx.scenario.state_partitions):
            have = ctx.outcome.state.get(sid, {}).get(str(p), {})
            for v in want:
                if str(v) not in have:
                    return Verdict("retention", FAIL, f"version within the last {retain} is not loadable", sid, p, v)
    return Verdict("retention", PASS, f"the last {retain} versions load")


def reconstruction(ctx: Context) -> Verdict:
    """Every retained version loads to the failure-free state from its nearest snapshot, from every older
    snapshot on its lineage, and by a full changelog replay where the files still allow it."""
    if ctx.storage is None:
        return Verdict("reconstruction", NA, "needs the checkpoint directory")
    latest = latest_lineage(ctx.storage)
    missing = _no_committed_state(ctx, latest, "reconstruction")
    if missing is not None or latest is None:
        return missing or Verdict("reconstruction", PASS, "a stateless query keeps no state")
    version, lineage = latest
    checked = 0
    for sid in ctx.store_ids:
        for p in range(ctx.scenario.state_partitions):
            uid = lineage.get(sid, {}).get(str(p))
            if uid is None:
                return Verdict("reconstruction", FAIL, "the latest commit entry names no lineage for this store",
                               sid, p, version)
            chain = committed_chain(ctx.storage, sid, p, version, uid)
            if not chain:
                return _nothing_to_read("reconstruction", sid, p, version, uid)
            uids = {link.version: link.uid for link in chain}
            snaps = sorted(link.version for link in chain if link.snapshot)
            for v in retained_range(chain):
                want = dict(map(tuple, ctx.expected_state(sid, p, v)))
                loaded, why = 0, ""
                for base in sorted({s for s in snaps if s <= v} | {0}):
                    skip = frozenset(s for s in snaps if s > base)
                    try:
                        got = load_version(ctx.storage, sid, p, v, uids[v], skip_snapshots=skip)
                    except CheckpointFormatError as exc:
                        why = str(exc)
                        continue   # this base's files are gone (retention) or damaged (named by retention)
                    checked += 1
                    loaded += 1
                    if got != want:
                        key = _first_diff(sorted(map(list, want.items())), sorted(map(list, got.items())))
                        how = "a full changelog replay" if base == 0 else f"the snapshot of version {base}"
                        return Verdict("reconstruction", FAIL, f"loading from {how} differs from the failure-free "
                                                               "run", sid, p, v, key=key, expected=want.get(key or ""),
                                       actual=got.get(key or ""))
                if not loaded:   # nothing to compare is no evidence that it holds
                    return Verdict("reconstruction", FAIL, f"the retained version loads from no base: {why}", sid,
                                   p, v)
    return Verdict("reconstruction", PASS, f"{checked} loads from every base equal the failure-free run")


def _nothing_to_read(check: str, sid: str, partition: int, version: int, uid: str) -> Verdict:
    """FAIL: the latest commit entry names a version of which no state file is left, so the check has nothing
    to read (and nothing read is no evidence that it holds)."""
    name = layout.state_file(sid, partition, version, uid, "changelog")
    return Verdict(check, FAIL, f"the latest commit entry names version {version} (lineage id {uid!r}), but no "
                                f"state file of it is in the checkpoint (expected {name}, or its .snapshot or "
                                ".delta): nothing to read", sid, partition, version)


def _no_committed_state(ctx: Context, latest: Any, check: str) -> Verdict | None:
    """FAIL when the outcome commits stateful batches but the checkpoint holds no commit entry."""
    if latest is None and ctx.store_ids and ctx.outcome.batches and not ctx.outcome.error:
        return Verdict(check, FAIL, f"the outcome commits {len(ctx.outcome.batches)} batches of a stateful query "
                                    "but the checkpoint holds no commit entry")
    return None


def lineage(ctx: Context) -> Verdict:
    if ctx.storage is None:
        return Verdict("lineage", NA, "needs the checkpoint directory")
    latest = latest_lineage(ctx.storage)
    missing = _no_committed_state(ctx, latest, "lineage")
    if missing is not None or latest is None or not ctx.store_ids:
        return missing or Verdict("lineage", PASS, "no committed state to trace")
    version, newest = latest
    for sid in ctx.store_ids:
        for p in range(ctx.scenario.state_partitions):
            latest_uid = newest.get(sid, {}).get(str(p), "")
            chain = committed_chain(ctx.storage, sid, p, version, latest_uid)
            if not chain:
                return _nothing_to_read("lineage", sid, p, version, latest_uid)
            on_chain = {link.version: link.uid for link in chain}
            for batch in log_batches(ctx.storage, layout.COMMITS):
                try:
                    entry = CommitEntry.read(ctx.storage, batch)
                except CheckpointFormatError:
                    continue
                uid = entry.state_lineage.get(sid, {}).get(str(p))
                v = batch + 1
                if v in on_chain and uid is not None and on_chain[v] != uid:
                    return Verdict("lineage", FAIL, "the committed chain reads a file of another attempt than "
                                                    f"{layout.commit_path(batch)} committed", sid, p, v, batch,
                                   expected=uid, actual=on_chain[v])
    return Verdict("lineage", PASS, "every version on the committed chain is the attempt its commit named")


def checkpoint(ctx: Context) -> Verdict:
    """The checkpoint is this outcome's, of this query, and obeys the checkpoint rules."""
    if ctx.storage is None:
        return Verdict("checkpoint", NA, "needs the checkpoint directory")
    storage = ctx.storage
    try:
        meta = read_metadata(storage)
    except CheckpointFormatError as exc:
        return Verdict("checkpoint", FAIL, f"unreadable metadata: {exc}")
    if meta is None:
        return Verdict("checkpoint", FAIL, "no metadata file: not a checkpoint, or not a whole one")
    if meta.get("scenario_digest") != ctx.scenario.query_digest():
        return Verdict("checkpoint", FAIL, "the checkpoint belongs to another query",
                       expected=ctx.scenario.query_digest(), actual=meta.get("scenario_digest"))
    found: list[Verdict] = []   # every finding: a tampered checkpoint is named whole, not one file at a time
    present = set(storage.list())
    gone = [f for f in ctx.outcome.checkpoint_files if f not in present]
    if gone:
        found.append(Verdict("checkpoint", FAIL, f"{len(gone)} file(s) the outcome lists are not in the checkpoint, "
                                                 f"first {gone[0]}", actual=gone[:5]))
    commits = log_batches(storage, layout.COMMITS)
    last = ctx.outcome.batches[-1].id if ctx.outcome.batches else None
    if not ctx.outcome.error and ctx.scenario.engine.progress_mode == "sync" and (commits[-1] if commits else None) != last:
        found.append(Verdict("checkpoint", FAIL, "the checkpoint's latest commit entry is not the outcome's last "
                                                 "batch", expected=last, actual=commits[-1] if commits else None))
    damaged = _damaged_on_chain(ctx, storage)
    found += [damaged] if damaged is not None else []
    named = damaged.message.split(" ", 1)[0] if damaged is not None else None   # the file: not named twice
    found += [Verdict("checkpoint", FAIL, f"{rule}: {message}")
              for rule, message in checkpoint_rules.violations(storage, ctx.scenario)
              if not (rule == "state_files" and message.startswith(f"{named}:"))]
    if len(found) == 1:
        return found[0]
    if found:
        lines = [f.message for f in found[:MAX_FINDINGS]]
        more = [f"... and {len(found) - MAX_FINDINGS} more"] if len(found) > MAX_FINDINGS else []
        return Verdict("checkpoint", FAIL, f"{len(found)} problems: " + "\n      ".join(lines + more))
    return _logs_read_back(ctx, storage) or _sink_read_back(ctx, storage) or _state_read_back(ctx, storage)


def _damaged_on_chain(ctx: Context, storage: Storage) -> Verdict | None:
    """FAIL naming the first file on a committed lineage chain that does not decode, even one a load can
    fall back past (SPARK-21696): the checkpoint is damaged, and nothing damaged passes silently."""
    latest = latest_lineage(storage)
    if latest is None:
        return None
    version, lineage = latest
    for sid in ctx.store_ids:
        for p in range(ctx.scenario.state_partitions):
            for link in committed_chain(storage, sid, p, version, lineage.get(sid, {}).get(str(p), "")):
                for path in (link.delta, link.snapshot):
                    try:
                        if path is not None:
                            read_state_file(storage, path)
                    except CheckpointFormatError as exc:
                        return Verdict("checkpoint", FAIL, f"{path} is damaged (it does not decode: {exc})", sid,
                                       p, link.version)
    return None


def _logs_read_back(ctx: Context, storage: Storage) -> Verdict | None:
    """The offset and commit logs are the outcome's: each entry of a batch the outcome ran logs that batch's
    offsets (its end only under async progress, where a re-run folds unlogged batches in front of it) and the
    watermark the failure-free run gives it (the ``watermarks`` check judges the outcome's); no entry lies
    past the input, nor past the last batch of a run that finished."""
    batches = {b.id: b for b in ctx.outcome.batches}
    last = max(batches, default=-1)
    totals = list(ctx.data.totals)
    whole = ctx.scenario.engine.progress_mode == "sync"
    for b in log_batches(storage, layout.OFFSETS):
        entry, path = OffsetEntry.read(storage, b), layout.offset_path(b)
        if any(end > total for end, total in zip(entry.end, totals)):
            return Verdict("checkpoint", FAIL, f"{path} ends past the input", batch=b, expected=totals,
                           actual=list(entry.end))
        ran = batches.get(b)
        if ran is None and b > last and not ctx.outcome.error:
            return Verdict("checkpoint", FAIL, f"{path} logs a batch after the outcome's last batch {last}, of a "
                                               "run that finished", batch=b)
        if ran is not None and (entry.end != ran.end_offsets or whole and entry.start != ran.start_offsets):
            return Verdict("checkpoint", FAIL, f"{path} logs other offsets than the outcome's batch {b} ran",
                           batch=b, expected=[list(ran.start_offsets or ()), list(ran.end_offsets)],
                           actual=[list(entry.start), list(entry.end)])
    for b in log_batches(storage, layout.COMMITS):
        commit = CommitEntry.read(storage, b)
        if b in batches and commit.watermark_ms != ctx.expected.watermarks[b]:
            return Verdict("checkpoint", FAIL, f"{layout.commit_path(b)} holds another watermark than the "
                                               "failure-free run gives the batch", batch=b,
                           expected=ctx.expected.watermarks[b], actual=commit.watermark_ms)
        wrong = _tracker_beyond_input(commit, ctx.expected.trackers.get(b)) if b in batches else None
        if wrong is not None:   # what recovery resumes the watermark from
            where, bound, found = wrong
            return Verdict("checkpoint", FAIL, f"{layout.commit_path(b)}: {where} is {found}, beyond what the input "
                                               "and the offset log allow the batch (the watermark recovery resumes "
                                               "from)", batch=b, expected=bound, actual=found)
    return None


def _tracker_beyond_input(commit: CommitEntry, bound: Any) -> tuple[str, Any, Any] | None:
    """The first field of a commit entry's ``next_trackers`` that the input and the offset log rule out, as
    (field, what they allow, what it holds). ``bound`` is the failure-free run's trackers after the batch: each
    input's largest event time up to the batch's end offsets, and the watermark they give. A run's own trackers
    can only be lower (a restart forgets the event-time maxima, Spark keeping them in memory only), and each
    tracker's late-events watermark is the watermark the batch ran with (the first one's is the commit's)."""
    trackers = commit.next_trackers
    if bound is None:
        return None
    if len(trackers) != len(bound):
        return "next_trackers", f"{len(bound)} trackers, one per operator", len(trackers)
    for i, (have, most) in enumerate(zip(trackers, bound)):
        where = f"next_trackers[{i}]"
        if not isinstance(have, dict) or not all(isinstance(have.get(k), int) and not isinstance(have.get(k), bool)
                                                 for k in ("watermark_ms", "late_watermark_ms")) \
                or not isinstance(have.get("max_event_ms"), dict):
            return where, "{watermark_ms: int, late_watermark_ms: int, max_event_ms: {input: int}}", have
        if i == 0 and have["late_watermark_ms"] != commit.watermark_ms:
            return f"{where}.late_watermark_ms", commit.watermark_ms, have["late_watermark_ms"]
        if have["watermark_ms"] > most["watermark_ms"] or have["watermark_ms"] < have["late_watermark_ms"]:
            return f"{where}.watermark_ms", [have["late_watermark_ms"], most["watermark_ms"]], have["watermark_ms"]
        for side, t in sorted(have["max_event_ms"].items()):
            if side not in most["max_event_ms"] or not isinstance(t, int) or t > most["max_event_ms"][side]:
                return f"{where}.max_event_ms.{side}", most["max_event_ms"].get(side), t
    return None


def _sink_read_back(ctx: Context, storage: Storage) -> Verdict | None:
    """The sink's files hold the outcome's sink: each batch's rows and how many times it was delivered."""
    found = {e.batch: e for e in visible_output(storage, ctx.scenario.sink_mode)}
    told = ctx.outcome.sink_by_batch()
    for b in sorted(set(found) | set(told)):
        have, said = found.get(b), told.get(b)
        where = layout.manifest_path(b) if ctx.scenario.sink_mode == "exactly_once" else f"{layout.SINK}/{b}/"
        if have is None or said is None:
            return Verdict("checkpoint", FAIL, f"{where}: the sink files and the outcome disagree on whether "
                                               f"batch {b} was delivered", batch=b,
                           expected=None if said is None else list(said.rows),
                           actual=None if have is None else list(have.rows))
        if canonical_rows(have.rows) != canonical_rows(said.rows):
            return Verdict("checkpoint", FAIL, f"{where}: the sink files hold other rows than the outcome's sink",
                           batch=b, expected=list(said.rows)[:10], actual=list(have.rows)[:10])
        if have.deliveries != said.deliveries:
            return Verdict("checkpoint", FAIL, f"{where}: the sink files count another number of deliveries than "
                                               "the outcome's sink", batch=b, expected=said.deliveries,
                           actual=have.deliveries)
    return None


def _state_read_back(ctx: Context, storage: Storage) -> Verdict:
    """The state the checkpoint loads is the state the outcome reports, version by version."""
    loaded, _errors = retained_states(storage, ctx.store_ids, ctx.scenario.state_partitions)
    for sid, parts in ctx.outcome.state.items():
        for p, versions in parts.items():
            for v, pairs in versions.items():
                found = loaded.get(sid, {}).get(p, {}).get(v)
                if found is not None and found != pairs:
                    key = _first_diff(found, pairs)
                    return Verdict("checkpoint", FAIL, "the checkpoint loads other state than the outcome reports",
                                   sid, int(p), int(v), key=key)
    return Verdict("checkpoint", PASS, f"{len(storage.list())} files of this query; the checkpoint rules hold")


def rebalancing(ctx: Context) -> Verdict:
    """The outcome records every state move the scenario's executor events call for, and no other: for each
    batch it planned, the partitions whose executor changed (``rebalancing.py``). The moved partitions' state
    is judged by the other checks like any other: it loaded from the checkpoint."""
    last = max((b.id for b in ctx.outcome.batches), default=-1)
    expected = PlacementTimeline(ctx.scenario).moves(through=last)
    if ctx.outcome.moves == expected:
        return Verdict("rebalancing", PASS, f"{len(expected)} state move(s), as the placement rule gives")
    wrong = next((i for i, (e, a) in enumerate(zip(expected, ctx.outcome.moves)) if e != a),
                 min(len(expected), len(ctx.outcome.moves)))
    want = expected[wrong].to_dict() if wrong < len(expected) else None
    got = ctx.outcome.moves[wrong].to_dict() if wrong < len(ctx.outcome.moves) else None
    where = want or got or {}
    return Verdict("rebalancing", FAIL, f"move {wrong} differs from the placement rule's "
                                        f"({len(expected)} expected, {len(ctx.outcome.moves)} recorded)",
                   partition=where.get("partition"), batch=where.get("batch"), expected=want, actual=got)


def recoveries(ctx: Context) -> Verdict:
    """The outcome's restarts, re-runs, attempts and deliveries are what the faults that fired explain
    (``fault_effects.py``): a crash that fired brought its restart and re-ran its batch, no restart or
    second delivery came from nowhere, and a fault whose step ran is not listed as never fired."""
    finding = unexplained(ctx.scenario, ctx.outcome, ctx.external_crashes)
    if finding is not None:
        return Verdict("recoveries", FAIL, finding.message, batch=finding.batch, expected=finding.expected,
                       actual=finding.actual)
    return Verdict("recoveries", PASS, f"{len(ctx.outcome.recoveries)} restart(s), every re-run and repeated "
                                       "delivery explained by the faults that fired")


def _reading(check: str, fn: Callable[[Context], Verdict]) -> Callable[[Context], Verdict]:
    """A check that reads the checkpoint FAILs, naming the file, when a file it must read is unreadable."""
    def judged(ctx: Context) -> Verdict:
        try:
            return fn(ctx)
        except CheckpointFormatError as exc:
            return Verdict(check, FAIL, f"unreadable checkpoint file: {exc}")
    judged.__name__ = fn.__name__
    return judged


ORACLES: dict[str, Callable[[Context], Verdict]] = {
    "identity": identity,
    "state_equivalence": state_equivalence,
    "output_semantics": output_semantics,
    "replay_bound": replay_bound,
    "no_loss": no_loss,
    "retention": _reading("retention", retention),
    "reconstruction": _reading("reconstruction", reconstruction),
    "lineage": _reading("lineage", lineage),
    "watermarks": watermarks,
    "checkpoint": _reading("checkpoint", checkpoint),
    "rebalancing": rebalancing,
    "recoveries": recoveries,
}


# Each failure condition of each oracle, listed once, with every way it can fail (a gap and an overlap, too
# few and too many, below a floor and above a ceiling). tests/quick/test_judge_both_ways.py crafts, for every way,
# an outcome that only that oracle rejects, and fails when a way has none. Too few re-runs is a way of
# ``recoveries`` (a crash that left its batch un-re-run), too many of ``replay_bound``.
FAILURE_WAYS: dict[str, dict[str, tuple[str, ...]]] = {
    "outcome_shape": {"source partitions of a batch's offsets": ("too few", "too many")},
    "identity": {"scenario name": ("another",), "seed": ("another",), "operator stores": ("one not the query's",),
                 "state partitions": ("below zero", "beyond the count")},
    "watermarks": {"watermark of a committed batch": ("missing", "below the failure-free one",
                                                      "above the failure-free one")},
    "state_equivalence": {"a key's value": ("below", "above"), "keys of a version": ("missing", "extra")},
    "output_semantics": {
        "exactly-once commit of a batch": ("missing for a committed batch", "for a batch not committed"),
        "exactly-once rows": ("a row missing", "a row extra"),
        "exactly-once deliveries": ("an earlier delivery with other rows",),
        "at-least-once rows of a committed batch": ("lost", "never produced", "duplicated without a re-run",
                                                    "more copies than its attempts"),
        "at-least-once output of an uncommitted batch": ("never re-run", "rows no committed batch produces")},
    "replay_bound": {"batches a restart re-ran": ("more than can be in flight",),
                     "async-progress re-run range": ("with a gap", "longer than the bound")},
    "no_loss": {"where a batch starts": ("a gap", "an overlap"),
                "where the committed batches end": ("short of the input", "past the input"),
                "how the run ended": ("stopped with an error",)},
    # (an outcome without the newest committed version fails no_loss and retention alike: the newest version
    # is always among the last min_batches_to_retain, so that way is retention's below)
    "retention": {"retained versions": ("one that does not load", "one within min_batches_to_retain missing")},
    "reconstruction": {"a load from any base": ("differs from the failure-free state",)},
    "lineage": {"the attempt a version is read from": ("another than its commit named",)},
    # (a checkpoint whose latest commit entry is ahead of the outcome's last batch holds state of a batch the
    # outcome does not know: reconstruction rejects it as well as checkpoint, so that way is not listed here)
    "checkpoint": {"the latest commit entry": ("behind the last batch",),
                   "offset entries": ("past the input", "after the last batch of a finished run"),
                   "sink deliveries of a batch": ("fewer than the outcome's", "more than the outcome's"),
                   "a batch's sink files": ("delivered only in the files", "delivered only in the outcome")},
    "rebalancing": {"state moves": ("one missing", "one extra", "one to another executor")},
    "recoveries": {"restarts": ("fewer than the crashes that fired", "more than the faults that fired"),
                   "a batch planned again": ("without a restart",),
                   "a batch a restart re-ran (sync)": ("planned only once",),
                   "a crash between plan and commit (sync)": ("its batch not re-run", "not delivered again"),
                   "a repeated delivery": ("without a re-run",),
                   "delivery digests of an exactly-once batch": ("fewer than its deliveries",
                                                                 "more than its deliveries")},
}


def check_outcome(scenario: Scenario, outcome: Outcome, storage: Storage | None = None, *,
                  external_crashes: int = 0) -> list[Verdict]:
    """Run every oracle on one outcome (from any backend). ``external_crashes``: driver crashes the caller
    brought about itself, outside the scenario's faults (the explorer's crash cuts), which explain as many
    restarts."""
    try:
        ctx = Context(scenario, outcome, storage, external_crashes)
    except (KeyError, TypeError, ValueError) as exc:
        return [Verdict("outcome_shape", FAIL, f"outcome cannot be judged: {exc!r}")]
    return [fn(ctx) for fn in ORACLES.values()]


def determinism(first: bytes | str, second: bytes | str) -> Verdict:
    """The same scenario and seed must give byte-identical outcomes."""
    a = first.encode() if isinstance(first, str) else first
    b = second.encode() if isinstance(second, str) else second
    if a == b:
        return Verdict("determinism", PASS, f"{len(a)} bytes identical")
    index = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
    return Verdict("determinism", FAIL, f"outcomes differ from byte {index}",
                   expected=a[max(0, index - 40):index + 40].decode(errors="replace"),
                   actual=b[max(0, index - 40):index + 40].decode(errors="replace"))


def failures(verdicts: list[Verdict]) -> list[Verdict]:
    return [v for v in verdicts if not v.ok]
