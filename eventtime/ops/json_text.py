"""Exact JSON text of a row's values (the late table's ``payload`` and ``key`` columns).

One value or row in plain Python; a whole batch a column at a time over pyarrow arrays
(numpy, pandas and pyarrow imported when met), so the sinks and ``spark/batch_tables.py``
share one set of rules. ``json.dumps`` alone would turn a ``Decimal`` into a quoted string
(or a float) and has no rule for dates and timestamps; this renders every value a Spark
column can hold without a float round trip:

* integers of any width as JSON integers, ``Decimal`` as a JSON number with its scale;
* finite floats with Python's shortest repr, NaN / Infinity as the strings Spark writes;
* dates as ``"YYYY-MM-DD"``, timestamps as ISO-8601 in UTC (``"2024-05-01T01:00:00+00:00"``);
* bytes as hex, arrays and structs recursively, anything else as its ``str``.

>>> from decimal import Decimal
>>> row_json([("id", 2**53 + 1), ("amount", Decimal("12.50")), ("ok", None)])
'{"id": 9007199254740993, "amount": 12.50, "ok": null}'
"""

from __future__ import annotations

import datetime as _dt
import json
import math
from decimal import Decimal
from json.encoder import encode_basestring as _quote  # = json.dumps(text, ensure_ascii=False)
from typing import Any, Iterable, Optional

__all__ = ["render_value", "row_json", "rows_json_array", "key_json", "keys_json", "keys_json_array", "to_python"]


def to_python(value: Any) -> Any:
    """A numpy / pandas scalar as the plain Python value it stands for (``None`` for NA/NaT)."""
    if value is None:
        return None
    module = type(value).__module__
    if module.startswith("pandas"):
        import pandas as pd

        if value is pd.NA or value is pd.NaT:
            return None
        if isinstance(value, pd.Timestamp):
            return value
    if module == "numpy":
        import numpy as np

        if isinstance(value, np.datetime64):
            import pandas as pd

            return None if np.isnat(value) else pd.Timestamp(value)
        if isinstance(value, np.generic):
            return value.item()
    return value


def _timestamp_text(value: _dt.datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(_dt.timezone.utc)
    else:
        value = value.replace(tzinfo=_dt.timezone.utc)
    return value.isoformat()


def render_value(value: Any) -> str:
    """The JSON text of one value (see the module docstring)."""
    kind = type(value)  # the common exact types first: this runs once per late record's field
    if kind is str:
        return _quote(value)  # raw UTF-8, as Spark's to_json writes
    if kind is int:
        return str(value)
    if value is None:
        return "null"
    if kind is float and math.isfinite(value):
        return repr(value)
    value = to_python(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return '"NaN"'
        if math.isinf(value):
            return '"Infinity"' if value > 0 else '"-Infinity"'
        return repr(value)
    if isinstance(value, Decimal):
        if not value.is_finite():
            return json.dumps(str(value))
        return format(value, "f")
    if isinstance(value, str):
        return _quote(value)
    if isinstance(value, _dt.datetime):  # pandas.Timestamp too; before date (a subclass)
        return json.dumps(_timestamp_text(value))
    if isinstance(value, _dt.date):
        return json.dumps(value.isoformat())
    if isinstance(value, (bytes, bytearray, memoryview)):
        return json.dumps(bytes(value).hex())
    if isinstance(value, dict):
        return row_json(value.items())
    if hasattr(value, "tolist") and not isinstance(value, str):
        value = value.tolist()
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(render_value(v) for v in value) + "]"
    return json.dumps(str(value))


def row_json(items: Iterable[tuple[str, Any]], sort_keys: bool = False, compact: bool = False) -> str:
    """A JSON object of ``(name, value)`` pairs, spaced like ``json.dumps`` (``", "``, ``": "``)
    or, with ``compact``, without spaces (like Spark's ``to_json``)."""
    pairs = sorted(items, key=lambda kv: kv[0]) if sort_keys else items
    comma, colon = (",", ":") if compact else (", ", ": ")
    return "{" + comma.join(_quote(str(name)) + colon + render_value(v) for name, v in pairs) + "}"


def key_json(names: Iterable[str], values: Iterable[Any]) -> str:
    """The ``key`` column of the results and late-data tables: the key columns in their order,
    compact — the text Spark's ``to_json(struct(k1, k2))`` gives for string, integer and
    boolean keys, so that both tables join on it.

    >>> key_json(["user", "shop"], ["a", 2**53 + 1])
    '{"user":"a","shop":9007199254740993}'
    """
    return row_json(zip(names, values), compact=True)


def _objects(names: list[str], columns: list[list[Any]], compact: bool) -> list[str]:
    """``row_json`` of each row of ``columns`` (one list of values per name), built column by
    column: each value rendered by ``render_value``, each name's prefix once."""
    if not names:
        return []
    prefixes = _prefixes(names, compact)
    texts = [[prefix + render_value(v) for v in values] for prefix, values in zip(prefixes, columns)]
    return ["".join(parts) + "}" for parts in zip(*texts)]


def _prefixes(names: list[str], compact: bool) -> list[str]:
    comma, colon = (",", ":") if compact else (", ", ": ")
    return ["{" + _quote(str(names[0])) + colon] + [comma + _quote(str(n)) + colon for n in names[1:]]


def _needs_escape(column: Any) -> bool:
    """Whether any text of a pyarrow string array has a byte ``encode_basestring`` escapes: a
    control character, a quote or a backslash."""
    import numpy as np

    if not len(column):
        return False
    offsets = np.frombuffer(column.buffers()[1], dtype=np.int32)[column.offset: column.offset + len(column) + 1]
    data = column.buffers()[2]
    if data is None:
        return False
    data = np.frombuffer(data, dtype=np.uint8)[offsets[0]: offsets[-1]]
    return bool(((data < 0x20) | (data == 0x22) | (data == 0x5C)).any())


def _column_texts(column: Any) -> list[Any]:
    """The ``render_value`` texts of a pyarrow array's values, as parts to join row by row
    (string arrays and literal strings): integers, booleans and text that needs no escaping by
    pyarrow's kernels, the rest value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    kind = column.type
    if pa.types.is_integer(kind):
        return [pc.cast(column, pa.string()).fill_null("null")]
    if pa.types.is_boolean(kind):
        return [pc.if_else(column, "true", "false").fill_null("null")]
    if pa.types.is_string(kind) and not _needs_escape(column):
        if not column.null_count:
            return ['"', column, '"']
        return [pc.binary_join_element_wise('"', column, '"', "").fill_null("null")]
    if pa.types.is_float64(kind):
        return [_float_texts(column)]
    return [pa.array([render_value(v) for v in column.to_pylist()], pa.string())]


def _float_texts(column: Any) -> Any:
    """``render_value`` of a float64 array: pyarrow's shortest text where Python's ``repr`` is
    the same digits in fixed notation (0, and 1e-4 <= |v| < 1e16, where pyarrow writes no
    exponent), with the ``.0`` repr gives a whole number; the rest value by value."""
    import pyarrow as pa
    import pyarrow.compute as pc

    text = pc.cast(column, pa.string())
    magnitude = pc.abs(column)
    fixed = pc.or_(pc.equal(magnitude, 0), pc.and_(pc.greater_equal(magnitude, 1e-4), pc.less(magnitude, 1e16)))
    fast = pc.and_(fixed, pc.invert(pc.match_substring_regex(text, "[eEnNiI]"))).fill_null(True)
    whole = pc.invert(pc.match_substring(text, "."))
    text = pc.if_else(whole, pc.binary_join_element_wise(text, ".0", ""), text).fill_null("null")
    slow = pc.invert(fast)
    if not pc.any(slow).as_py():
        return text
    values = column.filter(slow).to_pylist()
    return pc.replace_with_mask(text, slow, pa.array([render_value(v) for v in values], pa.string()))


def _objects_array(names: list[str], columns: list[Any], compact: bool) -> Any:
    """``_objects`` of pyarrow arrays, as a string array: the columns' texts joined by pyarrow."""
    import pyarrow.compute as pc

    parts: list[Any] = []
    for part in [p for prefix, column in zip(_prefixes(names, compact), columns) for p in [prefix, *_column_texts(column)]] + ["}"]:
        if isinstance(part, str) and parts and isinstance(parts[-1], str):
            parts[-1] += part
        else:
            parts.append(part)
    return pc.binary_join_element_wise(*parts, "")


def rows_json_array(rows: Any) -> Any:
    """``row_json`` of every row of a pyarrow ``StructArray`` (null for a null row), rendered a
    column at a time, as a pyarrow string array: the late table's ``payload`` of a batch.

    >>> import pyarrow as pa
    >>> rows_json_array(pa.array([{"id": 1, "name": "a"}, None])).to_pylist()
    ['{"id": 1, "name": "a"}', None]
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    names = [field.name for field in rows.type]
    if not names:
        return pa.array([None if row is None else "{}" for row in rows.to_pylist()], pa.string())
    texts = _objects_array(names, rows.flatten(), compact=False)
    if rows.null_count:
        return pc.if_else(rows.is_valid(), texts, pa.scalar(None, pa.string()))
    return texts


def keys_json(names: list[str], columns: list[list[Any]]) -> list[str]:
    """``key_json`` of each row of the key ``columns`` (one list of values per key column).

    >>> keys_json(["user", "shop"], [["a", "b"], [1, None]])
    ['{"user":"a","shop":1}', '{"user":"b","shop":null}']
    """
    return _objects(list(names), columns, compact=True)


def keys_json_array(names: list[str], columns: list[Any]) -> Any:
    """``keys_json`` of pyarrow arrays (one per key column), as a pyarrow string array."""
    import pyarrow as pa

    if not names:
        return pa.array(["{}"] * (len(columns[0]) if columns else 0), pa.string())
    return _objects_array(list(names), columns, compact=True)
