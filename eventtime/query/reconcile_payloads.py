"""The late records' values of the aggregated columns, rebuilt from the payload the late
table stores (the whole row as JSON), typed as the results table types each aggregation."""

from __future__ import annotations

import json
from typing import Optional

import pyarrow as pa

from ..core.aggregations import Aggregation
from ..core.config import EngineConfig
from ..core.kinds import MEAN

__all__ = ["late_values"]


def late_values(config: EngineConfig, payloads: list, schema: pa.Schema) -> tuple[list[dict], dict[int, str]]:
    """Each payload's values of the aggregations' columns, typed as the results table types the
    aggregation (``{row: why}`` for those that do not parse or convert)."""
    fast = _parsed_at_once(config, payloads, schema)
    if fast is not None:
        without: dict[int, str] = {}
        for i, row in enumerate(fast):  # a null is a null in the payload or no such column: look
            if None in row.values():
                present = json.loads(payloads[i])
                missing = [c for c in row if c not in present]
                if missing:
                    without[i] = f"payload has no column {missing[0]!r}"
        return fast, without
    bad: dict[int, str] = {}
    parsed: list[dict] = []
    for i, text in enumerate(payloads):
        try:
            value = json.loads(text) if text is not None else None
            if not isinstance(value, dict):
                raise ValueError("not a JSON object")
        except ValueError as exc:
            bad[i] = f"payload: {exc}"
            value = {}
        parsed.append(value)
    for agg in config.aggregations:
        if agg.column is None:
            continue
        target = _target(agg, schema)
        raw = [p.get(agg.column) for p in parsed]
        for i, p in enumerate(parsed):
            if i not in bad and agg.column not in p:
                bad[i] = f"payload has no column {agg.column!r}"
        try:
            typed = pa.array(raw).cast(target).to_pylist() if target is not None else raw
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
            typed = []
            for i, v in enumerate(raw):
                try:
                    typed.append(pa.array([v]).cast(target).to_pylist()[0])
                except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError) as exc:
                    bad.setdefault(i, f"{agg.column}={v!r} is not {target}: {exc}")
                    typed.append(None)
        for p, v in zip(parsed, typed):
            p[agg.column] = v
    return parsed, bad


def _target(agg: Aggregation, schema: pa.Schema) -> Optional[pa.DataType]:
    """The type a record's value is added as: the results table's type of the aggregation's
    value, or of a mean's sum column (its value is a double)."""
    name = agg.accumulator_columns()[0] if agg.kind == MEAN else agg.name
    return schema.field(name).type if name in schema.names else None


def _parsed_at_once(config: EngineConfig, payloads: list, schema: pa.Schema) -> Optional[list[dict]]:
    """:func:`late_values` by Arrow's JSON reader, when every payload parses, has every column and
    converts (``None`` otherwise: the record-by-record path says which does not)."""
    import io

    import pyarrow.json as pj

    columns = [agg for agg in config.aggregations if agg.column is not None]
    if not payloads or any(not isinstance(p, str) or "\n" in p for p in payloads):
        return None
    try:
        table = pj.read_json(io.BytesIO("\n".join(payloads).encode()))
        if table.num_rows != len(payloads):
            return None
        values = {}
        for agg in columns:
            column = table.column(agg.column)  # KeyError: a payload without it
            target = _target(agg, schema)
            values[agg.column] = (column.cast(target) if target is not None else column).to_pylist()
    except (KeyError, pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError):
        return None
    return [dict(zip(values, row)) for row in zip(*values.values())] if values else [{} for _ in payloads]
