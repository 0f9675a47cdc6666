"""Query a late-data Delta table written by ``eventtime.sinks.DeltaLateSink``.

    python examples/query_late_table.py [PATH]

When PATH (default ``./demo-output/late``) holds no table, a small one is created first
with two micro-batches, one of them "re-run" to show that it is written once.
The same queries from the shell::

    eventtime late summary --table PATH --format json
    eventtime late show --table PATH --reason too_late --partition 1
"""

from __future__ import annotations

import datetime as dt
import json
import os
import sys

import pyarrow as pa

from eventtime.query.late import read_late, read_late_pandas, summarize
from eventtime.sinks import DeltaLateSink

UTC = dt.timezone.utc


def create_demo_table(path: str) -> None:
    now = dt.datetime(2024, 6, 1, 10, 0, tzinfo=UTC)
    watermark = now - dt.timedelta(minutes=5)

    def batch(rows):
        return pa.table({
            "kind": [r[0] for r in rows],
            "reason": [r[1] for r in rows],
            "key": [json.dumps({"sensor": r[2]}, separators=(",", ":")) for r in rows],
            "sensor": [r[2] for r in rows],
            "event_time": pa.array([r[3] for r in rows], pa.timestamp("us", tz="UTC")),
            "raw_timestamp": [r[4] for r in rows],
            "watermark": pa.array([watermark] * len(rows), pa.timestamp("us", tz="UTC")),
            "lateness_ms": pa.array([int((watermark - r[3]).total_seconds() * 1000) if r[3] else None
                                     for r in rows], pa.int64()),
            "partition": [r[5] for r in rows],
            "offset": pa.array([r[6] for r in rows], pa.int64()),
            "payload": [json.dumps({"sensor": r[2], "ts": r[4]}) for r in rows],
        })

    t1 = now - dt.timedelta(minutes=12)
    t2 = now - dt.timedelta(minutes=40)
    b0 = batch([
        ("late", "too_late", "s1", t1, t1.isoformat(), "0", 17),
        ("invalid", "before_min_valid", "s2", None, "0", "1", 4),
    ])
    b1 = batch([
        ("late", "too_late", "s2", t2, t2.isoformat(), "1", 9),
        ("invalid", "too_far_in_future", "s3", None, "2999-01-01T00:00:00Z", "1", 10),
    ])
    sink = DeltaLateSink(path, pipeline="sensors")
    sink(b0, 0, "demo-query")
    sink(b1, 1, "demo-query")
    print("re-run of batch 1:", sink(b1, 1, "demo-query"))  # skipped: already committed


def main(path: str) -> None:
    from deltalake import DeltaTable

    if not DeltaTable.is_deltatable(path):
        print(f"creating a demo late-data table at {path}")
        create_demo_table(path)

    summary = summarize(read_late(path))
    print(json.dumps({k: summary[k] for k in ("total", "by_reason", "by_partition", "max_lateness_ms")}, indent=2))

    df = read_late_pandas(path, reason="too_late", columns=["detected_at", "partition", "key", "event_time",
                                                             "lateness_ms"])
    print(df.to_string(index=False))

    bogus = read_late(path, kind="invalid", columns=["reason", "raw_timestamp", "partition"])
    print(bogus.to_pandas().to_string(index=False))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join("demo-output", "late"))
    # delta-rs can abort at interpreter exit after a read (delta-rs#2184): leave cleanly
    sys.stdout.flush()
    os._exit(0)
