"""Speed of the RocksDB state store (spec section 2, ``state_store.provider``).

Run with ``.venv/bin/pytest tests/bench/test_bench_state_store.py --benchmark-only``.
Every figure is a ratio of two measurements taken side by side in one run,
rounds interleaved, so a busy machine slows both sides alike:

1. commit latency of changelog checkpointing, 1M keys of state and 1% of them
   changed per batch, against
   - a *full* snapshot on every commit: a RocksDB checkpoint whose every SST
     file is copied to the checkpoint directory, nothing shared with earlier
     snapshots (what a non-incremental RocksDB checkpoint or Spark's
     HDFS-backed provider snapshot writes: the complete state image)
     (target: >= 20x lower);
   - an *incremental* snapshot on every commit (the ``snapshot`` provider:
     only SSTs not yet in the checkpoint are uploaded), reported;
   and the changelog commit averaged over ten commits of which one takes the
   periodic snapshot checkpoint (``min_deltas_for_snapshot = 10``), reported.
   Wall clock; the checked figure is the median over rounds of each round's
   ratio (the commits of a round run back to back, in rotating order);
2. replay throughput of a load (records/s; the whole ``load()``: listing,
   reading, verifying, parsing, writing into a fresh RocksDB) against raw
   rocksdict ingest of the same records as prepared (key bytes, value bytes)
   pairs put into a ``WriteBatch`` and written to a fresh DB with the same
   options (the faster of one batch and 64k-record batches)
   (target: >= 50% of raw), for a changelog of sequential inserts and one of
   random updates. Wall clock; the checked figure is the median over rounds
   of each round's ratio (raw ingest and load run back to back); the ratio of
   each side's best round and the ratio of thread CPU time (both sides run
   in the calling thread, so it is blind to other processes on the machine)
   are reported;
3. 32 stores in one process within the configured memory bound.

Below a target the run warns and reports the figure; below the regression
floor it fails.
"""

from __future__ import annotations

import random
import shutil
import statistics
import time
import warnings
from pathlib import Path

import pytest
import rocksdict

from reference.protocol.changelog import encode_value
from reference.protocol.storage import DurableStorage, LocalStorage
from spark_impl.state_store import MemoryBudget, RocksDBStateStore, memory_usage, shared_memory

STATE_KEYS = 1_000_000
CHANGED_FRACTION = 0.01
COMMIT_ROUNDS = 15
PERIODIC_SNAPSHOT_EVERY = 10
REPLAY_RECORDS = 300_000
REPLAY_ROUNDS = 9
RAW_CHUNK_RECORDS = 65_536
COMMIT_SPEEDUP_TARGET = 20.0
REPLAY_FRACTION_TARGET = 0.5
# Regression floors (a run below fails); between floor and target the run warns.
COMMIT_SPEEDUP_FLOOR = 5.0               # vs a full snapshot
COMMIT_SPEEDUP_INCREMENTAL_FLOOR = 1.0   # vs an incremental snapshot
REPLAY_FRACTION_FLOOR = 0.25


def _key(i: int) -> str:
    return f"key-{i:08d}"


def _change_one_percent(store: RocksDBStateStore, rng: random.Random) -> None:
    for i in rng.sample(range(STATE_KEYS), int(STATE_KEYS * CHANGED_FRACTION)):
        store.put(_key(i), {"count": rng.randint(0, 10**6), "sum": 1})


def _report(benchmark, capsys, lines: list[str], **figures: float) -> None:
    """Record the figures in the benchmark JSON and print them (shown without ``-s`` too)."""
    benchmark.extra_info.update(figures)
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_commit_latency_changelog_vs_full_snapshot(benchmark, capsys, tmp_path: Path):
    # Fill one store with 1M keys, then give the same state to the two
    # snapshot stores by loading the base version from a copy of its checkpoint.
    changelog = RocksDBStateStore(LocalStorage(tmp_path / "ck-changelog"), "bench", 0, "changelog", 10**6,
                                  local_root=tmp_path / "local-changelog")
    for i in range(STATE_KEYS):
        changelog.put(_key(i), {"count": i, "sum": i * 3})
    changelog.commit("base")
    baselines = {}
    for name, share in (("full", False), ("incremental", True)):
        shutil.copytree(tmp_path / "ck-changelog", tmp_path / f"ck-{name}")
        store = RocksDBStateStore(LocalStorage(tmp_path / f"ck-{name}"), "bench", 0, "snapshot",
                                  local_root=tmp_path / f"local-{name}", share_ssts=share)
        store.load(1, "base")
        _change_one_percent(store, random.Random(0))
        store.commit("warm")  # the first snapshot: everything is uploaded once
        baselines[name] = store
    _change_one_percent(changelog, random.Random(0))
    changelog.commit("warm")

    stores = {"full": baselines["full"], "incremental": baselines["incremental"], "changelog": changelog}
    times: dict[str, list[float]] = {name: [] for name in stores}
    seeds = iter(range(1, 10**6))

    def setup():
        # The same 1% change on every store (untimed).
        seed = next(seeds)
        for store in stores.values():
            _change_one_percent(store, random.Random(seed))
        return (seed,), {}

    def commit_round(seed: int) -> None:
        # One commit per store, each timed; the order rotates from round to round so
        # no store always runs right after another one's I/O and background flushes.
        names = list(stores)
        for name in names[seed % 3:] + names[:seed % 3]:
            start = time.perf_counter()
            stores[name].commit(f"r{seed}")
            times[name].append(time.perf_counter() - start)

    # pytest-benchmark's row for this test is a whole round (three commits); the figures are below.
    benchmark.pedantic(commit_round, setup=setup, rounds=COMMIT_ROUNDS)

    # Amortized: ten commits of which one takes the periodic snapshot checkpoint;
    # maintenance uploads it between batches, off the commit path.
    changelog.min_deltas_for_snapshot = PERIODIC_SNAPSHOT_EVERY
    changelog.last_snapshot_version = changelog.version - PERIODIC_SNAPSHOT_EVERY + 1
    periodic = []
    for r in range(PERIODIC_SNAPSHOT_EVERY):
        _change_one_percent(changelog, random.Random(10**6 + r))
        start = time.perf_counter()
        changelog.commit(f"p{r}")
        periodic.append(time.perf_counter() - start)
        changelog.do_maintenance()
    for store in (changelog, *baselines.values()):
        store.close()
    for name in stores:  # the full snapshots alone are ~15 MB a commit
        shutil.rmtree(tmp_path / f"ck-{name}", ignore_errors=True)

    median = {name: statistics.median(values) for name, values in times.items()}

    def paired(name: str) -> float:
        return statistics.median(b / c for b, c in zip(times[name], times["changelog"]))

    vs_full, vs_incremental = paired("full"), paired("incremental")
    vs_full_amortized = median["full"] / statistics.mean(periodic)
    _report(benchmark, capsys, [
        f"commit medians over {COMMIT_ROUNDS} rounds ({STATE_KEYS:,} keys, {CHANGED_FRACTION:.0%} changed):",
        f"  full snapshot        {median['full'] * 1e3:8.1f} ms",
        f"  incremental snapshot {median['incremental'] * 1e3:8.1f} ms",
        f"  changelog            {median['changelog'] * 1e3:8.2f} ms"
        f"  (mean incl. a checkpoint every {PERIODIC_SNAPSHOT_EVERY}: {statistics.mean(periodic) * 1e3:.2f} ms)",
        f"  changelog vs full snapshot {vs_full:.1f}x lower (median of per-round ratios; amortized "
        f"{vs_full_amortized:.1f}x), vs incremental snapshot {vs_incremental:.1f}x lower",
    ], full_snapshot_commit_median_ms=median["full"] * 1e3,
        incremental_snapshot_commit_median_ms=median["incremental"] * 1e3,
        changelog_commit_median_ms=median["changelog"] * 1e3,
        changelog_commit_mean_with_periodic_checkpoint_ms=statistics.mean(periodic) * 1e3,
        speedup_vs_full_snapshot=vs_full, speedup_vs_full_snapshot_amortized=vs_full_amortized,
        speedup_vs_incremental_snapshot=vs_incremental)
    if vs_full < COMMIT_SPEEDUP_TARGET:
        warnings.warn(f"commit latency only {vs_full:.1f}x below a full snapshot "
                      f"(target {COMMIT_SPEEDUP_TARGET}x)")
    assert vs_full >= COMMIT_SPEEDUP_FLOOR, f"changelog commit only {vs_full:.1f}x faster than a full snapshot"
    assert vs_incremental >= COMMIT_SPEEDUP_INCREMENTAL_FLOOR, (
        f"changelog commit slower than an incremental snapshot ({vs_incremental:.2f}x)")


def _replay_workload(kind: str) -> list[tuple[str, dict]]:
    if kind == "sequential-inserts":
        return [(_key(i), {"count": i, "sum": i * 3}) for i in range(REPLAY_RECORDS)]
    rng = random.Random(7)
    keys = rng.sample(range(REPLAY_RECORDS * 10), REPLAY_RECORDS)
    return [(_key(k), {"count": rng.randint(0, 10**6), "sum": rng.randint(0, 10**9)}) for k in keys]


def _raw_ingest(directory: Path, pairs: list[tuple[bytes, bytes]], chunk: int | None) -> tuple[float, float]:
    """(wall, thread CPU) seconds to put ``pairs`` into WriteBatches of ``chunk`` and write them."""
    db = rocksdict.Rdict(str(directory), shared_memory().db_options())
    write_options = rocksdict.WriteOptions()
    write_options.disable_wal = True
    step = chunk or len(pairs)
    chunks = [pairs] if step >= len(pairs) else [pairs[i:i + step] for i in range(0, len(pairs), step)]
    try:
        start, cpu = time.perf_counter(), time.thread_time()
        for part in chunks:
            batch = rocksdict.WriteBatch(raw_mode=True)
            put = batch.put
            for key, value in part:
                put(key, value)
            db.write(batch, write_options)
        return time.perf_counter() - start, time.thread_time() - cpu
    finally:
        db.close()


@pytest.mark.parametrize("workload", ["sequential-inserts", "random-updates"])
def test_replay_throughput_vs_raw_writebatch(benchmark, capsys, tmp_path: Path, workload: str):
    storage = DurableStorage()
    writer = RocksDBStateStore(storage, "bench", 1, "changelog", 10**6, local_root=tmp_path / "w")
    records = _replay_workload(workload)
    for key, value in records:
        writer.put(key, value)
    writer.commit("r1")
    writer.close()
    # The raw side gets the records already prepared, in the changelog's order.
    pairs = [(key.encode(), encode_value(value)) for key, value in records]
    expected = dict(records)

    raw_times: list[tuple[float, float]] = []   # (wall, thread CPU) seconds
    load_times: list[tuple[float, float]] = []
    readers: list[RocksDBStateStore] = []
    rounds = iter(range(10**6))

    def setup():
        r = next(rounds)
        if readers:
            readers.pop().close()  # its memtable would weigh on the shared write buffer budget
        one = _raw_ingest(tmp_path / f"raw{r}-one", pairs, None)
        chunked = _raw_ingest(tmp_path / f"raw{r}-chunked", pairs, RAW_CHUNK_RECORDS)
        raw_times.append((min(one[0], chunked[0]), min(one[1], chunked[1])))
        reader = RocksDBStateStore(storage, "bench", 1, "changelog", 10**6, local_root=tmp_path / f"r{r}")
        readers.append(reader)
        return (reader,), {}

    def load(reader: RocksDBStateStore) -> None:
        start, cpu = time.perf_counter(), time.thread_time()
        report = reader.load(1, "r1")
        load_times.append((time.perf_counter() - start, time.thread_time() - cpu))
        assert report.records_replayed == REPLAY_RECORDS

    benchmark.pedantic(load, setup=setup, rounds=REPLAY_ROUNDS)
    probe = random.Random(3).sample(sorted(expected), 50)
    assert [readers[-1].get(k) for k in probe] == [expected[k] for k in probe]
    for reader in readers:
        reader.close()

    raw_wall, raw_cpu = (min(t[i] for t in raw_times) for i in (0, 1))
    load_wall, load_cpu = (min(t[i] for t in load_times) for i in (0, 1))
    raw_rate, replay_rate = REPLAY_RECORDS / raw_wall, REPLAY_RECORDS / load_wall
    fraction = statistics.median(raw[0] / load[0] for raw, load in zip(raw_times, load_times))
    best_fraction = replay_rate / raw_rate
    cpu_fraction = raw_cpu / load_cpu  # both run in the calling thread: insensitive to other processes
    _report(benchmark, capsys, [
        f"{workload}: replay at {fraction:.0%} of raw ingest (median of per-round ratios); best rounds: "
        f"raw {raw_rate:,.0f} rec/s, replay (load) {replay_rate:,.0f} rec/s = {best_fraction:.0%}; "
        f"thread CPU time {cpu_fraction:.0%}",
    ], raw_records_per_s=raw_rate, replay_records_per_s=replay_rate, fraction_of_raw=fraction,
        fraction_of_raw_best_rounds=best_fraction, fraction_of_raw_cpu=cpu_fraction)
    if fraction < REPLAY_FRACTION_TARGET:
        warnings.warn(f"{workload}: replay at {fraction:.0%} of raw ingest, "
                      f"below the {REPLAY_FRACTION_TARGET:.0%} target")
    assert fraction >= REPLAY_FRACTION_FLOOR, f"{workload}: replay at {fraction:.0%} of raw ingest"


def test_memory_32_stores_within_bound(benchmark, capsys, tmp_path: Path):
    budget = MemoryBudget(total_bytes=64 << 20, write_buffer_fraction=0.5, per_db_write_buffer_bytes=1 << 20)
    stores = [RocksDBStateStore(DurableStorage(), "bench", p, "changelog", 5, local_root=tmp_path / "m",
                                memory=budget) for p in range(32)]
    peak = [0]
    payload = "v" * 300

    def round_of_writes() -> None:
        for p, store in enumerate(stores):
            for i in range(2000):
                store.put(f"{p}-{i:05d}", payload)
            store.commit(f"x{store.version}")
            peak[0] = max(peak[0], memory_usage().total_bytes)

    benchmark.pedantic(round_of_writes, rounds=3)
    _report(benchmark, capsys, [f"32 stores: peak gauge {peak[0] / 2**20:.1f} MiB of "
                                f"{budget.total_bytes / 2**20:.0f} MiB"],
            peak_bytes=peak[0], bound_bytes=budget.total_bytes)
    for store in stores:
        store.close()
    assert 0 < peak[0] <= budget.total_bytes
