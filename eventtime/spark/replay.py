"""``eventtime replay --engine spark``: run a scenario through a real streaming query.

Scenario batch *i* becomes Spark data batch *i* (one JSON file per batch, file source with
``maxFilesPerTrigger=1``), followed by the no-data batch Spark runs when the watermark
moved. Both are driven by ``processAllAvailable()``: the file is renamed into the source
directory, then the driver waits until the source offset of that file is committed, and
waits once more so that the following no-data batch (if any) is done too. Everything
``foreachBatch`` received in between is the scenario batch's result. Processing time is the
scenario's ``now_ms``, a literal in the plan.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
import uuid
from datetime import datetime
from typing import Any, Optional, Union

from ..core.kinds import LATE_RECORD
from ..harness.scenario import Scenario, parse_scenario
from .aggregate import window_aggregate
from .batch_tables import timestamp_ms
from .extract import with_event_time
from .router import route

__all__ = ["run_scenario", "ReplayRunner", "wait_for_file"]


def _is_int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _watermark_ms(progress: Optional[dict]) -> Optional[int]:
    if not progress:
        return None
    text = (progress.get("eventTime") or {}).get("watermark")
    if text is None:
        return None
    dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    return int(round(dt.timestamp() * 1000))



def file_source_offset(progress: Optional[dict]) -> int:
    """The last file index a file-source query has read, from its progress (-1: none yet)."""
    if not progress or not progress.get("sources"):
        return -1
    end = progress["sources"][0].get("endOffset")
    if isinstance(end, str):
        end = json.loads(end)
    return int(end["logOffset"]) if end else -1

def wait_for_file(query, index: int, timeout_s: float = 300) -> None:
    """Drive a file-source query (``maxFilesPerTrigger=1``) until file ``index`` is committed,
    then once more for the no-data batch that follows a watermark move."""
    deadline = time.monotonic() + timeout_s
    while True:
        query.processAllAvailable()
        if file_source_offset(query.lastProgress) >= index:
            break
        if query.exception() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"replay: batch {index} was not processed: {query.exception()}")
        time.sleep(0.05)
    query.processAllAvailable()


class ReplayRunner:
    """One streaming query fed batch by batch (used by :func:`run_scenario` and the tests)."""

    def __init__(self, scenario: Scenario, spark=None, workdir: Optional[str] = None, merged_from: bool = False,
                 bounded: bool = False) -> None:
        from pyspark.sql import SparkSession
        from pyspark.sql import types as T

        from .session import local_session

        self.scenario = scenario
        self.sessions = merged_from and scenario.config.window.merging  # render merged_from
        self.spark = spark or SparkSession.getActiveSession() or local_session()
        self._own_dir = workdir is None
        self.dir = workdir or tempfile.mkdtemp(prefix="eventtime-replay-")
        self.src = os.path.join(self.dir, "source")
        os.makedirs(self.src, exist_ok=True)
        self.records: list = []
        records = [r for batch in scenario.batches for r in batch]
        ts_values = [r.ts for r in records if r.ts is not None]
        self.ts_type = T.LongType() if all(_is_int(v) for v in ts_values if not isinstance(v, str) and not isinstance(v, bool)) else T.DoubleType()
        values = [r.fields.get("value") for r in records if r.fields.get("value") is not None]
        self.value_type = T.LongType() if all(_is_int(v) for v in values) else T.DoubleType()
        self.schema = T.StructType(
            [
                T.StructField("rid", T.LongType()),
                T.StructField("key", T.StringType()),
                T.StructField("ts", self.ts_type),
                T.StructField("ts_str", T.StringType()),
                T.StructField("value", self.value_type),
                T.StructField("hb", T.BooleanType()),
                T.StructField("partition", T.StringType()),
            ]
        )
        self._panes: list = []
        self._records: list = []
        self._batch = 0
        self.bounded = bounded
        if bounded:  # a static DataFrame of every record, made by run_to_end
            return
        stream = self.spark.readStream.schema(self.schema).option("maxFilesPerTrigger", 1).json(self.src)
        self.router = self._route(stream)
        self.query = self.router.start(checkpoint=os.path.join(self.dir, "checkpoint"))

    def _route(self, source):
        cfg, scenario = self.scenario.config, self.scenario
        events = source.transform(
            with_event_time(
                "ts",
                max_out_of_orderness=cfg.max_out_of_orderness_ms,
                min_valid=cfg.min_valid_ms,
                max_future=cfg.max_future_ms,
                now=scenario.now_ms,
                tz=scenario.tz,
                _string_fallback="ts_str",
            )
        )
        out = events.transform(
            window_aggregate(
                keys=["key"],
                window=cfg.window,
                allowed_lateness=cfg.allowed_lateness_ms,
                aggregations=cfg.aggregations,
                accumulation=cfg.accumulation,
                emit=cfg.emit,
                partition_col="partition",
                heartbeat_col="hb",
                watermark=cfg.watermark.mode,
                idle_timeout=cfg.watermark.idle_timeout_ms,
                source_partitions=cfg.watermark.source_partitions,
            )
        )
        return route(out, panes=self._capture_panes, late=self._capture_records, pipeline="replay_" + uuid.uuid4().hex[:8])

    def run_to_end(self) -> dict:
        """A bounded runner: every record of the scenario as one static DataFrame, run to its end of
        input (one batch, ``start(end_of_input=True)``); its output as one batch."""
        path = os.path.join(self.src, "all.json")
        with open(path, "w", encoding="utf-8") as handle:  # read as the stream reads its files
            for rec in (rec for batch in self.scenario.batches for rec in batch):
                handle.write(json.dumps(self._row(rec)) + "\n")
        self.router = self._route(self.spark.read.schema(self.schema).json(path))
        stats = self.router.start(end_of_input=True)
        panes, records = self._panes, self._records
        self._panes, self._records = [], []
        return self._render(panes, records, stats.watermark_ms)

    def _capture_panes(self, table, batch_id, query_id) -> None:
        self._panes.append(table)

    def _capture_records(self, table, batch_id, query_id) -> None:
        self._records.append(table)

    def _row(self, rec) -> dict:
        rid = len(self.records)
        self.records.append(rec)
        ts = rec.ts
        row = {"rid": rid, "key": None if rec.key is None else json.dumps(rec.key), "hb": bool(rec.heartbeat)}
        if isinstance(ts, bool):
            row["ts_str"] = "true" if ts else "false"
        elif isinstance(ts, str):
            row["ts_str"] = ts
        elif ts is not None:
            row["ts"] = ts
        value = rec.fields.get("value")
        if value is not None:
            row["value"] = value
        if rec.partition is not None:
            row["partition"] = str(rec.partition)
        return row

    def run_batch(self, batch) -> dict:
        i = self._batch
        self._batch += 1
        tmp = os.path.join(self.dir, f"batch-{i:05d}.json.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            for rec in batch:
                handle.write(json.dumps(self._row(rec)) + "\n")
        driver = self.router.partition_watermark
        if driver is not None:  # the scenario's processing time of this batch (and of the tick batch after it)
            driver.processing_time_ms = self.scenario.processing_time_ms(i)
        os.rename(tmp, os.path.join(self.src, f"batch-{i:05d}.json"))
        wait_for_file(self.query, i)
        panes, self._panes = self._panes, []
        records, self._records = self._records, []
        if driver is not None:
            watermark = driver.watermark_ms
        else:
            watermark = _watermark_ms(self.query.lastProgress) if self.router.event_time_seen else None
        return self._render(panes, records, watermark)

    def _render(self, panes: list, records: list, watermark: Optional[int]) -> dict:
        out_panes, late, invalid = [], [], []
        for t in panes:
            if not t.num_rows:
                continue
            starts = timestamp_ms(t.column("window_start")).to_pylist()
            ends = timestamp_ms(t.column("window_end")).to_pylist()
            cols = {c: t.column(c).to_pylist() for c in ("key", "pane_timing", "pane_index", "is_final", "count", "sum")}
            merged = _merged_from_ms(t) if self.sessions else None
            for j in range(t.num_rows):
                key = cols["key"][j]
                pane = {
                    "key": None if key is None else json.loads(key),
                    "window_start": starts[j],
                    "window_end": ends[j],
                    "timing": cols["pane_timing"][j],
                    "index": cols["pane_index"][j],
                    "is_final": cols["is_final"][j],
                    "count": cols["count"][j],
                    "sum": cols["sum"][j],
                }
                if merged is not None:
                    pane["merged_from"] = merged[j]
                out_panes.append(pane)
        for t in records:
            if not t.num_rows:
                continue
            event_time = timestamp_ms(t.column("event_time")).to_pylist()
            wm = timestamp_ms(t.column("watermark")).to_pylist()
            kinds = t.column("kind").to_pylist()
            reasons = t.column("reason").to_pylist()
            payloads = t.column("payload").to_pylist()
            for j in range(t.num_rows):
                rec = self.records[json.loads(payloads[j])["rid"]]
                value = rec.fields.get("value")
                if kinds[j] == LATE_RECORD:
                    late.append({"key": rec.key, "ts": event_time[j], "value": value, "reason": reasons[j], "watermark_ms": wm[j]})
                else:
                    invalid.append({"key": rec.key, "ts": rec.ts, "value": value, "reason": reasons[j]})
        return {"watermark_ms": watermark, "panes": out_panes, "late": late, "invalid": invalid}

    def close(self) -> None:
        try:
            if not self.bounded:
                self.query.stop()
        finally:
            if self._own_dir:
                shutil.rmtree(self.dir, ignore_errors=True)


def _merged_from_ms(table) -> list:
    """The ``merged_from`` column of session panes as ``[[start_ms, end_ms], ...]`` per row."""
    import pyarrow as pa

    column = table.column("merged_from").combine_chunks()
    flat = column.flatten()  # list<struct> -> struct values
    starts = timestamp_ms(pa.chunked_array([flat.field("start")])).to_pylist()
    ends = timestamp_ms(pa.chunked_array([flat.field("end")])).to_pylist()
    offsets = column.offsets.to_pylist()
    return [
        None if not column[j].is_valid else [[starts[k], ends[k]] for k in range(offsets[j], offsets[j + 1])]
        for j in range(len(column))
    ]


def run_scenario(scenario: Union[dict, Scenario], spark=None, merged_from: bool = False, bounded: bool = False) -> dict:
    """Replay a scenario (parsed JSON or :class:`Scenario`) through Spark; same output as the
    reference (``merged_from`` and ``bounded`` as in :func:`~eventtime.harness.scenario.run_reference`:
    ``bounded`` runs every record as one static DataFrame to its end of input)."""
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    runner = ReplayRunner(scenario, spark=spark, merged_from=merged_from, bounded=bounded)
    try:
        if bounded:
            return {"batches": [runner.run_to_end()]}
        return {"batches": [runner.run_batch(batch) for batch in scenario.batches]}
    finally:
        runner.close()
