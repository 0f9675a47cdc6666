"""Spark SQL aggregate functions in windows (``eventtime.agg``), held to Spark's batch ``agg``.

First their buffers alone (eventtime.jvm.spark.SqlAggregate): the records dealt into several buffers
(slices, map-side partials, sessions), each written to bytes and read back, merged in any
order, then evaluated. Then the engine's panes in real streaming queries, each against Spark's
batch aggregation over exactly the records the pane covers. Typed, nullable columns, seeded
Hypothesis examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import eventtime
from property_tests.strategies import MAX_FUTURE_MS, NOW_MS, TYPED_COLUMNS, typed_rows, typed_scenarios
from typed_harness import run_reference_typed, run_spark_typed

pytestmark = pytest.mark.spark

EXPRESSIONS = (
    "count(DISTINCT v_str)",  # exact: Spark's streaming aggregation refuses distinct aggregates
    "count(DISTINCT k_big)",
    "approx_count_distinct(v_str)",  # HyperLogLog++: an imperative function
    "percentile(v_big, 0.5)",  # exact percentile: a typed imperative function (its object written as bytes)
    "percentile_approx(v_small, 0.9)",
    "collect_set(v_small)",
    "stddev(v_dbl)",  # declarative: initial / update / merge / evaluate expressions
    "variance(v_big)",
    "avg(v_dec)",
    "sum(v_dec)",
    "max_by(v_str, rid)",
    "min_by(v_big, rid)",
    "count(*) FILTER (WHERE v_bool)",
    "count_if(v_bool)",
    "bool_and(v_bool)",
    "max(v_date)",
    "min(v_ts)",
)


def _same(ours, spark) -> bool:
    if isinstance(ours, float) and isinstance(spark, float):
        return (math.isnan(ours) and math.isnan(spark)) or math.isclose(ours, spark, rel_tol=1e-9, abs_tol=0.0)
    if isinstance(ours, list) and isinstance(spark, list):  # collect_set: a set, in no order
        return sorted(ours, key=repr) == sorted(spark, key=repr)
    return ours == spark


@pytest.mark.slow
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data(), parts=st.integers(min_value=1, max_value=5), seed=st.integers(0, 2**31 - 1))
def test_sql_aggregates_in_buffers_equal_spark_batch_agg(spark, data, parts, seed):
    from pyspark.sql import functions as F

    n = data.draw(st.integers(min_value=0, max_value=30))
    rows = [data.draw(typed_rows(50_000, rid, ("k_big", "k_str"))) for rid in range(n)]
    schema = ", ".join(f"{name} {ddl}" for name, ddl in TYPED_COLUMNS)
    df = spark.createDataFrame(rows, schema).repartition(3)
    expected = df.agg(*[F.expr(e) for e in EXPRESSIONS]).collect()[0]
    from pyspark.sql import DataFrame

    got = DataFrame(spark._jvm.eventtime.jvm.operator.InProcess.sqlAggregates(df._jdf, list(EXPRESSIONS), seed, parts),
                    spark).collect()[0]
    wrong = [(e, g, x) for e, g, x in zip(EXPRESSIONS, got, expected) if not _same(g, x)]
    assert not wrong, wrong


SQL_AGGREGATIONS = (
    eventtime.agg("count(DISTINCT v_str)", "distinct_str"),
    eventtime.agg("percentile(v_big, 0.5)", "p50_big"),
    eventtime.agg("percentile_approx(v_small, 0.9)", "p90_small"),
    eventtime.agg("approx_count_distinct(v_dec)", "hll_dec"),
    eventtime.agg("stddev(v_dbl)", "sd_dbl"),
    eventtime.agg("max_by(v_str, rid)", "last_str_by_rid"),
    eventtime.agg("collect_set(v_date)", "dates"),
    eventtime.agg("count(*) FILTER (WHERE v_bool)", "n_true"),
)
# which records each pane covers, by the reference model (an independent statement of the rules)
RIDS = eventtime.aggregate("rids", "rid", create=frozenset, add=lambda acc, v: acc | {v}, merge=lambda a, b: a | b,
                           result=lambda acc: acc)
# Python aggregations, run by both engines: on Spark over the pane's values kept in state
PYTHON_AGGREGATIONS = (
    eventtime.aggregate("py_rids", "rid", create=frozenset, add=lambda acc, v: acc | {v}, merge=lambda a, b: a | b,
                        result=sorted, result_type="array<bigint>"),
    # nulls reach add(): the records whose v_dec is null
    eventtime.aggregate("py_null_dec", "v_dec", create=int, add=lambda n, v: n + (v is None), merge=lambda a, b: a + b,
                        result=lambda n: n),
    eventtime.aggregate("py_max_len", "v_str", create=lambda: None, merge=lambda a, b: b if a is None else a if b is None else max(a, b),
                        add=lambda m, v: m if v is None else len(v) if m is None else max(m, len(v)), result=lambda m: m,
                        result_type="int"),
)


def _dense(sc: dict) -> bool:
    """Scenarios of several batches and records (so that panes are many)."""
    return len(sc["batches"]) >= 3 and sum(len(b) for b in sc["batches"]) >= 18


def _pane_id(pane: dict) -> tuple:
    return pane["key"], pane["window_start"], pane["window_end"], pane["timing"], pane["index"]


@pytest.mark.slow
@settings(max_examples=8, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(sc=typed_scenarios(max_batches=4, max_records=12).filter(_dense), session_gap_ms=st.sampled_from([None, None, 1500]))
def test_each_pane_equals_spark_batch_agg_over_exactly_the_records_it_covers(spark, sc, session_gap_ms):
    """The engine's panes of Spark SQL aggregations (text and a ``Column``) and Python ones
    (ON_TIME and LATE, accumulating and discarding, final_only, tumbling, sliding and session
    windows, late and invalid records among them) against Spark's batch
    ``groupBy(pane).agg(...)`` over the records the reference model puts in each pane; the
    panes themselves (which exist, their counts) and the Python aggregations' values are the
    reference model's."""
    from pyspark.sql import functions as F

    if session_gap_ms is not None:
        sc = {**sc, "window": {"type": "session", "gap_ms": session_gap_ms}}

    sql_aggregations = (*SQL_AGGREGATIONS, eventtime.agg(F.variance(F.col("v_dbl") * 2), "var_2dbl"))  # a Column
    reference = [p for batch in run_reference_typed({**sc, "aggregations": (eventtime.count(), RIDS, *PYTHON_AGGREGATIONS)})
                 for p in batch["panes"]]
    panes = [p for batch in run_spark_typed(
        {**sc, "aggregations": (eventtime.count(), *sql_aggregations, *PYTHON_AGGREGATIONS)}, spark) for p in batch["panes"]]
    got = {_pane_id(p): p for p in panes}  # aware datetimes in keys compare by instant
    assert len(got) == len(panes) == len(reference) and all(_pane_id(p) in got for p in reference)
    assert all(got[_pane_id(p)]["count"] == p["count"] == len(p["rids"]) for p in reference)
    # the Python aggregations: Spark's panes equal the reference model's, values and types
    wrong = [(a.name, _pane_id(p), got[_pane_id(p)][a.name], p[a.name]) for p in reference for a in PYTHON_AGGREGATIONS
             if got[_pane_id(p)][a.name] != p[a.name] or type(got[_pane_id(p)][a.name]) is not type(p[a.name])]
    assert not wrong, wrong
    if not reference:
        return
    schema = ", ".join(f"{name} {ddl}" for name, ddl in TYPED_COLUMNS)
    rows = spark.createDataFrame([r for batch in sc["batches"] for r in batch], schema)
    members = spark.createDataFrame([(i, rid) for i, p in enumerate(reference) for rid in p["rids"]], "pane int, member bigint")
    expected = {r["pane"]: r for r in members.join(rows, members.member == rows.rid).groupBy("pane").agg(
        *[F.expr(a.expression).alias(a.name) for a in SQL_AGGREGATIONS], F.variance(F.col("v_dbl") * 2).alias("var_2dbl"),
        F.sort_array(F.collect_list("rid")).alias("py_rids"), F.count_if(F.col("v_dec").isNull()).alias("py_null_dec"),
        F.max(F.length("v_str")).alias("py_max_len")).collect()}
    names = [a.name for a in sql_aggregations] + [a.name for a in PYTHON_AGGREGATIONS]
    wrong = [(name, _pane_id(p), got[_pane_id(p)][name], expected[i][name])
             for i, p in enumerate(reference) for name in names
             if not _same(got[_pane_id(p)][name], expected[i][name])]
    assert not wrong, wrong
    print(f"panes compared with Spark's batch groupBy: {len(reference)} x {len(names)} aggregations, 0 different")


@pytest.mark.slow
@settings(max_examples=2, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(sc=typed_scenarios(max_batches=4, max_records=12).filter(_dense))
def test_buffers_resume_from_the_checkpoint_after_a_restart(spark, sc):
    """The Spark SQL buffers and the Python aggregations' values kept in state, read back by a
    query started again from the checkpoint after every batch: the same panes as one
    uninterrupted query."""
    # a last batch of one heartbeat far ahead fires every window still held (its buffers resumed)
    flush = {name: None for name, _ in TYPED_COLUMNS} | {"rid": 10**6, "hb": True, "ts": NOW_MS + MAX_FUTURE_MS}
    sc = {**sc, "aggregations": (eventtime.count(), *SQL_AGGREGATIONS, *PYTHON_AGGREGATIONS),
          "batches": [*sc["batches"], [flush]]}
    straight = run_spark_typed(sc, spark)
    restarted = run_spark_typed(sc, spark, restart=True)
    names = ["count", *[a.name for a in SQL_AGGREGATIONS], *[a.name for a in PYTHON_AGGREGATIONS]]
    for one, other in zip(straight, restarted):
        a, b = {_pane_id(p): p for p in one["panes"]}, {_pane_id(p): p for p in other["panes"]}
        assert set(a) == set(b)
        wrong = [(pane, n, a[pane][n], b[pane][n]) for pane in a for n in names if not _same(a[pane][n], b[pane][n])]
        assert not wrong, wrong
        print(f"batch: panes compared after a restart: {len(a)} x {len(names)} aggregations, 0 different")


@pytest.mark.parametrize("expression, reason", [
    ("v_big + 1", "not one aggregate function call"),
    ("sum(no_such_column)", "no_such_column"),
    ("sum(v_big) + 1", "not one aggregate function call"),
    ("sum(rand())", "Non-deterministic"),
    ("max(sum(v_big))", "aggregate function in the argument of another aggregate function"),
    ("avg(v_date)", "DATATYPE_MISMATCH"),
    ("sum(DISTINCT v_big)", "DISTINCT is supported in count(DISTINCT x)"),
    ("sum(v_big", "Syntax error"),
])
def test_an_expression_the_engine_cannot_run_is_refused_before_the_query_starts(spark, tmp_path, capfd, expression,
                                                                                reason):
    schema = ", ".join(f"{name} {ddl}" for name, ddl in TYPED_COLUMNS)
    (tmp_path / "in").mkdir()
    events = spark.readStream.schema(schema).parquet(str(tmp_path / "in")).transform(
        eventtime.with_event_time("ts", unit="ms"))
    with pytest.raises(ValueError) as refused:
        events.transform(eventtime.window_aggregate(["k_str"], eventtime.Tumbling("1 minute"),
                                                    aggregations=[eventtime.agg(expression, "x")]))
    message = str(refused.value)
    assert f"aggregations[0] ('x') cannot run {expression!r}" in message and reason in message, message
    assert not spark.streams.active
    printed = capfd.readouterr().err
    assert "QueryContextLogger" not in printed and "\tat org.apache" not in printed, printed[:2000]  # no JVM stack


def test_python_and_column_aggregations_that_cannot_run_are_refused_before_the_query_starts(spark, tmp_path):
    from pyspark.sql import functions as F

    schema = ", ".join(f"{name} {ddl}" for name, ddl in TYPED_COLUMNS)
    (tmp_path / "in").mkdir()
    events = spark.readStream.schema(schema).parquet(str(tmp_path / "in")).transform(
        eventtime.with_event_time("ts", unit="ms"))
    mean = dict(create=lambda: (0, 0), add=lambda a, v: a if v is None else (a[0] + v, a[1] + 1),
                merge=lambda a, b: (a[0] + b[0], a[1] + b[1]), result=lambda a: a[0] / a[1] if a[1] else None)
    cases = [
        (eventtime.aggregate("m", "v_big", **mean),
         "aggregations[0] ('m') is a Python aggregation: the Spark engine needs the Spark type of its result, and "
         "result(create()) gives None; pass it to eventtime.aggregate(..., result_type='bigint')"),
        (eventtime.aggregate("m", "v_big", **mean, result_type="dobule"),
         "aggregations[0] ('m'): result_type 'dobule' is not a Spark SQL type"),
        (eventtime.aggregate("m", "no_such", **mean, result_type="double"),
         "aggregations[0] (udaf 'm') names column 'no_such', which is not in the input"),
        (eventtime.agg(F.col("v_big") + 1, "x"), "aggregations[0] ('x') cannot run '+(v_big, 1)': it is not one aggregate function call"),
        (eventtime.agg(F.sum("no_such"), "x"), "aggregations[0] ('x') cannot run 'sum(no_such)': [UNRESOLVED_COLUMN"),
    ]
    for agg, message in cases:
        with pytest.raises(ValueError) as refused:
            events.transform(eventtime.window_aggregate(["k_str"], eventtime.Tumbling("1 minute"), aggregations=[agg]))
        assert message in str(refused.value), str(refused.value)
    assert not spark.streams.active


def test_sql_aggregations_are_refused_by_the_reference_model_and_need_text():
    with pytest.raises(ValueError, match=r"'p95' \(percentile_approx\(x, 0.95\)\) is a Spark SQL aggregate: it runs on "
                                         r"the Spark engine"):
        eventtime.ReferenceEngine(eventtime.EngineConfig(eventtime.Tumbling(1000),
                                                         (eventtime.agg("percentile_approx(x, 0.95)", "p95"),)))
    with pytest.raises(TypeError, match="expression must be the text of a Spark SQL aggregate expression"):
        eventtime.agg(42)


def _readme_dashboard() -> str:
    import pathlib
    import re

    readme = (pathlib.Path(__file__).parents[2] / "README.md").read_text()
    blocks = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S) if b.startswith("dashboard = ")]
    assert len(blocks) == 1, "README.md has one dashboard example"
    return blocks[0]


def test_the_readme_dashboard_example_runs_as_written(spark):
    """README.md's dashboard (distinct users, p95 latency and the last status by event time per
    page and local day in UTC+8), executed as written on events with those columns, one bounded
    run: equal to Spark's batch groupBy over the same local days."""
    import datetime as dt

    from pyspark.sql import functions as F

    utc = dt.timezone.utc
    rows = [("home", f"u{i % 7}", float(i * 13 % 97), "error" if i % 5 == 0 else "ok",
             dt.datetime(2024, 5, 1, 10, tzinfo=utc) + dt.timedelta(minutes=37 * i)) for i in range(80)]
    raw = spark.createDataFrame(rows, "page string, user_id string, latency_ms double, status string, ts timestamp")
    events = raw.transform(eventtime.with_event_time("ts", max_out_of_orderness="1 minute"))
    scope = {"eventtime": eventtime, "events": events}
    exec(_readme_dashboard(), scope)
    panes = []
    eventtime.route(scope["dashboard"], panes=lambda t, b, q: panes.append(t), progress=False).start(end_of_input=True)
    got = sorted((r["window_start"], r["count"], r["users"], r["p95_latency_ms"], r["last_status"])
                 for t in panes for r in t.to_pylist())
    day = F.window(F.from_utc_timestamp("ts", "Asia/Shanghai"), "1 day").start
    expected = sorted((row["start"], row["n"], row["users"], row["p95"], row["last"])
                      for row in raw.groupBy(F.to_utc_timestamp(day, "Asia/Shanghai").alias("start")).agg(
                          F.count("*").alias("n"), F.countDistinct("user_id").alias("users"),
                          F.percentile_approx("latency_ms", 0.95).alias("p95"),
                          F.max_by("status", "ts").alias("last")).collect())
    assert len(got) == 3 and [g[1:] for g in got] == [e[1:] for e in expected]
    assert [g[0].astimezone(dt.timezone.utc) for g in got] == [e[0].replace(tzinfo=dt.timezone.utc) for e in expected]


def _register_longest_string(spark, tmp_path) -> None:
    """Compiles tests/spark/aggregator/LongestString.java (a Java ``Aggregator``), adds its jar
    to the session and registers it as ``longest_string``, as a user registers theirs."""
    import os
    import pathlib
    import subprocess

    import pyspark

    source = pathlib.Path(__file__).parent / "aggregator" / "LongestString.java"
    classes = tmp_path / "classes"
    subprocess.run(["javac", "-d", str(classes), "-cp", os.path.join(pyspark.__path__[0], "jars", "*"), str(source)],
                   check=True, capture_output=True)
    jar = tmp_path / "longest.jar"
    subprocess.run(["jar", "cf", str(jar), "-C", str(classes), "."], check=True, capture_output=True)
    spark.sql(f"ADD JAR '{jar}'")
    jvm = spark._jvm
    loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
    aggregator = jvm.java.lang.Class.forName("eventtime_test.LongestString", True, loader).newInstance()
    spark._jsparkSession.udf().register(
        "longest_string", jvm.org.apache.spark.sql.functions.udaf(aggregator, jvm.org.apache.spark.sql.Encoders.STRING()))


def test_a_registered_java_aggregator_runs_in_windows_as_in_spark_batch_agg(spark, tmp_path):
    """A Scala/Java ``Aggregator`` registered with ``functions.udaf`` / ``spark.udf.register``
    (Spark runs it as a typed imperative aggregate): tumbling and sliding panes over several
    input partitions (map-side partials, slices merged) equal Spark's batch groupBy."""
    import datetime as dt

    from pyspark.sql import functions as F

    _register_longest_string(spark, tmp_path)
    utc = dt.timezone.utc
    rows = [(f"k{i % 3}", None if i % 7 == 0 else "x" * (i * 5 % 11) + chr(97 + i % 26),
             dt.datetime(2024, 5, 1, tzinfo=utc) + dt.timedelta(seconds=17 * i)) for i in range(300)]
    events = spark.createDataFrame(rows, "k string, v string, ts timestamp").repartition(4)
    for window, spark_window in ((eventtime.Tumbling("5 minutes"), F.window("ts", "5 minutes")),
                                 (eventtime.Sliding("5 minutes", "1 minute"), F.window("ts", "5 minutes", "1 minute"))):
        out = events.transform(eventtime.with_event_time("ts")).transform(eventtime.window_aggregate(
            keys=["k"], window=window, aggregations=[eventtime.agg("longest_string(v)", "longest")]))
        panes = []
        eventtime.route(out, panes=lambda t, b, q: panes.append(t), progress=False).start(end_of_input=True)
        got = sorted((r["k"], r["window_start"].astimezone(utc).replace(tzinfo=None), r["longest"])
                     for t in panes for r in t.to_pylist())
        expected = sorted((r["k"], r["start"], r["longest"]) for r in events.groupBy(
            "k", F.to_utc_timestamp(spark_window.start, spark.conf.get("spark.sql.session.timeZone")).alias("start")).agg(
            F.expr("longest_string(v)").alias("longest")).collect())
        assert len(got) > 20 and got == expected


@pytest.mark.slow
def test_sketches_on_large_windows_keep_to_their_documented_error_against_the_exact_value(spark):
    """approx_count_distinct (HyperLogLog++, relative standard deviation ``rsd``) and
    percentile_approx (rank error at most 1/accuracy) over windows of up to 200 k records, merged
    across input partitions and sliding-window slices: each pane is Spark's own batch result
    of the same function, and within the function's documented error of the exact value."""
    from pyspark.sql import functions as F

    n = 400_000
    events = spark.range(n, numPartitions=4).select(
        (F.col("id") % 2).cast("string").alias("k"),
        # ~n/3 distinct users, skewed; latencies with a long tail
        ((F.col("id") * 7919) % (n // 3)).alias("user_id"),
        (F.pow(F.rand(7), 3) * 10_000).alias("latency_ms"),
        F.timestamp_millis(F.lit(1_700_000_000_000) + (F.col("id") * 13) % 7_200_000).alias("ts"))
    sketches = [eventtime.agg("approx_count_distinct(user_id)", "users_05"),
                eventtime.agg("approx_count_distinct(user_id, 0.01)", "users_01"),
                eventtime.agg("percentile_approx(latency_ms, 0.95, 1000)", "p95"),
                eventtime.agg("count(DISTINCT user_id)", "users")]
    out = events.transform(eventtime.with_event_time("ts")).transform(eventtime.window_aggregate(
        keys=["k"], window=eventtime.Sliding("1 hour", "30 minutes"), aggregations=[eventtime.count(), *sketches]))
    panes = []
    eventtime.route(out, panes=lambda t, b, q: panes.append(t), progress=False).start(end_of_input=True)
    got = {(r["k"], r["window_start"]): r for t in panes for r in t.to_pylist()}
    assert len(got) == 2 * 5 and sum(r["count"] > 100_000 for r in got.values()) >= 4  # (the edges are partial windows)
    windowed = events.withColumn("w", F.window("ts", "1 hour", "30 minutes")).select("k", F.col("w.start").alias("start"),
                                                                                    "user_id", "latency_ms")
    hll = [a for a in sketches if a.expression.startswith("approx_count_distinct")]
    # (one query each: Spark plans a distinct count beside other aggregates with an Expand, 15x slower)
    spark_rows = {(r["k"], r["start"]): r for r in windowed.groupBy("k", "start").agg(
        *[F.expr(a.expression).alias(a.name) for a in hll]).collect()}
    exact_rows = {(r["k"], r["start"]): r["users"] for r in windowed.groupBy("k", "start").agg(
        F.count_distinct("user_id").alias("users")).collect()}
    import zoneinfo

    local = zoneinfo.ZoneInfo(spark.conf.get("spark.sql.session.timeZone"))
    at = {(k, start.astimezone(local).replace(tzinfo=None)): pane for (k, start), pane in got.items()}
    p95 = spark.createDataFrame([(k, start, pane["p95"]) for (k, start), pane in at.items()], "k string, start timestamp, p95 double")
    rank = {(r["k"], r["start"]): r["below"] for r in windowed.join(p95, ["k", "start"]).groupBy("k", "start").agg(
        (F.count_if(F.col("latency_ms") <= F.col("p95")) / F.count("*")).alias("below")).collect()}
    errors = {"users_05": [], "users_01": [], "p95_rank": []}
    for window, pane in at.items():
        assert [pane[a.name] for a in hll] == [spark_rows[window][a.name] for a in hll]  # Spark's own result
        exact = pane["users"]
        assert exact == exact_rows[window]
        errors["users_05"].append(abs(pane["users_05"] - exact) / exact)
        errors["users_01"].append(abs(pane["users_01"] - exact) / exact)
        errors["p95_rank"].append(abs(rank[window] - 0.95))
    # HyperLogLog++'s rsd is a standard deviation: three of them bound every window here
    assert max(errors["users_05"]) <= 3 * 0.05 and max(errors["users_01"]) <= 3 * 0.01, errors
    assert max(errors["p95_rank"]) <= 1 / 1000, errors  # percentile_approx: rank error <= 1/accuracy
    print("sketch errors (max):", {name: round(max(e), 5) for name, e in errors.items()})


@pytest.mark.slow
@settings(max_examples=4, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(sc=typed_scenarios(max_batches=4, max_records=12).filter(_dense), session_gap_ms=st.sampled_from([None, 1500]))
def test_a_mergeable_pane_s_buffer_gives_back_its_value(spark, sc, session_gap_ms):
    """``mergeable=True`` over typed, nullable columns (integers above 2^53, decimals, dates,
    nulls in keys and partitions): every pane carries its buffer, and Spark's function over that
    buffer alone (what reconcile merges, eventtime.spark.pane_merge) gives the pane's value; the
    values are those the aggregations give without ``mergeable``."""
    import dataclasses

    from pyspark.sql import types as T

    from eventtime.core.reconcile import Correction, SparkMerge
    from eventtime.core.window import Window
    from eventtime.spark.pane_merge import merge_in_spark

    if session_gap_ms is not None:
        sc = {**sc, "window": {"type": "session", "gap_ms": session_gap_ms}}
    mergeable = tuple(dataclasses.replace(a, mergeable=True) for a in SQL_AGGREGATIONS)
    panes = [p for batch in run_spark_typed({**sc, "aggregations": (eventtime.count(), *mergeable)}, spark)
             for p in batch["panes"]]
    plain = {_pane_id(p): p for batch in run_spark_typed({**sc, "aggregations": (eventtime.count(), *SQL_AGGREGATIONS)},
                                                         spark) for p in batch["panes"]}
    assert len(plain) == len(panes)
    if not panes:  # (no window fired)
        return
    config = eventtime.EngineConfig(eventtime.Tumbling(1000), (eventtime.count(), *mergeable))
    record_type = T.StructType([T.StructField(n, T._parse_datatype_string(d)) for n, d in TYPED_COLUMNS]).json()
    corrections = [Correction("k", Window(0, 1), 0, {a.name: SparkMerge((bytes(p[a.name + "__buffer"]),), ())
                                                     for a in mergeable}) for p in panes]
    merged = merge_in_spark(spark, config, record_type, corrections, {})
    wrong = [(a.name, _pane_id(p), c.values[a.name], p[a.name], plain[_pane_id(p)][a.name])
             for p, c in zip(panes, merged) for a in mergeable
             if not (_same(c.values[a.name], p[a.name]) and _same(p[a.name], plain[_pane_id(p)][a.name]))]
    assert not wrong, wrong
