"""Fixtures of the Spark engine tests: one local SparkSession for the whole run."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# jvm_harness.py lives beside the tests; property_tests/ (the shared strategies) at the root.
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(0, str(Path(__file__).parents[2]))


@pytest.fixture(scope="session")
def spark():
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from eventtime.spark import local_session

    session = local_session(master="local[2]", app_name="eventtime-tests", shuffle_partitions=2)
    yield session
    session.stop()
