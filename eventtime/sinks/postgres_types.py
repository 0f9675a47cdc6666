"""PostgreSQL's side of the pane columns: the column type the sink creates for each Arrow
type, and the JSON text of nested values (``jsonb``) and keys."""

from __future__ import annotations

import datetime as _dt
import decimal
import functools
import json
from typing import Any

import pyarrow as pa

__all__ = ["postgres_type", "dumps"]


def postgres_type(dtype: pa.DataType) -> str:
    """The PostgreSQL column type the sink creates for an Arrow type.

    >>> postgres_type(pa.int64()), postgres_type(pa.timestamp("us", tz="UTC")), postgres_type(pa.decimal128(10, 2))
    ('bigint', 'timestamptz', 'numeric(10,2)')
    """
    if pa.types.is_boolean(dtype):
        return "boolean"
    if pa.types.is_int8(dtype) or pa.types.is_int16(dtype) or pa.types.is_uint8(dtype):
        return "smallint"
    if pa.types.is_int32(dtype) or pa.types.is_uint16(dtype):
        return "integer"
    if pa.types.is_int64(dtype) or pa.types.is_uint32(dtype):
        return "bigint"
    if pa.types.is_uint64(dtype):
        return "numeric(20,0)"
    if pa.types.is_float16(dtype) or pa.types.is_float32(dtype):
        return "real"
    if pa.types.is_float64(dtype):
        return "double precision"
    if pa.types.is_decimal(dtype):
        return f"numeric({dtype.precision},{dtype.scale})"
    if pa.types.is_string(dtype) or pa.types.is_large_string(dtype) or pa.types.is_null(dtype):
        return "text"
    if pa.types.is_binary(dtype) or pa.types.is_large_binary(dtype):
        return "bytea"
    if pa.types.is_timestamp(dtype):
        return "timestamptz" if dtype.tz else "timestamp"
    if pa.types.is_date(dtype):
        return "date"
    if pa.types.is_nested(dtype):
        return "jsonb"
    raise TypeError(f"no PostgreSQL type for the Arrow type {dtype}")


def _json_default(value: Any) -> Any:
    if isinstance(value, (_dt.datetime, _dt.date)):
        return value.isoformat()
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, bytes):
        return value.hex()
    raise TypeError(f"not JSON serialisable: {type(value).__name__}")


dumps = functools.partial(json.dumps, default=_json_default, sort_keys=True)
