"""Mergeable Spark SQL aggregations (``eventtime.agg(..., mergeable=True)``) reconciled: a
streaming query over the demo's stream whose panes carry each function's buffer, its too-late
records merged into them by ``reconcile`` with Spark's own functions. Held to the bounded run of
the same transforms over all the input, and (tumbling windows) to Spark's batch ``groupBy``
over every valid record."""

from __future__ import annotations

import datetime as dt
import json
import math
import os
import subprocess
import sys

import pytest

import eventtime
from eventtime.cli.demo_data import DEMO_SCHEMA_DDL, DemoStream, write_stream
from eventtime.sinks import DeltaLateSink, DeltaResultsSink, latest_panes

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STREAM = DemoStream(rows=3000, batches=8)
SQL = {  # every kind of Spark aggregate function: imperative, typed imperative, declarative, a set
    "hll": "approx_count_distinct(amount)",
    "p50": "percentile_approx(amount, 0.5)",
    "sd": "stddev(amount)",
    "distinct_offsets": "count(DISTINCT offset)",
    "max_by_record": "max_by(amount, partition * 1000000 + offset)",  # a unique ordering: no ties
}
VALUES = ["count", *SQL]


def _routed(source, window, out: str, mergeable: bool = True, panes=None):
    events = source.transform(eventtime.with_event_time(
        "ts", unit="ms", max_out_of_orderness=STREAM.max_out_of_orderness_ms, min_valid="2000-01-01",
        max_future="1 day"))
    aggregations = [eventtime.count(), *(eventtime.agg(e, name, mergeable=mergeable) for name, e in SQL.items())]
    out_df = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=window, allowed_lateness=STREAM.allowed_lateness_ms, aggregations=aggregations,
        partition_col="partition", offset_col="offset", heartbeat_col="heartbeat"))
    return eventtime.route(out_df, panes=panes or DeltaResultsSink(os.path.join(out, "results"), pipeline="sql"),
                           late=DeltaLateSink(os.path.join(out, "late"), pipeline="sql", delays=False),
                           pipeline="sql", progress=False)


def _null(v) -> bool:  # pandas reads a null double as NaN
    return v is None or (isinstance(v, float) and math.isnan(v))


def _same(a, b) -> bool:
    if _null(a) or _null(b):
        return _null(a) and _null(b)
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=1e-9)
    return a == b


def _ms(t) -> int:
    return int(t.timestamp() * 1000)


def _windows(table) -> dict:
    return {(r["user_id"], _ms(r["window_start"]), _ms(r["window_end"])): {v: r[v] for v in VALUES}
            for r in table.to_dict("records")}


def _pg_windows(sink) -> dict:
    """The PostgreSQL table's rows, as a dashboard reads them: one per current window (a session
    pane deleted the rows of the sessions it superseded)."""
    import psycopg
    from psycopg.rows import dict_row

    with psycopg.connect(sink.conninfo) as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(f"SELECT * FROM {sink.table}").fetchall()
    return {(r["user_id"], _ms(r["window_start"]), _ms(r["window_end"])): {v: r[v] for v in VALUES} for r in rows}


def _differ(results: dict, truth: dict) -> list:
    return [(w, results.get(w), truth.get(w)) for w in sorted(set(results) | set(truth), key=repr)
            if w not in results or w not in truth or not all(_same(results[w][v], truth[w][v]) for v in VALUES)]


@pytest.fixture(scope="module")
def stream_input(tmp_path_factory) -> str:
    directory = str(tmp_path_factory.mktemp("sql-input"))
    write_stream(STREAM, directory)
    return directory


@pytest.mark.parametrize("window", [eventtime.Tumbling("1 minute"), eventtime.Session("15 seconds")],
                         ids=["tumbling", "session"])
def test_mergeable_sql_aggregations_reconcile_to_the_bounded_run(spark, stream_input, tmp_path, window):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    stream = str(tmp_path / "stream")
    source = spark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(stream_input)
    _routed(source, window, stream).start(checkpoint=str(tmp_path / "checkpoint"),
                                          trigger={"availableNow": True}).awaitTermination()
    _routed(spark.read.schema(DEMO_SCHEMA_DDL).json(stream_input), window, str(tmp_path / "truth")).start(
        end_of_input=True)
    truth = _windows(latest_panes(str(tmp_path / "truth" / "results")))
    results = os.path.join(stream, "results")
    assert "hll__buffer" in latest_panes(results).columns
    before = _differ(_windows(latest_panes(results)), truth)

    if window.merging:
        report = eventtime.reconcile(os.path.join(stream, "late"), results, spark=spark)
        assert report.written and report.reconciled == report.late_records > 0 and report.left == {}, report
        assert report.windows_merged > 0  # a late record joined two sessions: their buffers merged
    else:  # the command, in a process of its own: it starts a local Spark session for the merges
        proc = subprocess.run([sys.executable, "-m", "eventtime", "late", "reconcile", "--late",
                               os.path.join(stream, "late"), "--results", results, "--format", "json"],
                              capture_output=True, text=True, timeout=300, env=dict(os.environ, SPARK_LOCAL_IP="127.0.0.1"))
        assert proc.returncode == 0, proc.stderr[-3000:]
        report = eventtime.ReconcileReport(**json.loads(proc.stdout.strip().splitlines()[-1]))
        assert report.written and report.reconciled == report.late_records > 0 and report.left == {}, report
    after = _differ(_windows(latest_panes(results)), truth)
    print(f"{window}: {len(truth)} windows, {len(before)} differ before reconcile, {len(after)} after; "
          f"{report.reconciled} records in {report.corrections} corrections, {report.seconds:.1f} s")
    assert len(before) > 0 and after == [], [(w, {v: (a[v], b[v]) for v in VALUES if a and b and not _same(a[v], b[v])}) for w, a, b in after[:3]]
    again = eventtime.reconcile(os.path.join(stream, "late"), results, spark=spark)
    assert (again.written, again.reconciled, again.already) == (False, 0, report.reconciled)

    if not window.merging:  # the outside oracle: Spark's batch groupBy over every valid record
        from pyspark.sql import functions as F

        rows = spark.read.schema(DEMO_SCHEMA_DDL).json(stream_input)
        ms = F.col("ts").cast("long")
        valid = rows.where(~F.col("heartbeat") & F.col("ts").rlike("^[0-9]+$") & (ms >= 946_684_800_000)
                           & (ms < 4_102_444_800_000))
        spark_windows = valid.groupBy("user_id", F.window(F.timestamp_millis(ms), "1 minute").alias("w")).agg(
            F.count(F.lit(1)).alias("count"), *(F.expr(e).alias(name) for name, e in SQL.items())).collect()
        oracle = {(r["user_id"], r["w"]["start"], r["w"]["end"]): {v: r[v] for v in VALUES} for r in spark_windows}
        oracle = {(u, _ms(s.replace(tzinfo=dt.timezone.utc)), _ms(e.replace(tzinfo=dt.timezone.utc))): v
                  for (u, s, e), v in oracle.items()}  # the session's time zone is UTC
        ours = _windows(latest_panes(results))
        assert len(oracle) == len(ours) and _differ(ours, oracle) == [], _differ(ours, oracle)[:2]


def test_a_sql_aggregation_without_mergeable_leaves_its_records_and_says_how(spark, stream_input, tmp_path):
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    source = spark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(stream_input)
    _routed(source, eventtime.Tumbling("1 minute"), str(tmp_path), mergeable=False).start(
        checkpoint=str(tmp_path / "checkpoint"), trigger={"availableNow": True}).awaitTermination()
    assert "hll__buffer" not in latest_panes(str(tmp_path / "results")).columns
    from eventtime.core.reconcile import NOT_MERGEABLE

    report = eventtime.reconcile(str(tmp_path / "late"), str(tmp_path / "results"), spark=spark, dry_run=True)
    assert list(report.left) == [NOT_MERGEABLE] and len(report.left[NOT_MERGEABLE]) == report.late_records > 0


def test_a_postgres_results_table_of_sessions_reconciles_its_sql_aggregations(spark, stream_input, tmp_path):
    """As above into PostgreSQL (buffers as bytea), sessions: late records merge sessions, and
    the table holds exactly the current sessions before reconcile (but for the late records)
    and after it."""
    from eventtime.sinks import PostgresSink
    from eventtime.sinks.local_postgres import LocalPostgres, find_pg_bin

    if find_pg_bin() is None:
        pytest.skip("PostgreSQL is not installed (make install installs it)")
    spark.conf.set("spark.sql.shuffle.partitions", "2")
    window = eventtime.Session("15 seconds")
    _routed(spark.read.schema(DEMO_SCHEMA_DDL).json(stream_input), window, str(tmp_path / "truth")).start(
        end_of_input=True)
    truth = _windows(latest_panes(str(tmp_path / "truth" / "results")))
    with LocalPostgres() as pg:
        sink = PostgresSink(pg.conninfo, "sessions", pipeline="sql", key_columns=["user_id"])
        source = spark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(stream_input)
        _routed(source, window, str(tmp_path), panes=sink).start(
            checkpoint=str(tmp_path / "checkpoint"), trigger={"availableNow": True}).awaitTermination()
        before = _differ(_pg_windows(sink), truth)
        report = eventtime.reconcile(str(tmp_path / "late"), sink, spark=spark)
        assert report.written and report.reconciled == report.late_records > 0 and report.left == {}, report
        assert report.windows_merged > 0
        after = _differ(_pg_windows(sink), truth)
    print(f"postgres sessions: {len(truth)} windows, {len(before)} differ before reconcile, {len(after)} after; "
          f"{report.reconciled} records in {report.corrections} corrections ({report.windows_merged} merging)")
    assert len(before) > 0 and after == [], after[:2]
