"""``--storage-profile`` from the command line and the experiment runner to the backends (no Spark)."""

from __future__ import annotations

import json

import pytest

from experiments.cli import build_parser
from experiments.experiment import Experiment, ExperimentError, Point, RunContext
from experiments.measure import point_options
from experiments.registry import get_experiment
from experiments.results import default_out_dir
from experiments.sweep import validate_context, with_storage_profile
from reference.protocol.backend import RunOptions
from reference.language.scenario import Scenario
from sim.backend import SimBackend
from spark_impl.engine.speed import running_count


def _point(backend: str = "spark") -> Point:
    scenario = json.loads(running_count("p", 100, 1, {}, stateful=False).to_json())
    return Point("offset-management", "latency", "baseline", {"rate": 100}, 1, backend, scenario)


def test_the_runner_names_the_profile_in_every_point_and_hands_it_to_the_backend():
    points = with_storage_profile([_point(), _point()], "object_store")
    assert all(p.extra["storage_profile"] == "object_store" for p in points)
    assert point_options(points[0]).storage_profile == "object_store"
    assert point_options(_point()).storage_profile is None
    assert Point.from_dict(json.loads(json.dumps(points[0].to_dict()))).extra["storage_profile"] == "object_store"


def test_the_runner_refuses_an_unknown_profile_and_a_backend_without_checkpoint_latency():
    experiment = get_experiment("offset-management")
    with pytest.raises(ExperimentError, match="'tape'"):
        validate_context(experiment, RunContext(backend="spark", storage_profile="tape"))
    validate_context(experiment, RunContext(backend="spark", storage_profile="object_store"))
    # native Spark writes its checkpoint through the latency filesystem (spark_impl/native/checkpoint_fs.py)
    validate_context(experiment, RunContext(backend="spark-native", storage_profile="object_store"))

    class OnTheReference(Experiment):
        name, backends = "on-the-reference", ("reference",)

    with pytest.raises(ExperimentError, match="reference has no checkpoint storage latency"):
        validate_context(OnTheReference(), RunContext(backend="reference", storage_profile="object_store"))


def test_results_of_another_profile_go_to_their_own_folder():
    experiment = get_experiment("offset-management")
    plain = default_out_dir(experiment, RunContext(backend="spark", quick=True))
    assert default_out_dir(experiment, RunContext(backend="spark", quick=True, storage_profile="object_store")) \
        == plain.with_name(plain.name + "-object_store")


def test_run_diff_and_experiment_take_the_option():
    _, subs = build_parser()
    for command, argv in (("run", ["s.json"]), ("diff", ["s.json"]), ("experiment", ["offset-management"])):
        args = subs[command].parse_args(argv + ["--storage-profile", "hdfs"])
        assert args.storage_profile == "hdfs"


def test_the_sim_charges_the_named_profile_on_its_clock():
    scenario = Scenario.from_dict(json.loads(running_count("p", 200, 2, {}, stateful=False).to_json()))

    def wal_ms(name: str) -> float:
        outcome = SimBackend().run(scenario, RunOptions(storage_profile=name)).outcome
        return sum(p.duration_ms["walCommit"] for p in outcome.progress) / len(outcome.progress)
    assert wal_ms("object_store") > 10 * wal_ms("local_disk")
