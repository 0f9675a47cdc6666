"""Shared by every test directory: the helpers' path and one local SparkSession for the run."""

import os
import sys
from pathlib import Path

import pytest

# Test helpers (transcripts.py, sentry_receiver.py) live beside the tests.
sys.path.insert(0, str(Path(__file__).parent))


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test process: a test that needs Spark takes this one (and
    does not stop it; ``getOrCreate`` elsewhere would return it and stopping that would stop
    it for every later test)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from eventtime.spark import local_session

    session = local_session(master="local[2]", app_name="eventtime-tests", shuffle_partitions=2)
    yield session
    session.stop()
