"""Run the Spark engine's StatefulProcessor in-process with pyspark's TwsTester (no query).

It mirrors what the Spark plan does around the processor: classification (with the core's
``extract`` — the Spark SQL classification is covered by the real-query tests), the operator
input columns, grouping by hash bucket, one call per bucket per data batch, then
``setWatermark(W')`` for the no-data batch, which fires the event-time timers.
"""

from __future__ import annotations

import json
from typing import Any

import pandas as pd
import pyarrow as pa
from pyspark.sql.streaming.tws_tester import TwsTester

from eventtime.scenario import Scenario, parse_scenario
from eventtime.spark.processor import (
    C_BLOB,
    C_BUCKET,
    C_MS,
    C_OFF,
    C_PART,
    C_RAW,
    C_REASON,
    CLS_DATA,
    CLS_HEARTBEAT,
    CLS_INVALID,
    EngineSpec,
    EventTimeProcessor,
    Packer,
    end_of_input_rows,
)
from eventtime.timestamps import extract
from eventtime.trigger import END_OF_INPUT_MS, next_watermark
from eventtime.spark.transforms import OUTPUT_FIXED

KEY, VALUE, RID, HB = "et__u0", "et__u1", "et__u2", "et__u3"


class TwsReplay:
    def __init__(self, scenario: Scenario, num_buckets: int = 3) -> None:
        cfg = scenario.config
        self.scenario = scenario
        self.cfg = cfg
        self.num_buckets = num_buckets
        w = cfg.window
        aggs = tuple(
            a if a.column is None else __import__("dataclasses").replace(a, column=VALUE) for a in cfg.aggregations
        )
        values = [r.fields.get("value") for b in scenario.batches for r in b if r.fields.get("value") is not None]
        integral = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        self.spec = EngineSpec(
            keys=(KEY,),
            size_ms=w.size_ms,
            slide_ms=w.slide_ms,
            offset_ms=w.offset_ms,
            allowed_lateness_ms=cfg.allowed_lateness_ms,
            aggregations=aggs,
            accumulation=cfg.accumulation,
            emit=cfg.emit,
            payload_columns=((KEY, "key"), (VALUE, "value"), (RID, "rid")),
            integral_columns=frozenset({VALUE}) if integral else frozenset(),
            key_names=("key",),
            heartbeat_column=HB,
        )
        self.packer = Packer([KEY], num_buckets)
        columns = ["kind", "key"] + [n for n, _ in OUTPUT_FIXED[1:6]] + [a.name for a in aggs] + [n for n, _ in OUTPUT_FIXED[6:]]
        self.processor = EventTimeProcessor(self.spec, columns)
        self.tester = TwsTester(self.processor, timeMode="EventTime", eventTimeExtractor=lambda row: 2**62)
        self.watermark = 0
        self.max_seen = None
        self.seen = False
        self.records: list = []

    def run_batch(self, batch, raw_panes: bool = False) -> dict:
        cfg = self.cfg
        rows = []
        max_seen = None
        for rec in batch:
            rid = len(self.records)
            self.records.append(rec)
            ts_ms, reason = extract(rec.ts, self.scenario.now_ms, cfg.min_valid_ms, cfg.max_future_ms, tz=self.scenario.tz)
            if reason is None:
                max_seen = ts_ms if max_seen is None else max(max_seen, ts_ms)
            rows.append(
                {
                    KEY: None if rec.key is None else json.dumps(rec.key),
                    VALUE: rec.fields.get("value"),
                    RID: rid,
                    HB: bool(rec.heartbeat),
                    C_MS: ts_ms if reason is None else 0,
                    C_REASON: reason,
                    C_RAW: None if rec.ts is None else str(rec.ts),
                    C_PART: None if rec.partition is None else str(rec.partition),
                    C_OFF: None,
                }
            )
        outputs = []
        if rows:
            frame = pd.DataFrame(rows)
            table = pa.Table.from_pandas(frame, preserve_index=False)
            packed = pa.Table.from_batches(list(self.packer(table.to_batches(max_chunksize=4)))).to_pandas()
            for bucket, group in packed.groupby(C_BUCKET, sort=True):
                out = self.tester.testInPandas(int(bucket), group.reset_index(drop=True))
                if len(out):
                    outputs.append(out)
        if max_seen is not None:
            self.seen = True
        new_w = next_watermark(self.watermark, max_seen, cfg.max_out_of_orderness_ms)
        if new_w is not None and new_w > self.watermark:
            self.watermark = new_w
            out = self.tester.setWatermark(new_w)
            if len(out):
                outputs.append(out)
        if raw_panes:
            return self._render(outputs, raw=True)["panes"]
        return self._render(outputs)

    def end_of_input(self) -> dict:
        """One end-of-input marker per bucket (what the control stream delivers)."""
        outputs = []
        for bucket, blob in end_of_input_rows(self.num_buckets):
            out = self.tester.testInPandas(bucket, pd.DataFrame({C_BUCKET: [bucket], C_BLOB: [blob]}))
            if len(out):
                outputs.append(out)
        self.watermark = END_OF_INPUT_MS
        self.seen = True
        return self._render(outputs)

    def _render(self, outputs: list, raw: bool = False) -> dict:
        panes, late, invalid = [], [], []
        for out in outputs:
            for row in out.to_dict("records"):
                row = {k: (None if isinstance(v, float) and v != v else v) for k, v in row.items()}
                kind = row["kind"]
                if kind == "pane":
                    panes.append(
                        {
                            "key": None if row["key"] is None else json.loads(row["key"]),
                            "window_start": row["window_start"],
                            "window_end": row["window_end"],
                            "timing": row["pane_timing"],
                            "index": row["pane_index"],
                            "is_final": row["is_final"],
                            **{a.name: row[a.name] for a in self.spec.aggregations},
                        }
                    )
                elif kind in ("late", "invalid"):
                    rec = self.records[json.loads(row["payload"])["rid"]]
                    value = rec.fields.get("value")
                    if kind == "late":
                        late.append({"key": rec.key, "ts": row["event_time"], "value": value, "reason": row["reason"], "watermark_ms": row["watermark"]})
                    else:
                        invalid.append({"key": rec.key, "ts": rec.ts, "value": value, "reason": row["reason"]})
        return {"watermark_ms": self.watermark if self.seen else None, "panes": panes, "late": late, "invalid": invalid}

    def state_rows(self) -> int:
        h = self.tester.handle
        n = sum(len(v.state) for v in h.value_states.values())
        n += sum(len(m) for ms in h.map_states.values() for m in ms.state.values())
        return n


def run_tws(scenario: Any, num_buckets: int = 3) -> dict:
    if not isinstance(scenario, Scenario):
        scenario = parse_scenario(scenario)
    runner = TwsReplay(scenario, num_buckets)
    return {"batches": [runner.run_batch(b) for b in scenario.batches]}
