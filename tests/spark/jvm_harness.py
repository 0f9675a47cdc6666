"""Run the JVM engine's operator in-process (``eventtime.jvm.operator.InProcess``: Spark's TwsTester), no query.

It mirrors what the Spark plan does around the operator: classification (with the core's
``extract`` — the Spark SQL classification is covered by the real-query tests), the operator
input row (the user's row as a struct, event time, row class, reason, raw text, partition),
the map-side combine with the batch's watermark, one call per key per data batch, then
``advance(W')`` for the no-data batch, which fires the event-time timers.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from pyspark.sql import types as T

from eventtime.core.aggregations import pane_columns
from eventtime.core.kinds import SQL_AGGREGATE
from eventtime.core.timestamps import extract
from eventtime.core.trigger import END_OF_INPUT_MS, next_watermark
from eventtime.core.watermark import PartitionClocks
from eventtime.harness.scenario import Scenario, parse_scenario
from eventtime.spark.aggregate import CLS_DATA, CLS_HEARTBEAT, CLS_INVALID
from eventtime.spark.plan import operator_plan
from eventtime.spark.output import agg_type, output_schema, pane_fields


def _sql_type(spark, agg, record: T.StructType) -> T.DataType:
    """A Spark SQL aggregation's result type, as Spark resolves it over the record."""
    resolved = spark._jvm.eventtime.jvm.spark.SqlAggregate.of(agg.expression, spark._jsparkSession.parseDataType(record.json()))
    return T._parse_datatype_json_string(resolved.resultTypeJson())


class JvmReplay:
    def __init__(self, scenario: Scenario, spark, combine: bool = True, merged_from: bool = False) -> None:
        cfg = scenario.config
        self.scenario, self.cfg, self.combine = scenario, cfg, combine
        self.merged_from = merged_from and cfg.window.merging
        values = [r.fields.get("value") for b in scenario.batches for r in b if r.fields.get("value") is not None]
        integral = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        record = T.StructType([
            T.StructField("key", T.StringType()),
            T.StructField("value", T.LongType() if integral else T.DoubleType()),
            T.StructField("rid", T.LongType()),
            T.StructField("hb", T.BooleanType()),
        ])
        self.aggs = tuple(a if a.column is None else dataclasses.replace(a, column="value") for a in cfg.aggregations)
        out = output_schema([record["key"]], [f for a in self.aggs for f in pane_fields(
            a, _sql_type(spark, a, record) if a.kind == SQL_AGGREGATE else agg_type(a, record), record)])
        spec = operator_plan(dataclasses.replace(cfg, aggregations=self.aggs), record, out, ["key"], bounded=False)
        self.engine = spark._jvm.eventtime.jvm.operator.InProcess(json.dumps(spec))
        self.watermark = 0
        self.seen = False
        self.has_w = False  # per-partition: whether the clocks gave a watermark yet
        self.records: list = []
        # per-partition watermarks: W by the core's rules, as the Spark driver computes it
        self.clocks = PartitionClocks(cfg.watermark, cfg.max_out_of_orderness_ms) if cfg.watermark.per_partition else None
        self.index = 0

    def run_batch(self, batch, raw_panes: bool = False) -> Any:
        cfg = self.cfg
        rows, max_seen, by_partition = [], None, {}
        for rec in batch:
            rid = len(self.records)
            self.records.append(rec)
            ts_ms, reason = extract(rec.ts, self.scenario.now_ms, cfg.min_valid_ms, cfg.max_future_ms, tz=self.scenario.tz)
            if reason is None:
                max_seen = ts_ms if max_seen is None else max(max_seen, ts_ms)
                p = rec.partition
                by_partition[p] = ts_ms if p not in by_partition else max(by_partition[p], ts_ms)
            cls = CLS_INVALID if reason is not None else CLS_HEARTBEAT if rec.heartbeat else CLS_DATA
            rows.append({
                "rec": [None if rec.key is None else json.dumps(rec.key), rec.fields.get("value"), rid, bool(rec.heartbeat)],
                "ms": ts_ms if reason is None else None,
                "cls": cls,
                "reason": reason,
                "raw": None if rec.ts is None or reason is None else str(rec.ts),
                "part": None if rec.partition is None else str(rec.partition),
                "off": None,
            })
        outputs = json.loads(self.engine.batch(json.dumps(rows), self.watermark, self.combine)) if rows else []
        if max_seen is not None:
            self.seen = True
        if self.clocks is not None:
            new_w = self.clocks.advance(self.watermark if self.has_w else None, by_partition,
                                        self.scenario.processing_time_ms(self.index)).watermark_ms
            self.has_w = self.has_w or new_w is not None  # listed partitions can hold W at none after records
        else:
            new_w = next_watermark(self.watermark, max_seen, cfg.max_out_of_orderness_ms)
        self.index += 1
        if new_w is not None and new_w > self.watermark:
            self.watermark = new_w
            outputs += json.loads(self.engine.advance(new_w))
        rendered = self._render(outputs)
        return rendered["panes"] if raw_panes else rendered

    def end_of_input(self) -> dict:
        """The control row moved the watermark to END_OF_INPUT_MS: every key's timer fires."""
        self.watermark = END_OF_INPUT_MS
        self.has_w = True
        self.seen = True
        return self._render(json.loads(self.engine.advance(END_OF_INPUT_MS)))

    def state_entries(self, state: str | None = None) -> int:
        """State entries left, all or of one state variable ("keys", "due", "buffers", "meta")."""
        return self.engine.stateEntries() if state is None else self.engine.stateEntries(state)

    def keys_read(self) -> int:
        """User keys whose state the operator has read so far."""
        return self.engine.keysRead()

    def _render(self, outputs: list) -> dict:
        panes, late, invalid, stats = [], [], [], []
        for row in outputs:
            kind = row["kind"]
            if kind == "pane":
                panes.append({
                    "key": None if row["key"] is None else json.loads(row["key"]),
                    "window_start": row["window_start"],
                    "window_end": row["window_end"],
                    "timing": row["pane_timing"],
                    "index": row["pane_index"],
                    "is_final": row["is_final"],
                    **{name: row[name] for name in pane_columns(self.aggs)},
                    **({"merged_from": row["merged_from"]} if self.merged_from else {}),
                })
            elif kind in ("late", "invalid"):
                rec = self.records[row["et__rec"][2]]
                value = rec.fields.get("value")
                if kind == "late":
                    late.append({"key": rec.key, "ts": row["event_time"], "value": value, "reason": row["reason"], "watermark_ms": row["watermark"]})
                else:
                    invalid.append({"key": rec.key, "ts": rec.ts, "value": value, "reason": row["reason"]})
            else:
                stats.append(row)
        self.last_stats = stats
        shown = self.has_w if self.clocks is not None else self.seen
        return {"watermark_ms": self.watermark if shown else None, "panes": panes, "late": late, "invalid": invalid}


def run_jvm(scenario: Any, spark, combine: bool = True, merged_from: bool = False) -> dict:
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    runner = JvmReplay(scenario, spark, combine, merged_from)
    return {"batches": [runner.run_batch(b) for b in scenario.batches]}
