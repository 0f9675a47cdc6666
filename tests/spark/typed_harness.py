"""Typed, nullable columns through both engines: the reference model and a real Spark query.

A typed scenario (property_tests.strategies.typed_scenarios) is a list of micro-batches of
rows with the columns of ``TYPED_COLUMNS``. The reference model gets each row as a
:class:`~eventtime.Record` (key = the tuple of the key columns' Python values); Spark reads
the same rows from Parquet files written by pyarrow with the exact types, one file per
micro-batch. Both outputs are normalised to plain Python values (ints, Decimals, dates,
datetimes, strings, booleans) and compared in full, as multisets per batch.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import tempfile
import uuid
from decimal import Decimal
from typing import Any, Optional

import pyarrow as pa
import pyarrow.parquet as pq

import eventtime
from eventtime import EngineConfig, Record, ReferenceEngine
from eventtime.core.aggregations import pane_columns
from eventtime.spark.batch_tables import timestamp_ms
from eventtime.spark.replay import _watermark_ms, wait_for_file
from eventtime.core.watermark import WatermarkPolicy
from property_tests.strategies import MAX_FUTURE_MS, NOW_MS, TYPED_COLUMNS

AGGREGATIONS = (
    eventtime.count(),
    eventtime.sum("v_big", "s_big"),
    eventtime.sum("v_small", "s_small"),
    eventtime.sum("v_dec", "s_dec"),
    eventtime.mean("v_big", "avg_big"),
    eventtime.mean("v_dec", "avg_dec"),
    eventtime.min("v_dec", "mn_dec"),
    eventtime.min("v_dbl", "mn_dbl"),
    eventtime.max("v_date", "mx_date"),
    eventtime.max("v_bool", "mx_bool"),
    eventtime.first("v_ts", "f_ts"),
    eventtime.last("v_str", "l_str"),
)
_UTC = dt.timezone.utc


def _arrow_type(ddl: str) -> pa.DataType:
    if ddl.startswith("decimal"):
        p, s = ddl[len("decimal("):-1].split(",")
        return pa.decimal128(int(p), int(s))
    return {
        "bigint": pa.int64(),
        "int": pa.int32(),
        "smallint": pa.int16(),
        "string": pa.string(),
        "boolean": pa.bool_(),
        "date": pa.date32(),
        "timestamp": pa.timestamp("us", tz="UTC"),
        "double": pa.float64(),
    }[ddl]


ARROW_SCHEMA = pa.schema([(name, _arrow_type(ddl)) for name, ddl in TYPED_COLUMNS])


def config_of(sc: dict) -> EngineConfig:
    from eventtime.harness.scenario import _window  # the replay contract's window objects

    window = _window(sc["window"])
    return EngineConfig(
        window,
        sc.get("aggregations", AGGREGATIONS),
        max_out_of_orderness_ms=sc["max_out_of_orderness_ms"],
        allowed_lateness_ms=sc["allowed_lateness_ms"],
        accumulation=sc["accumulation"],
        emit=sc["emit"],
        min_valid_ms=1,
        max_future_ms=MAX_FUTURE_MS,
        watermark=WatermarkPolicy(**sc.get("watermark", {})),
        report_partly_late=sc.get("report_partly_late", False),
    )


# --- expected JSON of one value in the late table's payload (docs/architecture.md) ---------
def expected_json(value: Any) -> Any:
    if isinstance(value, float):
        return Decimal(repr(value))  # payloads are parsed with parse_float=Decimal
    if isinstance(value, dt.datetime):
        return value.astimezone(_UTC).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def _partition_text(value: Any) -> Optional[str]:
    return None if value is None else str(value)  # Spark's cast(int as string)


def _record_entry(kind: str, row: dict, keys: tuple, extra: dict) -> dict:
    return {
        "kind": kind,
        "rid": row["rid"],
        "key": tuple(row[k] for k in keys),
        "partition": _partition_text(row["part"]),
        "offset": row["off"],
        "payload": {name: expected_json(row[name]) for name, _ in TYPED_COLUMNS},
        # Spark's text of the original event time (a bigint column: its decimal digits)
        "raw_timestamp": None if row["ts"] is None else str(row["ts"]),
        **extra,
    }


def run_reference_typed(sc: dict, end_of_input: bool = False) -> list[dict]:
    """One entry per batch; with ``end_of_input`` one more, the end-of-input result."""
    keys = tuple(sc["keys"])
    engine = ReferenceEngine(config_of(sc))
    out = []
    results = []
    for i, batch in enumerate(sc["batches"]):
        records = [Record(tuple(r[k] for k in keys), r["ts"], dict(r), heartbeat=r["hb"], partition=r["part"]) for r in batch]
        # batch i is processed at NOW_MS + i s (idleness with per-partition watermarks)
        results.append(engine.process_batch(records, now_ms=NOW_MS, processing_time_ms=NOW_MS + 1000 * i))
    if end_of_input:
        results.append(engine.end_of_input())
    for res in results:
        out.append(
            {
                "watermark_ms": res.watermark_ms,
                "panes": [
                    {"key": p.key, "window_start": p.window.start_ms, "window_end": p.window.end_ms, "timing": p.timing,
                     "index": p.index, "is_final": p.is_final, **p.values}
                    for p in res.panes
                ],
                "records": [
                    _record_entry("late", l.record.fields, keys, {
                        "ts": l.ts_ms, "reason": l.reason, "watermark_ms": l.watermark_ms,
                        "windows": (l.windows[0].start_ms, l.windows[-1].end_ms)})  # the windows it missed
                    for l in res.late
                ] + [_record_entry("invalid", i.record.fields, keys, {"ts": None, "reason": i.reason, "watermark_ms": None,
                                                                      "windows": None}) for i in res.invalid],
            }
        )
    return out


class SparkTypedRunner:
    """One streaming query over Parquet files of typed rows, fed one micro-batch at a time.

    ``between``: a step applied between ``with_event_time`` and ``window_aggregate``; ``after``: a
    step applied to the output of ``window_aggregate`` before ``route``."""

    def __init__(self, sc: dict, spark, between=None, after=None) -> None:
        self.sc = sc
        self.keys = tuple(sc["keys"])
        self.spark = spark
        self.dir = tempfile.mkdtemp(prefix="eventtime-typed-")
        self.src = os.path.join(self.dir, "source")
        os.makedirs(self.src)
        self._steps = (between, after)
        self._pipeline = "typed_" + uuid.uuid4().hex[:8]
        self._start()
        self._batch = 0

    def restart(self) -> None:
        """Stops the query and starts it again from its checkpoint, as a new process would."""
        self.query.stop()
        self._start()

    def _start(self) -> None:
        sc, spark, (between, after) = self.sc, self.spark, self._steps
        cfg = config_of(sc)
        ddl = ", ".join(f"{name} {t}" for name, t in TYPED_COLUMNS)
        stream = spark.readStream.schema(ddl).option("maxFilesPerTrigger", 1).parquet(self.src)
        events = stream.transform(
            eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=cfg.max_out_of_orderness_ms,
                                      min_valid=1, max_future=MAX_FUTURE_MS, now=NOW_MS)
        )
        if between is not None:
            events = between(events)
        out = events.transform(
            eventtime.window_aggregate(
                keys=list(self.keys), window=cfg.window, allowed_lateness=cfg.allowed_lateness_ms,
                aggregations=cfg.aggregations, accumulation=cfg.accumulation, emit=cfg.emit,
                partition_col="part", offset_col="off", heartbeat_col="hb",
                watermark=cfg.watermark.mode, idle_timeout=cfg.watermark.idle_timeout_ms,
                report_partly_late=cfg.report_partly_late, split_invalid=sc.get("split_invalid", False),
            )
        )
        if after is not None:
            out = after(out)
        self._panes: list = []
        self._records: list = []
        self.router = eventtime.route(out, panes=lambda t, b, q: self._panes.append(t),
                                      late=lambda t, b, q: self._records.append(t), pipeline=self._pipeline)
        self.query = self.router.start(checkpoint=os.path.join(self.dir, "checkpoint"))

    def run_batch(self, rows: list[dict]) -> dict:
        i = self._batch
        self._batch += 1
        table = pa.Table.from_pylist(rows, schema=ARROW_SCHEMA) if rows else ARROW_SCHEMA.empty_table()
        tmp = os.path.join(self.dir, f"batch-{i:05d}.parquet")
        pq.write_table(table, tmp)
        driver = self.router.partition_watermark
        if driver is not None:
            driver.processing_time_ms = NOW_MS + 1000 * i
        os.rename(tmp, os.path.join(self.src, f"batch-{i:05d}.parquet"))
        wait_for_file(self.query, i)
        panes, self._panes = self._panes, []
        records, self._records = self._records, []
        if driver is not None:
            watermark = driver.watermark_ms
        else:
            watermark = _watermark_ms(self.query.lastProgress) if self.router.event_time_seen else None
        panes = render_panes(panes, self.keys, config_of(self.sc).aggregations)
        return {"watermark_ms": watermark, "panes": panes, "records": render_records(records, self.keys)}

    def close(self) -> None:
        try:
            self.query.stop()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)


def render_panes(tables: list, keys: tuple, aggregations=AGGREGATIONS) -> list[dict]:
    """Pane tables (as the sinks get them) as plain Python dicts."""
    out = []
    for t in tables:
        if not t.num_rows:
            continue
        cols = {name: t.column(name).to_pylist() for name in t.column_names}
        starts, ends = timestamp_ms(t.column("window_start")).to_pylist(), timestamp_ms(t.column("window_end")).to_pylist()
        for j in range(t.num_rows):
            out.append(
                {
                    "key": tuple(cols[k][j] for k in keys),
                    "window_start": starts[j],
                    "window_end": ends[j],
                    "timing": cols["pane_timing"][j],
                    "index": cols["pane_index"][j],
                    "is_final": cols["is_final"][j],
                    **{name: cols[name][j] for name in pane_columns(aggregations)},
                }
            )
    return out


def render_records(tables: list, keys: tuple) -> list[dict]:
    """Late / invalid record tables as plain Python dicts (payload parsed exactly)."""
    out = []
    for t in tables:
        if not t.num_rows:
            continue
        cols = {name: t.column(name).to_pylist() for name in t.column_names}
        ets, wms = timestamp_ms(t.column("event_time")).to_pylist(), timestamp_ms(t.column("watermark")).to_pylist()
        starts, ends = timestamp_ms(t.column("window_start")).to_pylist(), timestamp_ms(t.column("window_end")).to_pylist()
        for j in range(t.num_rows):
            payload = json.loads(cols["payload"][j], parse_float=Decimal)
            late = cols["kind"][j] == "late"
            out.append(
                {
                    "kind": cols["kind"][j],
                    "rid": payload["rid"],
                    "key": tuple(cols[k][j] for k in keys),
                    "partition": cols["partition"][j],
                    "offset": cols["offset"][j],
                    "payload": payload,
                    "ts": ets[j],
                    "raw_timestamp": cols["raw_timestamp"][j],
                    "reason": cols["reason"][j],
                    "watermark_ms": wms[j] if late else None,
                    "windows": (starts[j], ends[j]) if late else None,
                }
            )
    return out


def run_spark_typed(sc: dict, spark, between=None, after=None, restart: bool = False) -> list[dict]:
    """The scenario's batches in one streaming query; with ``restart`` the query is stopped and
    started again from its checkpoint after every batch."""
    runner = SparkTypedRunner(sc, spark, between, after)
    try:
        out = []
        for i, batch in enumerate(sc["batches"]):
            if restart and i:
                runner.restart()
            out.append(runner.run_batch(batch))
        return out
    finally:
        runner.close()


def _same(a: Any, b: Any) -> bool:
    """Equal values of equal type (True is not 1, 2**53 + 1 is not 2**53 + 1.0)."""
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) and isinstance(b, (tuple, list)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        return isinstance(a, Decimal) and isinstance(b, Decimal) and a == b
    return type(a) is type(b) and a == b


def diff_typed(expected: list[dict], actual: list[dict]) -> Optional[str]:
    """None when both outputs are the same batch by batch (order inside a batch ignored)."""
    if len(expected) != len(actual):
        return f"{len(expected)} batches expected, got {len(actual)}"
    for i, (exp, act) in enumerate(zip(expected, actual)):
        if exp["watermark_ms"] != act["watermark_ms"]:
            return f"batch {i}: watermark {exp['watermark_ms']} expected, got {act['watermark_ms']}"
        for part in ("panes", "records"):
            left = list(act[part])
            for item in exp[part]:
                match = next((j for j, other in enumerate(left) if _same(item, other)), None)
                if match is None:
                    return f"batch {i}: {part[:-1]} missing or different: {item!r}; got {left!r}"
                left.pop(match)
            if left:
                return f"batch {i}: unexpected {part}: {left!r}"
    return None
