"""Every column keeps its type and value through the Spark engine (no float round trip).

Generated typed, nullable rows (integers of every width and above 2**53, decimals, booleans,
dates, timestamps, strings, nulls in keys and partitions) are run through the reference
model and a real streaming query and compared in full; the defects users reported each have
a test of their own.
"""

from __future__ import annotations

from decimal import Decimal

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from typed_harness import AGGREGATIONS, diff_typed, run_reference_typed, run_spark_typed

import eventtime
from property_tests.strategies import TYPED_COLUMNS, typed_scenarios

pytestmark = pytest.mark.spark


def _row(rid, ts, **values):
    row = {name: None for name, _ in TYPED_COLUMNS}
    row.update(rid=rid, ts=ts, hb=False, **values)
    return row


# Real queries: no shrinking (each step would be a query); derandomize makes a failure reproducible.
@settings(max_examples=6, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@pytest.mark.slow
@given(typed_scenarios(max_batches=3, max_records=6))
def test_typed_columns_equal_reference(spark, sc):
    difference = diff_typed(run_reference_typed(sc), run_spark_typed(sc, spark))
    assert difference is None, difference


# route() splits window_aggregate's own output by kind in the tasks (Collect.java); any other
# DataFrame -- here the same columns through a projection -- goes through toArrow and is split on
# the driver. Both give the reference model's tables, value for value.
@settings(max_examples=3, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@pytest.mark.slow
@given(typed_scenarios(max_batches=3, max_records=6))
def test_typed_columns_through_to_arrow_equal_reference(spark, sc):
    difference = diff_typed(run_reference_typed(sc), run_spark_typed(sc, spark, after=lambda out: out.select("*")))
    assert difference is None, difference


# Session state and its due index keep typed, nullable keys (decimals, dates, timestamps,
# booleans, big integers) exactly: the due index stores the keys it lists and finds their state
# again by them. Per-partition watermarks key the driver's table by Spark's text of typed
# partitions (INT up to 2^31 - 1, null), here with an idle timeout of one batch interval.
VARIANTS = {
    "session_windows": {"window": {"type": "session", "gap_ms": 1000}},
    "sliding_partly_late": {"window": {"type": "sliding", "size_ms": 3000, "slide_ms": 500, "offset_ms": 0},
                            "report_partly_late": True},
    "per_partition_watermarks": {"watermark": {"mode": "per_partition", "idle_timeout_ms": 1000}},
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@settings(max_examples=3, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck),
          phases=[Phase.explicit, Phase.reuse, Phase.generate])
@pytest.mark.slow
@given(typed_scenarios(max_batches=3, max_records=6))
def test_typed_rows_of_each_variant_equal_reference(spark, variant, sc):
    sc = {**sc, **VARIANTS[variant]}
    difference = diff_typed(run_reference_typed(sc), run_spark_typed(sc, spark))
    assert difference is None, difference


def test_a_record_too_late_for_some_of_its_sliding_windows_is_reported_with_the_ones_it_missed(spark):
    """Sliding 3 s / 1 s windows, W = 4.5 s after the first batch: a record at 2.5 s belongs to
    [0, 3), [1, 4) and [2, 5); the first two have expired, so it is counted in [2, 5) and reported
    partly late for [0, 4). Off (the default), it is counted the same and not reported."""
    first = [_row(0, 1000, k_big=1, v_big=1), _row(1, 4500, k_big=1, v_big=2)]
    second = [_row(2, 2500, k_big=1, v_big=4)]
    third = [_row(3, 9000, k_big=2, v_big=8)]  # W = 9 s: [2, 5) fires
    sc = {**_bigint_scenario(), "window": {"type": "sliding", "size_ms": 3000, "slide_ms": 1000, "offset_ms": 0},
          "batches": [first, second, third], "report_partly_late": True}
    got = run_spark_typed(sc, spark)
    assert diff_typed(run_reference_typed(sc), got) is None
    [late] = got[1]["records"]
    assert (late["reason"], late["windows"], late["payload"]["rid"]) == ("partly_late", (0, 4000), 2)
    counts = {(p["window_start"], p["count"], p["s_big"]) for p in got[2]["panes"] if p["key"] == (1,)}
    assert (2000, 2, 6) in counts  # [2, 5) holds it: 2 + 4
    quiet = run_spark_typed({**sc, "report_partly_late": False}, spark)
    assert quiet[1]["records"] == [] and quiet[2]["panes"] == got[2]["panes"]


def _bigint_scenario():
    """Keys 2**53 and 2**53 + 1 beside a null key, an INT
    partition with a null, a BIGINT payload above 2**53 in a late record."""
    big = 2**53
    first = [
        _row(0, 1000, k_big=big, part=2, v_big=big + 1),
        _row(1, 1100, k_big=big + 1, part=None, v_big=1),
        _row(2, 1200, k_big=None, part=2, v_big=None),
        _row(3, 9000, k_big=7, part=1),
    ]
    second = [_row(4, 500, k_big=big + 1, part=2, v_big=big + 1, v_dec=Decimal("9999999999999999.9999"))]
    return {
        "keys": ("k_big",),
        "window": {"type": "tumbling", "size_ms": 3000, "offset_ms": 0},
        "max_out_of_orderness_ms": 0,
        "allowed_lateness_ms": 0,
        "accumulation": "accumulating",
        "emit": "on_time_and_late",
        "batches": [first, second],
    }


def test_bigint_keys_payloads_and_int_partitions_are_exact(spark):
    sc = _bigint_scenario()
    got = run_spark_typed(sc, spark)
    assert diff_typed(run_reference_typed(sc), got) is None
    panes = {p["key"]: p for p in got[0]["panes"] if p["window_start"] == 0}
    assert set(panes) == {(2**53,), (2**53 + 1,), (None,)}  # three groups, not two
    assert [panes[k]["count"] for k in ((2**53,), (2**53 + 1,), (None,))] == [1, 1, 1]
    assert panes[(2**53,)]["s_big"] == 2**53 + 1 and type(panes[(2**53,)]["s_big"]) is int
    [late] = got[1]["records"]
    assert late["kind"] == "late" and late["key"] == (2**53 + 1,)
    assert late["payload"]["v_big"] == 9007199254740993
    assert late["payload"]["v_dec"] == Decimal("9999999999999999.9999")
    assert late["partition"] == "2"  # not "2.0", although a null partition shared the bucket


def test_null_int_and_bigint_keys_form_their_own_group(spark):
    rows = [_row(i, 1000 + i, k_int=v, k_str="a", part=None) for i, v in enumerate([None, 1, None, 2**31 - 1])]
    rows.append(_row(9, 9000, k_int=1, k_str=None))
    sc = {**_bigint_scenario(), "keys": ("k_int", "k_str"), "batches": [rows]}
    got = run_spark_typed(sc, spark)
    assert diff_typed(run_reference_typed(sc), got) is None
    counts = {p["key"]: p["count"] for p in got[0]["panes"] if p["window_start"] == 0}
    assert counts == {(None, "a"): 2, (1, "a"): 1, (2**31 - 1, "a"): 1}


def test_every_aggregation_keeps_its_spark_type(spark):
    from pyspark.sql import types as T

    ddl = ", ".join(f"{name} {t}" for name, t in TYPED_COLUMNS)
    df = spark.createDataFrame([], ddl)
    out = df.transform(eventtime.with_event_time("ts", unit="ms")).transform(
        eventtime.window_aggregate(keys=["k_big"], window=eventtime.Tumbling(1000), aggregations=AGGREGATIONS)
    )
    types = {f.name: f.dataType for f in out.schema.fields}
    assert types["k_big"] == T.LongType()
    assert types["s_big"] == T.LongType() and types["s_small"] == T.LongType()
    assert types["s_dec"] == T.DecimalType(30, 4)  # Spark's sum(decimal(20,4))
    assert types["mn_dec"] == T.DecimalType(20, 4)
    assert types["mx_date"] == T.DateType() and types["f_ts"] == T.TimestampType()
    assert types["mx_bool"] == T.BooleanType() and types["l_str"] == T.StringType()
