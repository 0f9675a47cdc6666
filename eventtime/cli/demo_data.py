"""A realistic, deterministic event stream for the demo and the reliability tests.

Several source partitions with out-of-order events, records late within and beyond the
allowed lateness, one partition lagging behind the others, a few bogus timestamps (0, 1970,
seconds-for-milliseconds, far future, null, unparseable) and a closing heartbeat that
lets every window fire. Each record carries its source ``partition`` and its ``offset`` there
(from 0, as Kafka numbers them; heartbeats have none). The same seed gives the same files,
byte for byte.
"""

from __future__ import annotations

import json
import os
import random
from dataclasses import dataclass
from typing import Any, Iterator

from ..core._duration import to_instant_ms

__all__ = ["DemoStream", "write_stream", "DEMO_SCHEMA_DDL", "late_by_partition"]

DEMO_SCHEMA_DDL = "user_id STRING, amount DOUBLE, ts STRING, partition INT, offset BIGINT, heartbeat BOOLEAN"


@dataclass(frozen=True)
class DemoStream:
    """Parameters of the generated stream; event time starts at ``start_ms``.

    >>> batches = list(DemoStream(rows=100, batches=2).micro_batches())
    >>> len(batches), sum(len(b) for b in batches) >= 100
    (3, True)
    """

    seed: int = 7
    rows: int = 40_000
    batches: int = 20
    partitions: int = 4
    keys: int = 200
    start_ms: int = to_instant_ms("2026-11-01T00:00:00Z", "start")
    batch_span_ms: int = 30_000
    window_ms: int = 60_000
    max_out_of_orderness_ms: int = 10_000
    allowed_lateness_ms: int = 180_000
    lagging_partition: int = 3
    lag_ms: int = 90_000
    late_within_share: float = 0.05
    late_beyond_share: float = 0.01
    bogus_per_batch: int = 3

    def __post_init__(self) -> None:
        for name in ("rows", "batches", "partitions", "keys"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be an int, got {value!r}")
            if value < 1:
                raise ValueError(f"{name} must be >= 1, got {value}")
        if not 0 <= self.lagging_partition < self.partitions:
            raise ValueError(f"lagging_partition must be in [0, {self.partitions}), got {self.lagging_partition}")

    def micro_batches(self) -> Iterator[list[dict]]:
        """The micro-batches, the last one being the closing heartbeats."""
        rng = random.Random(self.seed)
        offsets = [0] * self.partitions
        per_batch = max(1, self.rows // self.batches)
        span, lateness, window = self.batch_span_ms, self.allowed_lateness_ms, self.window_ms
        for b in range(self.batches):
            batch_start = self.start_ms + b * span
            watermark_before = batch_start - self.max_out_of_orderness_ms
            rows = []
            for _ in range(per_batch):
                partition = rng.randrange(self.partitions)
                draw = rng.random()
                if b > 0 and draw < self.late_beyond_share:
                    ts = watermark_before - lateness - window - rng.randrange(window)
                elif b > 0 and draw < self.late_beyond_share + self.late_within_share:
                    ts = watermark_before - window - rng.randrange(max(1, lateness - 2 * window))
                else:
                    ts = batch_start + rng.randrange(span) - rng.randrange(self.max_out_of_orderness_ms)
                    if partition == self.lagging_partition:
                        ts -= self.lag_ms
                rows.append(self._row(rng, partition, offsets, str(ts)))
            for _ in range(self.bogus_per_batch):
                bogus = rng.choice(
                    ["0", "1970-01-01T00:00:00Z", str(batch_start // 1000), "4102444800000", None, "not-a-timestamp"]
                )
                rows.append(self._row(rng, rng.randrange(self.partitions), offsets, bogus))
            rng.shuffle(rows)
            yield rows
        end = self.start_ms + self.batches * span
        flush = end + lateness + 2 * window
        yield [
            {"user_id": None, "amount": None, "ts": str(flush), "partition": p, "offset": None, "heartbeat": True}
            for p in range(self.partitions)
        ]

    def _row(self, rng: random.Random, partition: int, offsets: list, ts: object) -> dict:
        # offsets count from 0 in each partition, as Kafka's do: produced in offset order to an
        # empty topic (``eventtime demo --source kafka``), a record gets the offset it carries here
        offset = offsets[partition]
        offsets[partition] += 1
        return {
            "user_id": f"user-{rng.randrange(self.keys):04d}",
            "amount": round(rng.uniform(1, 500), 2),
            "ts": ts,
            "partition": partition,
            "offset": offset,
            "heartbeat": False,
        }


def write_stream(stream: DemoStream, directory: str) -> list[str]:
    """Write one JSON-lines file per micro-batch; file times increase with the batch number.

    Spark's file source picks files oldest first, so the explicit modification times keep
    the batches in order even when they are written within the same second.
    """
    os.makedirs(directory, exist_ok=True)
    paths = []
    base = 1_700_000_000  # fixed mtimes: the same seed gives the same files and order
    for i, rows in enumerate(stream.micro_batches()):
        path = os.path.join(directory, f"batch-{i:05d}.json")
        tmp = os.path.join(directory, f".batch-{i:05d}.json.tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            for row in rows:
                handle.write(json.dumps(row, sort_keys=True) + "\n")
        os.utime(tmp, (base + i, base + i))
        os.replace(tmp, path)
        paths.append(path)
    return paths


def late_by_partition(config: Any, input_dir: str, watermark: str) -> dict:
    """Records too late for all their windows under ``watermark``, per source partition, by the
    reference model over the demo's input files (one micro-batch per file, as the query reads them)."""
    import dataclasses

    from ..core.reference import Record, ReferenceEngine

    engine = ReferenceEngine(dataclasses.replace(config, watermark=watermark), unit="ms")
    late: dict = {}
    for name in sorted(f for f in os.listdir(input_dir) if f.endswith(".json")):
        with open(os.path.join(input_dir, name), encoding="utf-8") as handle:
            rows = [json.loads(line) for line in handle]
        records = [Record(r["user_id"], r["ts"], r, bool(r["heartbeat"]), r["partition"]) for r in rows]
        for rec in engine.process_batch(records).late:
            late[rec.record.partition] = late.get(rec.record.partition, 0) + 1
    return late
