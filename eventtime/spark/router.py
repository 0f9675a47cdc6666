"""``route``: the ``foreachBatch`` splitter of one streaming query.

The output of ``window_aggregate`` is one stream with a ``kind`` column; ``Router`` runs the
query, splits each batch by kind into the sinks (each gets a ``pyarrow.Table``), computes the
batch's statistics for the alerter, publishes the batch watermark to the map side, and
reports a failed query once (docs/architecture.md, "Contract between the engine, the router
and the sinks").

Its helpers, each with one job: :mod:`.sink_checks` (what route is given), :mod:`.batch_tables` (a batch's
output as the sinks' tables and its statistics), :mod:`.errors` (a failed query: three lines, the alerter's
report), :mod:`.checkpoint_files` (the query id and a batch's watermark in the checkpoint).
"""

from __future__ import annotations

import dataclasses
import logging
import os
import sys
import time
from typing import Any, Callable, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core.aggregations import pane_columns
from ..core.config import EngineConfig
from ..core.kinds import INVALID_RECORD, LATE_RECORD, PANE
from ..core.trigger import END_OF_INPUT_MS
from ..core.watermark import running_max_ms
from ..ops.faults import fault_point
from ..ops.monitor import progress_line
from ..ops.paths import local_path
from .aggregate import MERGED_FROM
from .batch_tables import OPERATOR, BatchCounter, collect, collector, delay_table, split
from .checkpoint_files import batch_offsets, checkpoint_query_id
from .connect import require_classic
from .errors import FailureWatch, RunningQuery
from .sink_checks import bind_sinks, check_no_orphaned_tables, check_route_arguments, rejected_rows
from .state_cache import StateCache
from .plan import WATERMARK_PROPERTY, batch_watermark, pipeline_document, plan_of
from .batch_output import commit_task_files, write_in_tasks, write_on_driver

__all__ = ["Router", "route"]

log = logging.getLogger("eventtime.spark")


def _query_enrichment(out: DataFrame):
    """The async enrichment steps in ``out``'s plan (eventtime/enrich/spark.py), or None."""
    if "eventtime.enrich.spark" not in sys.modules:  # no step was made in this driver
        return None
    return sys.modules["eventtime.enrich.spark"].QueryEnrichment(out)



class Router:
    """Runs ONE streaming query and splits its output by ``kind`` in ``foreachBatch``."""

    def __init__(
        self,
        out: DataFrame,
        panes: Optional[Callable] = None,
        late: Optional[Callable] = None,
        invalid: Optional[Callable] = None,
        alerter: Any = None,
        pipeline: str = "eventtime",
        delays: Optional[Callable] = None,
        progress: Any = True,
    ) -> None:
        require_classic(out, "route")
        check_route_arguments({"panes": panes, "late": late, "invalid": invalid, "delays": delays}, alerter, pipeline,
                              progress)
        if "kind" not in out.columns:
            raise ValueError("route() expects the output of eventtime.window_aggregate(...): it has no 'kind' column")
        self.plan = plan_of(out)  # the operator's one document (spark/plan.py)
        self.config = EngineConfig.from_spec(self.plan["config"])
        if alerter is not None and callable(getattr(alerter, "use_pipeline_defaults", None)):
            alerter.use_pipeline_defaults(self.config.max_out_of_orderness_ms)
        self.keys: list[str] = self.plan["keys"]
        self.agg_names: list[str] = pane_columns(self.config.aggregations)  # values and accumulator columns
        self.panes_sink, self.late_sink = panes, late
        self.invalid_sink = invalid if invalid is not None else late
        if delays is None and callable(getattr(late, "default_delays", None)):
            delays = late.default_delays()  # DeltaLateSink: <late path>_delays unless told otherwise
        self.delays_sink = delays
        bind_sinks(out, (panes, late, invalid, delays), self.keys, self.agg_names, pipeline_document(self.plan))
        self.alerter = alerter
        self.pipeline = pipeline
        self.progress = progress
        self.metrics_name = f"eventtime_{pipeline}"
        # A sink writes in Spark's tasks (the Delta sinks, through delta-rs or delta-spark): the tasks
        # write the rows, the driver commits them and keeps the statistics (spark/batch_output.py); the
        # tasks send the driver the rows of the route's other sinks only.
        self._routed = (panes, late, self.invalid_sink)
        self._in_tasks = any(getattr(s, "writes_in_tasks", False) for s in self._routed if s is not None)
        # Else window_aggregate's own output: the query runs its operator struct, which the tasks
        # split by kind into Arrow for the driver (Collect.java); any other DataFrame goes
        # through toArrow and split.
        operator = None if self._in_tasks else getattr(out, "_eventtime_operator", None)
        self._collector = None
        if operator is not None:
            runs, output_type = operator
            field = lambda name: F.col(f"{OPERATOR}.{name}")  # noqa: E731
            watermark_ms = field("watermark")  # epoch ms in the struct
            self._collector = collector(out.sparkSession, output_type, self.keys, self.agg_names,
                                        MERGED_FROM in out.columns)
        else:
            runs, field = out, F.col
            watermark_ms = F.unix_millis(F.col("watermark"))
        self.out = runs.observe(
            self.metrics_name,
            F.count(F.when(field("kind") == PANE, 1)).alias("panes"),
            F.count(F.when(field("kind") == LATE_RECORD, 1)).alias("late"),
            F.count(F.when(field("kind") == INVALID_RECORD, 1)).alias("invalid"),
            F.coalesce(F.sum(field("stat_rows")), F.lit(0)).alias("rows_in"),
            F.max(watermark_ms).alias("watermark_ms"),
        )
        self.query = None
        self.checkpoint: Optional[str] = None
        self._query_id: Optional[str] = None
        self._counter = BatchCounter(self.plan["partition_col"] is not None)
        self._failures = FailureWatch(alerter, lambda: self.query_id() or (self.query.id if self.query else ""))
        self._last_stats = None
        self._input_ended = False  # the end of input was raised: every later batch runs past it
        #: Per-partition watermarks: the driver's W (eventtime/spark/partition_watermark.py), from start().
        self.partition_watermark = None
        self._state_cache = None  # RocksDB's block cache against the state (spark/state_cache.py), from start()
        self._enrichment = _query_enrichment(out)
        self._streaming = self.out.isStreaming  # a py4j round trip: asked once

    # -- the query ----------------------------------------------------------------------
    def start(
        self,
        checkpoint: Optional[str] = None,
        trigger: Any = None,
        query_name: Optional[str] = None,
        fresh_start: bool = False,
        end_of_input: bool = False,
    ):
        """Start the query. ``trigger``: ``DataStreamWriter.trigger`` keywords, e.g.
        ``{"processingTime": "1 minute"}`` or ``{"availableNow": True}``, or an interval
        string (processing time).

        A new (or deleted) local checkpoint whose sinks already hold rows of the pipeline
        raises :class:`~eventtime.ops.compat.CheckpointMissingError` unless ``fresh_start=True``
        says that a new query over the same tables is intended.

        ``end_of_input=True`` runs a bounded input to its end, as Flink does with a bounded
        stream: with ``trigger={"availableNow": True}`` it drains the source, then raises the
        end of input, so every window still held fires (ON_TIME with ``is_final``, or FINAL)
        and is purged; it blocks until then and returns the finished query (whose checkpoint
        cannot be resumed). On a static DataFrame (a backfill) it runs the one batch, with no
        checkpoint, and returns its :class:`~eventtime.ops.monitor.BatchStats`.

        >>> route(out, panes=sink).start("/chk/backfill", trigger={"availableNow": True}, end_of_input=True)  # doctest: +SKIP
        """
        if isinstance(trigger, str):
            trigger = {"processingTime": trigger}
        if not isinstance(fresh_start, bool):
            raise TypeError(f"fresh_start must be a bool, got {fresh_start!r}")
        if not isinstance(end_of_input, bool):
            raise TypeError(f"end_of_input must be a bool, got {type(end_of_input).__name__} {end_of_input!r}")
        if not self.out.isStreaming:
            return self._run_static(checkpoint, trigger, end_of_input)
        if not isinstance(checkpoint, str) or not checkpoint:
            raise TypeError(f"checkpoint must be a path (str) for a streaming query, got {checkpoint!r}")
        if end_of_input and not (trigger and (trigger.get("availableNow") or trigger.get("once"))):
            raise ValueError(
                f"end_of_input=True needs a bounded run: trigger={{'availableNow': True}}, got trigger={trigger!r} "
                "(an unbounded stream has no end of input)"
            )
        self.checkpoint = checkpoint
        local = local_path(checkpoint)
        policy = self.config.watermark
        if policy.per_partition:
            if local is None:
                raise ValueError(
                    f"watermark='per_partition' keeps its state beside the checkpoint and needs a local (or mounted) "
                    f"checkpoint path, got {checkpoint!r}"
                )
            from .partition_watermark import PartitionWatermarkDriver

            self.partition_watermark = PartitionWatermarkDriver(
                policy, self.config.max_out_of_orderness_ms, local, self.plan["run"]["tick_signal"])
        if local is not None and not os.path.exists(os.path.join(local, "metadata")):
            check_no_orphaned_tables((self.panes_sink, self.late_sink, self.invalid_sink), checkpoint, fresh_start,
                                     self.pipeline)
        if local is not None:
            # Refuse to resume state laid out by another window / keys / aggregations / modes.
            from ..ops.compat import check_and_store, check_not_ended, plan_fingerprint

            check_and_store(local, plan_fingerprint(self.plan))
            check_not_ended(local)

        def writer():
            w = self.out.writeStream.foreachBatch(self._handle).option("checkpointLocation", checkpoint)
            if query_name:
                w = w.queryName(query_name)
            return w.trigger(**trigger) if trigger else w

        self._query_id = None  # read again from this checkpoint's metadata
        self._state_cache = StateCache(self.out.sparkSession, local, self._say if self.progress else log.info)
        self._failures.start(self.out.sparkSession, checkpoint, bounded=end_of_input)
        try:
            self.query = RunningQuery(writer().start(), self.pipeline, local, self._failures.settle)
        except BaseException:
            self._failures.stop()
            raise
        self._query_id = self.query.id
        if end_of_input:
            from ..ops.compat import mark_ended
            from .control import raise_end_of_input

            self.query.awaitTermination()  # raises the query's error, if it failed
            raise_end_of_input(self.plan["run"]["end_of_input_signal"])
            self._input_ended = True
            self.query = RunningQuery(writer().start(), self.pipeline, local, self._failures.settle)
            self.query.awaitTermination()
            if local is not None:
                mark_ended(local)
            os.remove(self.plan["run"]["end_of_input_signal"])
            self._failures.stop()
        return self.query

    def wait_failure_reported(self, timeout: float) -> bool:
        """Wait until route has reported its query's failure to the alerter (``pipeline_failed``).

        True once it has (``self.failure`` is then the error); False after ``timeout`` seconds
        (no alerter with ``on_failure``, or the query did not fail). A caller that reports
        failures itself waits for this instead of sending a second event:

        >>> if not router.wait_failure_reported(5.0):  # doctest: +SKIP
        ...     alerter.on_failure(error)
        """
        return self._failures.reported.wait(timeout)

    @property
    def failure(self):
        """The :class:`~eventtime.spark.errors.QueryFailedError` the query stopped on, once reported."""
        return self._failures.failure

    @property
    def failure_text(self) -> Optional[str]:
        """The failed query's own error text (with the JVM stack), once reported."""
        return self._failures.failure_text

    def _say(self, line: str) -> None:
        """A line for the person running the job: to ``progress`` when it is a callable, else stderr."""
        if callable(self.progress) and not isinstance(self.progress, bool):
            self.progress(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def _run_static(self, checkpoint: Optional[str], trigger: Any, end_of_input: bool):
        """A static DataFrame: one batch (id 0) through the sinks, ended by the end of input."""
        import uuid

        if not end_of_input:
            raise ValueError(
                "route(...).start() got a static DataFrame: it is bounded input, run as one batch that ends with "
                "the end of input (every window fires and is purged). Call start(end_of_input=True)."
            )
        if checkpoint is not None or trigger:
            raise ValueError(
                f"a static DataFrame runs as one batch and keeps no checkpoint or trigger; got checkpoint={checkpoint!r}, "
                f"trigger={trigger!r}. Call start(end_of_input=True) alone."
            )
        self._query_id = f"batch-{uuid.uuid4()}"
        self._handle(self.out, 0, ends_input=True)
        return self._last_stats

    @property
    def event_time_seen(self) -> bool:
        """Whether any batch so far had a record or heartbeat with a valid event time (before
        that, Spark's watermark of 0 means "no watermark yet")."""
        return self._counter.seen_event_time

    def query_id(self) -> str:
        # foreachBatch may run before start() returns; the checkpoint's metadata file holds
        # the query id from before the first batch on (it is also StreamingQuery.id).
        if self._query_id is None and self.checkpoint is not None:
            self._query_id = checkpoint_query_id(self.checkpoint)
        return self._query_id or ""

    # -- per batch ----------------------------------------------------------------------
    def _publish_watermark(self, spark, batch_id: int) -> Optional[int]:
        """Tell this batch's tasks its watermark (the map-side combine, Mapper.java): read from
        the checkpoint's offset log, which Spark writes before it runs the batch. The value is
        tagged with the query id and batch id, and tasks check both; without it (a remote
        checkpoint, a static DataFrame) every row goes to the operator uncombined. Returns the
        watermark read (``None`` when there is none)."""
        context = spark.sparkContext
        context.setLocalProperty(WATERMARK_PROPERTY, None)
        local = local_path(self.checkpoint) if self.checkpoint else None
        query_id = self.query_id() if local is not None else ""
        if not query_id:
            return None
        try:
            watermark = int(batch_offsets(local, batch_id)["batchWatermarkMs"])
        except (OSError, ValueError, KeyError):
            return None
        self._publish(spark, batch_id, watermark, running_max_ms(watermark, self.config.max_out_of_orderness_ms))
        return watermark if watermark > 0 else None

    def _publish(self, spark, batch_id: int, watermark: int, running_max: Optional[int] = None) -> None:
        """Tell the batch's tasks W (and the largest valid event time of the earlier batches, for
        the delay histograms), tagged with the query and batch id, which tasks check."""
        spark.sparkContext.setLocalProperty(WATERMARK_PROPERTY, batch_watermark(self.query_id(), batch_id, watermark,
                                                                                running_max))

    def _handle(self, df: DataFrame, batch_id: int, ends_input: bool = False) -> None:
        started = time.monotonic()
        fault_point("after_commit", batch_id - 1)
        if self._state_cache is not None and self.query is not None:  # the last batch's state store files
            self._state_cache.observe_query(self.query)
        driver = self.partition_watermark
        published = None  # the batch's W, told to its tasks
        if driver is not None:
            published = driver.before_batch(batch_id)
            self._publish(df.sparkSession, batch_id, 0 if published is None else published, driver.running_max_ms())
        elif self._streaming:
            published = self._publish_watermark(df.sparkSession, batch_id)
        # one execution of the batch; everything below is on the driver
        if self._in_tasks:
            written = write_in_tasks(df, self._routed, self.keys, self.agg_names, batch_id, self.query_id())
            stats_rows, records = written.stats, written.sample
            stats = written.batch_stats(self._counter, batch_id)
        else:
            written = None
            panes, records, stats_rows, pane_watermark_ms = collect(df, self._collector, self.keys) if self._collector \
                else split(df.toArrow(), self.keys, self.agg_names)
            stats = self._counter.count(batch_id, panes, records, stats_rows, pane_watermark_ms)
        if ends_input:  # a static DataFrame's one batch: its watermark ends at the end of input, rows or none
            stats = dataclasses.replace(stats, watermark_ms=END_OF_INPUT_MS)
        # the watermark the batch ran at (its rows show it; a batch with none ran at the one published)
        ran_at = max(stats.watermark_ms or 0, published or 0) or None
        if driver is not None:  # (the driver's W after the batch: the next batch runs at it)
            stats = driver.apply(batch_id, stats_rows, stats)
            if self._input_ended:  # the operator swept to the end of input: no partition holds it back
                stats = dataclasses.replace(stats, watermark_ms=END_OF_INPUT_MS, holdback_ms=None)
                ran_at = END_OF_INPUT_MS
        if self._enrichment:  # the workers' counts, merged into the accumulators by the batch's action
            stats = dataclasses.replace(stats, enrichment=self._enrichment.take())
        self._last_stats = stats
        qid = self.query_id()
        log.info(
            "eventtime[%s] batch %s: rows_in=%s panes=%s late=%s invalid=%s watermark_ms=%s",
            self.pipeline, batch_id, stats.rows_in, stats.panes, stats.late, stats.invalid, stats.watermark_ms,
        )
        fault_point("before_write", batch_id)
        for sink in self._routed:
            if sink is not None and hasattr(sink, "batch_watermark"):
                sink.batch_watermark(ran_at)
        results = commit_task_files(written, batch_id, qid) if written is not None \
            else write_on_driver(panes, records, self._routed, batch_id, qid)
        if self.delays_sink is not None:
            self.delays_sink(delay_table(stats_rows, self.config), batch_id, qid)
        rejected = rejected_rows(results)
        if rejected:  # rows a sink's store refused (eventtime.sinks.BatchSink): kept apart, and alerted
            stats = dataclasses.replace(stats, rejected=rejected)
            self._last_stats = stats
        fault_point("after_write", batch_id)
        if self.alerter is not None:
            try:
                self.alerter.on_batch(batch_id, records, stats)
            except Exception:  # the alerter must never stop the pipeline
                log.exception("eventtime[%s] alerter failed on batch %s", self.pipeline, batch_id)
        if self.progress:
            self._say(progress_line(self.pipeline, stats, time.monotonic() - started, tick=driver is not None,
                                    ran_at_ms=published))


def route(
    out: DataFrame,
    panes: Optional[Callable] = None,
    late: Optional[Callable] = None,
    invalid: Optional[Callable] = None,
    alerter: Any = None,
    pipeline: str = "eventtime",
    delays: Optional[Callable] = None,
    progress: Any = True,
) -> Router:
    """Split the output of :func:`window_aggregate` into sinks; ``.start(checkpoint=...)`` runs it.

    ``panes(table, batch_id, query_id)`` gets the panes, ``late(...)`` the late and invalid
    records (or only the late ones when ``invalid`` is given), ``alerter.on_batch(batch_id,
    records, stats)`` the records and a ``BatchStats``. Per-batch counts and the watermark
    are also in ``StreamingQueryProgress.observedMetrics["eventtime_<pipeline>"]``.
    ``delays(...)`` (e.g. :class:`eventtime.sinks.DeltaDelaySink`) gets, per batch and source
    partition, a histogram of how far behind the running maximum the valid records arrived:
    what ``eventtime late advise`` reads. Without it, a :class:`~eventtime.sinks.DeltaLateSink`
    given as ``late`` writes them to ``<late path>_delays`` (its ``delays=`` argument).

    ``progress`` (default ``True``) prints one line per batch to stderr (rows, panes, late and
    invalid records, the watermark, the time the batch took); ``False`` turns it off, a
    callable gets each line instead. A query that fails prints one line with its cause and the
    file holding the full trace (Spark's own 60-line console report is turned off), and the
    returned query's ``awaitTermination()`` raises a three-line
    :class:`~eventtime.spark.errors.QueryFailedError`.
    """
    return Router(out, panes=panes, late=late, invalid=invalid, alerter=alerter, pipeline=pipeline, delays=delays,
                  progress=progress)
