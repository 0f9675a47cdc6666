"""The ``key`` text is rendered once (eventtime.ops.json_text.key_json) for both tables: byte
for byte the same in the results table (DeltaResultsSink) and the late-data table (Router.split)."""

from __future__ import annotations

import datetime as dt
import json
from decimal import Decimal

import pyarrow as pa
import pytest

from eventtime.sinks import DeltaLateSink, DeltaResultsSink, snapshot_dataset

UTC = dt.timezone.utc
W = dt.datetime(2024, 5, 1, 8, 0, tzinfo=UTC)
TS = pa.timestamp("us", tz="UTC")

KEYS = {
    "user": pa.array(['a "quoted" ü-ñ-😀 user', None], pa.string()),
    "shop": pa.array([2**53 + 1, None], pa.int64()),
    "vip": pa.array([True, None], pa.bool_()),
    "score": pa.array([0.1, None], pa.float64()),
    "day": pa.array([dt.date(2024, 5, 1), None], pa.date32()),
    "seen": pa.array([W, None], TS),
    "price": pa.array([Decimal("12.50"), None], pa.decimal128(10, 2)),
}


def operator_output(kinds: list[str]) -> pa.Table:
    """Rows shaped like window_aggregate's output (as foreachBatch hands them to the router)."""
    n = len(kinds)
    columns = {"kind": pa.array(kinds, pa.string())}
    columns.update({name: values.take(pa.array([i % 2 for i in range(n)])) for name, values in KEYS.items()})
    columns.update({
        "window_start": pa.array([W] * n, TS), "window_end": pa.array([W] * n, TS),
        "pane_timing": pa.array(["ON_TIME" if k == "pane" else None for k in kinds], pa.string()),
        "pane_index": pa.array([0 if k == "pane" else None for k in kinds], pa.int64()),
        "is_final": pa.array([False if k == "pane" else None for k in kinds], pa.bool_()),
        "count": pa.array([1 if k == "pane" else None for k in kinds], pa.int64()),
        "reason": pa.array([None if k == "pane" else "too_late" for k in kinds], pa.string()),
        "event_time": pa.array([W] * n, TS), "raw_timestamp": pa.array(["1"] * n, pa.string()),
        "watermark": pa.array([W] * n, TS), "lateness_ms": pa.array([1] * n, pa.int64()),
        "partition": pa.array(["0"] * n, pa.string()), "offset": pa.array([0] * n, pa.int64()),
        "payload": pa.array(["{}"] * n, pa.string()),
        "stat_max_event_time": pa.array([None] * n, pa.int64()), "stat_rows": pa.array([None] * n, pa.int64()),
        "stat_delays": pa.array([None] * n, pa.string()),
    })
    return pa.table(columns)


def test_results_and_late_tables_carry_the_same_key_text_byte_for_byte(tmp_path):
    pytest.importorskip("pyspark")
    from eventtime.spark.batch_tables import split

    panes, records, _, _ = split(operator_output(["pane", "pane", "late", "late"]), list(KEYS), ["count"])
    DeltaResultsSink(str(tmp_path / "results"), pipeline="k")(panes, 0, "q")
    DeltaLateSink(str(tmp_path / "late"), pipeline="k")(records, 0, "q")

    from deltalake import DeltaTable

    def keys(name: str) -> list[bytes]:
        table = snapshot_dataset(DeltaTable(str(tmp_path / name))).to_table().sort_by("user")
        return [k.encode("utf-8") for k in table.column("key").to_pylist()]

    assert keys("results") == keys("late")
    first, nulls = keys("results")
    assert nulls == b'{"user":null,"shop":null,"vip":null,"score":null,"day":null,"seen":null,"price":null}'
    assert json.loads(first) == {  # the key columns in their order, compact, exact values
        "user": 'a "quoted" ü-ñ-😀 user', "shop": 2**53 + 1, "vip": True, "score": 0.1, "day": "2024-05-01",
        "seen": "2024-05-01T08:00:00+00:00", "price": 12.5,
    }
    assert list(json.loads(first)) == list(KEYS) and first.endswith(b',"price":12.50}')


def test_non_ascii_keys_are_raw_utf8_like_spark_to_json():
    from eventtime.ops.json_text import key_json

    assert key_json(["user"], ["ü-😀"]) == '{"user":"ü-😀"}'
