"""The Delta sinks: late and invalid records (:class:`DeltaLateSink`), window panes
(:class:`DeltaResultsSink`) and the delay histograms ``eventtime late advise`` reads
(:class:`DeltaDelaySink`). Each is its table's columns and partitioning over the one
exactly-once write of :mod:`eventtime.sinks.delta_write`.

Example:
    >>> import pyarrow as pa, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "late")
    >>> sink = DeltaLateSink(path, pipeline="clicks")
    >>> records = pa.table({"kind": ["late"], "reason": ["too_late"], "key": ['{"user":"a"}'],
    ...                     "payload": ['{"user":"a"}']})
    >>> sink(records, 0, "query-1").written
    True
    >>> sink(records, 0, "query-1").written      # re-run of batch 0: skipped
    False
"""

from __future__ import annotations

import datetime as _dt
import os
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..core.trigger import DISCARDING, FINAL_ONLY
from .delta_merge import insert_rust, insert_spark, merge_rows, merge_rust, merge_spark
from .delta_write import DeltaSink, DeltaSinkError, WriteResult
from .schema import LATE_META_SCHEMA, RECORD_SCHEMA, TS, prepare_panes, prepare_records
from .spark_delta import spark_has_delta, write_via_spark
from .closed import WATERMARK_METADATA
from .tables import check_path, same_table, table_layout, compact, latest_panes, record_pipeline, snapshot_dataset

__all__ = [
    "DeltaSinkError",
    "WriteResult",
    "DeltaLateSink",
    "DeltaResultsSink",
    "DeltaDelaySink",
    "RECORD_SCHEMA",
    "TS",
    "latest_panes",
    "snapshot_dataset",
    "compact",
    "spark_has_delta",
    "write_via_spark",
]


class _PipelineRecorded(DeltaSink):
    """A sink whose table records the pipeline it holds (its window, aggregations and keys) in its
    properties, for ``eventtime late reconcile``: ``route`` gives the document before the query
    starts; a table that does not exist yet records it after its first write."""

    _document: dict | None = None
    _recorded = False

    def record_pipeline(self, document: dict) -> None:
        """Record ``document`` (``{"config": EngineConfig.to_spec(), "keys": [...]}``) in the table."""
        self._document, self._recorded = dict(document), False
        self._record()

    def _record(self) -> None:
        if self._document is not None and not self._recorded:
            self._recorded = record_pipeline(self.path, self.pipeline, self._document, self.storage_options,
                                             self.spark if self._spark_enabled() else None)

    def __call__(self, table: pa.Table, batch_id: int, query_id: str) -> WriteResult:
        result = super().__call__(table, batch_id, query_id)
        self._record()
        return result

    def commit_files(self, files: list, batch_id: int, query_id: str) -> WriteResult:
        result = super().commit_files(files, batch_id, query_id)
        self._record()
        return result

    def write_frame(self, frame: Any, rows: int, batch_id: int, query_id: str) -> WriteResult:
        result = super().write_frame(frame, rows, batch_id, query_id)
        self._record()
        return result


class DeltaLateSink(_PipelineRecorded):
    """Durable side output: every late and invalid record, one row each.

    ``route`` creates the table, empty, before the query starts (so it can be queried before
    the first late record), partitioned by ``detected_date`` (the UTC date of
    ``detected_at``); new columns (the key columns) merge into the schema. Columns: ``pipeline, query_id, batch_id, detected_at, detected_date``,
    the record columns of the contract (:data:`RECORD_SCHEMA`), then the key columns.

    Args:
        path: table location (local path or a URI delta-rs understands). A local path that
            cannot be created or written raises ``ValueError`` here, naming the sink, the path
            and why; remote URIs are checked by their store at the first write.
        pipeline: pipeline name, stored in every row and part of the app id.
        storage_options: passed to delta-rs (object store credentials, ...).
        retries, backoff_s, max_backoff_s: retry policy for write errors
            (delay ``min(max_backoff_s, backoff_s * 2**attempt)``).
        engine: ``"auto"`` (default: delta-spark when the Spark session -- ``spark``, else the
            one ``route`` runs on, else the driver's active one -- has Delta configured,
            delta-rs otherwise), ``"spark"`` (delta-spark, see :func:`write_via_spark`; the
            session must have Delta: ``ValueError`` when the sink is made) or ``"rust"``.
        spark: the Spark session for the delta-spark path (default: ``route``'s).
        fault_injector: test hook ``f(point)`` called with a :class:`~eventtime.sinks.FaultPoint` at stage
            ``"write"`` before each write attempt; raising simulates a storage fault.
        now: clock for ``detected_at`` (UTC ``datetime``).
        delays: where ``route`` writes the delay histograms that ``eventtime late advise``
            reads, when it is given no ``delays=`` sink: ``True`` (default) the Delta table
            ``<path>_delays``, a path, or ``False`` for none.

    Example:
        >>> import pyarrow as pa, tempfile, os
        >>> sink = DeltaLateSink(os.path.join(tempfile.mkdtemp(), "late"), pipeline="p")
        >>> sink(pa.table({"kind": ["invalid"], "reason": ["null_timestamp"]}), 3, "q").rows
        1
    """

    _kind = "late"
    _what = "late and invalid records"

    def __init__(self, path: str | os.PathLike[str], pipeline: str, *args: Any,
                 delays: bool | str | os.PathLike[str] = True, **kwargs: Any) -> None:
        super().__init__(path, pipeline, *args, **kwargs)
        if isinstance(delays, bool):
            self.delays_path = self.path.rstrip("/") + "_delays" if delays else None
        elif isinstance(delays, (str, os.PathLike)):
            self.delays_path = check_path(delays)
        else:
            raise TypeError(f"delays must be True, False or a table path, got {type(delays).__name__} {delays!r}")
        if self.delays_path is not None and same_table(self.delays_path, self.path):
            raise ValueError(f"delays must be a table of its own, not the late table {self.path!r}")
        self._delays_sink: DeltaDelaySink | None = None

    def default_delays(self) -> DeltaDelaySink | None:
        """The delay-histogram sink ``route`` uses when it is given no ``delays=``: a
        :class:`DeltaDelaySink` at ``delays_path`` (``<path>_delays`` unless ``delays=`` said
        otherwise; ``None`` with ``delays=False``), what ``eventtime late advise`` reads."""
        if self.delays_path is None:
            return None
        if self._delays_sink is None:
            self._delays_sink = DeltaDelaySink(
                self.delays_path, self.pipeline, storage_options=self.storage_options, retries=self.policy.retries,
                backoff_s=self.policy.backoff_s, max_backoff_s=self.policy.max_backoff_s, engine=self.engine, spark=self.spark,
                now=self._now, sleep=self._sleep)
        return self._delays_sink

    def _default_partition_by(self) -> list[str]:
        return ["detected_date"]

    def bind_route(self, spark: Any, others: Sequence[Any] = (), key_schema: pa.Schema | None = None) -> None:
        """As the base class; ``key_schema`` (the route's key columns as Arrow types) is part of
        the table ``route`` creates empty, so that its first rows need no schema change."""
        self._key_schema = key_schema
        super().bind_route(spark, others)

    def _empty_rows(self) -> pa.Table:
        taken = set(RECORD_SCHEMA.names) | set(LATE_META_SCHEMA.names)
        keys = [f for f in (getattr(self, "_key_schema", None) or []) if f.name not in taken]
        return pa.schema([*RECORD_SCHEMA, *keys]).empty_table()

    def _prepare(self, table: pa.Table, batch_id: int, query_id: str, now: _dt.datetime, id_prefix: str = "") -> pa.Table:
        return prepare_records(table, self.pipeline, query_id, batch_id, now, id_prefix)


class DeltaResultsSink(_PipelineRecorded):
    """Window panes, appended with their timing and index.

    Every pane row gets ``pipeline, query_id, batch_id, written_at`` and ``key`` (JSON of
    the key columns: ``key_columns``, or by the contract the columns before
    ``window_start``). Read the latest pane per key and window with :func:`latest_panes`.
    An existing table must have every column the route writes: ``add_columns=True`` adds the
    ones a pipeline gained (a new aggregation; earlier panes read null there), else ``route``
    refuses the table before the query starts.

    ``mode="upsert"`` keeps one row per key and window instead (the current-state table a
    dashboard reads: each pane and CORRECTION replaces its window's row, a session pane deletes
    the rows of the sessions it supersedes), by one Delta ``MERGE`` per batch, exactly once
    per batch as appends are (:mod:`eventtime.sinks.delta_merge`).

    Example:
        >>> import pyarrow as pa, tempfile, os, datetime as dt
        >>> path = os.path.join(tempfile.mkdtemp(), "results")
        >>> sink = DeltaResultsSink(path, pipeline="p")
        >>> w = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
        >>> panes = pa.table({"user": ["a", "a"], "window_start": [w, w],
        ...     "window_end": [w + dt.timedelta(minutes=1)] * 2,
        ...     "pane_timing": ["ON_TIME", "LATE"], "pane_index": [0, 1],
        ...     "is_final": [False, False], "count": [3, 4]})
        >>> sink(panes, 0, "q").rows
        2
        >>> latest_panes(path)["count"].tolist()
        [4]
    """

    _kind = "results"
    _what = "window panes"
    #: Appends by an insert-only ``MERGE`` (reconcile's runs: two concurrent runs conflict, not both land).
    _insert_by_merge = False

    def __init__(self, path: str | os.PathLike[str], pipeline: str, *args: Any,
                 key_columns: Sequence[str] | None = None, add_columns: bool = False, mode: str = "append",
                 **kwargs: Any) -> None:
        if not isinstance(mode, str):
            raise TypeError(f"mode must be a str, got {type(mode).__name__} {mode!r}")
        if mode not in ("append", "upsert"):
            raise ValueError(f"mode must be 'append' (every pane, the history) or 'upsert' (one row per key and "
                             f"window), got {mode!r}")
        self.mode = mode
        super().__init__(path, pipeline, *args, **kwargs)
        if key_columns is not None and (
            isinstance(key_columns, str) or not all(isinstance(c, str) for c in key_columns)
        ):
            raise TypeError("key_columns must be a sequence of column names")
        if not isinstance(add_columns, bool):
            raise TypeError(f"add_columns must be a bool, got {type(add_columns).__name__} {add_columns!r}")
        self.key_columns = list(key_columns) if key_columns is not None else None
        self.add_columns = add_columns

    def bind_route(self, spark: Any, others: Sequence[Any] = (), columns: Sequence[str] | None = None,
                   pane_schema: pa.Schema | None = None) -> None:
        """As the base class; ``columns`` (the pane columns the route writes, from ``route``)
        that an existing table lacks -- an aggregation the pipeline gained -- are refused
        unless ``add_columns=True`` said to add them (earlier rows read null there).
        ``pane_schema`` (the panes' Arrow types, from ``route``): the table is created with
        them, empty, when there is none, so that it can be read before its first pane."""
        self._pane_schema = pane_schema
        super().bind_route(spark, others)
        if columns is None or self.add_columns:
            return
        layout = table_layout(self.path, self.storage_options, self.spark if self.engine != "rust" else None)
        if layout is None or not layout[0]:
            return
        new = [c for c in columns if c not in layout[0]]
        if new:
            raise ValueError(
                f"DeltaResultsSink: the table at {self.path!r} has no column(s) {', '.join(new)} that pipeline "
                f"{self.pipeline!r} writes now (its columns: {', '.join(layout[0])}): did its aggregations change? "
                f"Pass add_columns=True to add them to the table (its earlier panes read null there), or write "
                f"the new pipeline to a table of its own."
            )

    def batch_watermark(self, watermark_ms: int | None) -> None:
        """The watermark the batch about to be written ran at (``route`` tells it): recorded in
        the batch's commit, so that :func:`latest_panes` can tell which windows are closed."""
        self._watermark_ms = watermark_ms

    def _commit_metadata(self, query_id: str, batch_id: int) -> dict:
        metadata = super()._commit_metadata(query_id, batch_id)
        watermark_ms = getattr(self, "_watermark_ms", None)
        if watermark_ms is not None:
            metadata[WATERMARK_METADATA] = int(watermark_ms)
        return metadata

    def _empty_rows(self) -> pa.Table | None:
        schema = getattr(self, "_pane_schema", None)
        return None if schema is None else schema.empty_table()

    def _prepare(self, table: pa.Table, batch_id: int, query_id: str, now: _dt.datetime, id_prefix: str = "") -> pa.Table:
        return prepare_panes(table, self.pipeline, query_id, batch_id, now, self.key_columns)

    @property
    def writes_in_tasks(self) -> bool:
        """As the base class; an upsert table merges on the driver."""
        return self.mode == "append" and not self._insert_by_merge and super().writes_in_tasks

    def record_pipeline(self, document: dict) -> None:
        """As the base class; an upsert table refuses a pipeline of discarding panes (``ValueError``,
        before the query starts): it keeps a window's last pane, which holds only its last records."""
        config = document.get("config", {})
        if self.mode == "upsert" and config.get("accumulation") == DISCARDING and config.get("emit") != FINAL_ONLY:
            raise ValueError(
                f"DeltaResultsSink({self.path!r}, mode='upsert'): pipeline {self.pipeline!r} emits discarding panes "
                f"(each holds only the records since the window's previous pane), and an upsert table keeps only a "
                f"window's last pane: its rows would lose records. Use accumulation='accumulating' (or "
                f"emit='final_only') for the upsert table, or mode='append'.")
        super().record_pipeline({**document, "mode": self.mode} if self.mode != "append" else document)

    def _write_rust(self, data: pa.Table, batch_id: int, query_id: str, app_id: str,
                    partition_by: list[str] | None, attempts: int) -> WriteResult:
        dt = self._table() if self.mode == "upsert" or self._insert_by_merge else None
        if dt is None:  # appends, and the first write of an upsert table (which creates it)
            return super()._write_rust(self._upserts(data), batch_id, query_id, app_id, partition_by, attempts)
        skipped = self._committed(dt, app_id, batch_id, query_id, attempts)
        if skipped is not None:
            return skipped
        from deltalake import CommitProperties, Transaction

        props = CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                                 custom_metadata=self._commit_metadata(query_id, batch_id))
        if self.mode == "upsert":
            merge_rust(dt, merge_rows(data), props)
        else:
            insert_rust(dt, data, props)
        return WriteResult(True, data.num_rows, attempts, version=self._table().version())

    def _write_spark(self, data: Any, rows: int, batch_id: int, query_id: str, app_id: str,
                     partition_by: list[str] | None, attempts: int) -> WriteResult:
        dt = self._table() if self.mode == "upsert" or self._insert_by_merge else None
        if dt is None:
            if self.mode == "upsert":
                data = self._upserts(data)
                rows = data.num_rows
            return super()._write_spark(data, rows, batch_id, query_id, app_id, partition_by, attempts)
        skipped = self._committed(dt, app_id, batch_id, query_id, attempts)
        if skipped is not None:
            return skipped
        before = dt.version()
        metadata = self._commit_metadata(query_id, batch_id)
        if self.mode == "upsert":
            merge_spark(self.spark, self.path, merge_rows(data), app_id, batch_id, user_metadata=metadata)
        else:
            insert_spark(self.spark, self.path, data, app_id, batch_id, user_metadata=metadata)
        version = self._table().version()
        if version == before:  # delta-spark skipped it: another writer committed the batch first
            return WriteResult(False, 0, attempts, skipped="already_committed", version=version)
        return WriteResult(True, data.num_rows, attempts, version=version)

    def _upserts(self, data: pa.Table) -> pa.Table:
        if self.mode == "append":
            return data
        rows = merge_rows(data)
        return rows.filter(pc.equal(rows.column("_et_op"), "upsert")).drop_columns(["_et_op"])


class DeltaDelaySink(DeltaSink):
    """The delay histograms (``route(..., delays=...)``): per batch, source partition and
    delay bin, how many valid records arrived that far behind the running maximum event time;
    ``eventtime late advise`` reads them (the bins: :mod:`eventtime.query.advise`).

    Example:
        >>> import pyarrow as pa, tempfile, os
        >>> sink = DeltaDelaySink(os.path.join(tempfile.mkdtemp(), "delays"), pipeline="p")
        >>> sink(pa.table({"partition": ["0"], "delay_bin": pa.array([0], pa.int32()),
        ...                "records": [5]}), 0, "q").rows
        1
    """

    _kind = "delays"
    _what = "delay histograms"

    def _empty_rows(self) -> pa.Table:
        return pa.table({"partition": pa.array([], pa.string()), "delay_bin": pa.array([], pa.int32()),
                         "records": pa.array([], pa.int64()), "max_out_of_orderness_ms": pa.array([], pa.int64()),
                         "allowed_lateness_ms": pa.array([], pa.int64())})

    def _prepare(self, table: pa.Table, batch_id: int, query_id: str, now: _dt.datetime, id_prefix: str = "") -> pa.Table:
        n = table.num_rows
        meta = {
            "pipeline": pa.array([self.pipeline] * n, pa.string()),
            "query_id": pa.array([query_id] * n, pa.string()),
            "batch_id": pa.array([batch_id] * n, pa.int64()),
            "written_at": pa.array([now] * n, pa.timestamp("us", tz="UTC")),
        }
        return pa.table({**meta, **{c: table.column(c) for c in table.column_names}})
