"""The state store's cleanup (a purge of one store) at 100, 1,000 and 2,000 versions, beside raw SimPy.

Run with ``pytest tests/bench --benchmark-only``. A store of the changelog
provider commits one version per batch with no snapshot due (the worst case:
until a snapshot exists at or below the oldest retained version, cleanup's
walk goes down the whole lineage), and cleanup runs after every commit, as
the engine's purge does. At 100, 1,000 and 2,000 versions the benchmark times
the purges around that version, remembered (``reference.protocol.lineage_memo``,
what ``cleanup_store`` does) and walked afresh (a listing and every header,
what it did before), and prints both in microseconds and in raw SimPy
timeouts (``yardstick.py``, measured in the same run). Issue 28's target: a
run costs linear time in its length, so the remembered cost stays flat as
the versions grow while the walk afresh grows with them.
"""

from __future__ import annotations

import statistics
import time

from yardstick import simpy_raw_rate

from reference.protocol.state_store import StateStore, cleanup_store, lineage_base, store_files
from reference.protocol.storage import DurableStorage

OP, PARTITION, RETAIN = "0", 0, 100
AT_VERSIONS = (100, 1_000, 2_000)
TIMED = 20   # purges timed around each version


def test_cleanup_cost_at_100_1000_and_2000_versions(benchmark, capsys):
    raw = simpy_raw_rate()[0]
    store = StateStore(DurableStorage(), OP, PARTITION, "changelog", 10**6)
    remembered: dict[int, list[float]] = {n: [] for n in AT_VERSIONS}
    afresh: dict[int, float] = {}

    def commit_and_purge(version: int) -> float:
        store.put(f"k{version % 50}", version)
        store.commit(f"u{version}")
        start = time.perf_counter()
        cleanup_store(store.storage, OP, PARTITION, RETAIN, version, f"u{version}")
        return time.perf_counter() - start

    def run() -> None:
        for version in range(1, max(AT_VERSIONS) + TIMED // 2 + 1):
            took = commit_and_purge(version)
            for n in AT_VERSIONS:
                if abs(version - n) < TIMED // 2:
                    remembered[n].append(took)
            if version in AT_VERSIONS:
                start = time.perf_counter()
                files = store_files(store.storage, OP, PARTITION)
                lineage_base(store.storage, files, OP, PARTITION, version, f"u{version}", version - RETAIN + 1)
                afresh[version] = time.perf_counter() - start

    benchmark.pedantic(run, rounds=1, iterations=1)
    lines = [f"cleanup of one store, no snapshot yet, retaining {RETAIN}; SimPy raw {raw:,.0f} timeouts/s"]
    for n in AT_VERSIONS:
        median = statistics.median(remembered[n])
        lines.append(f"  {n:>5,} versions: {median * 1e6:8.1f} us a purge ({median * raw:6.1f} raw SimPy timeouts); "
                     f"walked afresh {afresh[n] * 1e6:9.1f} us ({afresh[n] * raw:8.1f} timeouts)")
        benchmark.extra_info[f"purge_us_at_{n}"] = median * 1e6
        benchmark.extra_info[f"purge_raw_timeouts_at_{n}"] = median * raw
        benchmark.extra_info[f"afresh_us_at_{n}"] = afresh[n] * 1e6
    benchmark.extra_info["simpy_raw_timeouts_per_s"] = raw
    with capsys.disabled():
        print("\n" + "\n".join(lines))
    # linear in the run's length: a purge at 2,000 versions costs about what one at 100 does (a wide margin
    # for a busy machine), while the walk afresh grows with the versions
    assert statistics.median(remembered[2_000]) < 5 * statistics.median(remembered[100])
