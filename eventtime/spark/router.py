"""``route``: the ``foreachBatch`` splitter of one streaming query.

The output of ``window_aggregate`` is one stream with a ``kind`` column; ``Router`` runs the
query, splits each batch by kind into the sinks (each gets a ``pyarrow.Table``), computes the
batch's statistics for the alerter, publishes the batch watermark to the map side, and
reports a failed query once (docs/architecture.md, "Contract between the engine, the router
and the sinks").

Why one module of about 600 lines: everything in it is one ``Router``'s state over the life
of its query (the checkpoint, the query id, the failure listener, the batch watermark it
publishes); the sink-shape checks and the split are small and read that state.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import sys
import time
from typing import Any, Callable, Optional

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ..core._json import keys_json_array, rows_json_array
from ..core.kinds import INVALID_RECORD, LATE_RECORD, PANE, PARTITION_STATS, RECORD_KINDS
from ..core.trigger import END_OF_INPUT_MS
from ..ops.faults import fault_point
from ..ops.monitor import BatchStats, PartitionStats
from .aggregate import _META, C_REC, MERGED_FROM, WATERMARK_PROPERTY, timestamp_ms
from .connect import require_classic

__all__ = ["Router", "route"]

log = logging.getLogger("eventtime.spark")


def _engine_meta(out: DataFrame) -> dict:
    if "kind" not in out.columns:
        raise ValueError("route() expects the output of eventtime.window_aggregate(...)")
    meta = out.schema["kind"].metadata.get(_META)
    if meta is None:
        raise ValueError("route() expects the output of eventtime.window_aggregate(...) (no engine metadata on 'kind')")
    return json.loads(meta)


def _local_path(path: str) -> Optional[str]:
    """The local file system path of a checkpoint location, None for a remote one (s3a://...)."""
    if path.startswith("file:"):
        return "/" + path[len("file:"):].lstrip("/")
    return path if "://" not in path else None


def _takes_positional(function: Callable, count: int) -> bool:
    """Whether ``function`` can be called with ``count`` positional arguments (True when its
    signature cannot be read, e.g. some builtins)."""
    import inspect

    try:
        signature = inspect.signature(function)
    except (TypeError, ValueError):
        return True
    try:
        signature.bind(*([None] * count))
    except TypeError:
        return False
    return True


def _accepts_keyword(function: Callable, name: str) -> bool:
    import inspect

    try:
        parameters = inspect.signature(function).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == name or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)


def _signature_text(function: Callable) -> str:
    import inspect

    try:
        return f"the arguments {inspect.signature(function)}"
    except (TypeError, ValueError):  # pragma: no cover - only called when the signature was read
        return "other arguments"


def _query_enrichment(out: DataFrame):
    """The async enrichment steps in ``out``'s plan (eventtime/enrich/spark.py), or None."""
    import sys

    if "eventtime.enrich.spark" not in sys.modules:  # no step was made in this driver
        return None
    return sys.modules["eventtime.enrich.spark"].QueryEnrichment(out)


def _rejected(results: list) -> dict:
    """``{sink target: ((row index, key, error), ...)}`` of the rows the sinks' stores refused,
    from ``[(sink, what it returned)]`` (a :class:`eventtime.sinks.BatchWriteResult`'s
    ``rejected``; other sinks return nothing of the kind)."""
    out: dict = {}
    for sink, result in results:
        rows = getattr(result, "rejected", None)
        if rows:
            target = getattr(sink, "target", None) or type(sink).__name__
            out[target] = tuple((r.row_index, r.key, r.error) for r in rows)
    return out


_OPERATOR = "et__out"  # window_aggregate's operator struct (aggregate.py)


def _shapes(keys: list, agg_names: list, merging: bool, record: str = C_REC) -> list[dict]:
    """The three tables a batch is split into, by ``kind``, as columns of the operator output: the
    panes (with their watermark, which the pane sink does not get), the late and invalid records
    (with the user's row, ``record``, for the payload) and the per-partition statistics. Times
    are epoch ms in the operator's struct and timestamps in the output; ``merged_from`` holds
    session bounds."""
    def col(name: str, conversion: str = "") -> dict:
        return {"name": name, "field": name, **({"as": conversion} if conversion else {})}

    panes = [*map(col, keys), col("window_start", "timestamp"), col("window_end", "timestamp"), col("pane_timing"),
             col("pane_index"), col("is_final"), *map(col, agg_names)]
    if merging:
        panes.append(col(MERGED_FROM, "bounds"))
    panes.append(col("watermark", "timestamp"))
    records = [col("kind"), col("reason"), *map(col, keys), col("event_time", "timestamp"), col("raw_timestamp"),
               col("watermark", "timestamp"), col("lateness_ms"), col("window_start", "timestamp"),
               col("window_end", "timestamp"), col("partition"), col("offset"), col(record)]
    stats = [col("partition"), col("stat_max_event_time"), col("stat_rows"), col("stat_delays"),
             col("watermark", "timestamp")]
    return [{"kinds": [PANE], "columns": panes}, {"kinds": list(RECORD_KINDS), "columns": records},
            {"kinds": [PARTITION_STATS], "columns": stats}]


def _collector(spark, output_type: str, keys: list, agg_names: list, merging: bool) -> tuple:
    """What Collect.java needs per batch, and the Arrow types toArrow would give each table."""
    from pyspark.sql import types as T
    from pyspark.sql.pandas.types import to_arrow_schema

    shapes_json = json.dumps(_shapes(keys, agg_names, merging))
    large = spark.conf.get("spark.sql.execution.arrow.useLargeVarTypes", "false") == "true"
    schemas = json.loads(spark._jvm.eventtime.jvm.Collect.schemas(output_type, shapes_json))
    arrow = [to_arrow_schema(T.StructType.fromJson(s), error_on_duplicated_field_names_in_struct=True, timezone="UTC",
                             prefers_large_types=large) for s in schemas]
    return output_type, shapes_json, large, arrow


def _sink_tables(keys: list, panes, records, stats) -> tuple:
    """The sinks' tables from the three shapes' columns (_shapes), and the panes' largest
    watermark (ms, or None): the panes without their watermark, the records with their key and
    payload as JSON."""
    import pyarrow as pa
    import pyarrow.compute as pc

    pane_watermark = panes.column("watermark")
    pane_watermark_ms = pc.max(timestamp_ms(pane_watermark)).as_py() if len(pane_watermark) else None
    panes = panes.drop_columns(["watermark"])
    keys_text = keys_json_array(keys, [records.column(k).combine_chunks() for k in keys]) \
        if keys else pa.array(["{}"] * records.num_rows, pa.string())
    columns = {
        "kind": records.column("kind"),
        "reason": records.column("reason"),
        "key": keys_text,
    }
    for k in keys:
        if k not in columns:
            columns[k] = records.column(k)
    for name in ("event_time", "raw_timestamp", "watermark", "lateness_ms", "window_start", "window_end", "partition", "offset"):
        columns[name] = records.column(name)
    # The whole original row as exact JSON (eventtime.core._json), rendered here for the few
    # late / invalid records only.
    columns["payload"] = rows_json_array(records.column(C_REC).combine_chunks()) \
        if C_REC in records.column_names else records.column("payload")
    return panes, pa.table(columns), stats, pane_watermark_ms


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
        if not isinstance(progress, bool) and not callable(progress):
            raise TypeError(f"route: progress must be True, False or a callable(line), got {type(progress).__name__} "
                            f"{progress!r}")
        for parameter, sink in (("panes", panes), ("late", late), ("invalid", invalid), ("delays", delays)):
            if sink is not None and not callable(sink):
                raise TypeError(
                    f"route: {parameter} must be a sink, a callable (table, batch_id, query_id) such as "
                    f"eventtime.sinks.DeltaResultsSink(path), got {type(sink).__name__} {sink!r}"
                )
            if isinstance(sink, type):
                raise TypeError(
                    f"route: {parameter} must be a sink object, got the class {sink.__name__}; make one first, "
                    f"e.g. {parameter}={sink.__name__}(path, pipeline=...)"
                )
            if sink is not None and not _takes_positional(sink, 3):
                raise TypeError(
                    f"route: {parameter} must be callable as {parameter}(table, batch_id, query_id), but "
                    f"{sink!r} takes {_signature_text(sink)}"
                )
        if panes is None and late is None and invalid is None:
            raise ValueError(
                "route: no sink given (panes, late and invalid are all None): every pane and record would be "
                "discarded. Give at least one, e.g. panes=DeltaResultsSink(path), late=DeltaLateSink(path)"
            )
        if alerter is not None and (isinstance(alerter, type) or not callable(getattr(alerter, "on_batch", None))):
            raise TypeError(
                "route: alerter must have on_batch(batch_id, records, stats): an object such as "
                f"eventtime.Alerter(pipeline=...), got {alerter!r}"
            )
        if alerter is not None and not _takes_positional(alerter.on_batch, 3):
            raise TypeError(
                f"route: alerter.on_batch must be callable as on_batch(batch_id, records, stats), but it takes "
                f"{_signature_text(alerter.on_batch)}"
            )
        if not isinstance(pipeline, str) or not pipeline:
            raise TypeError(f"route: pipeline must be a non-empty string, got {pipeline!r}")
        self.meta = _engine_meta(out)
        if alerter is not None and callable(getattr(alerter, "use_pipeline_defaults", None)):
            alerter.use_pipeline_defaults(self.meta.get("config", {}).get("max_out_of_orderness_ms"))
        self.keys: list[str] = self.meta["keys"]
        self.agg_names: list[str] = self.meta["aggregations"]
        self.panes_sink, self.late_sink = panes, late
        self.invalid_sink = invalid if invalid is not None else late
        if delays is None and callable(getattr(late, "default_delays", None)):
            delays = late.default_delays()  # DeltaLateSink: <late path>_delays unless told otherwise
        self.delays_sink = delays
        # Sinks that take the query's session and check their tables before the query starts
        # (the Delta sinks: delta-spark when the session has Delta; one table per kind of rows).
        sinks = list({id(s): s for s in (panes, late, invalid, delays) if s is not None}.values())
        pane_columns = [*self.keys, "window_start", "window_end", "pane_timing", "pane_index", "is_final",
                        *self.agg_names, *([MERGED_FROM] if MERGED_FROM in out.columns else [])]
        for sink in sinks:
            bind = getattr(sink, "bind_route", None)
            if callable(bind):
                others = [other for other in sinks if other is not sink]
                if sink is panes and _accepts_keyword(bind, "columns"):
                    bind(out.sparkSession, others, columns=pane_columns)
                else:
                    bind(out.sparkSession, others)
        self.alerter = alerter
        self.pipeline = pipeline
        self.progress = progress
        self.metrics_name = f"eventtime_{pipeline}"
        # window_aggregate's own output: the query runs its operator struct, which the tasks split
        # by kind into Arrow (Collect.java); any other DataFrame goes through toArrow and split.
        operator = getattr(out, "_eventtime_operator", None)
        self._collector = None
        if operator is not None:
            runs, output_type = operator
            field = lambda name: F.col(f"{_OPERATOR}.{name}")  # noqa: E731
            watermark_ms = field("watermark")  # epoch ms in the struct
            self._collector = _collector(out.sparkSession, output_type, self.keys, self.agg_names,
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
        self._watermark_ms: Optional[int] = None
        self._seen_event_time = False
        self._pane_watermark_ms: Optional[int] = None
        self._listener = None
        self._bounded_run = False
        self.failure = None  # the QueryFailedError the query stopped on, once reported
        self.failure_text: Optional[str] = None  # the query's own error text (with the JVM stack)
        import threading

        self._failure_reported = threading.Event()
        self._last_stats = None
        #: Per-partition watermarks: the driver's W (eventtime/spark/partition_watermark.py), from start().
        self.partition_watermark = None
        self._enrichment = _query_enrichment(out)

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
        local = _local_path(checkpoint)
        policy = self._watermark_policy()
        if policy.per_partition:
            if local is None:
                raise ValueError(
                    f"watermark='per_partition' keeps its state beside the checkpoint and needs a local (or mounted) "
                    f"checkpoint path, got {checkpoint!r}"
                )
            from .partition_watermark import PartitionWatermarkDriver

            self.partition_watermark = PartitionWatermarkDriver(
                policy, int(self.meta["config"].get("max_out_of_orderness_ms") or 0), local, self.meta.get("tick_signal"))
        if local is not None and not os.path.exists(os.path.join(local, "metadata")):
            self._check_no_orphaned_tables(checkpoint, fresh_start)
        if local is not None and "fingerprint" in self.meta:
            # Refuse to resume state laid out by another window / keys / aggregations / modes.
            from ..ops.compat import check_and_store, check_not_ended

            check_and_store(local, self.meta["fingerprint"])
            check_not_ended(local)

        def writer():
            w = self.out.writeStream.foreachBatch(self._handle).option("checkpointLocation", checkpoint)
            if query_name:
                w = w.queryName(query_name)
            return w.trigger(**trigger) if trigger else w

        self._bounded_run = end_of_input  # two queries: the listener stays for the second
        self.failure = self.failure_text = None
        self._failure_reported.clear()
        self._query_id = None  # read again from this checkpoint's metadata
        self._watch_failures(self.out.sparkSession, checkpoint)
        from .errors import RunningQuery

        try:
            self.query = RunningQuery(writer().start(), self.pipeline, local, self._settle_failure)
        except BaseException:
            self._stop_watching()
            raise
        self._query_id = self.query.id
        if end_of_input:
            from ..ops.compat import mark_ended
            from .control import raise_end_of_input

            self.query.awaitTermination()  # raises the query's error, if it failed
            raise_end_of_input(self.meta["end_of_input_signal"])
            self.query = RunningQuery(writer().start(), self.pipeline, local, self._settle_failure)
            self.query.awaitTermination()
            if local is not None:
                mark_ended(local)
            os.remove(self.meta["end_of_input_signal"])
            self._stop_watching()
        return self.query

    def wait_failure_reported(self, timeout: float) -> bool:
        """Wait until route has reported its query's failure to the alerter (``pipeline_failed``).

        True once it has (``self.failure`` is then the error); False after ``timeout`` seconds
        (no alerter with ``on_failure``, or the query did not fail). A caller that reports
        failures itself waits for this instead of sending a second event:

        >>> if not router.wait_failure_reported(5.0):  # doctest: +SKIP
        ...     alerter.on_failure(error)
        """
        return self._failure_reported.wait(timeout)

    def _settle_failure(self) -> None:
        """The query failed and the job is told: let the alerter's report finish, then remove the
        listener before the job (and its interpreter) goes on or exits."""
        if self._listener is not None:
            self._failure_reported.wait(30.0)
            self._stop_watching()

    def _stop_watching(self, spark=None, from_listener: bool = False) -> None:
        listener, self._listener = self._listener, None
        if listener is None:
            return
        spark = spark or self.out.sparkSession
        if from_listener:  # not from inside the listener bus' own callback
            import threading

            threading.Thread(target=spark.streams.removeListener, args=(listener,), daemon=True).start()
        else:
            try:  # deliver the events already posted (e.g. the last batch's progress) first
                spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(10_000)
            except Exception:  # noqa: BLE001 - a stopped context or a timeout: remove it anyway
                pass
            try:
                spark.streams.removeListener(listener)
            except Exception:  # noqa: BLE001 - the session is already stopped
                pass

    def _say(self, line: str) -> None:
        """A line for the person running the job: to ``progress`` when it is a callable, else stderr."""
        if callable(self.progress) and not isinstance(self.progress, bool):
            self.progress(line)
        else:
            print(line, file=sys.stderr, flush=True)

    def _watch_failures(self, spark, checkpoint: str) -> None:
        """Turn off Spark's console report of a query's failure (a JVM stack of 60 lines: the
        returned :class:`~eventtime.spark.errors.RunningQuery` raises it in three lines, the full
        trace in a file), and send ``pipeline_failed`` to the alerter (fingerprinted by the
        innermost error class) when the query stops on an error: a listener on the session,
        removed once the query has ended."""
        _quiet_spark_failure_log(spark)
        if self.alerter is None or not callable(getattr(self.alerter, "on_failure", None)) or self._listener is not None:
            return
        import atexit

        from pyspark.sql.streaming import StreamingQueryListener

        router = self
        report = {"checkpoint": checkpoint}
        pass_run_id = _accepts_keyword(self.alerter.on_failure, "run_id")

        class _FailureListener(StreamingQueryListener):
            def onQueryStarted(self, event) -> None:
                pass

            def onQueryProgress(self, event) -> None:
                pass

            def onQueryIdle(self, event) -> None:
                pass

            def onQueryTerminated(self, event) -> None:
                # A query that fails at once may end before start() has returned it: its id is
                # also the id in the checkpoint's metadata.
                ours = router.query_id() or (router.query.id if router.query is not None else "")
                if not ours or str(event.id) != str(ours):
                    return
                if event.exception:
                    from .errors import describe_failure

                    router.failure_text = event.exception
                    router.failure = describe_failure(event.exception)
                    try:
                        run = {"run_id": str(event.runId)} if pass_run_id else {}
                        router.alerter.on_failure(router.failure, **report, **run)
                    finally:
                        router._failure_reported.set()
                if event.exception or not router._bounded_run:
                    router._stop_watching(spark, from_listener=True)

        self._listener = _FailureListener()
        spark.streams.addListener(self._listener)
        # An event still on its way to the listener when the interpreter exits fails in the JVM
        # with a 60-line Py4J stack: the listener leaves first, once its events are delivered.
        atexit.register(self._stop_watching)

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
        self._handle(self.out, 0)
        return self._last_stats

    def _check_no_orphaned_tables(self, checkpoint: str, fresh_start: bool) -> None:
        from ..ops.compat import CheckpointMissingError

        sinks = {id(s): s for s in (self.panes_sink, self.late_sink, self.invalid_sink) if s is not None}
        for sink in sinks.values():
            ids = sink.pipeline_query_ids() if hasattr(sink, "pipeline_query_ids") else []
            if not ids:
                continue
            where = getattr(sink, "path", repr(sink))
            if fresh_start:
                log.warning("eventtime[%s]: fresh start requested; %s already holds rows of query id(s) %s",
                            self.pipeline, where, ", ".join(ids))
                continue
            raise CheckpointMissingError(
                f"checkpoint {checkpoint!r} has no query metadata (new or deleted), but {where} already holds rows "
                f"of pipeline {getattr(sink, 'pipeline', self.pipeline)!r} written by query id(s) {', '.join(ids)}. "
                "Starting now would read the source again and write those rows twice. Restore the checkpoint, "
                "or pass fresh_start=True to start a new query over these tables on purpose."
            )

    def _watermark_policy(self):
        from ..core.watermark import WatermarkPolicy

        spec = self.meta.get("config", {}).get("watermark") or {}
        return WatermarkPolicy(spec.get("mode", "global"), idle_timeout_ms=spec.get("idle_timeout_ms"))

    @property
    def event_time_seen(self) -> bool:
        """Whether any batch so far had a record or heartbeat with a valid event time (before
        that, Spark's watermark of 0 means "no watermark yet")."""
        return self._seen_event_time

    def query_id(self) -> str:
        # foreachBatch may run before start() returns; the checkpoint's metadata file holds
        # the query id from before the first batch on (it is also StreamingQuery.id).
        if self._query_id is None and self.checkpoint is not None:
            path = os.path.join(_local_path(self.checkpoint) or self.checkpoint, "metadata")
            try:
                with open(path, encoding="utf-8") as handle:
                    self._query_id = json.load(handle)["id"]
            except (OSError, ValueError, KeyError):
                return ""
        return self._query_id or ""

    # -- per batch ----------------------------------------------------------------------
    def split(self, table):
        """(panes, records, stats rows) tables of one batch's operator output, a table of all its
        columns (what ``toArrow`` gives of the output of ``window_aggregate``)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        kind = table.column("kind")
        shapes = _shapes(self.keys, self.agg_names, MERGED_FROM in table.column_names,
                         C_REC if C_REC in table.column_names else "payload")
        # select the few columns each output needs first, then filter only those
        tables = [table.select([c["name"] for c in shape["columns"]]).filter(
            pc.equal(kind, shape["kinds"][0]) if len(shape["kinds"]) == 1 else pc.is_in(kind, pa.array(shape["kinds"])))
            for shape in shapes]
        panes, records, stats, self._pane_watermark_ms = _sink_tables(self.keys, *tables)
        return panes, records, stats

    def _collect(self, df):
        """(panes, records, stats rows) of one batch, split by kind in the tasks (Collect.java):
        each task sends each table's columns only, as Arrow."""
        import pyarrow as pa
        from pyspark.serializers import NoOpSerializer
        from pyspark.util import _load_from_socket

        output_type, shapes_json, large, arrow_schemas = self._collector
        info = df.sparkSession._jvm.eventtime.jvm.Collect.serve(df._jdf, output_type, shapes_json, large)
        with _load_from_socket(info, NoOpSerializer()) as stream:
            frames = list(stream)
        n = len(arrow_schemas)
        tables = []
        for s, schema in enumerate(arrow_schemas):
            parts = [pa.ipc.open_stream(frame).read_all() for frame in frames[s::n]]
            # toArrow's types (PySpark's own mapping of the Spark types), as the generic path has them
            tables.append(pa.concat_tables(parts).cast(schema) if parts else schema.empty_table())
        panes, records, stats, self._pane_watermark_ms = _sink_tables(self.keys, *tables)
        return panes, records, stats

    def batch_stats(self, batch_id: int, panes, records, stats):
        parts: dict[str, list] = {}
        for p, t, n in zip(*[stats.column(c).to_pylist() for c in ("partition", "stat_max_event_time", "stat_rows")]):
            name = "null" if p is None else str(p)
            entry = parts.setdefault(name, [None, 0])
            if t is not None:
                entry[0] = t if entry[0] is None else max(entry[0], t)
                self._seen_event_time = True
            entry[1] += int(n)
        kinds = records.column("kind").to_pylist()
        import pyarrow.compute as pc

        for table in (panes, records, stats):
            if table.num_rows and "watermark" in table.column_names:
                ms = pc.max(timestamp_ms(table.column("watermark"))).as_py()
                if ms is not None:
                    self._watermark_ms = ms if self._watermark_ms is None else max(self._watermark_ms, ms)
        if self._pane_watermark_ms is not None:  # the panes' watermark (END_OF_INPUT_MS at the end)
            self._watermark_ms = self._pane_watermark_ms if self._watermark_ms is None else max(self._watermark_ms, self._pane_watermark_ms)
        partitions = {
            name: PartitionStats(max_event_time_ms=t, rows=n) for name, (t, n) in parts.items()
        } if self.meta.get("partition_col") else {}
        return BatchStats(
            batch_id=int(batch_id),
            rows_in=sum(n for _, n in parts.values()),
            panes=panes.num_rows,
            late=kinds.count(LATE_RECORD),
            invalid=kinds.count(INVALID_RECORD),
            watermark_ms=self._watermark_ms if self._seen_event_time else None,
            partitions=partitions,
        )

    def _publish_watermark(self, spark, batch_id: int) -> Optional[int]:
        """Tell this batch's tasks its watermark (the map-side combine, Mapper.java): read from
        the checkpoint's offset log, which Spark writes before it runs the batch. The value is
        tagged with the query id and batch id, and tasks check both; without it (a remote
        checkpoint, a static DataFrame) every row goes to the operator uncombined. Returns the
        watermark read (``None`` when there is none)."""
        context = spark.sparkContext
        context.setLocalProperty(WATERMARK_PROPERTY, None)
        local = _local_path(self.checkpoint) if self.checkpoint else None
        query_id = self.query_id() if local is not None else ""
        if not query_id:
            return None
        try:
            with open(os.path.join(local, "offsets", str(batch_id)), encoding="utf-8") as handle:
                handle.readline()  # version
                watermark = int(json.loads(handle.readline())["batchWatermarkMs"])
        except (OSError, ValueError, KeyError):
            return None
        b = int(self.meta.get("config", {}).get("max_out_of_orderness_ms") or 0)
        # W = max event time - B once W is above 0 (it never decreases, nor does the max)
        self._publish(spark, batch_id, watermark, watermark + b if 0 < watermark < END_OF_INPUT_MS else None)
        return watermark if watermark > 0 else None

    def _publish(self, spark, batch_id: int, watermark: int, running_max: Optional[int] = None) -> None:
        """Tell the batch's tasks W (and the largest valid event time of the earlier batches, for
        the delay histograms), tagged with the query and batch id, which tasks check."""
        value = f"{self.query_id()}:{batch_id}:{watermark}:{'' if running_max is None else running_max}"
        spark.sparkContext.setLocalProperty(WATERMARK_PROPERTY, value)

    def _delay_table(self, stats_rows):
        """One row per (source partition, delay bin) of the batch (eventtime/query/advise.py)."""
        import pyarrow as pa

        config = self.meta.get("config", {})
        rows: dict = {}
        for p, t, n, text in zip(*[stats_rows.column(c).to_pylist()
                                   for c in ("partition", "stat_max_event_time", "stat_rows", "stat_delays")]):
            for bin_, count in (json.loads(text) if text else {}).items():
                key = (p, int(bin_))
                rows[key] = rows.get(key, 0) + int(count)
        parts = sorted(rows, key=lambda k: ("" if k[0] is None else str(k[0]), k[1]))
        return pa.table({
            "partition": pa.array([p for p, _ in parts], pa.string()),
            "delay_bin": pa.array([b for _, b in parts], pa.int32()),
            "records": pa.array([rows[k] for k in parts], pa.int64()),
            "max_out_of_orderness_ms": pa.array([config.get("max_out_of_orderness_ms")] * len(parts), pa.int64()),
            "allowed_lateness_ms": pa.array([config.get("allowed_lateness_ms")] * len(parts), pa.int64()),
        })

    def _apply_partition_watermark(self, driver, batch_id: int, stats_rows, stats):
        """The batch's partitions' largest valid event times into the per-partition W."""
        maxima: dict = {}
        for p, t in zip(stats_rows.column("partition").to_pylist(), stats_rows.column("stat_max_event_time").to_pylist()):
            maxima[p] = t if maxima.get(p) is None else (maxima[p] if t is None else max(maxima[p], t))
        step = driver.after_batch(batch_id, maxima)
        return dataclasses.replace(
            stats, watermark_ms=step.watermark_ms, idle_partitions=tuple(sorted(map(str, driver._clocks.idle))),
            became_idle=tuple(map(str, step.became_idle)), became_active=tuple(map(str, step.became_active)),
            holdback_ms=step.holdback_ms, watermark_mode="per_partition")

    def _handle(self, df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        fault_point("after_commit", batch_id - 1)
        driver = self.partition_watermark
        published = None  # the batch's W, told to its tasks
        if driver is not None:
            published = driver.before_batch(batch_id)
            self._publish(df.sparkSession, batch_id, 0 if published is None else published, driver.running_max_ms())
        elif self.out.isStreaming:
            published = self._publish_watermark(df.sparkSession, batch_id)
        # one execution of the batch; everything below is on the driver
        panes, records, stats_rows = self._collect(df) if self._collector else self.split(df.toArrow())
        stats = self.batch_stats(batch_id, panes, records, stats_rows)
        if driver is not None:
            stats = self._apply_partition_watermark(driver, batch_id, stats_rows, stats)
        if self._enrichment:  # the workers' counts, merged into the accumulators by the batch's action
            stats = dataclasses.replace(stats, enrichment=self._enrichment.take())
        self._last_stats = stats
        qid = self.query_id()
        log.info(
            "eventtime[%s] batch %s: rows_in=%s panes=%s late=%s invalid=%s watermark_ms=%s",
            self.pipeline, batch_id, stats.rows_in, stats.panes, stats.late, stats.invalid, stats.watermark_ms,
        )
        import pyarrow.compute as pc

        fault_point("before_write", batch_id)
        results = []  # (sink, what it returned)
        if self.panes_sink is not None:
            results.append((self.panes_sink, self.panes_sink(panes, batch_id, qid)))
        fault_point("between_writes", batch_id)
        kind = records.column("kind")
        if self.late_sink is not None and self.late_sink is self.invalid_sink:
            results.append((self.late_sink, self.late_sink(records, batch_id, qid)))
        else:
            if self.late_sink is not None:
                results.append((self.late_sink, self.late_sink(records.filter(pc.equal(kind, LATE_RECORD)), batch_id, qid)))
            if self.invalid_sink is not None:
                results.append((self.invalid_sink,
                                self.invalid_sink(records.filter(pc.equal(kind, INVALID_RECORD)), batch_id, qid)))
        if self.delays_sink is not None:
            self.delays_sink(self._delay_table(stats_rows), batch_id, qid)
        rejected = _rejected(results)
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
            shown = stats if (stats.watermark_ms or 0) > 0 or published is None else dataclasses.replace(
                stats, watermark_ms=published)  # a batch with no output row still ran at its W
            self._say(progress_line(self.pipeline, shown, time.monotonic() - started, tick=driver is not None))


def progress_line(pipeline: str, stats: BatchStats, seconds: float, tick: bool = False) -> str:
    """One batch for a person: its input rows (the records of the source, not the watermark's
    tick rows), panes, late and invalid records, the watermark (``none`` before any valid event
    time) and how long the batch took.

    >>> progress_line("orders", BatchStats(batch_id=3, rows_in=2000, panes=340, late=12, invalid=3,
    ...               watermark_ms=1_714_557_800_000), 0.84)
    'eventtime[orders] batch 3: 2,000 rows, 340 panes, 12 late, 3 invalid, watermark 2024-05-01 10:03:20 UTC (0.8 s)'
    """
    import datetime as _dt

    if stats.watermark_ms is None or stats.watermark_ms <= 0:  # Spark's 0: no watermark yet
        watermark = "none"
    elif stats.watermark_ms >= END_OF_INPUT_MS:
        watermark = "end of input"
    else:
        watermark = _dt.datetime.fromtimestamp(stats.watermark_ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC")
    note = " (no input: the per-partition watermark's tick, which fires the windows it passed)" if tick and not stats.rows_in else ""
    return (f"eventtime[{pipeline}] batch {stats.batch_id}: {stats.rows_in:,} rows, {stats.panes:,} panes, "
            f"{stats.late:,} late, {stats.invalid:,} invalid, watermark {watermark} ({seconds:.1f} s){note}")


# Spark logs a failed query's whole JVM stack to the console at ERROR from here; route reports it.
_SPARK_FAILURE_LOGGERS = ("org.apache.spark.sql.execution.streaming.runtime.MicroBatchExecution",
                          "org.apache.spark.sql.execution.streaming.MicroBatchExecution")


def _quiet_spark_failure_log(spark) -> None:
    try:
        jvm = spark._jvm
        level = jvm.org.apache.logging.log4j.Level.FATAL
        for name in _SPARK_FAILURE_LOGGERS:
            jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(name, level)
    except Exception:  # noqa: BLE001 - another logging backend: Spark's report stays
        log.debug("eventtime: could not lower Spark's query-failure console log", exc_info=True)


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
