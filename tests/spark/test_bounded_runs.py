"""Bounded runs of static DataFrames (a backfill, a daily re-run): ``route(...).start(end_of_input=True)``.

Run on every supported Spark minor (``make check`` runs this file on each): every transcript's
records and seeded generated scenarios as one static DataFrame against the reference model
(``run_reference(..., bounded=True)``: one batch that ends the input), and every window kind
with Spark SQL aggregations (``eventtime.agg``) against Spark's own batch ``groupBy`` of the
same rows.
"""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import HealthCheck, given, settings
from pyspark.sql import functions as F
from transcripts import lists_merged_from, load_transcript, transcript_paths

import eventtime
from eventtime.core.trigger import END_OF_INPUT_MS
from eventtime.harness.scenario import diff_outputs, parse_scenario, run_reference
from eventtime.spark.replay import run_scenario
from property_tests.strategies import calendar_scenarios, scenarios, session_scenarios

pytestmark = pytest.mark.spark


@pytest.mark.parametrize("path", transcript_paths(), ids=lambda p: p.stem)
def test_static_dataframe_of_a_transcript_equals_the_model(spark, path):
    scenario, expected = load_transcript(path)
    parsed = parse_scenario(scenario)
    merged_from = lists_merged_from(expected)
    got = run_scenario(parsed, spark=spark, merged_from=merged_from, bounded=True)
    assert got["batches"][0]["watermark_ms"] == END_OF_INPUT_MS
    difference = diff_outputs(run_reference(parsed, merged_from=merged_from, bounded=True), got)
    assert difference is None, f"{path.name}: {difference}"


def _check_bounded(spark, scenario: dict, merged_from: bool = False) -> None:
    parsed = parse_scenario(scenario)
    difference = diff_outputs(run_reference(parsed, merged_from=merged_from, bounded=True),
                              run_scenario(parsed, spark=spark, merged_from=merged_from, bounded=True))
    assert difference is None, difference


_SEEDED = dict(derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))


@settings(max_examples=3, **_SEEDED)
@given(scenarios(max_batches=3, max_records=6))
def test_static_dataframe_equals_the_model_on_generated_scenarios(spark, scenario):
    _check_bounded(spark, scenario)


@settings(max_examples=2, **_SEEDED)
@given(calendar_scenarios(max_batches=3, max_records=6))
def test_static_dataframe_equals_the_model_on_generated_calendar_scenarios(spark, scenario):
    _check_bounded(spark, scenario)


@settings(max_examples=2, **_SEEDED)
@given(session_scenarios(max_batches=3, max_records=6))
def test_static_dataframe_equals_the_model_on_generated_session_scenarios(spark, scenario):
    _check_bounded(spark, scenario, merged_from=True)


_UTC = dt.timezone.utc
_START = dt.datetime(2024, 3, 30, 20, tzinfo=_UTC)  # across Europe/Berlin's change to summer time


def _events(spark):
    # 3 users, 160 events 17 minutes apart (45 hours: two DST-changed local days), nulls in the values
    rows = [(f"u{i % 3}", None if i % 11 == 0 else float(i * 7 % 31), "error" if i % 4 == 0 else "ok",
             _START + dt.timedelta(minutes=17 * i)) for i in range(160)]
    return spark.createDataFrame(rows, "user string, amount double, status string, ts timestamp")


_SQL_AGGREGATIONS = [("count(DISTINCT status)", "statuses"), ("sum(amount)", "total"), ("max_by(status, ts)", "last_status")]


def _spark_aggregates():
    return [F.count("*").alias("count"), F.countDistinct("status").alias("statuses"), F.sum("amount").alias("total"),
            F.max_by("status", "ts").alias("last_status")]


def _static_panes(raw, window):
    out = raw.transform(eventtime.with_event_time("ts", min_valid="2000-01-01")).transform(eventtime.window_aggregate(
        keys=["user"], window=window,
        aggregations=[eventtime.count(), *[eventtime.agg(text, name) for text, name in _SQL_AGGREGATIONS]]))
    tables = []
    stats = eventtime.route(out, panes=lambda t, b, q: tables.append(t), progress=False).start(end_of_input=True)
    assert stats.watermark_ms == END_OF_INPUT_MS and stats.late == 0 and stats.invalid == 0
    rows = [r for t in tables for r in t.to_pylist()]
    assert all(r["pane_timing"] == "ON_TIME" and r["is_final"] for r in rows)  # every window fires once, final
    return sorted((r["user"], r["window_start"], r["window_end"], r["count"], r["statuses"], r["total"], r["last_status"])
                  for r in rows)


def _rows(df):
    return sorted(tuple(r) for r in df.collect())


@pytest.mark.parametrize("kind", ["tumbling", "sliding", "calendar", "session"])
def test_static_dataframe_every_window_kind_with_spark_sql_aggregations_equals_groupby(spark, kind):
    raw = _events(spark)
    window = {"tumbling": eventtime.Tumbling("2 hours"), "sliding": eventtime.Sliding("3 hours", "1 hour"),
              "calendar": eventtime.Calendar("day", tz="Europe/Berlin"), "session": eventtime.Session("20 minutes")}[kind]
    if kind == "calendar":  # the local day in Berlin (23 hours on 2024-03-31), its bounds back in UTC
        day = F.to_date(F.from_utc_timestamp("ts", "Europe/Berlin"))
        grouped = raw.groupBy("user", day.alias("day")).agg(*_spark_aggregates())
        start = F.to_utc_timestamp(F.col("day").cast("timestamp"), "Europe/Berlin")
        end = F.to_utc_timestamp(F.date_add("day", 1).cast("timestamp"), "Europe/Berlin")
        expected = grouped.select("user", start, end, "count", "statuses", "total", "last_status")
    else:
        group = {"tumbling": F.window("ts", "2 hours"), "sliding": F.window("ts", "3 hours", "1 hour"),
                 "session": F.session_window("ts", "20 minutes")}[kind]
        grouped = raw.groupBy("user", group.alias("w")).agg(*_spark_aggregates())
        expected = grouped.select("user", "w.start", "w.end", "count", "statuses", "total", "last_status")
    want = [(u, s.replace(tzinfo=_UTC) if s.tzinfo is None else s, e.replace(tzinfo=_UTC) if e.tzinfo is None else e,
             *rest) for u, s, e, *rest in _rows(expected)]
    got = _static_panes(raw, window)
    assert len(got) >= 9  # three users, at least three windows each
    assert got == sorted(want)


def _shuffled_rows(df) -> int:
    """The rows the executed plan of ``df`` (after a run) wrote to its shuffles."""
    plan = df._jdf.queryExecution().executedPlan()
    if plan.nodeName().startswith("AdaptiveSparkPlan"):
        plan = plan.finalPhysicalPlan()
    todo, written = [plan], 0
    while todo:
        node = todo.pop()
        metrics = node.metrics()
        if "Exchange" in node.nodeName() and metrics.contains("shuffleRecordsWritten"):
            written += metrics.get("shuffleRecordsWritten").get().value()
        children = node.children()
        todo.extend(children.apply(i) for i in range(children.size()))
    return written


def test_invalid_records_are_written_beside_the_operator_not_through_its_shuffle(spark):
    """A flood of invalid records (ts = 0) belongs to no window: with ``split_invalid=True``
    every one is in the output, with its reason, partition, offset, raw text and record, and
    none crosses the operator's shuffle (InvalidRecords.java); the valid rows' panes are
    counted as before. By default they go through the operator (the input is read once)."""
    rows = 2000
    df = spark.range(rows).select(
        F.concat(F.lit("u"), (F.col("id") % 3).cast("string")).alias("user"),
        (F.col("id") % 2).alias("part"), F.col("id").alias("off"),
        F.when(F.col("id") < 3, F.lit(1_700_000_000_000) + F.col("id")).otherwise(F.lit(0)).alias("ts"))
    out = (df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01"))
             .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"),
                                                   partition_col="part", offset_col="off", split_invalid=True)))
    got = out.collect()
    invalid = sorted((r for r in got if r.kind == "invalid"), key=lambda r: r.offset)
    assert [r.offset for r in invalid] == list(range(3, rows))
    first = invalid[0]
    assert (first.reason, first.raw_timestamp, first.partition, first.user, first.watermark) == \
        ("before_min_valid", "0", "1", "u0", None)
    assert first.et__rec.asDict() == {"user": "u0", "part": 1, "off": 3, "ts": 0}
    assert sorted(r["count"] for r in got if r.kind == "pane") == [1, 1, 1]
    stats: dict = {}  # each map task's rows of each partition
    for r in got:
        if r.kind == "partition_stats":
            stats[r.partition] = stats.get(r.partition, 0) + r.stat_rows
    assert stats == {"0": rows // 2, "1": rows // 2}  # the invalid records counted in their partition
    assert _shuffled_rows(out) < 10  # the map side's partial counts and statistics only
    through = df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01")).transform(
        eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"), partition_col="part",
                                   offset_col="off"))
    assert sorted(map(repr, through.collect())) == sorted(map(repr, got))
    assert _shuffled_rows(through) >= rows - 3
    with pytest.raises(TypeError, match="split_invalid must be a bool"):
        eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"), split_invalid="yes")
