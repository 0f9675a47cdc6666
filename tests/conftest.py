"""Shared by every test directory: the helpers' path and one local SparkSession for the run."""

import os
import sys
from pathlib import Path

import pytest

# Test helpers (transcripts.py, sentry_receiver.py, streams.py) live beside the tests; the
# shared Hypothesis strategies in property_tests/ at the root (tests/flink uses them too).
sys.path.insert(0, str(Path(__file__).parent))
sys.path.insert(1, str(Path(__file__).parents[1]))

# Every Spark JVM of the run (this process's, and those of the demo and script subprocesses,
# which inherit the environment) compiles with C1 only: tests run many short queries, and C2
# compiling freshly generated code took over half the JVM's CPU (measured on one transcript
# replayed 4 times in one session: 37.6 + 13.4 + 11.3 + 11.0 CPU-s with C2, 15.7 + 6.9 + 5.7 +
# 6.2 with C1 only). Code generation and results are the same; only the JIT tier differs.
# The Flink harness starts its JVM the same way (tests/flink/flink_harness.py).
C1_ONLY = "-XX:TieredStopAtLevel=1"
# ...and maps the classes a Spark driver loads from the class-data-sharing archive that `make
# install` records (scripts/build-class-archive.py): a cold session and its first query in 4.1
# s instead of 8.9 s, for the run's ~15 JVM starts (sessions, demo and script subprocesses).
# A JVM that cannot use it (another class path, e.g. the local-cluster executors) ignores it.
CLASS_ARCHIVE = Path(sys.prefix) / "spark-classes.jsa"
_JVM_OPTIONS = [C1_ONLY]
if CLASS_ARCHIVE.exists():
    _JVM_OPTIONS.append(f"-XX:SharedArchiveFile={CLASS_ARCHIVE} -Xlog:cds=off -Xlog:cds+dynamic=off")
for _option in _JVM_OPTIONS:
    if _option not in os.environ.get("SPARK_SUBMIT_OPTS", ""):
        os.environ["SPARK_SUBMIT_OPTS"] = f"{os.environ.get('SPARK_SUBMIT_OPTS', '')} {_option}".strip()


@pytest.fixture(scope="session")
def spark():
    """The one SparkSession of the test process: a test that needs Spark takes this one (and
    does not stop it; ``getOrCreate`` elsewhere would return it and stopping that would stop
    it for every later test)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import pyspark

    from eventtime.spark import local_session
    from eventtime.spark.connectors import CONNECTORS, connector_jars

    # Where the connectors are resolved (the pyspark 4.2 environment), the one session of the
    # process has them: Kafka's and Delta's tests and the others then share it.
    minor = ".".join(pyspark.__version__.split(".")[:2])
    have = {name: minor in by_minor and connector_jars(name, pyspark.__version__) is not None
            for name, by_minor in CONNECTORS.items()}
    from eventtime.spark.engine import engine_jar
    from jvm import engine_test_jar

    session = local_session(master="local[2]", app_name="eventtime-tests", shuffle_partitions=2,
                            kafka=have["kafka"], delta=have["delta"], extra_jars=[engine_test_jar(engine_jar())])
    yield session
    session.stop()


# The longest files first, longest to shortest (measured in a full run on 2026-11-27, seconds of
# a worker: 159, 126, 55, 52, 38, 40, 33, 32, 32, 30, 24, 21, 20), then the rest in collection order:
# xdist hands out whole files in this order (`make test` passes --no-loadscope-reorder, else
# xdist would order them by their number of tests), so no long file starts last and becomes the
# run's tail. The Flink and Spark Connect files run in `make check` only (marked component).
LONGEST_FIRST = (
    "tests/spark/test_crash_restart.py",
    "tests/spark/test_spark_engine.py",
    "tests/spark/test_map_side_watermark.py",
    "tests/spark/test_postgres_crash.py",
    "tests/spark/test_typed_columns.py",
    "tests/spark/test_sql_aggregate.py",
    "tests/spark/test_collect.py",
    "tests/flink/test_flink_harness.py",
    "tests/spark/test_quiet_runs.py",
    "tests/spark/test_connect.py",
    "tests/spark/test_tz_boundaries.py",
    "property_tests/test_model_properties.py",
    "tests/spark/test_end_of_input.py",
)


def pytest_collection_modifyitems(config, items):
    def rank(item) -> int:
        return next((i for i, path in enumerate(LONGEST_FIRST) if item.nodeid.startswith(path)), len(LONGEST_FIRST))

    items.sort(key=rank)  # stable: the order inside each group is kept
