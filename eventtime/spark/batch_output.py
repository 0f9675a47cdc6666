"""Where a batch's rows are written: by the executors (the rows never reach the driver), or
handed to sinks that take tables on the driver (:func:`write_on_driver`).

When every sink of a route writes in the tasks (:class:`eventtime.sinks.DeltaResultsSink` and
:class:`eventtime.sinks.DeltaLateSink` appending through delta-rs to a local or mounted path),
``route`` runs the batch as one ``mapInArrow`` job over ``window_aggregate``'s output. Each
task splits its rows by kind as the driver would (:func:`~.batch_tables.split`), gives each
sink its rows as the sink stores them, and writes them as Parquet files into the sink's table
(files that no Delta commit names, so nobody sees them). What a task sends the driver is
small, whatever the batch holds: the files it wrote (path, size, rows, partition values,
schema), the batch's partition statistics, its counts by kind and reason with the largest
lateness and the partitions seen, and a bounded sample of its late and invalid records for the
alerter (:data:`SAMPLE_ROWS` per kind and reason). The driver then commits each table's files
in one Delta transaction under the batch's app transaction (exactly once per query and batch:
:meth:`eventtime.sinks.DeltaSink.commit_files`).

A task that fails, and every attempt of a batch that does not commit, leaves files that no
commit names: readers never see them, and ``eventtime late optimize --vacuum`` removes them.

A sink that writes through delta-spark (a session with Delta) gets its rows as a DataFrame
(:class:`SinkRows`: the tasks split and prepare them as above) that delta-spark writes from the
tasks and commits under the same app transaction (:meth:`eventtime.sinks.DeltaSink.write_frame`).
The batch is then persisted for its one execution (the statistics' job, then each table's write
read it) and released when the batch's writes end.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any, Iterator, Optional

from ..core.kinds import INVALID_RECORD, LATE_RECORD, PANE, RECORD_KINDS
from ..ops.faults import fault_point
from .batch_tables import split, stats_schema, timestamp_ms

__all__ = ["SAMPLE_ROWS", "RESULT_SCHEMA", "TaskOutput", "SinkRows", "BatchOutput", "run_in_tasks", "write_in_tasks",
           "commit_task_files", "write_on_driver"]

#: Late or invalid records of one kind and reason that each task sends the alerter as samples.
SAMPLE_ROWS = 20
#: What each task returns: its files, statistics, counts and samples, a few rows.
RESULT_SCHEMA = "part string, sink int, data binary"

_FILES, _STATS, _COUNTS, _SAMPLE = "files", "stats", "counts", "sample"


def _ipc(table) -> bytes:
    import pyarrow as pa

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _from_ipc(data: bytes):
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
class _Counts:
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

    def merge(self, other: "_Counts") -> None:
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

    def __call__(self, batches: Iterator) -> Iterator:
        import pyarrow as pa
        import pyarrow.compute as pc

        task = _task_name()
        writers: dict = {}
        counts = _Counts()
        stats, samples = [], {}

        def write(index: Optional[int], rows) -> None:
            if index is None or not rows.num_rows:
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
        out = [(_COUNTS, -1, json.dumps(dataclasses.asdict(counts)).encode())]
        for index, writer in writers.items():
            out.append((_FILES, index, json.dumps(writer.close()).encode()))
        if stats:
            out.append((_STATS, -1, _ipc(pa.concat_tables(stats))))
        for table in samples.values():
            out.append((_SAMPLE, -1, _ipc(table)))
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


def _frame(df, plan: SinkRows):
    """The DataFrame of ``plan``'s rows over the batch ``df``: its schema from the sink's rows
    of no row."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    empty = to_arrow_schema(df.schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC").empty_table()
    prepared = plan.sink._prepare(plan.rows(empty), plan.batch_id, plan.query_id, plan.now)
    spark_schema = from_arrow_schema(prepared.schema)
    arrow = to_arrow_schema(spark_schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")
    return df.mapInArrow(dataclasses.replace(plan, schema=arrow), spark_schema)


@dataclasses.dataclass
class BatchOutput:
    """The batch as the driver sees it: per sink index the files its tasks wrote, the partition
    statistics, the counts by kind and reason, and the records' samples (a pyarrow table)."""

    files: dict
    stats: Any
    counts: _Counts
    sample: Any
    sinks: list = dataclasses.field(default_factory=list)  # the sinks the indexes of ``files`` name
    frames: dict = dataclasses.field(default_factory=dict)  # sink index -> (DataFrame, rows): delta-spark's
    cached: Any = None  # the batch, persisted while the frames are written

    def release(self) -> None:
        """Drop the batch's persisted blocks (after its writes)."""
        if self.cached is not None:
            self.cached.unpersist()
            self.cached = None

    @property
    def late(self) -> int:
        return self.counts.count(LATE_RECORD)

    def batch_stats(self, counter: Any, batch_id: int) -> Any:
        """The batch's ``BatchStats`` by ``counter`` (a :class:`~.batch_tables.BatchCounter`)."""
        c = self.counts
        return counter.tally(batch_id, self.stats, c.panes, self.late, self.invalid, c.watermark_ms, c.pane_watermark_ms,
                             c.reasons)

    @property
    def invalid(self) -> int:
        return self.counts.count(INVALID_RECORD)


def run_in_tasks(df, plan: TaskOutput) -> BatchOutput:
    """Run ``plan`` over ``df`` (one execution of the batch) and gather what the tasks sent."""
    import pyarrow as pa

    rows = df.mapInArrow(plan, RESULT_SCHEMA).collect()
    files: dict = {}
    counts = _Counts()
    stats, samples = [], []
    for row in rows:
        if row.part == _COUNTS:
            counts.merge(_Counts(**json.loads(row.data)))
        elif row.part == _FILES:
            files.setdefault(row.sink, []).extend(json.loads(row.data))
        elif row.part == _STATS:
            stats.append(_from_ipc(row.data))
        elif row.part == _SAMPLE:
            samples.append(_from_ipc(row.data))
    stats_table = pa.concat_tables(stats, promote_options="permissive") if stats else stats_schema().empty_table()
    sample = pa.concat_tables(samples, promote_options="permissive") if samples else \
        pa.table({"kind": pa.array([], pa.string()), "reason": pa.array([], pa.string())})
    if sample.num_rows:  # late before invalid, as the driver's record table has them
        import pyarrow.compute as pc

        sample = pa.concat_tables([sample.filter(pc.equal(sample.column("kind"), k)) for k in RECORD_KINDS])
    return BatchOutput(files, stats_table, counts, sample, plan.sinks)


def write_in_tasks(df, routed: tuple, keys: list, agg_names: list, batch_id: int, query_id: str) -> BatchOutput:
    """One execution of the batch in which the tasks write the rows of ``routed`` (the panes',
    late and invalid records' sinks, each may be ``None`` or the same as another), each sink's
    rows stamped with its own clock's time of the batch."""
    import datetime as _dt

    from pyspark import StorageLevel

    sinks: list = []
    for sink in routed:
        if sink is not None and not any(sink is s for s in sinks):
            sinks.append(sink)
    indexes = [None if s is None else next(i for i, t in enumerate(sinks) if t is s) for s in routed]
    utc = _dt.timezone.utc
    nows = [(n if n.tzinfo else n.replace(tzinfo=utc)).astimezone(utc) for n in (s._now() for s in sinks)]
    framed = {i for i, s in enumerate(sinks) if getattr(s, "writes_frames", False)}
    files = [None if i in framed else i for i in indexes]  # the sinks the statistics' tasks write files of
    cached = df.persist(StorageLevel.MEMORY_AND_DISK) if framed else None
    try:
        written = run_in_tasks(cached if framed else df, TaskOutput(keys, agg_names, sinks, *files, batch_id, query_id,
                                                                    nows))
        for i in sorted(framed):
            kinds = tuple(k for k, s in zip((PANE, LATE_RECORD, INVALID_RECORD), indexes) if s == i)
            rows = sum(written.counts.panes if k == PANE else written.counts.count(k) for k in kinds)
            plan = SinkRows(sinks[i], keys, agg_names, kinds, batch_id, query_id, nows[i], None)
            written.frames[i] = (_frame(cached, plan), rows)
    except BaseException:
        if cached is not None:
            cached.unpersist()
        raise
    written.cached = cached
    return written


def commit_task_files(written: BatchOutput, batch_id: int, query_id: str) -> list:
    """The driver's part of a batch the tasks wrote: each table's files committed, or its
    DataFrame written by delta-spark, in order; ``(sink, WriteResult)`` of each."""
    results = []
    try:
        for i, sink in enumerate(written.sinks):
            if i:
                fault_point("between_writes", batch_id)
            if i in written.frames:
                results.append((sink, sink.write_frame(*written.frames[i], batch_id, query_id)))
            else:
                results.append((sink, sink.commit_files(written.files.get(i, []), batch_id, query_id)))
    finally:
        written.release()
    return results


def write_on_driver(panes, records, routed: tuple, batch_id: int, query_id: str) -> list:
    """The batch's tables handed to the sinks on the driver (``routed``: the panes', late and
    invalid records' sinks); ``(sink, what it returned)`` of each."""
    import pyarrow.compute as pc

    panes_sink, late_sink, invalid_sink = routed
    results = []
    if panes_sink is not None:
        results.append((panes_sink, panes_sink(panes, batch_id, query_id)))
    fault_point("between_writes", batch_id)
    kind = records.column("kind")
    if late_sink is not None and late_sink is invalid_sink:
        results.append((late_sink, late_sink(records, batch_id, query_id)))
    else:
        if late_sink is not None:
            results.append((late_sink, late_sink(records.filter(pc.equal(kind, LATE_RECORD)), batch_id, query_id)))
        if invalid_sink is not None:
            results.append((invalid_sink, invalid_sink(records.filter(pc.equal(kind, INVALID_RECORD)), batch_id, query_id)))
    return results
