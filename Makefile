# Two commands on a fresh machine: `make demo` runs the main job, `make check` runs every test
# (what CI runs); `make test` is the shorter suite a developer runs between changes.
# Both install first, from this repository's files only:
#   .venv            pyspark 4.3 (constraints/spark-4.3.txt): the demo and the full suite
#   .venv-spark4.2   pyspark 4.2 (constraints/spark-4.2.txt): Kafka and Delta on Spark, whose
#                    connectors Maven Central serves up to Spark 4.2 (eventtime/spark/connectors.py)
# Jars come from Maven Central through mvn (cached in ~/.m2), copied into each environment's
# share/eventtime/jars by `python -m eventtime.spark.connectors`.
VENV ?= .venv
VENV42 ?= .venv-spark4.2
PY := $(VENV)/bin/python
PY42 := $(VENV42)/bin/python
PYTHON ?= python3
DEMO_DIR ?= demo-output
BENCH_ARGS ?= --rows 500000
JAVA_SOURCES := $(shell find eventtime/spark/engine/src eventtime/spark/engine/spark-* -name '*.java') eventtime/contract.json

.PHONY: demo demo-kafka test check test-fast test-spark test-integration install jars wheel bench bench-targets clean

$(VENV)/.installed: pyproject.toml constraints/spark-4.3.txt $(JAVA_SOURCES)
	bash scripts/ensure-java.sh
	bash scripts/ensure-postgres.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip -c constraints/spark-4.3.txt setuptools wheel
	$(PY) -m pip install --quiet -c constraints/spark-4.3.txt -e ".[test]"
	# the engine is Java: compiled here with javac against pyspark's own jars
	$(PY) -c 'from eventtime.spark.engine import engine_jar; print(engine_jar(verbose=True))'
	# Apache Kafka's broker jars (for the Kafka demo and tests), from Maven Central
	$(PY) -m eventtime.spark.connectors broker
	# the classes a Spark driver loads, recorded once so that every later JVM starts faster
	$(PY) scripts/build-class-archive.py $(VENV)/spark-classes.jsa
	touch $@

$(VENV42)/.installed: pyproject.toml constraints/spark-4.2.txt $(JAVA_SOURCES)
	bash scripts/ensure-java.sh
	$(PYTHON) -m venv $(VENV42)
	$(PY42) -m pip install --quiet --upgrade pip -c constraints/spark-4.2.txt setuptools wheel
	$(PY42) -m pip install --quiet -c constraints/spark-4.2.txt -e ".[test,delta-spark]"
	$(PY42) -c 'from eventtime.spark.engine import engine_jar; print(engine_jar(verbose=True))'
	# Spark's Kafka source, Delta Lake and Kafka's broker, from Maven Central
	$(PY42) -m eventtime.spark.connectors kafka delta broker
	$(PY42) scripts/build-class-archive.py $(VENV42)/spark-classes.jsa
	touch $@

install: $(VENV)/.installed $(VENV42)/.installed

jars: install

# SPARK_SUBMIT_OPTS: start the driver JVM from the class archive made at install (see
# scripts/build-class-archive.py; ignored when it cannot be used)
CLASS_ARCHIVE_OPTS := -XX:SharedArchiveFile=$(abspath $(VENV))/spark-classes.jsa -Xlog:cds=off -Xlog:cds+dynamic=off

demo: $(VENV)/.installed
	SPARK_SUBMIT_OPTS="$(SPARK_SUBMIT_OPTS) $(CLASS_ARCHIVE_OPTS)" $(VENV)/bin/eventtime demo --output $(DEMO_DIR)

# The same demo read from a local Kafka broker it starts (a 4-partition topic): pyspark 4.2 only
demo-kafka: $(VENV42)/.installed
	$(VENV42)/bin/eventtime demo --source kafka --output demo-kafka

# Not part of the two set-up commands: eventtime vs Spark's native windowed aggregation.
bench: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/bench_windowing.py $(BENCH_ARGS)

# Every performance target in one command, each printed as met or not (about 40 minutes, nothing else running)
bench-targets: $(VENV)/.installed $(VENV42)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/bench_targets.py

# The wheel: the engine jar built once per supported Spark minor (both environments' pyspark jars)
wheel: $(VENV)/.installed $(VENV42)/.installed
	EVENTTIME_SPARK_JARS="$$($(PY) -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__)+"/jars")'):$$($(PY42) -c 'import pyspark,os;print(os.path.dirname(pyspark.__file__)+"/jars")')" \
		$(PY) -m build --wheel --no-isolation --outdir dist .

# The tests a developer runs between changes: the suite on pyspark 4.3 in two processes (one per
# core, whole files each; tests/conftest.py hands out the longest first), without the tests marked
# `slow` (crash / restart chains, whole jobs against an oracle, reconcile through the tables) or
# `component` (real Flink, a Spark Connect server, local-cluster executors, the PostgreSQL job
# killed mid-commit, the 40-process exit soak) and without tests/integration.
PYTEST43 := PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -p no:cacheprovider -q -n 2 --dist loadfile --no-loadscope-reorder --ignore=tests/integration
test: $(VENV)/.installed
	$(PYTEST43) -m "not component and not slow"

# Every test, what CI runs: the pyspark 4.3 suite with the component tests, then on pyspark 4.2
# the real components (tests/integration: Kafka, delta-spark, a standalone cluster, the wheel on
# both minors), the engine's transcripts and the static bounded runs (tests/spark/test_bounded_runs.py).
# Both runs always run; the target fails when either fails.
check: $(VENV)/.installed $(VENV42)/.installed
	$(PYTEST43); \
	first=$$?; \
	$(MAKE) --no-print-directory test-integration; \
	second=$$?; \
	test $$first -eq 0 -a $$second -eq 0

test-integration: $(VENV42)/.installed
	PYSPARK_PYTHON=$(abspath $(PY42)) $(PY42) -m pytest -p no:cacheprovider -q tests/integration \
		"tests/spark/test_spark_engine.py::test_spark_matches_transcript" tests/spark/test_bounded_runs.py

# The pure core and unit tests only (no Spark engine run), in two processes, for use between edits.
test-fast: $(VENV)/.installed
	$(PY) -m pytest -p no:cacheprovider -q -n 2 --ignore=tests/spark --ignore=tests/integration -m "not spark and not component"

# The Spark engine tests alone (real queries, crash / restart, local-cluster), in two processes.
test-spark: $(VENV)/.installed
	$(PYTEST43) -m spark

clean:
	rm -rf $(VENV) $(VENV42) $(DEMO_DIR) demo-kafka example-output .pytest_cache .hypothesis .flink dist build
