"""Spark SQL and Python aggregations' panes into PostgreSQL (``PostgresSink``): the README's
dashboard (exact distinct users, p95 latency, the last status by event time, per page and
local day in UTC+8) plus a set and a Python aggregation whose result is an array, run by the
Spark engine and written by the sink; each column's stored value equals Spark's batch
``groupBy`` over the same local days (arrays and structs as jsonb)."""

from __future__ import annotations

import datetime as dt

import psycopg
import pytest
from psycopg.rows import dict_row

import eventtime
from eventtime.sinks import PostgresSink
from eventtime.sinks.local_postgres import LocalPostgres, find_pg_bin

pytestmark = [
    pytest.mark.spark,
    pytest.mark.skipif(find_pg_bin() is None, reason="PostgreSQL is not installed (make install installs it)"),
]


def test_sql_and_python_aggregations_reach_postgres_as_spark_computes_them(spark):
    from pyspark.sql import functions as F

    utc = dt.timezone.utc
    rows = [(("home", "cart")[i % 2], f"u{i % 7}" if i % 9 else None, float(i * 13 % 97), "error" if i % 5 == 0 else "ok",
             dt.datetime(2024, 5, 1, 10, tzinfo=utc) + dt.timedelta(minutes=37 * i)) for i in range(120)]
    raw = spark.createDataFrame(rows, "page string, user_id string, latency_ms double, status string, event_ts timestamp")
    events = raw.transform(eventtime.with_event_time("event_ts", max_out_of_orderness="1 minute"))
    distinct_users = eventtime.aggregate(
        "user_list", "user_id", create=frozenset, add=lambda acc, v: acc | {v} if v is not None else acc,
        merge=lambda a, b: a | b, result=lambda acc: sorted(acc), result_type="array<string>")
    out = events.transform(eventtime.window_aggregate(
        keys=["page"], window=eventtime.Calendar("day", tz="Asia/Shanghai"), allowed_lateness="1 hour",
        aggregations=[eventtime.count(),
                      eventtime.agg("count(DISTINCT user_id)", "users"),
                      eventtime.agg("percentile_approx(latency_ms, 0.95)", "p95_latency_ms"),
                      eventtime.agg("max_by(status, event_ts)", "last_status"),
                      eventtime.agg("max_by(struct(status, latency_ms), event_ts)", "last_event"),
                      distinct_users]))
    with LocalPostgres() as pg:
        eventtime.route(out, panes=PostgresSink(pg.conninfo, "dashboard", pipeline="dashboard"), progress=False).start(
            end_of_input=True)
        with psycopg.connect(pg.conninfo, row_factory=dict_row) as conn:
            types = {r["column_name"]: r["data_type"] for r in conn.execute(
                "SELECT column_name, data_type FROM information_schema.columns WHERE table_name = 'dashboard'")}
            stored = conn.execute("SELECT * FROM dashboard ORDER BY page, window_start").fetchall()
    assert types["users"] == "bigint" and types["p95_latency_ms"] == "double precision" and types["last_status"] == "text"
    assert types["user_list"] == "jsonb" and types["last_event"] == "jsonb", types

    day = F.window(F.from_utc_timestamp("event_ts", "Asia/Shanghai"), "1 day").start
    expected = raw.groupBy("page", F.to_utc_timestamp(day, "Asia/Shanghai").alias("start")).agg(
        F.count("*").alias("n"), F.countDistinct("user_id").alias("users"),
        F.percentile_approx("latency_ms", 0.95).alias("p95"), F.max_by("status", "event_ts").alias("last"),
        F.max_by(F.struct("status", "latency_ms"), "event_ts").alias("last_event"),
        F.array_sort(F.collect_set("user_id")).alias("user_list")).orderBy("page", "start").collect()
    assert len(stored) == len(expected) == 8
    for got, want in zip(stored, expected):
        assert (got["page"], got["window_start"].astimezone(utc).replace(tzinfo=None)) == (want["page"], want["start"])
        assert (got["count"], got["users"], got["p95_latency_ms"], got["last_status"]) == \
            (want["n"], want["users"], want["p95"], want["last"])
        assert got["last_event"] == want["last_event"].asDict()
        assert got["user_list"] == list(want["user_list"])
        assert got["is_final"] is True and got["pane_timing"] == "ON_TIME"
