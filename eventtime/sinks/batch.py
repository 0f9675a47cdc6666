"""The generic part of a sink into a transactional store: chunks, retries, replay, a ledger.

:class:`BatchSink` writes one micro-batch (the router's ``sink(table, batch_id, query_id)``
contract) into an external system exactly once, in one transaction:

1. open (or reuse) a connection and begin a transaction;
2. if the ledger already holds ``(pipeline, target, query_id, batch_id)``, roll back and skip
   the batch: Spark re-ran a batch that this sink had committed before a crash;
3. write the rows in chunks (at most ``max_rows`` rows and about ``max_bytes`` bytes each),
   one statement per chunk, each chunk inside a savepoint;
4. record the batch in the ledger, in the same transaction, and commit.

Failures:

* a **bad row** (the store refuses a value: :meth:`BatchSink.is_data_error`) does not fail
  the batch: the chunk is rolled back to its savepoint and split in halves until the refused
  rows are alone; they go to :meth:`BatchSink.reject` (same transaction) with the batch id,
  their row index in the table the sink was given, and the error, and are listed in the
  result; every other row is written;
* a **transient error** (:meth:`BatchSink.is_transient`: connection lost, server restarting,
  lock timeout, serialization failure) is retried with exponential backoff (the transactional
  sinks' one loop, :func:`~eventtime.sinks.exactly_once.run_with_retries`). With
  ``replay=True`` the transaction is rolled back and the whole buffered batch is replayed
  into a new one. With ``replay=False`` only the failed chunk's statement is retried (rolled
  back to its savepoint, the earlier chunks stay in the open transaction); when the
  connection itself is gone its transaction went with it, so the batch is replayed then too
  (nothing else could keep the earlier chunks);
* any other error, or a transient one after ``retries`` attempts, raises
  :class:`BatchSinkError` (naming the target, batch and attempts): Spark fails the query,
  and re-runs the batch on restart, so nothing is lost.

A subclass supplies the store: connect, begin / commit / rollback, savepoints, the chunk
statement, the ledger and the rejects. :class:`eventtime.sinks.PostgresSink` is the built-in
one.
"""

from __future__ import annotations

import abc
import dataclasses
import logging
import numbers
import time
from typing import Any, Callable, Optional, Sequence

import pyarrow as pa

from ..ops.faults import fault_point
from .exactly_once import (FaultInjector, FaultPoint, RetryPolicy, SinkError, WriteResult, check_batch,
                           check_fault_injector, run_with_retries)

__all__ = ["BatchSink", "BatchSinkError", "BatchWriteResult", "RejectedRow", "SinkError"]

log = logging.getLogger(__name__)


class BatchSinkError(SinkError):
    """A batch could not be written after all retries (or failed with an error that is not
    retried); ``target`` names the table."""

    def __init__(self, message: str, *, target: str, batch_id: int, query_id: str, attempts: int) -> None:
        super().__init__(message, batch_id=batch_id, query_id=query_id, attempts=attempts)
        self.target = target


@dataclasses.dataclass(frozen=True)
class RejectedRow:
    """A row the store refused: its index in the table given to the sink, the row, the error,
    and its key (:meth:`BatchSink.row_key`; ``None`` when the sink has no notion of one)."""

    batch_id: int
    row_index: int
    row: dict
    error: str
    key: Optional[dict] = None


BatchWriteResult = WriteResult
"""Deprecated: the name :class:`~eventtime.sinks.WriteResult` had for :class:`BatchSink` (one
result type for every transactional sink now); give its fields by keyword."""


def _check_int(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__} {value!r}")
    if value < minimum:
        raise ValueError(f"{name} must be >= {minimum}, got {value!r}")
    return int(value)


class _Replay(Exception):
    """The open transaction is lost or must be replayed whole; carries the cause."""


class BatchSink(abc.ABC):
    """Base of an exactly-once, chunked, retried sink (module docstring); subclass it per store.

    ``fault_injector(point)`` (for fault tests) is called with a :class:`~eventtime.sinks.FaultPoint`
    at the stages ``"begin"`` (transaction begun), ``"chunk"`` (before each chunk; ``point.chunk``
    is its number, ``None`` at the other stages), ``"before_commit"`` and ``"after_commit"``, in
    that order.

    >>> class Printer(BatchSink):                      # a store without transactions, for show
    ...     def connect(self): return object()
    ...     def close(self, conn): pass
    ...     def begin(self, conn): pass
    ...     def commit(self, conn): pass
    ...     def rollback(self, conn): pass
    ...     def savepoint(self, conn): pass
    ...     def release_savepoint(self, conn): pass
    ...     def rollback_to_savepoint(self, conn): pass
    ...     def committed(self, conn, query_id, batch_id): return False
    ...     def record(self, conn, query_id, batch_id, rows, rejected): pass
    ...     def reject(self, conn, query_id, rejected): pass
    ...     def write_rows(self, conn, columns, rows): print(len(rows), "rows")
    >>> import pyarrow as pa
    >>> Printer("p", max_rows=2)(pa.table({"x": [1, 2, 3]}), 0, "q").chunks
    2 rows
    1 rows
    2
    """

    def __init__(
        self,
        pipeline: str,
        *,
        target: str = "",
        max_rows: int = 1000,
        max_bytes: int = 1 << 20,
        retries: int = 5,
        backoff_s: float = 0.2,
        max_backoff_s: float = 10.0,
        replay: bool = True,
        fault_injector: Optional[FaultInjector] = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not isinstance(pipeline, str) or not pipeline.strip():
            raise (TypeError if not isinstance(pipeline, str) else ValueError)(
                f"pipeline must be a non-empty str, got {pipeline!r}"
            )
        self.pipeline = pipeline
        self.target = target
        self.max_rows = _check_int("max_rows", max_rows, 1)
        self.max_bytes = _check_int("max_bytes", max_bytes, 1)
        self.policy = RetryPolicy(retries, backoff_s, max_backoff_s)
        if not isinstance(replay, bool):
            raise TypeError(f"replay must be True or False, got {type(replay).__name__} {replay!r}")
        self.replay = replay
        self.fault_injector = check_fault_injector(fault_injector)
        self._sleep = sleep
        self._conn: Any = None

    # -- what a store supplies ------------------------------------------------------------

    @abc.abstractmethod
    def connect(self) -> Any:
        """A new connection (the sink keeps it between batches and makes a new one after a failure)."""

    @abc.abstractmethod
    def close(self, conn: Any) -> None:
        """Close ``conn``, ignoring errors (it may be broken)."""

    @abc.abstractmethod
    def begin(self, conn: Any) -> None: ...

    @abc.abstractmethod
    def commit(self, conn: Any) -> None: ...

    @abc.abstractmethod
    def rollback(self, conn: Any) -> None: ...

    @abc.abstractmethod
    def savepoint(self, conn: Any) -> None: ...

    @abc.abstractmethod
    def release_savepoint(self, conn: Any) -> None: ...

    @abc.abstractmethod
    def rollback_to_savepoint(self, conn: Any) -> None: ...

    @abc.abstractmethod
    def committed(self, conn: Any, query_id: str, batch_id: int) -> bool:
        """Whether the ledger holds this batch (read inside the open transaction)."""

    @abc.abstractmethod
    def record(self, conn: Any, query_id: str, batch_id: int, rows: int, rejected: int) -> None:
        """Add the batch to the ledger, in the open transaction."""

    @abc.abstractmethod
    def reject(self, conn: Any, query_id: str, rejected: Sequence[RejectedRow]) -> None:
        """Store the refused rows (e.g. a rejects table), in the open transaction."""

    @abc.abstractmethod
    def write_rows(self, conn: Any, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        """Write one chunk (one statement), in the open transaction."""

    def setup(self, conn: Any, table: pa.Table) -> None:
        """Called on every new connection before its first batch (e.g. create missing tables)."""

    def prepare(self, table: pa.Table, batch_id: int, query_id: str) -> tuple[list[str], list[tuple], list[int]]:
        """The batch as ``(columns, rows, row_index)``: what is written, in a deterministic order,
        and each row's index in ``table``. The default: every column, in the table's order."""
        columns = table.column_names
        values = [table.column(c).to_pylist() for c in columns]
        return list(columns), list(zip(*values)) if columns else [], list(range(table.num_rows))

    def is_transient(self, exc: BaseException) -> bool:
        """Whether a retry may succeed (connection lost, server restarting, lock or serialization conflicts)."""
        return False

    def is_data_error(self, exc: BaseException) -> bool:
        """Whether the store refused a value of a row (that row is rejected, the rest written)."""
        return False

    def explain(self, exc: BaseException) -> str:
        """What to do about an error that is not retried (appended to :class:`BatchSinkError`'s message)."""
        return ""

    def is_broken(self, conn: Any) -> bool:
        """Whether ``conn`` lost its session (its open transaction is gone)."""
        return False

    def row_key(self, row: dict) -> Optional[dict]:
        """The key columns of a written row, for reporting a refused one (default: none)."""
        return None

    def row_bytes(self, row: tuple) -> int:
        """Roughly the bytes ``row`` takes in a statement (for ``max_bytes``)."""
        size = 0
        for value in row:
            if value is None or isinstance(value, (bool, int, float)):
                size += 8
            elif isinstance(value, (str, bytes)):
                size += len(value)
            else:
                size += len(str(value))
        return size

    # -- the write -------------------------------------------------------------------------

    def chunks(self, rows: Sequence[tuple]) -> list[tuple[int, int]]:
        """``[start, end)`` row ranges: at most ``max_rows`` rows and, unless one row is bigger,
        at most ``max_bytes`` bytes each."""
        out: list[tuple[int, int]] = []
        start, size = 0, 0
        for i, row in enumerate(rows):
            b = self.row_bytes(row)
            if i > start and (i - start >= self.max_rows or size + b > self.max_bytes):
                out.append((start, i))
                start, size = i, 0
            size += b
        if start < len(rows):
            out.append((start, len(rows)))
        return out

    def _fault(self, stage: str, batch_id: int, attempt: int, chunk: Optional[int] = None) -> None:
        if self.fault_injector is not None:
            self.fault_injector(FaultPoint(stage, batch_id, attempt, chunk))

    @property
    def retries(self) -> int:
        return self.policy.retries

    def _backoff(self, attempt: int) -> None:
        self._sleep(self.policy.delay_s(attempt))

    def _drop_connection(self) -> None:
        if self._conn is not None:
            self.close(self._conn)
            self._conn = None

    def __call__(self, table: pa.Table, batch_id: int, query_id: str) -> WriteResult:
        """Write one micro-batch exactly once per ``(query_id, batch_id)``."""
        started = time.perf_counter()
        if not isinstance(table, pa.Table):
            raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
        batch_id, query_id = check_batch(batch_id, query_id)
        if table.num_rows == 0:
            return WriteResult(False, 0, skipped="empty")
        columns, rows, index = self.prepare(table, batch_id, query_id)
        ranges = self.chunks(rows)
        statement_retries = 0  # over every attempt

        def transaction(attempt: int) -> WriteResult:
            nonlocal statement_retries
            if self._conn is None:
                conn = self.connect()
                try:
                    self.setup(conn, table)
                except BaseException:
                    self.close(conn)
                    raise
                self._conn = conn
            conn = self._conn
            self.begin(conn)
            self._fault("begin", batch_id, attempt)
            if self.committed(conn, query_id, batch_id):
                self.rollback(conn)
                log.info("%s: batch %s of query %s is in the ledger: skipped", self.target, batch_id, query_id)
                return WriteResult(False, 0, attempts=attempt + 1, skipped="already_committed",
                                   duration_s=time.perf_counter() - started)
            rejected: list[RejectedRow] = []
            for number, (lo, hi) in enumerate(ranges):
                self._fault("chunk", batch_id, attempt, number)
                statement_retries += self._write_chunk(conn, columns, rows, index, lo, hi, batch_id, rejected)
            if rejected:
                self.reject(conn, query_id, rejected)
            written = len(rows) - len(rejected)
            self.record(conn, query_id, batch_id, written, len(rejected))
            self._fault("before_commit", batch_id, attempt)
            self.commit(conn)
            return WriteResult(True, written, chunks=len(ranges), attempts=attempt + 1,
                               statement_retries=statement_retries,
                               rejected=tuple(sorted(rejected, key=lambda r: r.row_index)))

        def on_error(exc: Exception, attempt: int, delay: Optional[float]) -> BaseException:
            cause = exc.__cause__ if isinstance(exc, _Replay) else exc
            if not self.is_transient(cause):
                self._drop_connection()
                hint = self.explain(cause)
                raise BatchSinkError(
                    f"{self.target}: batch {batch_id} of query {query_id} failed: {type(cause).__name__}: "
                    f"{str(cause).strip()}{f' ({hint})' if hint else ''}",
                    target=self.target, batch_id=batch_id, query_id=query_id, attempts=attempt + 1,
                ) from cause
            log.warning("%s: batch %s attempt %s: %s: %s; %s", self.target, batch_id, attempt + 1,
                        type(cause).__name__, str(cause).strip(), "replaying the batch" if delay is not None else "giving up")
            if self._conn is not None and not self.is_broken(self._conn):
                try:
                    self.rollback(self._conn)
                except Exception:  # noqa: BLE001 - the connection is replaced below
                    self._drop_connection()
            else:
                self._drop_connection()
            return cause

        def give_up(last: BaseException, attempts: int) -> BatchSinkError:
            self._drop_connection()
            return BatchSinkError(
                f"{self.target}: batch {batch_id} of query {query_id} not written after {attempts} attempts: "
                f"{type(last).__name__}: {last}",
                target=self.target, batch_id=batch_id, query_id=query_id, attempts=attempts,
            )

        result = run_with_retries(self.policy, transaction, on_error=on_error, give_up=give_up, sleep=self._sleep)
        if not result.written:
            return result
        fault_point("after_db_commit", batch_id)  # outside the retries: the batch is committed
        self._fault("after_commit", batch_id, result.attempts - 1)
        for r in result.rejected:
            log.error("%s: batch %s row %s refused: %s", self.target, batch_id, r.row_index, r.error)
        return dataclasses.replace(result, duration_s=time.perf_counter() - started)

    def _write_chunk(self, conn, columns, rows, index, lo, hi, batch_id, rejected) -> int:
        """Write ``rows[lo:hi]`` in a savepoint; returns how many times the statement was retried alone."""
        retries = 0
        while True:
            self.savepoint(conn)
            try:
                self.write_rows(conn, columns, rows[lo:hi])
                self.release_savepoint(conn)
                return retries
            except Exception as exc:  # noqa: BLE001 - classified below
                if self.is_broken(conn):
                    raise _Replay() from exc
                self.rollback_to_savepoint(conn)
                if self.is_data_error(exc):
                    self._isolate(conn, columns, rows, index, lo, hi, batch_id, exc, rejected)
                    return retries
                if self.replay or not self.is_transient(exc) or retries >= self.retries:
                    raise
                log.warning("%s: batch %s rows %s-%s: %s: %s; retrying the statement", self.target, batch_id,
                            lo, hi - 1, type(exc).__name__, str(exc).strip())
                self._backoff(retries)
                retries += 1

    def _isolate(self, conn, columns, rows, index, lo, hi, batch_id, exc, rejected) -> None:
        """Write what ``rows[lo:hi]`` holds apart from the refused rows, found by halving."""
        if hi - lo == 1:
            row = dict(zip(columns, rows[lo]))
            rejected.append(RejectedRow(batch_id, index[lo], row, f"{type(exc).__name__}: {str(exc).strip()}",
                                        self.row_key(row)))
            return
        mid = (lo + hi) // 2
        for a, b in ((lo, mid), (mid, hi)):
            self.savepoint(conn)
            try:
                self.write_rows(conn, columns, rows[a:b])
                self.release_savepoint(conn)
            except Exception as inner:  # noqa: BLE001 - classified below
                if self.is_broken(conn):
                    raise _Replay() from inner
                self.rollback_to_savepoint(conn)
                if not self.is_data_error(inner):
                    raise
                self._isolate(conn, columns, rows, index, a, b, batch_id, inner, rejected)
