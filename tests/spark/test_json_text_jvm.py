"""The late table's JSON texts rendered in the JVM (JsonText.java, what Spark's tasks write when
they write the records) equal, character for character, those of eventtime/ops/json_text.py
(what the Python tasks and the driver write): generated rows of every type the JVM renders,
doubles from every bit pattern, text with control characters, nested arrays, maps and structs."""

from __future__ import annotations

import datetime as dt
import decimal
import math
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from eventtime.ops.json_text import keys_json_array, rows_json_array

pytestmark = pytest.mark.spark

SCHEMA = T.StructType([
    T.StructField("b", T.BooleanType()), T.StructField("i8", T.ByteType()), T.StructField("i32", T.IntegerType()),
    T.StructField("i64", T.LongType()), T.StructField("f32", T.FloatType()), T.StructField("f64", T.DoubleType()),
    T.StructField("dec", T.DecimalType(12, 3)), T.StructField("s", T.StringType()), T.StructField("bin", T.BinaryType()),
    T.StructField("d", T.DateType()), T.StructField("ts", T.TimestampType()), T.StructField("ntz", T.TimestampNTZType()),
    T.StructField("arr", T.ArrayType(T.DoubleType())), T.StructField("m", T.MapType(T.StringType(), T.LongType())),
    T.StructField("st", T.StructType([T.StructField("x", T.StringType()), T.StructField("y", T.DoubleType())])),
])
EDGES = [0.0, -0.0, 1e-4, 1e-5, 1e15, 1e16, 1e17, 5e-324, 1.7976931348623157e308, 2.0**53, 0.1, 1 / 3, 123456789.125,
         2e23, 9007199254740993.0, math.nan, math.inf, -math.inf, 1e22, 4.35, 0.3]

doubles = st.one_of(st.sampled_from(EDGES), st.floats(),
                    st.integers(0, 2**64 - 1).map(lambda bits: struct.unpack("<d", struct.pack("<Q", bits))[0]))
when = st.datetimes(min_value=dt.datetime(1, 1, 2), max_value=dt.datetime(9999, 12, 30))
row = st.tuples(
    st.none() | st.booleans(), st.none() | st.integers(-128, 127), st.none() | st.integers(-2**31, 2**31 - 1),
    st.none() | st.integers(-2**63, 2**63 - 1), st.none() | st.floats(width=32), st.none() | doubles,
    st.none() | st.decimals(min_value=-10**8, max_value=10**8, places=3, allow_nan=False),
    st.none() | st.text(max_size=12), st.none() | st.binary(max_size=6), st.none() | st.dates(),
    st.none() | when.map(lambda t: t.replace(tzinfo=dt.timezone.utc)), st.none() | when,
    st.none() | st.lists(st.none() | doubles, max_size=3),
    st.none() | st.dictionaries(st.text(max_size=3), st.none() | st.integers(-5, 5), max_size=2),
    st.none() | st.tuples(st.none() | st.text(max_size=4), st.none() | doubles),
)


def _jvm_json(df, struct_column, compact: bool):
    return Column(df.sparkSession._jvm.eventtime.jvm.JsonText.column(struct_column._jc, compact))


@settings(max_examples=6, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(st.lists(row, min_size=1, max_size=120))
def test_the_jvm_renders_every_value_as_python_does(spark, rows):
    df = spark.createDataFrame(rows, SCHEMA).select(F.monotonically_increasing_id().alias("n"), F.struct(*SCHEMA.names).alias("r"))
    df = df.union(df.limit(1).select("n", F.lit(None).cast(SCHEMA).alias("r")))  # a null row
    got = df.select("n", "r", _jvm_json(df, F.col("r"), False).alias("payload"),
                    _jvm_json(df, F.struct(*[F.col(f"r.{c}").alias(c) for c in ("s", "i64", "b")]), True).alias("key")).toArrow()
    record = got.column("r").combine_chunks()
    assert got.column("payload").to_pylist() == rows_json_array(record).to_pylist()
    keys = [record.field(name) for name in ("s", "i64", "b")]
    assert got.column("key").to_pylist() == keys_json_array(["s", "i64", "b"], keys).to_pylist()


def test_a_decimal_keeps_its_scale_and_a_double_its_repr(spark):
    df = spark.createDataFrame([(decimal.Decimal("12.500"), 1e-05, 1e16)], "d decimal(10,3), x double, y double")
    (text,) = df.select(_jvm_json(df, F.struct("d", "x", "y"), False)).first()
    assert text == '{"d": 12.500, "x": 1e-05, "y": 1e+16}'


def test_doubles_of_random_bit_patterns_print_as_python_repr(spark):
    import random

    rng = random.Random(20261207)
    values = [struct.unpack("<d", struct.pack("<Q", rng.getrandbits(64)))[0] for _ in range(100_000)]
    values += [rng.uniform(-1e6, 1e6) for _ in range(20_000)] + [rng.randint(-10**8, 10**8) / 100 for _ in range(20_000)]
    values += [2.0**-1074 * k for k in range(1, 200)] + [10.0**e for e in range(-320, 309)]
    df = spark.createDataFrame([(v,) for v in values], "x double")
    got = [row[0] for row in df.select(_jvm_json(df, F.struct("x"), True)).collect()]
    expected = ['{"x":' + ('"NaN"' if math.isnan(v) else '"Infinity"' if v == math.inf else '"-Infinity"'
                           if v == -math.inf else repr(v)) + "}" for v in values]
    wrong = [(v, g) for v, g, e in zip(values, got, expected) if g != e]
    assert not wrong, wrong[:5]
