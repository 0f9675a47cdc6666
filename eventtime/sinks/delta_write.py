"""The exactly-once write every Delta sink shares (:mod:`eventtime.sinks.delta` holds the
sinks: late records, panes, delay histograms). A sink is a callable
``sink(table: pyarrow.Table, batch_id: int, query_id: str)`` (``docs/architecture.md``),
exactly-once per ``(query_id, batch_id)``:

* each commit carries a Delta *app transaction* ``(app_id, batch_id)`` where
  ``app_id`` is derived from the pipeline name and the streaming query id (which
  Spark persists in the checkpoint, so it survives restarts);
* before writing, the sink reads ``DeltaTable.transaction_version(app_id)`` and skips
  the batch when it is ``>= batch_id`` (delta-rs records the transaction but does not
  skip a repeated version by itself). A batch that Spark re-runs after a crash
  between the Delta commit and its own checkpoint commit is therefore written once;
  a fresh checkpoint (a new query id) writing to an old table is not skipped;
* with ``engine="spark"``, or ``"auto"`` (the default) when the Spark session has Delta
  configured (``eventtime.local_session(delta=True)``; the sink gets the session from
  ``route``), the batch is written through Spark's Delta writer with the same app
  transaction as ``txnAppId`` / ``txnVersion``: delta-spark itself refuses a version already
  committed, and the check above is made first to report the skip;
* an existing table at the path must be one of this sink's kind (its ``_delta_log`` schema
  has the sink's columns with their types, and the sink's partitioning): checked when the
  sink is made and again by ``route``, which also refuses two sinks of different kinds on
  one path, all before the query starts;
* write errors are retried by the sinks' one loop (:func:`~eventtime.sinks.exactly_once.run_with_retries`);
  the check above is repeated before every attempt, so an attempt that committed but then
  raised is not written twice. When retries are exhausted, :class:`DeltaSinkError` names the
  table and the batch; Spark fails the query and re-runs the batch on restart, so nothing is
  lost.
"""
from __future__ import annotations

import abc
import dataclasses
import datetime as _dt
import logging
import os
import sys
import time
from typing import Any, Callable, Literal, Mapping, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..ops.paths import local_path
from .delta_files import TaskFiles, commit_batch
from .exactly_once import (FaultInjector, FaultPoint, RetryPolicy, SinkError, WriteResult, check_batch,
                           check_fault_injector, run_with_retries)
from .schema import TABLE_COLUMNS
from .spark_delta import active_session, append_via_spark, spark_has_delta
from .tables import check_name, check_path, check_writable, same_table, check_table_columns, snapshot_dataset

__all__ = ["DeltaSinkError", "WriteResult", "DeltaSink"]

log = logging.getLogger(__name__)

class DeltaSinkError(SinkError):
    """A batch could not be written to a Delta table after all retries.

    Attributes ``path``, ``batch_id``, ``query_id``, ``attempts`` describe the failure.
    """

    def __init__(self, message: str, *, path: str, batch_id: int, query_id: str, attempts: int) -> None:
        super().__init__(message, batch_id=batch_id, query_id=query_id, attempts=attempts)
        self.path = path


# ---------------------------------------------------------------------------
# validation helpers


def _not_transient(exc: BaseException) -> bool:
    """A write error that a retry cannot fix (the data does not fit the table)."""
    from deltalake.exceptions import SchemaMismatchError

    if isinstance(exc, SchemaMismatchError):
        return True
    if "pyspark" in sys.modules:
        from pyspark.errors import AnalysisException

        return isinstance(exc, AnalysisException)
    return False


# ---------------------------------------------------------------------------
# the sinks


class DeltaSink(abc.ABC):
    """Base of the Delta sinks: the exactly-once write (module docstring); a kind supplies
    ``_kind``, ``_prepare`` and, when its columns are known up front, ``_empty_rows``.

    ``fault_injector(point)`` (for fault tests) is called with a
    :class:`~eventtime.sinks.FaultPoint` at one stage, ``"write"``, before each write attempt
    (``point.chunk`` is ``None``: a Delta commit has no chunks)."""

    _kind = "base"
    _what = "rows"

    def __init__(
        self,
        path: str | os.PathLike[str],
        pipeline: str,
        storage_options: Mapping[str, str] | None = None,
        retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 10.0,
        partition_by: Sequence[str] | None = None,
        engine: Literal["rust", "spark", "auto"] = "auto",
        spark: Any = None,
        fault_injector: FaultInjector | None = None,
        now: Callable[[], _dt.datetime] | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.path = check_path(path)
        check_writable(self.path, type(self).__name__)
        self.pipeline = check_name("pipeline", pipeline)
        if storage_options is not None and not isinstance(storage_options, Mapping):
            raise TypeError(f"storage_options must be a mapping of str to str, got {type(storage_options).__name__}")
        self.storage_options = dict(storage_options) if storage_options else None
        self.policy = RetryPolicy(retries, backoff_s, max_backoff_s)
        if partition_by is not None and (
            isinstance(partition_by, str) or not all(isinstance(c, str) for c in partition_by)
        ):
            raise TypeError("partition_by must be a sequence of column names")
        self.partition_by = list(partition_by) if partition_by else None
        if engine not in ("rust", "spark", "auto"):
            raise ValueError(f"engine must be 'rust', 'spark' or 'auto', got {engine!r}")
        self.engine = engine
        self.spark = spark
        self._use_spark: bool | None = None
        if engine == "spark":
            self._require_spark_delta(spark if spark is not None else active_session())
        self.fault_injector = check_fault_injector(fault_injector)
        self._now = now or (lambda: _dt.datetime.now(_dt.timezone.utc))
        self._sleep = sleep
        self._dt_cache: Any = None
        self.check_table()

    # -- the engine, the table at the path -------------------------------------------

    def _require_spark_delta(self, spark: Any) -> None:
        name = type(self).__name__
        if spark is None:
            raise ValueError(
                f"{name}({self.path!r}, engine='spark') needs a Spark session with Delta Lake: pass spark=... "
                "(e.g. eventtime.local_session(delta=True)), or engine='auto' to write through Spark when the "
                "session route() runs on has Delta and through delta-rs otherwise"
            )
        if not spark_has_delta(spark):
            raise ValueError(
                f"{name}({self.path!r}, engine='spark'): the Spark session has no Delta Lake configured "
                "(delta-spark jars on the class path and spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension): "
                "make it with eventtime.local_session(delta=True), or use engine='rust' or 'auto'"
            )
        self.spark = spark
        self._use_spark = True

    def _partitioning(self) -> list[str] | None:
        return self.partition_by or self._default_partition_by()

    def check_table(self) -> None:
        """Refuse (``ValueError`` naming the path, the table's columns and what to do) an existing
        Delta table at the path that this sink cannot append to: not of its kind (another
        sink's table, someone else's ``customer, revenue`` table), a column of another type, or
        another partitioning. Run when the sink is made and by ``route`` before the query starts."""
        required, typed = TABLE_COLUMNS[self._kind]
        check_table_columns(self.path, type(self).__name__, self._what, required, typed, self._partitioning(),
                            self.storage_options, self.spark if self.engine != "rust" else None)

    def bind_route(self, spark: Any, others: Sequence[Any] = ()) -> None:
        """Called by ``route(...)`` before the query starts: takes the query's Spark session (the
        write path of ``engine="auto"`` is chosen by it: delta-spark when it has Delta), refuses
        another sink of the route that writes another kind of rows to the same table, and checks
        the table at the path again. ``route`` then creates the tables (:meth:`ensure_table`)
        once every sink is bound."""
        for other in others:
            other_path = getattr(other, "path", None)
            if (isinstance(other, DeltaSink) and other._kind != self._kind and isinstance(other_path, str)
                    and same_table(self.path, other_path)):
                raise ValueError(
                    f"route: {type(self).__name__} and {type(other).__name__} both write to the Delta table at "
                    f"{self.path!r}: {self._what} and {other._what} are tables of different columns. "
                    f"Give each sink a path of its own (e.g. .../results and .../late)."
                )
            if (isinstance(other, DeltaSink) and other._kind == self._kind and isinstance(other_path, str)
                    and same_table(self.path, other_path) and other.pipeline == self.pipeline):
                raise ValueError(
                    f"route: two {type(self).__name__}s of pipeline {self.pipeline!r} write to the Delta table at "
                    f"{self.path!r}: they would commit each batch under the same app transaction, and the second "
                    f"write of a batch would be skipped as already committed. Pass one sink (late=... also gets the "
                    f"invalid records), or give the second one a path of its own."
                )
        if self.engine != "rust" and spark is not None:
            if self.engine == "spark":
                if self.spark is None:
                    self._require_spark_delta(spark)
            elif self.spark is None or self._use_spark is None:
                self.spark = spark
                self._use_spark = spark_has_delta(spark)
        self.check_table()

    def _empty_rows(self) -> pa.Table | None:
        """The rows of a batch with none in it, when the kind's columns are known before any
        batch (then the table is created empty before the query starts), else ``None``."""
        return None

    def ensure_table(self) -> bool:
        """Create the table, with no rows, when there is none at the path and its columns are
        known up front (late records, delay histograms, panes of a route), so that it can be read and queried
        before its first row arrives. True when it was created. Run by ``route`` before the
        query starts; no app transaction is recorded, so no batch counts as written."""
        empty = self._empty_rows()
        if empty is None or self._table() is not None:
            return False
        data = self._prepare(empty, 0, "", self._now().astimezone(_dt.timezone.utc))
        partition_by = self._partitioning()
        # partition columns last (as delta-spark lays a table out), whichever writer makes it
        data = data.select([c for c in data.column_names if c not in (partition_by or [])] + list(partition_by or []))
        # one empty chunk per column (pyspark 4.2's createDataFrame refuses a column of no chunk)
        data = pa.Table.from_arrays([pa.array([], f.type) for f in data.schema], schema=data.schema)
        if self._spark_enabled():
            writer = self.spark.createDataFrame(data).write.format("delta").mode("append")
            (writer.partitionBy(*partition_by) if partition_by else writer).save(self.path)
        else:
            from deltalake import write_deltalake

            write_deltalake(self.path, data, mode="append", partition_by=partition_by,
                            storage_options=self.storage_options)
        self._dt_cache = None
        log.info("eventtime: created the empty %s table at %s", self._kind, self.path)
        return True

    @property
    def writer(self) -> str:
        """The write path this sink uses now: ``"delta-spark"`` or ``"delta-rs"``."""
        return "delta-spark" if self._spark_enabled() else "delta-rs"

    # -- identity -----------------------------------------------------------

    def app_id(self, query_id: str) -> str:
        """The Delta app-transaction id for a streaming query: ``eventtime/<kind>/<pipeline>/<query_id>``."""
        return f"eventtime/{self._kind}/{self.pipeline}/{query_id}"

    def committed_version(self, query_id: str) -> int | None:
        """The last batch id committed to this table by ``query_id`` (``None``: none)."""
        dt = self._table()
        return None if dt is None else dt.transaction_version(self.app_id(query_id))

    def pipeline_query_ids(self) -> list[str]:
        """The streaming query ids that have written this pipeline's rows to the table.

        Used at start to notice a deleted checkpoint pointed at existing tables: a fresh
        query id would not be skipped by the idempotency check and would write everything
        again.
        """
        dt = self._table()
        if dt is None:
            return []
        dataset = snapshot_dataset(dt)
        if "pipeline" not in dataset.schema.names or "query_id" not in dataset.schema.names:
            return []
        import pyarrow.dataset as pds

        ids = dataset.to_table(columns=["query_id"], filter=pds.field("pipeline") == self.pipeline).column("query_id")
        return sorted(str(v) for v in pc.unique(ids).to_pylist() if v is not None)

    # -- internals ------------------------------------------------------------

    def _table(self) -> Any:
        from deltalake import DeltaTable

        if self._dt_cache is not None:
            try:
                self._dt_cache.update_incremental()
                return self._dt_cache
            except Exception:  # noqa: BLE001 - reload from scratch below
                self._dt_cache = None
        if not DeltaTable.is_deltatable(self.path, self.storage_options):
            return None
        self._dt_cache = DeltaTable(self.path, storage_options=self.storage_options)
        return self._dt_cache

    def _spark_enabled(self) -> bool:
        if self._use_spark is None:
            if self.engine == "rust":
                self._use_spark = False
            else:  # "auto" without a session from route or spark=: the driver's session, if any
                spark = self.spark if self.spark is not None else active_session()
                if spark is None:
                    return False  # decided when there is a session
                self.spark = spark
                self._use_spark = spark_has_delta(spark)
        return self._use_spark

    @abc.abstractmethod
    def _prepare(self, table: pa.Table, batch_id: int, query_id: str, now: _dt.datetime, id_prefix: str = "") -> pa.Table:
        """The rows of one batch as this table stores them (``id_prefix``: which part of the batch
        they are, when the batch is written in parts)."""

    # -- written by Spark's tasks (eventtime.spark.batch_output.py) ---------------------

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["spark"], state["_dt_cache"] = None, None  # a task needs neither
        return state

    @property
    def writes_in_tasks(self) -> bool:
        """Whether ``route`` has Spark's tasks write this sink's rows: through delta-spark, a
        distributed write of the rows as a DataFrame (:meth:`write_frame`), or through delta-rs
        to a local or mounted table (:meth:`open_files` in the tasks, then :meth:`commit_files`
        on the driver)."""
        return self._spark_enabled() or (local_path(self.path) is not None and not self.storage_options)

    @property
    def writes_frames(self) -> bool:
        """Whether the tasks' rows reach this table as a DataFrame that delta-spark writes."""
        return self.writes_in_tasks and self._spark_enabled()

    def write_error(self, exc: BaseException, batch_id: int, query_id: str, attempts: int) -> DeltaSinkError:
        """The error a write of ``batch_id`` that gave up after ``attempts`` raises, naming the table."""
        return DeltaSinkError(
            f"could not write batch {batch_id} of query {query_id} to the Delta table at "
            f"{self.path!r} after {attempts} attempt(s): {type(exc).__name__}: {exc}",
            path=self.path, batch_id=batch_id, query_id=query_id, attempts=attempts,
        )

    def open_files(self, batch_id: int, query_id: str, now: _dt.datetime, task: str) -> TaskFiles:
        """In a task: the files it writes the batch's rows into (``write``, then ``close``)."""
        return TaskFiles(self, local_path(self.path), self._partitioning() or [], batch_id, query_id, now, task)

    def commit_files(self, files: list, batch_id: int, query_id: str) -> WriteResult:
        """On the driver: commit the files every task wrote for the batch, exactly once per
        ``(query_id, batch_id)`` (:func:`~eventtime.sinks.delta_files.commit_batch`)."""
        return commit_batch(self, files, batch_id, query_id, _not_transient)

    def write_frame(self, frame: Any, rows: int, batch_id: int, query_id: str) -> WriteResult:
        """On the driver: append ``frame`` (a Spark DataFrame of ``rows`` rows as this table
        stores them, computed by the tasks) through delta-spark, exactly once per
        ``(query_id, batch_id)``: Spark's tasks write its files, delta-spark commits them."""
        started = time.perf_counter()
        batch_id, query_id = check_batch(batch_id, query_id)
        if not rows:
            return WriteResult(False, 0, 0, skipped="empty", duration_s=time.perf_counter() - started)
        return self._write_retried(frame, rows, batch_id, query_id, started)

    def _default_partition_by(self) -> list[str] | None:
        return None

    def __call__(self, table: pa.Table, batch_id: int, query_id: str) -> WriteResult:
        """Append one micro-batch, exactly once per ``(query_id, batch_id)``."""
        started = time.perf_counter()
        batch_id, query_id = check_batch(batch_id, query_id)
        if not isinstance(table, pa.Table):
            raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
        if table.num_rows == 0:
            return WriteResult(False, 0, 0, skipped="empty", duration_s=time.perf_counter() - started)
        now = self._now()
        if now.tzinfo is None:
            now = now.replace(tzinfo=_dt.timezone.utc)
        data = self._prepare(table, batch_id, query_id, now.astimezone(_dt.timezone.utc))
        return self._write_retried(data, data.num_rows, batch_id, query_id, started)

    def _write_retried(self, data: Any, rows: int, batch_id: int, query_id: str, started: float) -> WriteResult:
        """``data`` (a ``pyarrow.Table``, or for delta-spark a DataFrame) of ``rows`` rows
        appended under the retry policy."""
        app_id = self.app_id(query_id)
        partition_by = self._partitioning()

        def attempt_write(attempt: int) -> WriteResult:
            if self.fault_injector is not None:
                self.fault_injector(FaultPoint("write", batch_id, attempt))
            if self._spark_enabled():
                return self._write_spark(data, rows, batch_id, query_id, app_id, partition_by, attempt + 1)
            return self._write_rust(data, batch_id, query_id, app_id, partition_by, attempt + 1)

        def give_up(exc: BaseException, attempts: int) -> DeltaSinkError:
            return self.write_error(exc, batch_id, query_id, attempts)

        def on_error(exc: Exception, attempt: int, delay: float | None) -> BaseException:
            self._dt_cache = None
            if _not_transient(exc):  # every storage error is retried, not a misfit of data and table
                raise give_up(exc, attempt + 1) from exc
            if delay is not None:
                log.warning(
                    "eventtime: writing batch %d of query %s to Delta table %s failed "
                    "(attempt %d of %d), retrying in %.2fs: %s",
                    batch_id, query_id, self.path, attempt + 1, self.policy.attempts, delay, exc,
                )
            return exc

        result = run_with_retries(self.policy, attempt_write, on_error=on_error, give_up=give_up, sleep=self._sleep)
        return dataclasses.replace(result, duration_s=time.perf_counter() - started)

    def _committed(self, dt: Any, app_id: str, batch_id: int, query_id: str, attempts: int) -> WriteResult | None:
        """The skip result when ``(app_id, batch_id)`` is already in the table, else ``None``."""
        committed = None if dt is None else dt.transaction_version(app_id)
        if committed is None or committed < batch_id:
            return None
        log.info(
            "eventtime: batch %d of query %s already committed to %s (version %d), skipping",
            batch_id, query_id, self.path, committed,
        )
        return WriteResult(False, 0, attempts, skipped="already_committed", version=dt.version())

    def _commit_metadata(self, query_id: str, batch_id: int) -> dict:
        return {"eventtime.pipeline": self.pipeline, "eventtime.query_id": query_id, "eventtime.batch_id": batch_id}

    def _write_spark(self, data: Any, rows: int, batch_id: int, query_id: str, app_id: str,
                     partition_by: list[str] | None, attempts: int) -> WriteResult:
        return append_via_spark(self, data, rows, batch_id, query_id, app_id, partition_by, attempts)

    def _write_rust(
        self, data: pa.Table, batch_id: int, query_id: str, app_id: str,
        partition_by: list[str] | None, attempts: int,
    ) -> WriteResult:
        from deltalake import CommitProperties, Transaction, write_deltalake

        dt = self._table()
        skipped = self._committed(dt, app_id, batch_id, query_id, attempts)
        if skipped is not None:
            return skipped
        props = CommitProperties(
            app_transactions=[Transaction(app_id, batch_id)],
            custom_metadata=self._commit_metadata(query_id, batch_id),
        )
        write_deltalake(
            dt if dt is not None else self.path,
            data,
            mode="append",
            schema_mode="merge",
            partition_by=partition_by,
            storage_options=self.storage_options,
            commit_properties=props,
        )
        dt = self._table()
        return WriteResult(True, data.num_rows, attempts, version=None if dt is None else dt.version())
