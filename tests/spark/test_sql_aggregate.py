"""Spark SQL aggregate functions run as the engine runs them (eventtime.jvm.SqlAggregate): the
records dealt into several buffers (slices, map-side partials, sessions), each written to bytes
and read back, merged in any order, then evaluated, give what Spark's batch ``agg`` gives over
the same records: typed, nullable columns, seeded Hypothesis examples."""

from __future__ import annotations

import math

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from property_tests.strategies import TYPED_COLUMNS, typed_rows

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


@settings(max_examples=25, deadline=None, derandomize=True, suppress_health_check=list(HealthCheck))
@given(data=st.data(), parts=st.integers(min_value=1, max_value=5), seed=st.integers(0, 2**31 - 1))
def test_sql_aggregates_in_buffers_equal_spark_batch_agg(spark, data, parts, seed):
    from pyspark.sql import functions as F

    n = data.draw(st.integers(min_value=0, max_value=30))
    rows = [data.draw(typed_rows(50_000, rid, ("k_big", "k_str"))) for rid in range(n)]
    schema = ", ".join(f"{name} {ddl}" for name, ddl in TYPED_COLUMNS)
    df = spark.createDataFrame(rows, schema).repartition(3)
    expected = df.agg(*[F.expr(e) for e in EXPRESSIONS]).collect()[0]
    from pyspark.sql import DataFrame

    got = DataFrame(spark._jvm.eventtime.jvm.InProcess.sqlAggregates(df._jdf, list(EXPRESSIONS), seed, parts),
                    spark).collect()[0]
    wrong = [(e, g, x) for e, g, x in zip(EXPRESSIONS, got, expected) if not _same(g, x)]
    assert not wrong, wrong
