"""Checkpoint storage with a named profile's latency (``spark_impl/engine/storage_latency.py``).

The wrapper's sleeps are checked against draws computed here from the
profile's parameters and the documented draw (the key's uniform, the standard
library's normal quantile and exp); no test times anything. One Spark test runs a stateful scenario on the engine with the
object-store profile and judges it with every oracle.
"""

from __future__ import annotations

import json
import math
from statistics import NormalDist

import pytest

from reference.protocol.backend import RunOptions
from reference.language.catalogue import scenario_dict
from reference.judge.oracles import check_outcome, failures
from reference.language.scenario import Scenario
from reference.protocol.storage import DurableStorage
from reference.protocol.storage_profiles import STORAGE_PROFILES, StorageProfileError, unit_uniform
from spark_impl.engine.storage_latency import LatencyStorage, StorageLatency, storage_latency_for, with_latency


def _expected(profile_name: str, seed: int | str, stream: str, ops: list[tuple[str, int]]) -> list[float]:
    """Each operation's sleep in seconds, from the profile's parameters by hand: the n-th operation of a kind
    draws the uniform of key "<seed>/<stream>/<kind>/<n>" (its hash is checked against published vectors in
    tests/spark/test_native_checkpoint_fs.py), mapped through the standard library's normal quantile and exp; an
    atomic write is a create and a rename."""
    p = STORAGE_PROFILES[profile_name]
    sequence: dict[str, int] = {}

    def draw(kind: str, base_ms: float) -> float:
        n = sequence.get(kind, 0)
        sequence[kind] = n + 1
        u = unit_uniform(f"{seed}/{stream}/{kind}/{n}")
        return base_ms * math.exp(p.jitter_sigma * NormalDist().inv_cdf(u))

    def transfer(n: int) -> float:
        return n / (p.bandwidth_mb_per_s * 1e6) * 1000.0

    out = []
    for op, size in ops:
        if op == "write":
            ms = draw("create", p.small_write_ms + transfer(size)) + draw("rename", p.rename_ms)
        elif op == "read":
            ms = draw("read", p.read_ms + transfer(size))
        else:
            ms = draw(op, {"exists": p.read_ms, "rename": p.rename_ms, "list": p.list_ms, "delete": p.delete_ms}[op])
        out.append(ms / 1000.0)
    return out


def _script(storage: LatencyStorage) -> list[tuple[str, int]]:
    """A fixed sequence of operations, the way the engine does them; returns (operation, bytes) of each."""
    big = b"x" * 3_000_000     # a state file large enough that bandwidth shows
    storage.write("offsets/0", b'{"v":1}')
    storage.write("state/0/0/1_u.changelog", big)
    assert storage.read("state/0/0/1_u.changelog") == big
    assert storage.exists("offsets/0") and not storage.exists("commits/0")
    storage.rename("offsets/0", "offsets/1")
    assert storage.list("offsets/") == ["offsets/1"]
    storage.delete("offsets/1")
    return [("write", 7), ("write", len(big)), ("read", len(big)), ("exists", 0), ("exists", 0),
            ("rename", 0), ("list", 0), ("delete", 0)]


@pytest.mark.parametrize("profile", sorted(STORAGE_PROFILES))
def test_each_operation_sleeps_the_profiles_seeded_draw(profile):
    slept: list[float] = []
    storage = with_latency(DurableStorage(), StorageLatency(profile, 11), "driver", sleep=slept.append)
    assert isinstance(storage, LatencyStorage)
    ops = _script(storage)
    assert slept == pytest.approx(_expected(profile, 11, "driver", ops), rel=1e-8)
    report = storage.report()
    assert report["operations"]["write"]["count"] == 2 and report["operations"]["exists"]["count"] == 2
    assert report["total_ms"] == pytest.approx(sum(slept) * 1000.0, abs=0.01)


def test_the_sink_is_not_the_checkpoint_and_pays_nothing():
    # The engine keeps the sink's files under sink/ only so the oracles can judge them; the published
    # benchmark's stat sink writes nothing. A checkpoint file next to them still pays its draw, the first
    # of the stream: the sink's operations draw nothing from it.
    slept: list[float] = []
    storage = with_latency(DurableStorage(), StorageLatency("object_store", 3), "task", sleep=slept.append)
    storage.write("sink/0/part-0-u.json", b"[]")
    storage.write("sink/_manifest/0", b"{}")
    assert storage.read("sink/0/part-0-u.json") == b"[]" and storage.exists("sink/0/part-0-u.json")
    assert storage.list("sink/0") == ["sink/0/part-0-u.json"]
    storage.rename("sink/0/part-0-u.json", "sink/0/part-0-v.json")
    storage.delete("sink/0/part-0-v.json")
    assert slept == []
    storage.write("sinks-are-not-this/0", b"{}")      # only the sink folder itself is free
    assert slept == pytest.approx(_expected("object_store", 3, "task", [("write", 2)]), rel=1e-8)


def test_the_same_seed_gives_the_same_sleeps_and_another_seed_other_ones():
    def sleeps(seed: int, stream: str = "driver") -> list[float]:
        slept: list[float] = []
        _script(with_latency(DurableStorage(), StorageLatency("object_store", seed), stream,   # type: ignore[arg-type]
                             sleep=slept.append))
        return slept
    assert sleeps(3) == sleeps(3)
    assert sleeps(3) != sleeps(4)
    assert sleeps(3, "executor") != sleeps(3, "driver")


def test_bandwidth_makes_a_large_write_cost_more_than_a_small_one():
    p = STORAGE_PROFILES["object_store"]
    slept: list[float] = []
    storage = with_latency(DurableStorage(), StorageLatency("object_store", 1), "driver", sleep=slept.append)
    storage.write("a", b"x" * 50_000_000)
    # without jitter the transfer alone is 500 ms; the log-normal factor keeps it well above a small write
    assert slept[0] * 1000.0 > p.small_write_ms + p.rename_ms
    assert slept[0] * 1000.0 > 0.2 * p.transfer_ms(50_000_000)


def test_the_wrapper_is_transparent_to_the_bytes_and_to_errors():
    inner = DurableStorage()
    storage = with_latency(inner, StorageLatency("hdfs", 5), "driver", sleep=lambda _s: None)
    storage.write("commits/0", b"abc")
    assert inner.files == {"commits/0": b"abc"}
    from reference.protocol.storage import CheckpointFormatError, StorageError
    with pytest.raises(StorageError):
        storage.write("commits/0", b"again")          # atomic create refuses, as the inner storage does
    with pytest.raises(CheckpointFormatError):
        storage.read("commits/9")
    assert storage.report()["operations"]["write"]["count"] == 1   # a failed operation sleeps nothing


def test_without_a_profile_the_storage_is_returned_unwrapped():
    inner = DurableStorage()
    assert with_latency(inner, None, "driver") is inner
    assert storage_latency_for(inner, "/nowhere", None) is inner


def test_an_executor_worker_shares_one_seeded_storage_per_checkpoint():
    latency = StorageLatency("local_disk", 2)
    first = storage_latency_for(DurableStorage(), "/ckpt-a", latency)
    assert storage_latency_for(DurableStorage(), "/ckpt-a", latency) is first
    assert storage_latency_for(DurableStorage(), "/ckpt-b", latency) is not first


def test_an_unknown_profile_is_refused_naming_it_and_the_known_ones():
    with pytest.raises(StorageProfileError) as err:
        StorageLatency("glacier", 1)
    assert "'glacier'" in str(err.value)
    for name in STORAGE_PROFILES:
        assert name in str(err.value)


def test_the_engine_backend_refuses_an_unknown_profile_before_starting_spark():
    from spark_impl.engine.backend import SparkEngineBackend
    scenario = Scenario.from_dict(scenario_dict("aggregate", "sync", batches=2))
    with pytest.raises(StorageProfileError, match="'nvme-of-the-future'"):
        SparkEngineBackend().run(scenario, RunOptions(storage_profile="nvme-of-the-future"))


def test_the_task_spec_carries_the_profile_to_the_executors():
    import pickle

    from spark_impl.engine.task_spec import TaskSpec
    spec = TaskSpec(None, "/ckpt", "/coord", "/local", "e", 0, 0, (), (), (),
                    storage_latency=StorageLatency("object_store", 7))
    again = pickle.loads(pickle.dumps(spec))
    assert again.storage_latency == StorageLatency("object_store", 7)


@pytest.mark.spark
def test_a_stateful_run_on_the_object_store_profile_passes_every_oracle(spark, tmp_path):
    from spark_impl.engine.backend import SparkEngineBackend
    raw = scenario_dict("aggregate", "async_purge", batches=3)
    raw["name"] = "aggregate-object-store"
    scenario = Scenario.from_dict(json.loads(json.dumps(raw)))
    result = SparkEngineBackend().run(scenario, RunOptions(workdir=str(tmp_path), pace=False,
                                                           storage_profile="object_store"))
    outcome = result.outcome
    assert outcome.error is None, outcome.error
    bad = failures(check_outcome(scenario, outcome, result.checkpoint))
    assert not bad, "\n".join(v.describe() for v in bad)
    storage = outcome.details["spark"]["storage"]
    assert storage["profile"] == "object_store" and storage["seed"] == scenario.seed
    driver_ops = storage["driver"]["operations"]
    assert driver_ops["write"]["count"] >= 2 * len(outcome.batches)   # offsets/b and commits/b at least
    assert storage["driver"]["total_ms"] > 0 and storage["tasks_ms"] > 0


def test_a_driver_process_is_told_the_profile_and_seeds_it_with_the_scenario_seed(tmp_path):
    from spark_impl.engine.driver_process import _child_command
    cmd = _child_command(tmp_path / "scenario.json", tmp_path, 0, None, True, 1, None,
                         StorageLatency("hdfs", 3))
    assert cmd[cmd.index("--storage-profile") + 1] == "hdfs"
    assert "--storage-profile" not in _child_command(tmp_path / "scenario.json", tmp_path, 0, None, True, 1, None)
