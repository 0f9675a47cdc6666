"""What every task of a batch runs when its output is written by the executors (the rows never
reach the driver): :class:`TaskOutput`, the one ``mapInArrow`` job of the batch, and
:class:`SinkRows`, a sink's rows for Spark's own writers.

A :class:`TaskOutput` task splits its rows by kind as the driver would
(:func:`~.batch_tables.split`), gives each sink that writes files its rows as the sink stores
them (Parquet files in the sink's table that no Delta commit names yet, so nobody sees them),
keeps the rows of the sinks that take tables on the driver, and sends the driver what is small
whatever the batch holds: the files it wrote (path, size, rows, partition values, schema), the
batch's partition statistics, its counts by kind and reason with the largest lateness and the
partitions seen, a bounded sample of its late and invalid records for the alerter
(:data:`SAMPLE_ROWS` per kind and reason), and the rows it kept. The driver's side is
:mod:`.batch_output`.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator, Optional

from ..core.kinds import INVALID_RECORD, LATE_RECORD, PANE
from .batch_tables import split, timestamp_ms

__all__ = ["COUNTS", "FILES", "ROWS", "SAMPLE", "STATS", "from_ipc", "SAMPLE_ROWS", "RESULT_SCHEMA", "TaskOutput",
           "SinkRows"]

#: Late or invalid records of one kind and reason that each task sends the alerter as samples.
SAMPLE_ROWS = 20
#: What each task returns: its files, statistics, counts and samples, a few rows.
RESULT_SCHEMA = "part string, sink int, data binary"

FILES, STATS, COUNTS, SAMPLE, ROWS = "files", "stats", "counts", "sample", "rows"


def _ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def from_ipc(data: bytes):
    import pyarrow as pa

    return pa.ipc.open_stream(data).read_all()


def _max_ms(column) -> Optional[int]:
    import pyarrow.compute as pc

    return pc.max(timestamp_ms(column)).as_py() if len(column) else None


def _task_name() -> str:
    """This task's partition and attempt (what its files and record ids are named by)."""
    import uuid

    from pyspark import TaskContext

    context = TaskContext.get()
    return f"{context.partitionId()}-{context.attemptNumber()}" if context is not None else uuid.uuid4().hex[:8]


@dataclasses.dataclass
class Counts:
    """One task's (or, merged, the batch's) counts of its rows by kind and reason."""

    panes: int = 0
    watermark_ms: Optional[int] = None  # the largest watermark of any row
    pane_watermark_ms: Optional[int] = None
    reasons: dict = dataclasses.field(default_factory=dict)  # "kind/reason" -> {count, partitions, max_lateness_ms}

    def watermark(self, ms: Optional[int], panes: bool = False) -> None:
        if ms is not None:
            self.watermark_ms = ms if self.watermark_ms is None else max(self.watermark_ms, ms)
            if panes:
                self.pane_watermark_ms = ms if self.pane_watermark_ms is None else max(self.pane_watermark_ms, ms)

    def add(self, key: str, rows) -> None:
        """``rows``: records of one ``"kind/reason"``."""
        import pyarrow.compute as pc

        partitions = [str(p) for p in pc.unique(rows.column("partition")).to_pylist() if p is not None]
        self._entry(key, rows.num_rows, partitions, pc.max(rows.column("lateness_ms")).as_py())

    def _entry(self, key: str, count: int, partitions: list, max_lateness_ms: Optional[int]) -> None:
        entry = self.reasons.setdefault(key, {"count": 0, "partitions": [], "max_lateness_ms": None})
        entry["count"] += count
        entry["partitions"] = sorted(set(entry["partitions"]) | set(partitions))
        if max_lateness_ms is not None:
            mine = entry["max_lateness_ms"]
            entry["max_lateness_ms"] = max_lateness_ms if mine is None else max(mine, max_lateness_ms)

    def merge(self, other: "Counts") -> None:
        self.panes += other.panes
        self.watermark(other.watermark_ms)
        if other.pane_watermark_ms is not None:
            self.watermark(other.pane_watermark_ms, panes=True)
        for key, theirs in other.reasons.items():
            self._entry(key, theirs["count"], theirs["partitions"], theirs["max_lateness_ms"])

    def count(self, kind: str) -> int:
        return sum(v["count"] for k, v in self.reasons.items() if k.split("/", 1)[0] == kind)


@dataclasses.dataclass
class TaskOutput:
    """What every task of one batch does with its rows (pickled to the executors): split them
    by kind, hand each sink that writes in the tasks its rows (``panes``, ``late`` and
    ``invalid``: indexes into ``sinks``, or None), and report files, statistics, counts and
    samples."""

    keys: list
    agg_names: list
    sinks: list  # each with open_files(batch_id, query_id, now, task) -> writer (write(table), close() -> [file])
    panes: Optional[int]
    late: Optional[int]
    invalid: Optional[int]
    batch_id: int
    query_id: str
    now: list  # per sink, the batch's time by its clock (a UTC datetime), the same in every task
    sent: tuple = ()  # the sinks that take their rows on the driver: the tasks send those rows

    def __call__(self, batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.compute as pc

        task = _task_name()
        writers: dict = {}
        kept: dict = {}  # the rows of the sinks in ``sent``
        counts = Counts()
        stats, samples = [], {}

        def write(index: Optional[int], rows) -> None:
            if index is None or not rows.num_rows:
                return
            if index in self.sent:
                kept.setdefault(index, []).append(rows)
                return
            if index not in writers:
                writers[index] = self.sinks[index].open_files(self.batch_id, self.query_id, self.now[index], task)
            writers[index].write(rows)

        for batch in batches:
            if not batch.num_rows:
                continue
            panes, records, stats_rows, pane_watermark_ms = split(pa.Table.from_batches([batch]), self.keys,
                                                                  self.agg_names)
            counts.panes += panes.num_rows
            counts.watermark(pane_watermark_ms, panes=True)
            write(self.panes, panes)
            if records.num_rows:
                counts.watermark(_max_ms(records.column("watermark")))
                if self.late == self.invalid:
                    write(self.late, records)
                else:
                    kind = records.column("kind")
                    write(self.late, records.filter(pc.equal(kind, LATE_RECORD)))
                    write(self.invalid, records.filter(pc.equal(kind, INVALID_RECORD)))
                keys = pc.binary_join_element_wise(records.column("kind"), records.column("reason"), "/")
                for key in pc.unique(keys).to_pylist():
                    rows = records.filter(pc.equal(keys, key))
                    counts.add(key, rows)
                    have = samples.get(key)
                    if have is None or have.num_rows < SAMPLE_ROWS:
                        more = rows.slice(0, SAMPLE_ROWS - (have.num_rows if have else 0))
                        samples[key] = more if have is None else pa.concat_tables([have, more])
            if stats_rows.num_rows:
                counts.watermark(_max_ms(stats_rows.column("watermark")))
                stats.append(stats_rows)
        out = [(COUNTS, -1, json.dumps(dataclasses.asdict(counts)).encode())]
        for index, writer in writers.items():
            out.append((FILES, index, json.dumps(writer.close()).encode()))
        for index, tables in kept.items():
            out.append((ROWS, index, _ipc(pa.concat_tables(tables))))
        if stats:
            out.append((STATS, -1, _ipc(pa.concat_tables(stats))))
        for table in samples.values():
            out.append((SAMPLE, -1, _ipc(table)))
        yield pa.RecordBatch.from_pylist([{"part": p, "sink": s, "data": d} for p, s, d in out],
                                         schema=pa.schema([("part", pa.string()), ("sink", pa.int32()),
                                                           ("data", pa.binary())]))


@dataclasses.dataclass
class SinkRows:
    """What every task gives a sink that Spark writes (delta-spark): its rows of the batch
    (``kinds``: the panes, or the kinds of records it takes) as the sink stores them, as Arrow
    batches of ``schema``."""

    sink: Any
    keys: list
    agg_names: list
    kinds: tuple
    batch_id: int
    query_id: str
    now: Any
    schema: Any  # the pyarrow schema Spark is told the rows have

    def rows(self, table) -> Any:
        """The sink's rows of one chunk of the operator's output, before the sink prepares them."""
        import pyarrow as pa
        import pyarrow.compute as pc

        panes, records, _, _ = split(table, self.keys, self.agg_names)
        if self.kinds == (PANE,):
            return panes
        return records.filter(pc.is_in(records.column("kind"), pa.array(list(self.kinds))))

    def __call__(self, batches: Iterator) -> Iterator:
        import pyarrow as pa

        task, chunk = _task_name(), 0
        for batch in batches:
            if not batch.num_rows:
                continue
            rows = self.rows(pa.Table.from_batches([batch]))
            if not rows.num_rows:
                continue
            data = self.sink._prepare(rows, self.batch_id, self.query_id, self.now, id_prefix=f"{task}.{chunk}.")
            chunk += 1
            yield from data.select(self.schema.names).cast(self.schema).to_batches()
