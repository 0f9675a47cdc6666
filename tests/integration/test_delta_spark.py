"""Delta Lake through Spark (delta-spark): the Delta sinks writing with Spark's Delta writer.

Runs in the pyspark 4.2 environment only (``.venv-spark4.2``: the newest delta-spark on Maven
Central, 4.4.0, serves Spark <= 4.2), on the one session of the test process, made with
``eventtime.local_session(kafka=True, delta=True)`` (tests/integration/test_kafka.py makes the
same one; ``getOrCreate`` returns it to both files, and neither stops it).

* the sinks on that session write through delta-spark by themselves (``engine="auto"``, the
  session from ``route``), with the app transaction as ``txnAppId`` / ``txnVersion``; a
  streaming pipeline's panes, late records and delay histograms equal the same pipeline's
  through delta-rs, table for table;
* a late table written by delta-spark reads the same through ``deltalake``, polars and
  ``eventtime late``; one written by delta-rs through Spark SQL, before and after Spark's
  ``OPTIMIZE`` and ``VACUUM``;
* the job SIGKILLed twice (right after the Delta commits, before Spark's checkpoint commit;
  and between the two tables' commits) and resumed from its checkpoint ends with the
  uninterrupted run's tables: nothing lost, nothing written twice;
* a table of another schema, or another sink's table, is refused before the query starts;
* the batch's rows are written by Spark's tasks (delta-spark's distributed write of the rows
  the tasks prepare), never by the driver: a flood of bogus timestamps lands whole, equal to
  the delta-rs tasks' tables, the batch's persisted blocks released after it, and the same
  batch written again is skipped.

The file is also the job the crash test kills: ``python test_delta_spark.py job INPUT OUT``.
"""

from __future__ import annotations

import collections
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

ROWS, BATCHES, SEED = 1200, 5, 5
PIPELINE = "dspark"
# When and by which query / batch a row was written differ between runs by design.
RUN_COLUMNS = {"query_id", "batch_id", "detected_at", "detected_date", "written_at", "record_id"}
TABLES = ("results", "late", "delays")
# Delta rebuilds a table's snapshot in spark.databricks.delta.snapshotPartitions tasks (50 by
# default: about 4 s a commit on 2 cores instead of 0.7 s), and VACUUM lists the table in
# spark.sql.sources.parallelPartitionDiscovery.parallelism tasks (10 000 by default: 66 s instead
# of 9 s). local_session(delta=True) does not set them (yet), so the tests do.
DELTA_LOCAL_CONF = {"spark.databricks.delta.snapshotPartitions": "2",
                    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2"}

pytestmark = pytest.mark.spark


# ---------------------------------------------------------------------------
# the pipeline (the test process runs it in its session; the crash test in a process of its own)


def _amount_bands():
    import eventtime

    return eventtime.aggregate("amount_bands", "amount", create=frozenset,
                               add=lambda acc, v: acc if v is None else acc | {int(v // 50)},
                               merge=lambda a, b: a | b, result=sorted, result_type="array<int>")


AMOUNT_BANDS = _amount_bands()


def pipeline(spark, input_dir: str, out: str, engine: str = "auto"):
    """examples/streaming_job.py's shape on the demo stream: with_event_time -> window_aggregate
    -> route into the three Delta sinks under ``out``."""
    import eventtime
    from eventtime.cli.demo_data import DEMO_SCHEMA_DDL
    from eventtime.sinks import DeltaDelaySink, DeltaLateSink, DeltaResultsSink

    events = (
        spark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(input_dir)
        .transform(eventtime.with_event_time(
            "ts", unit="ms", max_out_of_orderness="10 seconds", min_valid="2000-01-01", max_future="1 day"))
    )
    out_df = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"), allowed_lateness="3 minutes",
        aggregations=[eventtime.count(), eventtime.sum("amount"), eventtime.max("amount"),
                      eventtime.agg("count(DISTINCT amount)", "distinct_amounts"),  # a Spark SQL aggregation
                      AMOUNT_BANDS],  # a Python one, with an array result
        partition_col="partition", offset_col="offset", heartbeat_col="heartbeat",
    ))
    return eventtime.route(
        out_df,
        panes=DeltaResultsSink(os.path.join(out, "results"), pipeline=PIPELINE, engine=engine),
        late=DeltaLateSink(os.path.join(out, "late"), pipeline=PIPELINE, engine=engine),
        delays=DeltaDelaySink(os.path.join(out, "delays"), pipeline=PIPELINE, engine=engine),
        pipeline=PIPELINE,
    )


def run_pipeline(spark, input_dir: str, out: str, engine: str = "auto"):
    router = pipeline(spark, input_dir, out, engine)
    query = router.start(checkpoint=os.path.join(out, "checkpoint"), trigger={"availableNow": True})
    query.awaitTermination()
    return router


def _job(input_dir: str, out: str) -> None:
    """The crash test's job: the pipeline on a delta-spark session, to the end of its input."""
    import eventtime

    spark = eventtime.local_session(delta=True, shuffle_partitions=2, extra_conf=DELTA_LOCAL_CONF)
    router = run_pipeline(spark, input_dir, out)
    print("writers:", router.panes_sink.writer, router.late_sink.writer, router.delays_sink.writer, flush=True)


# ---------------------------------------------------------------------------
# reading the tables


def read_rows(path) -> pa.Table:
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    return snapshot_dataset(DeltaTable(str(path))).to_table()


def comparable(table: pa.Table) -> collections.Counter:
    """The rows without the run's columns, as a multiset (so a duplicate counts)."""
    columns = sorted(c for c in table.column_names if c not in RUN_COLUMNS)
    return collections.Counter(tuple((c, repr(r[c])) for c in columns) for r in table.select(columns).to_pylist())


def all_tables(out) -> dict:
    return {name: comparable(read_rows(Path(out) / name)) for name in TABLES}


def history(spark, path) -> list:
    quoted = str(path).replace("`", "``")
    return spark.sql(f"DESCRIBE HISTORY delta.`{quoted}`").orderBy("version").collect()


# ---------------------------------------------------------------------------
# fixtures


@pytest.fixture(scope="module")
def dspark():
    """The test process's one session, with Delta (and Kafka, as test_kafka.py makes it)."""
    import eventtime

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = eventtime.local_session(kafka=True, delta=True, shuffle_partitions=2)
    for key, value in DELTA_LOCAL_CONF.items():
        spark.conf.set(key, value)
    return spark


@pytest.fixture(scope="module")
def stream_input(tmp_path_factory) -> str:
    from eventtime.cli.demo_data import DemoStream, write_stream

    directory = tmp_path_factory.mktemp("dspark-input") / "input"
    write_stream(DemoStream(seed=SEED, rows=ROWS, batches=BATCHES), str(directory))
    return str(directory)


@pytest.fixture(scope="module")
def spark_run(dspark, stream_input, tmp_path_factory) -> Path:
    """The pipeline through delta-spark, uninterrupted (engine chosen automatically)."""
    out = tmp_path_factory.mktemp("dspark") / "spark"
    router = run_pipeline(dspark, stream_input, str(out))
    assert (router.panes_sink.writer, router.late_sink.writer, router.delays_sink.writer) == ("delta-spark",) * 3
    return out


@pytest.fixture(scope="module")
def rust_run(dspark, stream_input, tmp_path_factory) -> Path:
    """The same pipeline through delta-rs (engine='rust' on the same session)."""
    out = tmp_path_factory.mktemp("dspark") / "rust"
    router = run_pipeline(dspark, stream_input, str(out), engine="rust")
    assert router.late_sink.writer == "delta-rs"
    return out


def records(n: int, start: int = 0) -> pa.Table:
    """n late records shaped like the router's record table."""
    t0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=dt.timezone.utc)
    users = [f"u{(start + i) % 3}" for i in range(n)]
    return pa.table({
        "kind": ["late"] * n,
        "reason": ["too_late"] * n,
        "key": [json.dumps({"user": u}, separators=(",", ":")) for u in users],
        "user": users,
        "event_time": pa.array([t0 - dt.timedelta(minutes=start + i) for i in range(n)], pa.timestamp("ms", tz="UTC")),
        "watermark": pa.array([t0] * n, pa.timestamp("us", tz="UTC")),
        "lateness_ms": pa.array([60_000 * (start + i) for i in range(n)], pa.int64()),
        "partition": [str((start + i) % 2) for i in range(n)],
        "offset": pa.array([start + i for i in range(n)], pa.int64()),
        "payload": [json.dumps({"user": u, "i": start + i}) for i, u in enumerate(users)],
    })


# ---------------------------------------------------------------------------
# the tests


def test_write_via_spark_is_idempotent(dspark, tmp_path):
    from eventtime.sinks import DeltaLateSink, spark_has_delta, write_via_spark

    assert spark_has_delta(dspark)
    path = str(tmp_path / "late")
    sink = DeltaLateSink(path, pipeline="clicks", engine="spark", spark=dspark)
    assert sink.writer == "delta-spark"
    first = sink(records(3), 0, "q1")
    assert first.written and first.rows == 3 and first.version == 0
    again = sink(records(3), 0, "q1")
    assert not again.written and again.skipped == "already_committed"
    # delta-spark itself refuses the version again (txnAppId / txnVersion), without the sink's check
    write_via_spark(dspark, records(3), path, sink.app_id("q1"), 0, ["detected_date"])
    assert sink(records(2, 3), 1, "q1").written
    table = read_rows(path)
    assert table.num_rows == 5
    assert sorted(table.column("offset").to_pylist()) == [0, 1, 2, 3, 4]
    assert sink.committed_version("q1") == 1
    commits = history(dspark, path)
    assert [c["version"] for c in commits] == [0, 1]
    assert all("Apache-Spark" in c["engineInfo"] and "Delta-Lake" in c["engineInfo"] for c in commits)
    assert json.loads(commits[1]["userMetadata"]) == {
        "eventtime.batch_id": 1, "eventtime.pipeline": "clicks", "eventtime.query_id": "q1"}


def test_streaming_through_delta_spark_equals_delta_rs(dspark, spark_run, rust_run):
    spark_tables, rust_tables = all_tables(spark_run), all_tables(rust_run)
    for name in TABLES:
        assert sum(spark_tables[name].values()) > 0, f"the run wrote no {name}"
        assert spark_tables[name] == rust_tables[name], name
        if name != "delays":  # a delay row is a per-batch count: equal counts of two batches are two rows
            assert max(spark_tables[name].values()) == 1, f"{name}: a row written twice"
        # the same columns with the same types
        assert read_rows(spark_run / name).schema.remove_metadata() == read_rows(rust_run / name).schema.remove_metadata()
        # who wrote each table: Spark's Delta writer, delta-rs
        assert all("Apache-Spark" in c["engineInfo"] for c in history(dspark, spark_run / name))
        assert not any("Apache-Spark" in (c["engineInfo"] or "") for c in history(dspark, rust_run / name))
    kinds = collections.Counter(dict(row)["kind"] for row in spark_tables["late"].elements())
    assert kinds["'late'"] > 0 and kinds["'invalid'"] > 0, kinds
    # the watermark each batch ran at, recorded by either writer: the same windows are closed
    from eventtime.sinks import latest_panes

    closed = [latest_panes(str(run / "results")).sort_values(["key", "window_start"])["closed"].tolist()
              for run in (spark_run, rust_run)]
    assert closed[0] == closed[1] and any(closed[0]), closed


def test_a_late_table_written_by_delta_spark_reads_the_same_everywhere(spark_run):
    import polars as pl

    path = spark_run / "late"
    base = read_rows(path)
    assert base.num_rows > 0
    columns = base.column_names
    # polars
    polars_rows = pl.read_delta(str(path)).to_arrow()
    assert sorted(polars_rows.column_names) == sorted(columns)
    assert comparable(polars_rows.select(columns).cast(base.schema)) == comparable(base)
    # the eventtime late CLI, a process of its own
    cli = Path(sys.executable).with_name("eventtime")
    shown = subprocess.run([str(cli), "late", "show", "--table", str(path), "--format", "json", "--limit",
                            str(base.num_rows + 10)], capture_output=True, text=True, check=True)
    rows = json.loads(shown.stdout)

    def jsonable(v):
        return v.isoformat() if hasattr(v, "isoformat") else v

    expected = collections.Counter(json.dumps({k: jsonable(v) for k, v in r.items()}, sort_keys=True)
                                   for r in base.to_pylist())
    got = collections.Counter(json.dumps(r, sort_keys=True) for r in rows)
    assert got == expected
    summary = subprocess.run([str(cli), "late", "summary", "--table", str(path), "--format", "json"],
                             capture_output=True, text=True, check=True)
    totals = json.loads(summary.stdout)
    assert totals["total"] == base.num_rows
    assert totals["by_reason"] == dict(collections.Counter(base.column("reason").to_pylist()))
    assert totals["by_kind"] == dict(collections.Counter(base.column("kind").to_pylist()))


def test_a_late_table_written_by_delta_rs_is_spark_sql_s(dspark, rust_run, tmp_path):
    from eventtime.sinks import DeltaLateSink

    path = tmp_path / "late"
    shutil.copytree(rust_run / "late", path)
    base = read_rows(path)
    quoted = str(path).replace("`", "``")

    def spark_rows() -> pa.Table:
        return dspark.read.format("delta").load(str(path)).toArrow().select(base.column_names).cast(base.schema)

    assert comparable(spark_rows()) == comparable(base)
    writes = history(dspark, path)
    assert [c["version"] for c in writes] == list(range(len(writes)))
    # route created the table, empty, before the query started (no batch, no row), recorded the
    # pipeline in its properties (what reconcile reads); then one commit per batch with rows
    created, recorded, batches = writes[0], writes[1], writes[2:]
    assert created["userMetadata"] is None and int((created["operationMetrics"] or {}).get("num_added_rows", 0)) == 0
    assert recorded["operation"] == "SET TBLPROPERTIES"
    assert len(batches) == len(set(base.column("batch_id").to_pylist()))
    assert {c["operation"] for c in batches} == {"WRITE"}
    files_before = {f for f in path.rglob("*.parquet")}
    assert len(files_before) >= len(batches)  # each batch's tasks write a file each
    optimized = dspark.sql(f"OPTIMIZE delta.`{quoted}`").collect()[0]["metrics"]
    assert optimized["numFilesRemoved"] == len(files_before) and optimized["numFilesAdded"] >= 1
    key = "spark.databricks.delta.retentionDurationCheck.enabled"
    previous = dspark.conf.get(key, "true")
    dspark.conf.set(key, "false")
    try:
        dspark.sql(f"VACUUM delta.`{quoted}` RETAIN 0 HOURS").collect()
    finally:
        dspark.conf.set(key, previous)
    files_after = {f for f in path.rglob("*.parquet")}
    assert not files_after & files_before and len(files_after) == optimized["numFilesAdded"]
    operations = [c["operation"] for c in history(dspark, path)]
    assert operations[len(writes):] == ["OPTIMIZE", "VACUUM START", "VACUUM END"]
    # rows unchanged, read by Spark and by delta-rs
    assert comparable(spark_rows()) == comparable(base)
    assert comparable(read_rows(path)) == comparable(base)
    # the app transactions survive: the last batch again is skipped, by either writer
    query_id = base.column("query_id")[0].as_py()
    last = max(base.column("batch_id").to_pylist())
    for engine in ("rust", "spark"):
        sink = DeltaLateSink(str(path), pipeline=PIPELINE, engine=engine, spark=dspark if engine == "spark" else None)
        assert sink.committed_version(query_id) == last
        assert sink(records(2), last, query_id).skipped == "already_committed"
    assert comparable(read_rows(path)) == comparable(base)


def _run_job(input_dir: str, out: Path, fault: str | None, log: Path) -> int:
    from eventtime.ops.faults import FAULT_ENV

    env = {k: v for k, v in os.environ.items() if k != FAULT_ENV}
    env["PYSPARK_PYTHON"] = sys.executable
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if fault:
        env[FAULT_ENV] = fault
    with open(log, "w") as handle:
        proc = subprocess.Popen([sys.executable, __file__, "job", input_dir, str(out)], env=env, stdout=handle,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            code = proc.wait(timeout=600)
        finally:
            try:
                os.killpg(proc.pid, signal.SIGKILL)  # nothing of the run (its JVM) outlives it
            except ProcessLookupError:
                pass
    return code


def _committed_batches(out: Path) -> set[int]:
    return {int(p.name) for p in (out / "checkpoint" / "commits").iterdir() if p.name.isdigit()}


def test_sigkill_mid_stream_loses_and_duplicates_nothing(dspark, stream_input, spark_run, tmp_path):
    from deltalake import DeltaTable

    out = tmp_path / "crash"
    # 1: killed right after both Delta commits of batch 2, before Spark commits the batch
    code = _run_job(stream_input, out, "kill:after_write:2", tmp_path / "run1.log")
    assert code == -signal.SIGKILL, (tmp_path / "run1.log").read_text()[-3000:]
    assert 2 not in _committed_batches(out)
    query_id = json.loads((out / "checkpoint" / "metadata").read_text())["id"]
    for name in ("results", "late"):
        app_id = f"eventtime/{name}/{PIPELINE}/{query_id}"
        assert DeltaTable(str(out / name)).transaction_version(app_id) == 2, name
    # 2: resumed (Spark runs batch 2 again: the sinks skip it), killed between the two tables of batch 4
    code = _run_job(stream_input, out, "kill:between_writes:4", tmp_path / "run2.log")
    assert code == -signal.SIGKILL, (tmp_path / "run2.log").read_text()[-3000:]
    assert 4 not in _committed_batches(out)
    # 3: resumed to the end
    code = _run_job(stream_input, out, None, tmp_path / "run3.log")
    text = (tmp_path / "run3.log").read_text()
    assert code == 0, text[-3000:]
    assert "writers: delta-spark delta-spark delta-spark" in text
    assert json.loads((out / "checkpoint" / "metadata").read_text())["id"] == query_id
    got, expected = all_tables(out), all_tables(spark_run)
    for name in TABLES:
        lost = expected[name] - got[name]
        duplicated = got[name] - expected[name]
        assert (sum(lost.values()), sum(duplicated.values())) == (0, 0), (name, lost, duplicated)
        assert got[name] == expected[name]
    # every commit of the killed runs is Spark's; the batch re-runs committed nothing again
    for name in ("results", "late"):
        commits = history(dspark, out / name)
        assert all("Apache-Spark" in c["engineInfo"] for c in commits)
        # both tables were created empty by route before the first query started; each table
        # recorded the pipeline once (the restarts found it recorded)
        created = [c["version"] for c in commits if c["userMetadata"] is None and c["operation"] != "SET TBLPROPERTIES"]
        assert created == [0], (name, created)
        assert [c["operation"] for c in commits].count("SET TBLPROPERTIES") == 1, name
        batches = [json.loads(c["userMetadata"])["eventtime.batch_id"] for c in commits if c["userMetadata"]]
        assert len(batches) == len(set(batches)), (name, batches)


def _refusal(excinfo, path) -> str:
    text = str(excinfo.value)
    assert repr(str(path)) in text, text
    assert "path of its own" in text, text
    return text


def test_a_table_of_another_schema_is_refused_before_the_query_starts(dspark, stream_input, tmp_path):
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink

    crm = tmp_path / "crm"
    dspark.createDataFrame([("acme", 12.5)], "customer STRING, revenue DOUBLE").write.format("delta").save(str(crm))
    for sink_class in (DeltaResultsSink, DeltaLateSink):
        for engine in ("spark", "auto"):
            with pytest.raises(ValueError) as excinfo:
                sink_class(str(crm), pipeline=PIPELINE, engine=engine, spark=dspark)
            text = _refusal(excinfo, crm)
            assert "customer string, revenue double" in text and "lacks the column(s) pipeline" in text
    # a table that appears at the path after the sink was made: refused by route(...)
    out = tmp_path / "out"
    late_path = out / "late"
    router_sinks = dict(panes=DeltaResultsSink(str(out / "results"), pipeline=PIPELINE),
                        late=DeltaLateSink(str(late_path), pipeline=PIPELINE))
    dspark.createDataFrame([("acme", 12.5)], "customer STRING, revenue DOUBLE").write.format("delta").save(str(late_path))
    import eventtime

    events = dspark.readStream.schema("user_id STRING, ts LONG").json(stream_input).transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="10 seconds"))
    out_df = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"), aggregations=[eventtime.count()]))
    with pytest.raises(ValueError) as excinfo:
        eventtime.route(out_df, **router_sinks, pipeline=PIPELINE)
    assert "customer string, revenue double" in _refusal(excinfo, late_path)
    assert not dspark.streams.active and not (out / "results").exists()
    assert [c["operation"] for c in history(dspark, late_path)] == ["WRITE"]  # nothing written to it


def test_a_late_sink_on_the_results_table_is_refused(dspark, spark_run, stream_input, tmp_path):
    import eventtime
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink

    results = spark_run / "results"
    version = len(history(dspark, results))
    with pytest.raises(ValueError) as excinfo:
        DeltaLateSink(str(results), pipeline=PIPELINE, engine="spark", spark=dspark)
    text = _refusal(excinfo, results)
    assert "lacks the column(s) detected_at, detected_date, kind, reason" in text and "pane_index long" in text
    # neither table exists yet: route refuses the two sinks on one path
    shared = tmp_path / "shared"
    events = dspark.readStream.schema("user_id STRING, ts LONG").json(stream_input).transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="10 seconds"))
    out_df = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"), aggregations=[eventtime.count()]))
    with pytest.raises(ValueError) as excinfo:
        eventtime.route(out_df, panes=DeltaResultsSink(str(shared), pipeline=PIPELINE),
                        late=DeltaLateSink(str(shared), pipeline=PIPELINE), pipeline=PIPELINE)
    text = _refusal(excinfo, shared)
    assert "DeltaLateSink and DeltaResultsSink both write" in text or "DeltaResultsSink and DeltaLateSink both write" in text
    assert not shared.exists() and not dspark.streams.active
    assert len(history(dspark, results)) == version


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "job":
        _job(sys.argv[2], sys.argv[3])
    else:
        sys.exit(f"usage: {sys.argv[0]} job INPUT_DIR OUTPUT_DIR")


def test_reconcile_through_delta_spark_converges_to_the_bounded_run(dspark, stream_input, spark_run, tmp_path):
    """The pipeline recorded in both tables through Spark SQL (ALTER TABLE ... SET TBLPROPERTIES),
    the CORRECTION panes committed by Spark's Delta writer, the results then equal to the same
    transforms run bounded; the pipeline above (a Spark SQL and a Python aggregation) is refused
    record by record, not half reconciled."""
    import eventtime
    from eventtime.cli.demo_data import DEMO_SCHEMA_DDL
    from eventtime.cli.demo_reconcile import compare_with_truth
    from eventtime.core.reconcile import NOT_MERGEABLE
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink, latest_panes

    compared = ["count", "amount", "hi", "avg", "avg__n"]  # every built-in kind of value merges

    def routed(source, out, mode="append"):
        events = source.transform(eventtime.with_event_time(
            "ts", unit="ms", max_out_of_orderness="10 seconds", min_valid="2000-01-01", max_future="1 day"))
        out_df = events.transform(eventtime.window_aggregate(
            keys=["user_id"], window=eventtime.Tumbling("1 minute"), allowed_lateness="3 minutes",
            aggregations=[eventtime.count(), eventtime.sum("amount", name="amount"), eventtime.max("amount", name="hi"),
                          eventtime.mean("amount", name="avg")],
            partition_col="partition", offset_col="offset", heartbeat_col="heartbeat"))
        return eventtime.route(out_df, panes=DeltaResultsSink(str(out / "results"), pipeline="rec", engine="spark",
                                                              mode=mode),
                               late=DeltaLateSink(str(out / "late"), pipeline="rec", engine="spark", delays=False),
                               pipeline="rec", progress=False)

    stream = routed(dspark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(stream_input),
                    tmp_path / "stream")
    stream.start(checkpoint=str(tmp_path / "checkpoint"), trigger={"availableNow": True}).awaitTermination()
    routed(dspark.read.schema(DEMO_SCHEMA_DDL).json(stream_input), tmp_path / "truth").start(end_of_input=True)
    results, late = str(tmp_path / "stream" / "results"), str(tmp_path / "stream" / "late")
    for path in (results, late):
        quoted = path.replace("`", "``")
        props = {r["key"]: r["value"] for r in dspark.sql(f"SHOW TBLPROPERTIES delta.`{quoted}`").collect()}
        assert json.loads(props["eventtime.pipeline.rec"])["keys"] == ["user_id"]
    truth = latest_panes(str(tmp_path / "truth" / "results"))
    before = compare_with_truth(latest_panes(results), truth, ["user_id"], compared)
    report = eventtime.reconcile(late, results, engine="spark", spark=dspark)
    assert report.written and report.reconciled == report.late_records > 0 and report.left == {}
    assert "Apache-Spark" in history(dspark, results)[-1]["engineInfo"]
    after = compare_with_truth(latest_panes(results), truth, ["user_id"], compared)
    assert before["different"] > 0 and after["different"] == 0 and after["windows"] == len(truth)
    again = eventtime.reconcile(late, results, engine="spark", spark=dspark)
    assert (again.written, again.reconciled, again.already) == (False, 0, report.reconciled)

    # the current-state table: one row per window by Spark SQL's MERGE, reconciled in place
    upsert = routed(dspark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(stream_input),
                    tmp_path / "upsert", mode="upsert")
    upsert.start(checkpoint=str(tmp_path / "upsert-checkpoint"), trigger={"availableNow": True}).awaitTermination()
    current = str(tmp_path / "upsert" / "results")
    assert any(c["operation"] == "MERGE" and "Apache-Spark" in c["engineInfo"] for c in history(dspark, current))
    rows = read_rows(current).to_pandas()
    assert not rows.duplicated(["key", "window_start", "window_end"]).any()

    def closed(path: str) -> dict:  # the watermark recorded by MERGE's commits as by the appends'
        panes = latest_panes(path, corrections=False)
        return dict(zip(zip(panes["key"], panes["window_start"]), panes["closed"]))

    assert closed(current) == closed(str(tmp_path / "stream" / "results")) and any(closed(current).values())
    assert compare_with_truth(rows, latest_panes(str(tmp_path / "stream" / "results"), corrections=False),
                              ["user_id"], compared)["different"] == 0
    merged = eventtime.reconcile(str(tmp_path / "upsert" / "late"), current, engine="spark", spark=dspark)
    assert merged.written and merged.reconciled == report.reconciled
    assert history(dspark, current)[-1]["operation"] == "MERGE"
    in_place = compare_with_truth(read_rows(current).to_pandas(), truth, ["user_id"], compared)
    assert (in_place["windows"], in_place["different"], in_place["truth"]) == (after["windows"], 0, after["truth"])
    assert in_place["totals"] == pytest.approx(after["totals"], rel=1e-12)  # float sums in another row order

    refused = eventtime.reconcile(str(spark_run / "late"), str(spark_run / "results"), engine="spark", spark=dspark)
    assert not refused.written and list(refused.left) == [NOT_MERGEABLE]
    assert len(refused.left[NOT_MERGEABLE]) == refused.late_records > 0


def test_sessions_through_delta_spark_equal_delta_rs_and_the_current_sessions(dspark, stream_input, tmp_path):
    """Session windows (the map side's partial sessions, merged by the operator) streamed into
    Delta: delta-spark appends the same panes and late records as delta-rs, and its current-state
    table (Spark SQL's MERGE, superseded sessions deleted) holds exactly the latest pane of every
    current session of the appended table, as delta-rs's MERGE does."""
    import eventtime
    from eventtime.cli.demo_data import DEMO_SCHEMA_DDL
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink, latest_panes

    def run(out: Path, engine: str, mode: str) -> Path:
        events = (dspark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(stream_input)
                  .transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="10 seconds",
                                                        min_valid="2000-01-01", max_future="1 day")))
        out_df = events.transform(eventtime.window_aggregate(
            keys=["user_id"], window=eventtime.Session("20 seconds"), allowed_lateness="3 minutes",
            aggregations=[eventtime.count(), eventtime.sum("amount", name="amount")],
            partition_col="partition", offset_col="offset", heartbeat_col="heartbeat"))
        router = eventtime.route(
            out_df, panes=DeltaResultsSink(str(out / "results"), pipeline="ses", engine=engine, mode=mode),
            late=DeltaLateSink(str(out / "late"), pipeline="ses", engine=engine, delays=False), pipeline="ses", progress=False)
        router.start(checkpoint=str(out / "checkpoint"), trigger={"availableNow": True}).awaitTermination()
        assert router.panes_sink.writer == ("delta-spark" if engine == "spark" else "delta-rs")
        return out

    spark_append, rust_append = run(tmp_path / "spark", "spark", "append"), run(tmp_path / "rust", "rust", "append")
    for name in ("results", "late"):
        assert comparable(read_rows(spark_append / name)) == comparable(read_rows(rust_append / name)), name
    panes = read_rows(spark_append / "results").to_pylist()
    assert any(p["merged_from"] for p in panes) and any(p["pane_timing"] == "LATE" for p in panes)
    assert sum(r["kind"] == "late" for r in read_rows(spark_append / "late").to_pylist()) > 0

    spark_current, rust_current = run(tmp_path / "spark-up", "spark", "upsert"), run(tmp_path / "rust-up", "rust", "upsert")
    assert any(c["operation"] == "MERGE" and "Apache-Spark" in c["engineInfo"]
               for c in history(dspark, spark_current / "results"))
    current = comparable(read_rows(spark_current / "results"))
    assert current == comparable(read_rows(rust_current / "results"))
    assert max(current.values()) == 1
    window = ["key", "window_start", "window_end", "pane_index", "count", "amount"]
    latest = latest_panes(str(spark_append / "results"))[window].sort_values(window).reset_index(drop=True)
    rows = read_rows(spark_current / "results").to_pandas()[window].sort_values(window).reset_index(drop=True)
    assert len(rows) < len(read_rows(spark_append / "results"))  # superseded sessions and earlier panes are gone
    assert rows.equals(latest)


def _flood(spark, rows: int):
    import eventtime
    from pyspark.sql import functions as F

    # 99 % of the rows carry ts = 0 (1970), the rest one event a 10 ms; a null user among them
    ts = F.when(F.col("id") % 100 == 0, F.lit(1_700_000_000_000) + F.col("id") * 10).otherwise(F.lit(0))
    user = F.when(F.col("id") % 7 == 3, F.lit(None)).otherwise(F.concat(F.lit("u"), (F.col("id") % 13).cast("string")))
    df = spark.range(rows).select(user.alias("user"), (F.col("id") % 97).cast("double").alias("amount"),
                                  ts.alias("ts")).repartition(3)
    return (df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01", max_future="36500 days"))
              .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 second"),
                                                    aggregations=[eventtime.count(), eventtime.sum("amount")])))


def test_a_flood_through_delta_spark_is_written_by_the_tasks(dspark, tmp_path, monkeypatch):
    import eventtime
    import eventtime.spark.router as router_module
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink

    def no_driver_writes(*args, **kwargs):
        raise AssertionError("the batch's rows were handed to the sinks on the driver")

    monkeypatch.setattr(router_module, "write_on_driver", no_driver_writes)
    cached_before = dspark.sparkContext._jsc.getPersistentRDDs().size()  # the session is the module's
    now = dt.datetime(2026, 12, 7, 10, tzinfo=dt.timezone.utc)
    runs = {}
    for engine in ("spark", "rust"):
        out = tmp_path / engine
        panes = DeltaResultsSink(str(out / "results"), pipeline="flood", engine=engine, now=lambda: now)
        late = DeltaLateSink(str(out / "late"), pipeline="flood", engine=engine, now=lambda: now)
        router = eventtime.route(_flood(dspark, 30_000), panes=panes, late=late, pipeline="flood", progress=False)
        assert router._in_tasks and panes.writes_frames == (engine == "spark")
        runs[engine] = (router.start(end_of_input=True), out, late, router.query_id())
    (stats, out, late, query_id), (_, rust_out, _, _) = runs["spark"], runs["rust"]
    assert (stats.rows_in, stats.panes, stats.late, stats.invalid) == (30_000, 300, 0, 29_700)
    for name in ("results", "late"):
        assert comparable(read_rows(out / name)) == comparable(read_rows(rust_out / name)), name
        assert all("Apache-Spark" in c["engineInfo"] for c in history(dspark, out / name))
    assert read_rows(out / "late").num_rows == 29_700
    assert len(set(read_rows(out / "late").column("record_id").to_pylist())) == 29_700
    assert dspark.sparkContext._jsc.getPersistentRDDs().size() == cached_before  # the batch's cache released
    # the batch again (Spark re-running it after a crash): delta-spark's app transaction skips it
    again = late.write_frame(dspark.read.format("delta").load(str(out / "late")), 29_700, 0, query_id)
    assert (again.written, again.skipped) == (False, "already_committed")
    assert read_rows(out / "late").num_rows == 29_700
