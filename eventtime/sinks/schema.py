"""The columns of the two Delta tables, and the Arrow normalisation of a batch to them.

The late-data table: the record columns of the router contract (docs/architecture.md) plus
the run's columns (``pipeline``, ``query_id``, ``batch_id``, ``detected_at``,
``detected_date``); the results table: the panes plus ``pipeline``, ``query_id``,
``batch_id``, ``written_at`` and the ``key`` text.
"""

from __future__ import annotations

import datetime as _dt
from typing import Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..ops.json_text import keys_json

__all__ = ["prepare_panes", "prepare_records", "TS", "RECORD_SCHEMA", "LATE_META_SCHEMA", "PANE_META_SCHEMA",
           "PANE_REQUIRED", "TABLE_COLUMNS", "superseded"]

TS = pa.timestamp("us", tz="UTC")

#: The record columns of the router contract and the types the late table stores.
RECORD_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("reason", pa.string()),
        ("key", pa.string()),
        ("event_time", TS),
        ("raw_timestamp", pa.string()),
        ("watermark", TS),
        ("lateness_ms", pa.int64()),
        ("window_start", TS),
        ("window_end", TS),
        ("partition", pa.string()),
        ("offset", pa.int64()),
        ("payload", pa.string()),
    ]
)

#: Columns the late sink adds in front of the record columns.
LATE_META_SCHEMA = pa.schema(
    [
        ("pipeline", pa.string()),
        ("query_id", pa.string()),
        ("batch_id", pa.int64()),
        ("detected_at", TS),
        ("detected_date", pa.date32()),
        # "<query_id>:<batch_id>:<row>", unique per record (a batch is written once): what reconcile marks
        ("record_id", pa.string()),
    ]
)

PANE_REQUIRED = ("window_start", "window_end", "pane_timing", "pane_index", "is_final")
#: Session panes: the bounds of the earlier panes of the key that the pane supersedes.
MERGED_FROM_TYPE = pa.list_(pa.struct([("start", TS), ("end", TS)]))


def superseded(keys: list, starts: list, ends: list, merged_from: list) -> set:
    """The windows ``(key, start, end)`` a batch's session panes supersede (their ``merged_from``):
    a one-row-per-window table deletes their rows and writes none of their panes, not even one of
    the same batch (a session that grew within the batch).

    >>> superseded(["a", "a"], [0, 0], [15, 20], [[], [{"start": 0, "end": 15}]])
    {('a', 0, 15)}
    """
    return {(k, b["start"], b["end"]) for k, s, e, bounds in zip(keys, starts, ends, merged_from)
            for b in (bounds or ()) if (b["start"], b["end"]) != (s, e)}
PANE_META_SCHEMA = pa.schema(
    [
        ("pipeline", pa.string()),
        ("query_id", pa.string()),
        ("batch_id", pa.int64()),
        ("written_at", TS),
    ]
)

_DELTA_TYPES = {
    pa.string(): "string", pa.int64(): "long", pa.int32(): "integer", TS: "timestamp",
    pa.date32(): "date", pa.bool_(): "boolean",
}


def _delta_columns(*schemas: pa.Schema) -> dict[str, str]:
    return {f.name: _DELTA_TYPES[f.type] for schema in schemas for f in schema}


#: Per table kind (the sinks' ``_kind``): ``(required, typed)``, the columns (with their Delta
#: types) an existing table must have to be one of this sink's tables, and the columns it must
#: have with these types when it has them (older tables may lack later record columns: a write
#: adds them). Checked against a path's ``_delta_log`` before a sink writes there
#: (:func:`eventtime.sinks.tables.check_table_columns`).
TABLE_COLUMNS: dict[str, tuple[dict[str, str], dict[str, str]]] = {
    "late": (  # record_id is not required: tables written before it lack it (their records are not reconciled)
        {**{c: t for c, t in _delta_columns(LATE_META_SCHEMA).items() if c != "record_id"}, "kind": "string",
         "reason": "string"},
        _delta_columns(LATE_META_SCHEMA, RECORD_SCHEMA),
    ),
    "results": (
        {**_delta_columns(PANE_META_SCHEMA), "key": "string", "window_start": "timestamp", "window_end": "timestamp",
         "pane_timing": "string", "pane_index": "long", "is_final": "boolean"},
        {**_delta_columns(PANE_META_SCHEMA), "key": "string", "window_start": "timestamp", "window_end": "timestamp",
         "pane_timing": "string", "pane_index": "long", "is_final": "boolean"},
    ),
    "delays": (
        {**_delta_columns(PANE_META_SCHEMA), "partition": "string", "delay_bin": "integer", "records": "long"},
        {**_delta_columns(PANE_META_SCHEMA), "partition": "string", "delay_bin": "integer", "records": "long",
         "max_out_of_orderness_ms": "long", "allowed_lateness_ms": "long"},
    ),
}


# ---------------------------------------------------------------------------
# Arrow normalisation


def _normalise_column(arr: pa.ChunkedArray) -> pa.ChunkedArray:
    """Make a column storable in Delta: timestamps -> us UTC, null -> string, dict -> values."""
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.cast(t.value_type)
        t = arr.type
    if pa.types.is_null(t):
        return pa.chunked_array([pa.nulls(len(arr), pa.string())])
    if pa.types.is_timestamp(t) and (t.unit != "us" or t.tz not in ("UTC", "+00:00")):
        if t.tz is None:
            # naive timestamps of the contract are UTC wall clock
            arr = arr.cast(pa.timestamp(t.unit, tz="UTC"))
        return pc.cast(arr, TS, safe=False)
    return arr


def _cast_to(arr: pa.ChunkedArray, target: pa.DataType, name: str) -> pa.ChunkedArray:
    arr = _normalise_column(arr)
    if arr.type == target:
        return arr
    if pa.types.is_string(target) and pa.types.is_large_string(arr.type):
        return arr.cast(target)
    try:
        return arr.cast(target)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(f"column {name!r} has type {arr.type}, expected {target}: {exc}") from exc


def _same(value, arrow_type: pa.DataType, n: int) -> pa.ChunkedArray:
    """A column of ``n`` times ``value``."""
    return pa.chunked_array([pa.repeat(pa.scalar(value, arrow_type), n)])


def prepare_records(table: pa.Table, pipeline: str, query_id: str, batch_id: int, detected_at: _dt.datetime,
                     id_prefix: str = "") -> pa.Table:
    if not isinstance(table, pa.Table):
        raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
    names = table.column_names
    for col in ("kind", "reason"):
        if col not in names:
            raise ValueError(f"record table is missing the required column {col!r} (has {names})")
    for col in LATE_META_SCHEMA.names:
        if col in names:
            raise ValueError(f"record table column {col!r} collides with a column the late sink adds")
    n = table.num_rows
    cols: dict[str, pa.ChunkedArray] = {}
    cols["pipeline"] = _same(pipeline, pa.string(), n)
    cols["query_id"] = _same(query_id, pa.string(), n)
    cols["batch_id"] = _same(batch_id, pa.int64(), n)
    cols["detected_at"] = _same(detected_at, TS, n)
    cols["detected_date"] = _same(detected_at.date(), pa.date32(), n)
    # id_prefix: the part of the batch the rows are (a task writes each of its chunks with its own)
    numbers = pc.cast(pa.array(range(n), pa.int64()), pa.string())
    cols["record_id"] = pa.chunked_array([pc.binary_join_element_wise(f"{query_id}:{batch_id}:{id_prefix}", numbers, "")])
    for field in RECORD_SCHEMA:
        if field.name in names:
            cols[field.name] = _cast_to(table.column(field.name), field.type, field.name)
        else:
            cols[field.name] = pa.chunked_array([pa.nulls(n, field.type)])
    for name in names:  # key columns and any extra column, after the contract columns
        if name not in cols:
            cols[name] = _normalise_column(table.column(name))
    return pa.table(cols)


def _key_json(table: pa.Table, key_columns: Sequence[str]) -> pa.Array:
    if not key_columns:
        return pa.array(["{}"] * table.num_rows, pa.string())
    names = list(key_columns)
    columns = [table.column(k).to_pylist() for k in names]
    return pa.array(keys_json(names, columns), pa.string())


def prepare_panes(
    table: pa.Table,
    pipeline: str,
    query_id: str,
    batch_id: int,
    written_at: _dt.datetime,
    key_columns: Sequence[str] | None,
) -> pa.Table:
    if not isinstance(table, pa.Table):
        raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
    names = table.column_names
    for col in PANE_REQUIRED:
        if col not in names:
            raise ValueError(f"pane table is missing the required column {col!r} (has {names})")
    for col in PANE_META_SCHEMA.names:
        if col in names:
            raise ValueError(f"pane table column {col!r} collides with a column the results sink adds")
    if key_columns is None:
        # contract: key columns come first, before window_start
        key_columns = names[: names.index("window_start")]
    missing = [k for k in key_columns if k not in names]
    if missing:
        raise ValueError(f"key_columns {missing} are not columns of the pane table (has {names})")
    n = table.num_rows
    cols: dict[str, pa.ChunkedArray] = {
        "pipeline": _same(pipeline, pa.string(), n),
        "query_id": _same(query_id, pa.string(), n),
        "batch_id": _same(batch_id, pa.int64(), n),
        "written_at": _same(written_at, TS, n),
    }
    if "key" not in names:
        cols["key"] = pa.chunked_array([_key_json(table, key_columns)])
    for name in names:
        cols[name] = _normalise_column(table.column(name))
    cols["window_start"] = _cast_to(cols["window_start"], TS, "window_start")
    cols["window_end"] = _cast_to(cols["window_end"], TS, "window_end")
    cols["pane_timing"] = _cast_to(cols["pane_timing"], pa.string(), "pane_timing")
    cols["pane_index"] = _cast_to(cols["pane_index"], pa.int64(), "pane_index")
    cols["is_final"] = _cast_to(cols["is_final"], pa.bool_(), "is_final")
    if "merged_from" in cols:
        cols["merged_from"] = _cast_to(cols["merged_from"], MERGED_FROM_TYPE, "merged_from")
    return pa.table(cols)
