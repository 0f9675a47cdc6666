"""The late table's ``payload`` and ``key`` texts of a whole batch (``rows_json_array`` / ``keys_json``,
rendered a column at a time) are, row by row, the texts of ``row_json`` / ``key_json``: one set
of rules, so generated typed and nullable rows must give the same bytes both ways."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from eventtime.ops.json_text import key_json, keys_json, keys_json_array, row_json, rows_json_array

UTC = dt.timezone.utc
SETTINGS = settings(max_examples=200, derandomize=True, deadline=None)

# (arrow type, values of it, None included)
COLUMN_KINDS = {
    "text": (pa.string(), st.text(max_size=6)),
    "int64": (pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    "double": (pa.float64(), st.floats(allow_nan=True, allow_infinity=True)),
    "bool": (pa.bool_(), st.booleans()),
    "decimal": (pa.decimal128(12, 3), st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False)),
    "date": (pa.date32(), st.dates(min_value=dt.date(1900, 1, 1), max_value=dt.date(2200, 1, 1))),
    "timestamp": (pa.timestamp("us", tz="UTC"),
                  st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1), timezones=st.just(UTC))),
    "binary": (pa.binary(), st.binary(max_size=4)),
    "list": (pa.list_(pa.int64()), st.lists(st.one_of(st.none(), st.integers(-5, 5)), max_size=3)),
}


@st.composite
def struct_arrays(draw):
    kinds = draw(st.lists(st.sampled_from(sorted(COLUMN_KINDS)), min_size=1, max_size=5))
    n = draw(st.integers(0, 6))
    fields, arrays = [], []
    for i, kind in enumerate(kinds):
        arrow_type, values = COLUMN_KINDS[kind]
        arrays.append(pa.array(draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)), arrow_type))
        fields.append(draw(st.sampled_from(["id", "ts", "name \"q\"", "ü", "amount"])) + str(i))
    nested = draw(st.booleans())
    if nested:  # a struct column inside the row
        arrays.append(pa.StructArray.from_arrays([arrays[0]], names=["inner"]))
        fields.append("nested")
    row_valid = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    mask = pa.array([not ok for ok in row_valid], pa.bool_())
    return pa.StructArray.from_arrays(arrays, names=fields, mask=mask)


@SETTINGS
@given(struct_arrays())
def test_rows_json_is_row_json_of_each_row(rows):
    expected = [None if rec is None else row_json(rec.items()) for rec in rows.to_pylist()]
    assert _rows_json(rows) == expected


@SETTINGS
@given(struct_arrays())
def test_keys_json_is_key_json_of_each_row(rows):
    names = [f.name for f in rows.type]
    columns = [column.to_pylist() for column in rows.flatten()]
    assert keys_json(names, columns) == [key_json(names, values) for values in zip(*columns)]


@SETTINGS
@given(struct_arrays(), st.integers(0, 3))
def test_keys_json_array_is_key_json_of_each_row(rows, start):
    """The router's path: the key columns as pyarrow arrays (sliced ones too), rendered by kernels."""
    rows = rows.slice(min(start, len(rows)))
    names = [f.name for f in rows.type]
    columns = rows.flatten()
    expected = [key_json(names, values) for values in zip(*[c.to_pylist() for c in columns])]
    assert keys_json_array(names, columns).to_pylist() == expected


def _rows_json(rows):
    return rows_json_array(rows).to_pylist()


def test_text_that_needs_escaping_and_sliced_rows():
    names = ["plain", "quote \"x\"", "back\\slash", "new\nline", "bell\x01", "ü €", "", None]
    rows = pa.StructArray.from_arrays([pa.array(names, pa.string()), pa.array(range(len(names)), pa.int64())],
                                      names=["text", "n"])
    for part in (rows, rows.slice(1), rows.slice(3, 2), rows.slice(8)):
        expected = [row_json(rec.items()) for rec in part.to_pylist()]
        assert _rows_json(part) == expected
    assert _rows_json(rows)[1] == '{"text": "quote \\"x\\"", "n": 1}'
    assert _rows_json(rows)[7] == '{"text": null, "n": 7}'


def test_examples_at_the_edges():
    rows = pa.array([{"id": 2**53 + 1, "amount": Decimal("12.50"), "x": float("nan")}, None,
                     {"id": None, "amount": None, "x": float("-inf")}],
                    pa.struct([("id", pa.int64()), ("amount", pa.decimal128(10, 2)), ("x", pa.float64())]))
    assert _rows_json(rows) == ['{"id": 9007199254740993, "amount": 12.50, "x": "NaN"}', None,
                               '{"id": null, "amount": null, "x": "-Infinity"}']
    assert _rows_json(pa.array([{}, None], pa.struct([]))) == ["{}", None]
    assert keys_json([], []) == []


@SETTINGS
@given(st.lists(st.one_of(st.none(), st.floats(), st.floats(min_value=1e-5, max_value=1e17),
                          st.integers(-(10**17), 10**17).map(float)), max_size=50))
def test_a_double_column_renders_as_repr_of_each_value(values):
    """Doubles are rendered a column at a time (pyarrow's shortest text where it is repr's), at
    the edges of repr's fixed notation too."""
    edges = [0.0, -0.0, 1e-4, -1e-4, 9.999999999999999e-05, 1e16, 9999999999999998.0, 1e15, 100.0, 0.1 + 0.2,
             5e-324, 1.7976931348623157e308]
    column = pa.array(values + edges, pa.float64())
    rows = pa.StructArray.from_arrays([column], names=["v"])
    assert _rows_json(rows) == [row_json([("v", v)]) for v in values + edges]
