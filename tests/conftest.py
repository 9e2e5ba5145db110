"""Shared test configuration: Hypothesis profiles and scenario builders.

Profiles: ``ci`` (the default: derandomized, so CI is reproducible) and
``thorough`` (many more examples, random). Choose with HYPOTHESIS_PROFILE.
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings

settings.register_profile("ci", derandomize=True, deadline=None, max_examples=60,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("thorough", derandomize=False, deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


def pytest_report_header(config) -> list[str]:
    """Say loudly whether the JVM that PySpark needs is here: Spark tests fail without it."""
    import shutil
    import subprocess
    java = shutil.which("java")
    if java is None:
        return ["JAVA: NOT FOUND. PySpark needs Java 17; every test marked 'spark' will fail."]
    version = subprocess.run([java, "-version"], capture_output=True, text=True).stderr.splitlines()
    return [f"java: {version[0] if version else java}"]


import pytest  # noqa: E402

# the tier guard's hooks (a test that needs pyspark, a JVM or typst carries its marker, in its tier's folder)
from tier_guard import (pytest_make_collect_report, pytest_runtest_call,  # noqa: E402,F401
                        pytest_runtest_setup, pytest_runtest_teardown)


@pytest.fixture
def spark():
    """The process's live SparkSession (local[2]); fails loudly, never skips, without Java. Asked for anew by each
    test: a native run whose fault halts the driver's JVM starts a new one (``session.forget_dead_jvm``), and a
    session object kept from before would talk to the dead JVM."""
    from spark_impl.session import session
    return session()


def pytest_collection_modifyitems(session, config, items) -> None:
    """The hostile-input suite (``test_cli_hostile*.py``, in each tier that has one) runs first: a data-losing or
    hanging command line is the first thing ``make test`` reports. Every other test keeps its order."""
    items.sort(key=lambda item: not item.path.name.startswith("test_cli_hostile"))
