"""Where a batch's rows are written, as the driver plans and commits it: by the executors (the
rows never reach the driver; :mod:`.task_output` is what the tasks run), or handed to sinks
that take tables on the driver (:func:`write_on_driver`).

When a sink of a route writes in the tasks (:class:`eventtime.sinks.DeltaResultsSink` and
:class:`eventtime.sinks.DeltaLateSink` appending through delta-rs to a local or mounted path, or
through delta-spark; :class:`eventtime.sinks.KafkaSink`), ``route`` runs the batch as one
``mapInArrow`` job over ``window_aggregate``'s output (:class:`~.task_output.TaskOutput`) and
gathers what the tasks sent (:func:`run_in_tasks`). The driver then commits each table's files
in one Delta transaction under the batch's app transaction (exactly once per query and batch:
:meth:`eventtime.sinks.DeltaSink.commit_files`), and calls the route's other sinks with the
rows the tasks sent for them.

A task that fails, and every attempt of a batch that does not commit, leaves files that no
commit names: readers never see them, and ``eventtime late optimize --vacuum`` removes them.

A sink that Spark's own writer writes (delta-spark in a session with Delta, Kafka) gets its
rows as a DataFrame (:class:`~.task_output.SinkRows`: the tasks split and prepare them as
above) that the writer writes from the tasks (:meth:`eventtime.sinks.DeltaSink.write_frame`:
committed under the same app transaction). The batch is then persisted for its one execution
(the statistics' job, then each such write read it) and released when the batch's writes end.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from ..core.kinds import INVALID_RECORD, LATE_RECORD, PANE, RECORD_KINDS
from ..ops.faults import fault_point
from .batch_tables import no_rows, stats_schema
from .task_output import COUNTS, FILES, ROWS, SAMPLE, STATS, RESULT_SCHEMA, SAMPLE_ROWS, SinkRows, TaskOutput, \
    Counts, from_ipc

__all__ = ["SAMPLE_ROWS", "BatchOutput", "run_in_tasks", "write_in_tasks", "commit_task_files", "write_on_driver"]


def _frame(df, plan: SinkRows):
    """The DataFrame of ``plan``'s rows over the batch ``df``: its schema from the sink's rows
    of no row."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    prepared = plan.sink._prepare(plan.rows(no_rows(df.schema)), plan.batch_id, plan.query_id, plan.now)
    spark_schema = from_arrow_schema(prepared.schema)
    arrow = to_arrow_schema(spark_schema, error_on_duplicated_field_names_in_struct=True, timezone="UTC")
    return df.mapInArrow(dataclasses.replace(plan, schema=arrow), spark_schema)


@dataclasses.dataclass
class BatchOutput:
    """The batch as the driver sees it: per sink index the files its tasks wrote, the partition
    statistics, the counts by kind and reason, and the records' samples (a pyarrow table)."""

    files: dict
    stats: Any
    counts: Counts
    sample: Any
    sinks: list = dataclasses.field(default_factory=list)  # the sinks the indexes of ``files`` name
    frames: dict = dataclasses.field(default_factory=dict)  # sink index -> (DataFrame, rows): delta-spark's
    tables: dict = dataclasses.field(default_factory=dict)  # sink index -> pyarrow.Table: the driver's sinks'
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
    counts = Counts()
    stats, samples = [], []
    sent: dict = {index: [] for index in plan.sent}
    for row in rows:
        if row.part == COUNTS:
            counts.merge(Counts(**json.loads(row.data)))
        elif row.part == FILES:
            files.setdefault(row.sink, []).extend(json.loads(row.data))
        elif row.part == STATS:
            stats.append(from_ipc(row.data))
        elif row.part == SAMPLE:
            samples.append(from_ipc(row.data))
        elif row.part == ROWS:
            sent[row.sink].append(from_ipc(row.data))
    stats_table = pa.concat_tables(stats, promote_options="permissive") if stats else stats_schema().empty_table()
    sample = pa.concat_tables(samples, promote_options="permissive") if samples else \
        pa.table({"kind": pa.array([], pa.string()), "reason": pa.array([], pa.string())})
    if sample.num_rows:  # late before invalid, as the driver's record table has them
        import pyarrow.compute as pc

        sample = pa.concat_tables([sample.filter(pc.equal(sample.column("kind"), k)) for k in RECORD_KINDS])
    written = BatchOutput(files, stats_table, counts, sample, plan.sinks)
    for index, tables in sent.items():
        written.tables[index] = pa.concat_tables(tables, promote_options="permissive") if tables else None
    return written


def _in_utc(now, utc):
    return (now if now.tzinfo else now.replace(tzinfo=utc)).astimezone(utc)


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
    # the sinks that take their tables on the driver (callables, PostgreSQL): the tasks send their rows
    sent = tuple(i for i, s in enumerate(sinks) if not getattr(s, "writes_in_tasks", False))
    nows = [None if i in sent else _in_utc(s._now(), utc) for i, s in enumerate(sinks)]
    framed = {i for i, s in enumerate(sinks) if getattr(s, "writes_frames", False)}
    files = [None if i in framed else i for i in indexes]  # the sinks the statistics' tasks write files of
    cached = df.persist(StorageLevel.MEMORY_AND_DISK) if framed else None
    try:
        # the tasks get the sinks they write files of (a sink on the driver may hold a connection)
        in_tasks = [None if i in sent or i in framed else s for i, s in enumerate(sinks)]
        written = run_in_tasks(cached if framed else df, TaskOutput(keys, agg_names, in_tasks, *files, batch_id,
                                                                    query_id, nows, sent))
        written.sinks = sinks
        def kinds(i: int) -> tuple:  # what sink ``i`` takes
            return tuple(k for k, s in zip((PANE, LATE_RECORD, INVALID_RECORD), indexes) if s == i)

        for i in sent:
            if written.tables[i] is None:  # no task had a row for it: its table of no row
                written.tables[i] = SinkRows(sinks[i], keys, agg_names, kinds(i), batch_id, query_id, None,
                                             None).rows(no_rows(df.schema))
        for i in sorted(framed):
            rows = sum(written.counts.panes if k == PANE else written.counts.count(k) for k in kinds(i))
            plan = SinkRows(sinks[i], keys, agg_names, kinds(i), batch_id, query_id, nows[i], None)
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
            elif i in written.tables:
                results.append((sink, sink(written.tables[i], batch_id, query_id)))
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
