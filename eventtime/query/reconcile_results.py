"""The results tables ``eventtime late reconcile`` reads and corrects: a Delta table
(:class:`DeltaResults`, appends or the upsert table) or a PostgreSQL table
(:class:`PostgresResults`, what :class:`~eventtime.sinks.PostgresSink` writes). Each gives its
rows as the latest panes are computed from, the types of its columns, and commits one run's
CORRECTION panes exactly once (Delta: the app transaction; PostgreSQL: the sink's ledger)."""

from __future__ import annotations

import contextlib
import datetime as _dt
import os
from typing import Any, Iterator, Mapping, Optional

import pyarrow as pa
import pyarrow.compute as pc

from ..ops.paths import local_path
from ..sinks.delta import DeltaResultsSink, WriteResult
from ..sinks.schema import TABLE_COLUMNS
from ..sinks.tables import check_table_columns, recorded_pipelines, snapshot_dataset

__all__ = ["RECONCILE_QUERY", "LATE_RECORD_IDS", "DeltaResults", "PostgresResults", "open_results", "delta_dataset",
           "delta_exists", "one_run_at_a_time"]

#: The query id of reconcile runs in the results table (their batch id is the run's number).
RECONCILE_QUERY = "reconcile"
#: The results table's column of a CORRECTION pane: the ids of the late records its window holds.
LATE_RECORD_IDS = "late_record_ids"


def delta_exists(path: str, options: Optional[Mapping[str, str]]) -> bool:
    from deltalake import DeltaTable

    return DeltaTable.is_deltatable(path, dict(options) if options else None)


def delta_dataset(path: str, options: Optional[Mapping[str, str]]):
    from deltalake import DeltaTable

    return snapshot_dataset(DeltaTable(path, storage_options=dict(options) if options else None))


class DeltaResults:
    """A Delta results table (``DeltaResultsSink``'s), appends or upserts."""

    key_column = True  # the table has the key as JSON text (``key``) and ``pipeline``

    def __init__(self, path: str, options: Optional[Mapping[str, str]], engine: str, spark: Any) -> None:
        self.path, self.options, self.engine, self.spark = path, options, engine, spark
        self.name = repr(path)
        if self.exists():
            required, typed = TABLE_COLUMNS["results"]
            check_table_columns(path, "reconcile (results table)", "window panes", required, typed, None, options, spark)

    def exists(self) -> bool:
        return delta_exists(self.path, self.options)

    def documents(self) -> dict[str, dict]:
        return recorded_pipelines(self.path, self.options) if self.exists() else {}

    def read(self, pipeline: str, keys: list[str]) -> tuple[Optional[pa.Table], pa.Schema]:
        """The pipeline's rows (window bounds in epoch ms, ``written_at`` in us), and the table's
        column types; ``None`` when there is no table yet."""
        if not self.exists():
            return None, pa.schema([])
        import pyarrow.dataset as pds

        dataset = delta_dataset(self.path, self.options)
        columns = [c for c in dataset.schema.names if c not in ("query_id", "pipeline")]
        table = dataset.to_table(columns=columns, filter=pds.field("pipeline") == pipeline)
        for name in ("window_start", "window_end", "written_at"):
            if name in table.column_names:
                micros = pc.cast(table.column(name), pa.int64())
                table = table.set_column(table.column_names.index(name), name,
                                         micros if name == "written_at" else pc.divide(micros, 1000))
        return table, dataset.schema

    def write(self, table: pa.Table, pipeline: str, keys: list[str], document: dict, fault: Any) -> tuple[int, WriteResult]:
        sink = DeltaResultsSink(self.path, pipeline, key_columns=keys, storage_options=self.options, engine=self.engine,
                                spark=self.spark, add_columns=True, mode=document.get("mode", "append"))
        sink._insert_by_merge = True  # a concurrent run of the same number conflicts: retried, then skipped
        committed = sink.committed_version(RECONCILE_QUERY)
        run = 0 if committed is None else committed + 1
        fault("before_reconcile_commit", run)
        outcome = sink(table, run, RECONCILE_QUERY)
        fault("after_reconcile_commit", run)
        return run, outcome


class PostgresResults:
    """The PostgreSQL table a :class:`~eventtime.sinks.PostgresSink` upserts (one row per key
    and window; a session pane's ``merged_from`` in ``jsonb``). The pipeline is read from the late
    table; the run is committed through the sink, with its ledger row, in one transaction."""

    key_column = False

    def __init__(self, sink: Any) -> None:
        self.sink = sink
        self.name = f"PostgreSQL table {sink.table!r}"

    def _connect(self):
        return self.sink.connect()

    def exists(self) -> bool:
        conn = self._connect()
        try:
            return conn.execute("SELECT to_regclass(%s)", (self.sink.table,)).fetchone()[0] is not None
        finally:
            self.sink.close(conn)

    def documents(self) -> dict[str, dict]:
        return {}

    def read(self, pipeline: str, keys: list[str]) -> tuple[Optional[pa.Table], pa.Schema]:
        from psycopg import sql
        from psycopg.rows import dict_row

        from ..ops.json_text import keys_json

        if not self.exists():
            return None, pa.schema([])
        conn = self._connect()
        try:
            with conn.cursor(row_factory=dict_row) as cur:
                rows = cur.execute(sql.SQL("SELECT * FROM {}").format(self.sink._ident(self.sink.table))).fetchall()
        finally:
            self.sink.close(conn)
        texts = keys_json(keys, [[r.get(k) for r in rows] for k in keys]) if rows else []
        for row, text in zip(rows, texts):
            row.update(key=text, window_start=_epoch_ms(row["window_start"]), window_end=_epoch_ms(row["window_end"]),
                       written_at=_epoch_ms(row["written_at"]) * 1000)
            if row.get("merged_from"):
                row["merged_from"] = [{"start": _epoch_ms(_instant(b["start"])), "end": _epoch_ms(_instant(b["end"]))}
                                      for b in row["merged_from"]]
        table = pa.Table.from_pylist(rows) if rows else None
        if table is None:
            return None, pa.schema([])
        # numeric columns come back as Decimals of their values' digits: the late values may have more
        schema = pa.schema([pa.field(f.name, pa.decimal128(38, f.type.scale)) if pa.types.is_decimal(f.type) else f
                            for f in table.schema])
        return table, schema

    def write(self, table: pa.Table, pipeline: str, keys: list[str], document: dict, fault: Any) -> tuple[int, WriteResult]:
        from psycopg import sql

        conn = self._connect()
        try:  # the column of the records a window holds, and the next run's number from the ledger
            if self.exists():
                conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS {} jsonb").format(
                    self.sink._ident(self.sink.table), sql.Identifier(LATE_RECORD_IDS)))
            last = None
            if conn.execute("SELECT to_regclass(%s)", (self.sink.ledger_table,)).fetchone()[0] is not None:
                last = conn.execute(sql.SQL(
                    "SELECT max(batch_id) FROM {} WHERE pipeline = %s AND target = %s AND query_id = %s").format(
                    self.sink._ident(self.sink.ledger_table)),
                    (self.sink.pipeline, self.sink.table, RECONCILE_QUERY)).fetchone()[0]
        finally:
            self.sink.close(conn)
        run = 0 if last is None else int(last) + 1
        fault("before_reconcile_commit", run)
        outcome = self.sink(table, run, RECONCILE_QUERY)
        fault("after_reconcile_commit", run)
        return run, outcome


def _epoch_ms(value: _dt.datetime) -> int:
    return (value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)) // _dt.timedelta(milliseconds=1)


def _instant(text: Any) -> Any:
    """A ``merged_from`` bound as ``jsonb`` gives it back: ISO text, as the sink wrote it."""
    if isinstance(text, str):
        value = _dt.datetime.fromisoformat(text)
        return value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)
    return text


def open_results(results: Any, options: Optional[Mapping[str, str]], engine: str, spark: Any):
    """A results table to reconcile: a Delta path (or URI), or a ``PostgresSink``."""
    if isinstance(results, (str, os.PathLike)):
        return DeltaResults(os.fspath(results), options, engine, spark)
    if all(hasattr(results, a) for a in ("conninfo", "table", "ledger_table", "connect")):
        return PostgresResults(results)
    raise TypeError(f"results must be a Delta table path or a PostgresSink, got {type(results).__name__}")



@contextlib.contextmanager
def one_run_at_a_time(late: str) -> Iterator[None]:
    """Reconcile runs of a late table one after another: a second run waits for the first, then
    reads what it wrote (an exclusive ``flock`` on ``<late>/.eventtime-reconcile.lock``, a hidden
    file Delta and its VACUUM leave alone). Tables on object stores have no such lock: their runs
    are kept apart by the commit (an insert ``MERGE`` keyed by window and pane index, the app
    transaction, the PostgreSQL ledger), and should be started one at a time."""
    local = local_path(late)
    if local is None:
        yield
        return
    import fcntl

    with open(os.path.join(local, ".eventtime-reconcile.lock"), "a+") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
