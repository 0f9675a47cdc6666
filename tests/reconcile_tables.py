"""A stream run through the reference model into real Delta tables, as ``route`` writes them
(``DeltaResultsSink``, ``DeltaLateSink``, the pipeline recorded in both), and the truth: one
bounded run of the same configuration over every valid record."""

from __future__ import annotations

import datetime as dt
import json
import os
from typing import Any

import pyarrow as pa

from eventtime import DeltaLateSink, DeltaResultsSink, EngineConfig, ReferenceEngine
from eventtime.core.kinds import LATE_RECORD
from eventtime.ops.json_text import keys_json

EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
KEYS = ["user"]


def ts(ms: int) -> dt.datetime:
    return EPOCH + dt.timedelta(milliseconds=ms)


def pane_table(config: EngineConfig, panes: list, accumulators: bool = True) -> pa.Table:
    """The panes as route gives them to the sink; ``accumulators=False``: as eventtime wrote them
    before panes carried their accumulator columns."""
    cols: dict[str, Any] = {
        "user": [p.key for p in panes],
        "window_start": pa.array([ts(p.window.start_ms) for p in panes], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([ts(p.window.end_ms) for p in panes], pa.timestamp("us", tz="UTC")),
        "pane_timing": [p.timing for p in panes],
        "pane_index": pa.array([p.index for p in panes], pa.int64()),
        "is_final": [p.is_final for p in panes],
    }
    for agg in config.aggregations:
        for name in (agg.name, *(agg.accumulator_columns() if accumulators else ())):
            values = [p.values[name] for p in panes]
            cols[name] = pa.array(values, pa.float64() if any(isinstance(v, float) for v in values) else pa.int64())
    if config.window.merging:
        cols["merged_from"] = [[{"start": ts(w.start_ms), "end": ts(w.end_ms)} for w in p.merged_from] for p in panes]
    return pa.table(cols)


def late_table(late: list) -> pa.Table:
    return pa.table({
        "kind": [LATE_RECORD] * len(late),
        "reason": [r.reason for r in late],
        "key": keys_json(KEYS, [[r.record.key for r in late]]),
        "event_time": pa.array([ts(r.ts_ms) for r in late], pa.timestamp("us", tz="UTC")),
        "watermark": pa.array([None if r.watermark_ms is None else ts(r.watermark_ms) for r in late],
                              pa.timestamp("us", tz="UTC")),
        "window_start": pa.array([ts(r.windows[0].start_ms) for r in late], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([ts(r.windows[-1].end_ms) for r in late], pa.timestamp("us", tz="UTC")),
        "payload": [json.dumps({"user": r.record.key, **r.record.fields}) for r in late],
        "user": [r.record.key for r in late],
    })


class Stream:
    """The reference model's stream written batch by batch into the two tables."""

    def __init__(self, tmp: str, config: EngineConfig, pipeline: str = "p", query_id: str = "q1",
                 record: bool = True, mode: str = "append", results: Any = None, accumulators: bool = True) -> None:
        self.config, self.query_id, self.accumulators = config, query_id, accumulators
        self.results_path, self.late_path = os.path.join(tmp, "results"), os.path.join(tmp, "late")
        self.results = results if results is not None else DeltaResultsSink(
            self.results_path, pipeline, key_columns=KEYS, engine="rust", mode=mode)
        self.late = DeltaLateSink(self.late_path, pipeline, engine="rust", delays=False)
        self.late.ensure_table()
        document = {"config": config.to_spec(), "keys": KEYS}
        for sink in (self.results, self.late) if record else ():  # as route does when the query starts
            getattr(sink, "record_pipeline", lambda _document: None)(document)
        self.engine = ReferenceEngine(config)
        self.valid: list = []
        self.batch_id = 0

    def batch(self, records: list, now_ms: int = 10**12):
        out = self.engine.process_batch(records, now_ms)
        self._write(out)
        invalid = {id(r.record) for r in out.invalid}
        self.valid += [r for r in records if not r.heartbeat and id(r) not in invalid]
        return out

    def end(self) -> None:
        self._write(self.engine.end_of_input())

    def _write(self, out) -> None:
        if out.panes:
            self.results(pane_table(self.config, out.panes, self.accumulators), self.batch_id, self.query_id)
        if out.late:
            self.late(late_table(out.late), self.batch_id, self.query_id)
        self.batch_id += 1

    def truth(self, now_ms: int = 10**12) -> dict[tuple, dict]:
        engine = ReferenceEngine(self.config)
        latest = {}
        for p in [*engine.process_batch(self.valid, now_ms).panes, *engine.end_of_input().panes]:
            latest[(keys_json(KEYS, [[p.key]])[0], ts(p.window.start_ms), ts(p.window.end_ms))] = dict(p.values)
        return latest
