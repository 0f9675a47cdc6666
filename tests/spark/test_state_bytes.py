"""The bytes the JVM engine keeps in state (and shuffles as partials) are pinned here, written out
by hand with ``struct``: a checkpoint written by an earlier version must stay readable. The
encoding is java.io.DataOutputStream's (big-endian), with zigzag variable-length integers. The
operator's output rows are Spark's own binary rows, which its serializer would write."""

from __future__ import annotations

import json
import struct
from decimal import Decimal

import pytest
from py4j.java_gateway import get_field, set_field
from pyspark.sql import types as T

from eventtime import Tumbling, count, first, min, sum
from eventtime.core.config import EngineConfig
from eventtime.spark.aggregate import agg_type, ensure_engine, output_schema
from eventtime.spark.plan import operator_plan

pytestmark = pytest.mark.spark


def varlong(v: int) -> bytes:
    z = ((v << 1) ^ (v >> 63)) & (2**64 - 1)
    out = bytearray()
    while z & ~0x7F:
        out.append((z & 0x7F) | 0x80)
        z >>= 7
    out.append(z)
    return bytes(out)


@pytest.fixture(scope="module")
def jvm_spec(spark):
    ensure_engine(spark)
    record = T.StructType([T.StructField("key", T.StringType()), T.StructField("x", T.DoubleType()),
                           T.StructField("n", T.LongType()), T.StructField("s", T.StringType())])
    aggs = (count(), sum("x"), sum("n"), min("s"), first("s"))
    window = Tumbling("1 minute")
    config = EngineConfig(window, aggs)
    out = output_schema([record["key"]], [T.StructField(a.name, agg_type(a, record)) for a in aggs])
    spec = operator_plan(config, record, out, ["key"], bounded=False)
    return spark._jvm, spark._jvm.eventtime.jvm.plan.Spec(json.dumps(spec))


def _accs(jvm, fields: list[dict]):
    """An Acc[] with the given public fields set."""
    from pyspark import SparkContext

    array = SparkContext._gateway.new_array(jvm.eventtime.jvm.state.Acc, len(fields))
    for i, values in enumerate(fields):
        acc = jvm.eventtime.jvm.state.Acc()
        for name, value in values.items():
            set_field(acc, name, value)
        array[i] = acc
    return array


def test_accumulators_are_written_as_data_output_stream_bytes(jvm_spec):
    jvm, spec = jvm_spec
    accs = _accs(jvm, [
        {"n": 3},                                     # count
        {"n": 2, "d": 12.5},                          # sum of doubles
        {"n": 2, "lo": -5, "hi": -1},                 # sum of longs: hi * 2^64 + unsigned lo
        {"n": 1, "v": "é"},                           # min of text: tag 8, length, UTF-8
        {"n": 1, "t": 1_700_000_000_123, "v": "b"},   # first: its event time, then the value
    ])
    expected = (
        varlong(3)
        + varlong(2) + struct.pack(">d", 12.5)
        + varlong(2) + varlong(-5) + varlong(-1)
        + varlong(1) + b"\x08" + struct.pack(">i", 2) + "é".encode()
        + varlong(1) + varlong(1_700_000_000_123) + b"\x08" + struct.pack(">i", 1) + b"b"
    )
    encoded = bytes(jvm.eventtime.jvm.state.Acc.encode(spec, accs))
    assert encoded == expected
    back = jvm.eventtime.jvm.state.Acc.decode(spec, bytearray(expected))
    assert [get_field(back[i], f) for i, f in ((0, "n"), (1, "n"), (1, "d"), (2, "lo"), (2, "hi"), (3, "v"), (4, "t"), (4, "v"))] == \
        [3, 2, 12.5, -5, -1, "é", 1_700_000_000_123, "b"]


def test_every_value_type_keeps_its_bytes(jvm_spec):
    """Each tagged value: read into the Java type it names, and written back to the same bytes
    (py4j turns boxed numbers into Python ones, so the values start from their bytes)."""
    jvm, spec = jvm_spec
    stamp = jvm.java.sql.Timestamp(1_700_000_000_123)
    stamp.setNanos(123_456_789)
    cases = [
        (b"\x00", None),
        (b"\x01" + struct.pack(">q", -(2**40)), -(2**40)),
        (b"\x02" + struct.pack(">i", -7), -7),
        (b"\x03" + struct.pack(">h", -300), -300),
        (b"\x04" + struct.pack(">b", -8), -8),
        (b"\x05" + struct.pack(">d", -0.1), -0.1),
        (b"\x06" + struct.pack(">f", 1.5), 1.5),
        # scale, then the unscaled value as BigInteger.toByteArray: -1234500 is 0xED29BC
        (b"\x07" + struct.pack(">i", 4) + struct.pack(">i", 3) + (-1234500).to_bytes(3, "big", signed=True), Decimal("-123.4500")),
        (b"\x08" + struct.pack(">i", 3) + "aé".encode(), "aé"),
        (b"\x09\x01", True),
        (b"\x0a" + struct.pack(">q", 19_000), jvm.java.sql.Date.valueOf(jvm.java.time.LocalDate.ofEpochDay(19_000))),
        (b"\x0b" + struct.pack(">q", 19_000), jvm.java.time.LocalDate.ofEpochDay(19_000)),
        (b"\x0c" + struct.pack(">q", 1_700_000_000_123) + struct.pack(">i", 123_456_789), stamp),
        (b"\x0d" + struct.pack(">q", -5) + struct.pack(">i", 7), jvm.java.time.Instant.ofEpochSecond(-5, 7)),
        (b"\x0e" + struct.pack(">q", 86_401) + struct.pack(">i", 9), jvm.java.time.LocalDateTime.ofEpochSecond(86_401, 9, jvm.java.time.ZoneOffset.UTC)),
        (b"\x0f" + struct.pack(">i", 2) + b"\x00\xff", b"\x00\xff"),
    ]
    for tagged, expected in cases:
        whole = varlong(0) * 3 + varlong(1) + tagged + varlong(0)
        accs = jvm.eventtime.jvm.state.Acc.decode(spec, bytearray(whole))
        assert bytes(jvm.eventtime.jvm.state.Acc.encode(spec, accs)) == whole, tagged
        value = get_field(accs[3], "v")
        if isinstance(expected, bytes):
            assert bytes(value) == expected
        elif expected is None or isinstance(expected, (bool, int, float, str)):
            assert value == expected and type(value) is type(expected), (value, expected)
        elif isinstance(expected, Decimal):
            assert value.as_tuple() == expected.as_tuple(), (value, expected)  # the scale too
        else:
            assert value.equals(expected), (value, expected)
    # and from a value set here, not read: the same bytes
    accs = _accs(jvm, [{"n": 0}, {"n": 0}, {"n": 0}, {"n": 1, "v": stamp}, {"n": 0}])
    assert bytes(jvm.eventtime.jvm.state.Acc.encode(spec, accs)) == varlong(0) * 3 + varlong(1) + cases[12][0] + varlong(0)


def test_a_truncated_state_value_fails_with_a_message(jvm_spec):
    from py4j.protocol import Py4JJavaError

    jvm, spec = jvm_spec
    whole = varlong(0) + varlong(2) + struct.pack(">d", 1.0) + varlong(0) * 3
    with pytest.raises(Py4JJavaError, match="ends early"):
        jvm.eventtime.jvm.state.Acc.decode(spec, bytearray(whole[:5]))


def test_output_rows_are_written_as_spark_serializer_bytes(spark):
    """The operator's output rows with numbers, booleans, text and binary are written by
    RowWriter, the rest by Spark's serializer: the bytes are Spark's, row for row (seeded rows
    with nulls, NaN, -0.0, infinities, extreme integers, empty and non-ASCII text); text given as
    Spark's own UTF8String (a map-side partial's key) gives the same bytes too."""
    mismatched, written = spark._jvm.eventtime.jvm.spark.RowWriterCheck.run(11, 5000)
    assert mismatched == 0
    assert 1000 < written < 5000  # the others hold a decimal, a date or a struct
