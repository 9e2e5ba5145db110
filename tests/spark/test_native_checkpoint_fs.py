"""Native Spark's checkpoint filesystem with a storage profile's latency, and the one draw function behind it.

- The draw: its hash against published FNV-1a and SplitMix64 vectors, its exp/log/normal quantile against the
  standard library, its factor's distribution; and one test vector computed by the Java twin
  (``LatencyDraws.java``, in its own JVM), by ``reference.protocol.storage_profiles.LatencyDraws``, by the Spark
  engine's checkpoint storage and by the simulator's storage service, which must all agree to the bit.
- The build: javac against pyspark's jars from the sources, loud when javac or a jar is missing.
- Spark: a query's checkpoint goes through the filesystem (every batch's offsets/<b> is created and renamed
  there, and its walCommit holds those sleeps); the stat sink's per-record latency against the rate source's
  deterministic timestamps and Spark's progress events.
"""

from __future__ import annotations

import json
import math
import statistics
import time
import zipfile
from statistics import NormalDist

import pytest

from reference.protocol.storage import DurableStorage
from reference.protocol.storage_profiles import (
    STORAGE_PROFILES,
    LatencyDraws,
    StorageProfile,
    StorageProfileError,
    exact_exp,
    exact_log,
    fnv1a64,
    jitter_factor,
    normal_quantile,
    splitmix64,
    unit_uniform,
)
from sim.storage_service import StorageService
from spark_impl.engine.storage_latency import StorageLatency, with_latency
from spark_impl.native import checkpoint_fs

# every kind, small and large transfers (3 MB is 30 ms of bandwidth on the object store), interleaved
VECTOR = [("create", 7), ("rename", 0), ("exists", 0), ("list", 0), ("delete", 0), ("read", 3_000_000),
          ("create", 3_000_000), ("rename", 0), ("exists", 0), ("read", 120), ("list", 0), ("delete", 0)] * 20


# ------------------------------------------------------------------ the draw function


def test_the_uniform_hashes_by_the_published_fnv1a_and_splitmix64_vectors():
    assert fnv1a64(b"") == 0xCBF29CE484222325
    assert fnv1a64(b"a") == 0xAF63DC4C8601EC8C
    assert fnv1a64(b"foobar") == 0x85944171F73967E8
    # SplitMix64 seeded with 0: its first three outputs
    assert splitmix64(0) == 0xE220A8397B1DCDAF
    assert splitmix64(0x9E3779B97F4A7C15) == 0x6E789E6AA1B965F4
    assert splitmix64((2 * 0x9E3779B97F4A7C15) % 2 ** 64) == 0x06C45D188009454F
    values = [unit_uniform(f"7/driver/create/{n}") for n in range(2000)]
    assert all(0.0 < u < 1.0 for u in values) and len(set(values)) == len(values)


@pytest.mark.parametrize("x", [1e-16, 1e-3, 0.02425, 0.3, 0.5, 0.7071, 0.99, 1.0, 1.5, 2.0, 1e3, 1e10])
def test_the_logarithm_is_the_standard_librarys_to_an_ulp_or_two(x):
    assert exact_log(x) == pytest.approx(math.log(x), rel=4e-16, abs=4e-16)


@pytest.mark.parametrize("x", [-20.0, -8.2, -1.0, -1e-9, 0.0, 0.3466, 0.5, 1.0, 2.7, 8.2, 20.0])
def test_the_exponential_is_the_standard_librarys_to_an_ulp_or_two(x):
    assert exact_exp(x) == pytest.approx(math.exp(x), rel=4e-15)


@pytest.mark.parametrize("u", [1e-15, 1e-6, 0.0242, 0.0243, 0.1, 0.5, 0.9, 0.9757, 0.99999, 1 - 1e-15])
def test_the_normal_quantile_is_acklams_within_its_published_error(u):
    assert normal_quantile(u) == pytest.approx(NormalDist().inv_cdf(u), rel=1.2e-9, abs=1e-9)


def test_the_jitter_is_log_normal_with_median_one_and_the_profiles_shape():
    sigma = STORAGE_PROFILES["object_store"].jitter_sigma
    logs = [math.log(jitter_factor(sigma, f"1/executor/list/{n}")) for n in range(20_000)]
    assert statistics.median(logs) == pytest.approx(0.0, abs=0.02 * sigma)
    assert statistics.pstdev(logs) == pytest.approx(sigma, rel=0.03)
    assert jitter_factor(0.0, "anything") == 1.0


def test_a_profile_with_an_absurd_jitter_is_refused_naming_it():
    with pytest.raises(StorageProfileError, match="jitter_sigma"):
        StorageProfile(small_write_ms=1, rename_ms=1, list_ms=1, delete_ms=1, read_ms=1, bandwidth_mb_per_s=1,
                       jitter_sigma=50)


# ------------------------------------------------------------------ the build


@pytest.fixture(scope="module")
def fresh_jar(tmp_path_factory):
    """The jar built from the sources into an empty folder, as on a clean clone."""
    return checkpoint_fs.build(tmp_path_factory.mktemp("latency-fs") / checkpoint_fs.JAR_NAME)


@pytest.mark.spark
def test_the_build_compiles_every_source_into_the_jar_and_skips_an_up_to_date_one(fresh_jar):
    with zipfile.ZipFile(fresh_jar) as zf:
        names = set(zf.namelist())
    for cls in (checkpoint_fs.FS_CLASS, checkpoint_fs.DRAWS_CLASS, checkpoint_fs.STAT_SINK_CLASS):
        assert cls.replace(".", "/") + ".class" in names
    assert not any(name.endswith(".java") for name in names)
    before = fresh_jar.stat().st_mtime_ns
    assert checkpoint_fs.build(fresh_jar) == fresh_jar and fresh_jar.stat().st_mtime_ns == before


@pytest.mark.spark
def test_without_javac_the_build_fails_naming_it(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(checkpoint_fs.shutil, "which", lambda _name: None)
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(checkpoint_fs.CheckpointFsUnavailable, match="javac not found"):
        checkpoint_fs.build(tmp_path / "fs.jar")
    assert checkpoint_fs.main(["build", "--out", str(tmp_path / "fs.jar")]) == checkpoint_fs.EXIT_UNAVAILABLE
    assert "javac" in capsys.readouterr().err
    assert not (tmp_path / "fs.jar").exists()


def test_without_pysparks_hadoop_jar_the_build_fails_naming_it(monkeypatch, tmp_path):
    monkeypatch.setattr(checkpoint_fs, "pyspark_jars", lambda: tmp_path)
    with pytest.raises(checkpoint_fs.CheckpointFsUnavailable, match=r"hadoop-client-api-\*\.jar"):
        checkpoint_fs.build(tmp_path / "fs.jar")


# ------------------------------------------------------------------ one draw, four places


@pytest.mark.spark
@pytest.mark.parametrize("profile_name", sorted(STORAGE_PROFILES))
def test_java_python_the_engine_and_the_simulator_draw_the_same_latencies(fresh_jar, profile_name):
    profile = STORAGE_PROFILES[profile_name]
    java = checkpoint_fs.java_draws(fresh_jar, "11/driver", profile, VECTOR)
    draws = LatencyDraws(profile, "11/driver")
    assert [draws.draw(kind, size) for kind, size in VECTOR] == java   # to the bit

    # the engine's checkpoint storage: an atomic write is a create and a rename, each its own draw
    slept: list[float] = []
    storage = with_latency(DurableStorage(), StorageLatency(profile_name, 11), "driver", sleep=slept.append)
    storage.write("offsets/0", b"x" * 7)
    storage.exists("offsets/0")
    storage.list("offsets")
    storage.delete("offsets/0")
    assert slept == [(java[0] + java[1]) / 1000.0, java[2] / 1000.0, java[3] / 1000.0, java[4] / 1000.0]

    # the simulator's storage service on the same seed and stream
    service = StorageService(profile, 11)
    assert service.atomic_write_ms(7) == java[0] + java[1]
    assert service.list_ms() == java[3] and service.delete_ms(1) == java[4]


@pytest.mark.spark
def test_the_executor_stream_is_another_stream(fresh_jar):
    profile = STORAGE_PROFILES["object_store"]
    driver = checkpoint_fs.java_draws(fresh_jar, "11/driver", profile, VECTOR[:6])
    executor = checkpoint_fs.java_draws(fresh_jar, "11/executor", profile, VECTOR[:6])
    assert driver != executor
    service = StorageService(profile, 11)
    assert service.read_ms(3_000_000) == executor[5]    # a state load reads on the executor stream


def test_an_unknown_profile_is_refused_before_spark_starts():
    from reference.language.catalogue import scenario_dict
    from reference.language.scenario import Scenario
    from spark_impl.native import run_native
    with pytest.raises(StorageProfileError, match="'glacier'"):
        run_native(Scenario.from_dict(scenario_dict("aggregate", "sync", batches=2)), storage_profile="glacier")


# ------------------------------------------------------------------ Spark through it


@pytest.mark.spark
def test_a_native_query_writes_its_checkpoint_through_the_filesystem(spark, tmp_path):
    """A running count on RocksDB with changelog checkpointing, three batches, on the object-store profile:
    every oracle holds; each offset entry and commit entry was created and renamed on the driver's stream,
    the state stores' files on the executor's; and each batch's walCommit holds the sleeps of its offset
    entry's create and rename (Spark times offsets/<b>'s write inside walCommit: MicroBatchExecution)."""
    from reference.language.catalogue import scenario_dict
    from reference.judge.oracles import check_outcome, failures
    from reference.language.scenario import Scenario
    from spark_impl.native import run_native
    scenario = Scenario.from_dict(scenario_dict("aggregate", "sync", batches=3))
    outcome = run_native(scenario, workdir=str(tmp_path), storage_profile="object_store").outcome
    assert outcome.error is None, outcome.error
    assert not failures(check_outcome(scenario, outcome, None))
    storage = outcome.details["native"]["storage"]
    assert storage["profile"] == "object_store" and storage["seed"] == scenario.seed
    ops = storage["operations"]
    batches = len(outcome.batches)
    assert ops["driver/offsets/create"]["count"] == batches == ops["driver/commits/create"]["count"]
    assert ops["driver/offsets/rename"]["count"] == batches
    assert ops["executor/state/create"]["count"] >= batches and ops["executor/state/create"]["bytes"] > 0
    assert not any(key.startswith("executor/") and "/state/" not in key for key in ops)
    assert storage["async_log_write"] == {}      # synchronous progress: every log write on the query's thread
    wal_ms = sum(float(p.duration_ms["walCommit"]) for p in outcome.progress)
    offset_write_ms = ops["driver/offsets/create"]["ms"] + ops["driver/offsets/rename"]["ms"]
    assert wal_ms >= offset_write_ms - len(outcome.progress)     # durationMs are whole milliseconds
    assert storage["checkpoint_bytes"]["state"] > 0


@pytest.mark.spark
def test_the_stat_sinks_latency_is_the_rate_sources_timestamps_to_the_batch(spark, tmp_path):
    """Spark's rate source at 200 rows/s gives row v the timestamp creation + 5 v ms (RateStreamMicroBatchStream:
    the rows of seconds [s, e) are spread evenly over them; creation is in sources/0/0). Into the stat sink,
    each row's processing time must fall inside its batch as the progress events time it (from the trigger's
    start to the end of triggerExecution), each batch must hold exactly the values its progress event's
    offsets name, and the sink's latency (processing minus that timestamp) must lie within the bounds the
    progress events give."""
    from pyspark.sql import functions as F

    from spark_impl.native.query_run import progress_event
    from spark_impl.native.stat_sink import read_stat_sink, start_with_stat_sink
    rate = 200
    stat = tmp_path / "stat"
    stat.mkdir()
    df = (spark.readStream.format("rate").option("rowsPerSecond", rate).option("numPartitions", 2).load()
          .select("value", F.unix_millis("timestamp").alias("ts_ms")))
    query = start_with_stat_sink(df, str(stat), ("value", "ts_ms"), output_mode="append",
                                 options={"checkpointLocation": str(tmp_path / "checkpoint")}, trigger=None)
    try:
        deadline = time.monotonic() + 60
        while len([p for p in query.recentProgress if p.numInputRows]) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)
    finally:
        query.stop()
    raws = [json.loads(p.json) for p in query.recentProgress if p.numInputRows]
    assert len(raws) >= 4, "the rate source produced fewer than four batches in a minute"
    with open(tmp_path / "checkpoint" / "sources" / "0" / "0") as fh:
        creation_ms = int(fh.read().splitlines()[1])
    seen = read_stat_sink(str(stat))
    by_epoch: dict[int, list] = {}
    for row in seen:
        by_epoch.setdefault(row.epoch, []).append(row)
    lows, highs, latencies = [], [], []
    for raw in raws:
        event = progress_event(raw)
        source = raw["sources"][0]
        start_s, end_s = int(source["startOffset"] or 0), int(source["endOffset"])
        rows = by_epoch.get(event.batch_id, [])
        assert sorted(r.ids[0] for r in rows) == list(range(start_s * rate, end_s * rate))
        assert event.num_input_rows == len(rows)
        begin_ms = float(event.timestamp_ms)
        end_ms = begin_ms + float(event.duration_ms["triggerExecution"])
        for r in rows:
            value, ts_ms = r.ids
            created_ms = creation_ms + round(value * 1000 / rate)
            assert ts_ms == created_ms                      # Spark's own timestamp is the deterministic one
            seen_ms = r.seen_s * 1000.0
            assert begin_ms - 2 <= seen_ms <= end_ms + 2     # progress times are whole milliseconds
            latencies.append(seen_ms - created_ms)
            lows.append(begin_ms - created_ms)
            highs.append(end_ms - created_ms)
    assert statistics.median(lows) - 2 <= statistics.median(latencies) <= statistics.median(highs) + 2
    # a row waits for the end of its second (the source's offsets are whole seconds), so half a second on average
    assert statistics.median(latencies) >= 400
