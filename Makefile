# Two commands on a fresh machine: `make demo` runs the main job, `make test` runs the tests.
# Both create .venv and install the project from pyproject.toml first.
VENV ?= .venv
PY := $(VENV)/bin/python
PYTHON ?= python3
DEMO_DIR ?= demo-output
BENCH_ARGS ?= --rows 500000

.PHONY: demo test test-fast test-spark install bench clean

$(VENV)/.installed: pyproject.toml $(wildcard eventtime/jvm/src/eventtime/jvm/*.java)
	bash scripts/ensure-java.sh
	bash scripts/ensure-postgres.sh
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[test]"
	# the engine is Java: compiled here with javac against pyspark's own jars (no download)
	$(PY) -c "from eventtime.spark.jvm import engine_jar; print(engine_jar(verbose=True))"
	# the classes a Spark driver loads, recorded once so that every later JVM starts faster
	$(PY) scripts/build-class-archive.py $(VENV)/spark-classes.jsa
	touch $@

install: $(VENV)/.installed

# SPARK_SUBMIT_OPTS: start the driver JVM from the class archive made at install (see
# scripts/build-class-archive.py; ignored when it cannot be used)
CLASS_ARCHIVE_OPTS := -XX:SharedArchiveFile=$(abspath $(VENV))/spark-classes.jsa -Xlog:cds=off -Xlog:cds+dynamic=off

demo: $(VENV)/.installed
	SPARK_SUBMIT_OPTS="$(SPARK_SUBMIT_OPTS) $(CLASS_ARCHIVE_OPTS)" $(VENV)/bin/eventtime demo --output $(DEMO_DIR)

# Not part of the two set-up commands: eventtime vs Spark's native windowed aggregation.
bench: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) benchmarks/bench_windowing.py $(BENCH_ARGS)

# Two pytest processes (one per core), each with whole test files: a file's Spark session and
# fixtures stay in one process. Files are handed out longest first (tests/conftest.py).
test: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -p no:cacheprovider -q -n 2 --dist loadfile --no-loadscope-reorder

# The pure core and unit tests only (no Spark engine run), for use between changes; CI runs `make test`.
test-fast: $(VENV)/.installed
	$(PY) -m pytest -p no:cacheprovider -q --ignore=tests/spark -m "not spark"

# The Spark engine tests alone (real queries, crash / restart, local-cluster), in two processes.
test-spark: $(VENV)/.installed
	PYSPARK_PYTHON=$(abspath $(PY)) $(PY) -m pytest -p no:cacheprovider -q -n 2 --dist loadfile --no-loadscope-reorder -m spark

clean:
	rm -rf $(VENV) $(DEMO_DIR) example-output .pytest_cache .hypothesis .flink
