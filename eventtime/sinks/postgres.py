"""``PostgresSink``: window panes upserted into PostgreSQL, exactly once per micro-batch.

The generic part (chunks, retries, replay, ledger, bad rows) is :class:`BatchSink`; this
module is PostgreSQL's: psycopg 3, one multi-row ``INSERT ... ON CONFLICT DO UPDATE`` per
chunk, savepoints, and three tables:

* the **results table** (``table``): the pane columns, plus ``query_id``, ``batch_id`` and
  ``written_at``; unique on (key columns, ``window_start``, ``window_end``) with nulls not
  distinct (a null key is a key). The latest pane wins: a pane replaces the stored one only
  when its ``pane_index`` is not lower, and of several panes of one window in a batch only
  the last is written; a session pane deletes the rows of the sessions it supersedes (its
  ``merged_from``). Created when missing (``create_table=True``), from the first batch's
  columns; an existing table is used as it is (it needs that unique constraint);
* the **ledger** (``ledger_table``, shared by sinks): ``(pipeline, target, query_id,
  batch_id)`` of every committed batch, inserted in the batch's transaction;
* the **rejects** (``<table>_rejects``): rows the table refused, with the batch id, the row's
  index in the batch's pane table, its key, the row as JSON and the error.
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..ops.json_text import key_json
from .batch import BatchSink, RejectedRow
from .postgres_types import dumps as _dumps
from .postgres_types import postgres_type
from .schema import PANE_REQUIRED, superseded

__all__ = ["PostgresSink", "postgres_type"]

_MAX_PARAMS = 65535  # PostgreSQL's limit of bind parameters in one statement


def _name(value: Any, parameter: str) -> str:
    if not isinstance(value, str):
        raise TypeError(f"{parameter} must be a table name (str), got {type(value).__name__} {value!r}")
    parts = value.split(".")
    if not value or len(parts) > 2 or not all(parts):
        raise ValueError(f"{parameter} must be 'table' or 'schema.table', got {value!r}")
    return value


def _quoted(name: str) -> str:
    """``name`` as a PostgreSQL quoted identifier (what ``psycopg.sql.Identifier`` writes)."""
    return '"' + name.replace('"', '""') + '"'


class PostgresSink(BatchSink):
    """Upsert window panes into PostgreSQL, exactly once per ``(query_id, batch_id)``.

    ``conninfo``: a libpq connection string or URI. ``key_columns``: the pane table's key
    columns (by the router contract, the columns before ``window_start`` when not given).
    Chunking, retries and ``replay`` are :class:`BatchSink`'s. ``lock_timeout_ms`` and
    ``statement_timeout_ms`` are set on the sink's sessions (a lock or statement timeout is
    retried like a lost connection).

    >>> sink = PostgresSink("postgresql://127.0.0.1:5432/app", "clicks_per_minute",
    ...                     pipeline="clicks", max_rows=500, replay=True)   # doctest: +SKIP
    >>> route(out, panes=sink, late=DeltaLateSink("/data/late", pipeline="clicks"))  # doctest: +SKIP
    """

    def __init__(
        self,
        conninfo: str,
        table: str,
        pipeline: str,
        *,
        key_columns: Optional[Sequence[str]] = None,
        create_table: bool = True,
        ledger_table: str = "eventtime_ledger",
        rejects_table: Optional[str] = None,
        connect_timeout_s: int = 5,
        lock_timeout_ms: Optional[int] = 10_000,
        statement_timeout_ms: Optional[int] = None,
        **options: Any,
    ) -> None:
        if not isinstance(conninfo, str) or not conninfo.strip():
            raise (TypeError if not isinstance(conninfo, str) else ValueError)(
                f"conninfo must be a libpq connection string or URI, got {conninfo!r}"
            )
        table = _name(table, "table")
        super().__init__(pipeline, target=f"postgres table {table}", **options)
        self.conninfo = conninfo
        self.table = table
        self.ledger_table = _name(ledger_table, "ledger_table")
        self.rejects_table = _name(rejects_table if rejects_table is not None else f"{table}_rejects", "rejects_table")
        if key_columns is not None and (isinstance(key_columns, str) or not all(isinstance(c, str) for c in key_columns)):
            raise TypeError(f"key_columns must be a sequence of column names, got {key_columns!r}")
        self.key_columns = list(key_columns) if key_columns is not None else None
        if not isinstance(create_table, bool):
            raise TypeError(f"create_table must be True or False, got {create_table!r}")
        self.create_table = create_table
        for parameter, value in (("connect_timeout_s", connect_timeout_s), ("lock_timeout_ms", lock_timeout_ms),
                                 ("statement_timeout_ms", statement_timeout_ms)):
            if value is None and parameter != "connect_timeout_s":
                continue
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{parameter} must be an int, got {type(value).__name__} {value!r}")
            if value < 1:
                raise ValueError(f"{parameter} must be >= 1, got {value!r}")
        self.connect_timeout_s = connect_timeout_s
        self.lock_timeout_ms = lock_timeout_ms
        self.statement_timeout_ms = statement_timeout_ms
        self._keys: list[str] = []
        self._columns_per_row = 1
        self._columns: list[str] = []
        self._ready = False
        self._statement: Any = None
        self._statement_columns: Optional[tuple] = None

    def __repr__(self) -> str:
        return f"PostgresSink(table {self.table!r}, pipeline {self.pipeline!r})"

    def pipeline_query_ids(self) -> list[str]:
        """The streaming query ids in the ledger for this pipeline and table (the router's check
        at start that a new checkpoint is not pointed at a table that already has its rows)."""
        from psycopg import sql

        conn = self.connect()
        try:
            if conn.execute("SELECT to_regclass(%s)", (self.ledger_table,)).fetchone()[0] is None:
                return []
            rows = conn.execute(
                sql.SQL("SELECT DISTINCT query_id FROM {} WHERE pipeline = %s AND target = %s ORDER BY 1").format(
                    self._ident(self.ledger_table)),
                (self.pipeline, self.table),
            ).fetchall()
            return [r[0] for r in rows]
        finally:
            self.close(conn)

    # -- SQL helpers --------------------------------------------------------------------------

    @staticmethod
    def _ident(name: str) -> Any:
        from psycopg import sql

        return sql.Identifier(*name.split("."))

    # -- BatchSink: connection and transaction ---------------------------------------------

    def connect(self) -> Any:
        import psycopg

        conn = psycopg.connect(self.conninfo, connect_timeout=self.connect_timeout_s, autocommit=True)
        settings = []
        if self.lock_timeout_ms:
            settings.append(f"SET lock_timeout = {int(self.lock_timeout_ms)}")
        if self.statement_timeout_ms:
            settings.append(f"SET statement_timeout = {int(self.statement_timeout_ms)}")
        for statement in settings:
            conn.execute(statement)
        return conn

    def close(self, conn: Any) -> None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - a broken connection may fail to close
            pass

    def begin(self, conn: Any) -> None:
        conn.execute("BEGIN")

    def commit(self, conn: Any) -> None:
        conn.execute("COMMIT")

    def rollback(self, conn: Any) -> None:
        conn.execute("ROLLBACK")

    def savepoint(self, conn: Any) -> None:
        conn.execute("SAVEPOINT eventtime_chunk")

    def release_savepoint(self, conn: Any) -> None:
        conn.execute("RELEASE SAVEPOINT eventtime_chunk")

    def rollback_to_savepoint(self, conn: Any) -> None:
        conn.execute("ROLLBACK TO SAVEPOINT eventtime_chunk")
        conn.execute("RELEASE SAVEPOINT eventtime_chunk")

    def is_broken(self, conn: Any) -> bool:
        return bool(conn.closed or conn.broken)

    def is_transient(self, exc: BaseException) -> bool:
        import psycopg

        # OperationalError covers a lost connection, a server shutting down or starting
        # (57P01, 57P03), lock timeouts (55P03), cancelled statements, and serialization
        # failures / deadlocks (class 40)
        return isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError))

    def explain(self, exc: BaseException) -> str:
        import psycopg

        if isinstance(exc, psycopg.errors.InvalidColumnReference) and "ON CONFLICT" in str(exc):
            # quoted, so that the statement runs as printed for any key name (e.g. "user", a reserved word)
            unique = ", ".join(_quoted(c) for c in (*self._keys, "window_start", "window_end"))
            table = ".".join(_quoted(part) for part in self.table.split("."))
            return (f"the existing table {self.table} needs a unique constraint on ({unique}) for the upsert, e.g. "
                    f"ALTER TABLE {table} ADD UNIQUE NULLS NOT DISTINCT ({unique})")
        if isinstance(exc, psycopg.errors.UndefinedColumn):
            return f"the existing table {self.table} lacks a column of the panes; the sink writes {self._columns}"
        return ""

    def is_data_error(self, exc: BaseException) -> bool:
        import psycopg

        return isinstance(exc, (psycopg.DataError, psycopg.IntegrityError))

    # -- BatchSink: ledger and rejects -----------------------------------------------------

    def _ensure_tables(self, conn: Any, table: pa.Table) -> None:
        from psycopg import sql

        if self._ready:
            return
        keys = self._key_columns(table.column_names)
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (pipeline text NOT NULL, target text NOT NULL, query_id text NOT NULL, "
            "batch_id bigint NOT NULL, rows bigint NOT NULL, rejected bigint NOT NULL, "
            "committed_at timestamptz NOT NULL DEFAULT now(), PRIMARY KEY (pipeline, target, query_id, batch_id))"
        ).format(self._ident(self.ledger_table)))
        conn.execute(sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} (pipeline text NOT NULL, query_id text NOT NULL, batch_id bigint NOT NULL, "
            "row_index bigint NOT NULL, key text, row jsonb NOT NULL, error text NOT NULL, "
            "rejected_at timestamptz NOT NULL DEFAULT now())"
        ).format(self._ident(self.rejects_table)))
        if self.create_table:
            columns = [sql.SQL("{} {}").format(sql.Identifier(f.name), sql.SQL(postgres_type(f.type))) for f in table.schema]
            columns += [sql.SQL("query_id text"), sql.SQL("batch_id bigint"), sql.SQL("written_at timestamptz DEFAULT now()")]
            unique = sql.SQL(", ").join(sql.Identifier(c) for c in (*keys, "window_start", "window_end"))
            conn.execute(sql.SQL("CREATE TABLE IF NOT EXISTS {} ({}, UNIQUE NULLS NOT DISTINCT ({}))").format(
                self._ident(self.table), sql.SQL(", ").join(columns), unique))
        self._ready = True

    def committed(self, conn: Any, query_id: str, batch_id: int) -> bool:
        from psycopg import sql

        row = conn.execute(
            sql.SQL("SELECT 1 FROM {} WHERE pipeline = %s AND target = %s AND query_id = %s AND batch_id = %s").format(
                self._ident(self.ledger_table)),
            (self.pipeline, self.table, query_id, batch_id),
        ).fetchone()
        return row is not None

    def record(self, conn: Any, query_id: str, batch_id: int, rows: int, rejected: int) -> None:
        """The batch's last statements: the superseded sessions' rows deleted, its ledger row."""
        from psycopg import sql

        self._delete_superseded(conn)
        conn.execute(
            sql.SQL("INSERT INTO {} (pipeline, target, query_id, batch_id, rows, rejected) VALUES (%s, %s, %s, %s, %s, %s)").format(
                self._ident(self.ledger_table)),
            (self.pipeline, self.table, query_id, batch_id, rows, rejected),
        )

    def reject(self, conn: Any, query_id: str, rejected: Sequence[RejectedRow]) -> None:
        from psycopg import sql
        from psycopg.types.json import Jsonb

        keys = self._keys
        with conn.cursor() as cur:
            cur.executemany(
                sql.SQL("INSERT INTO {} (pipeline, query_id, batch_id, row_index, key, row, error) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s)").format(self._ident(self.rejects_table)),
                [(self.pipeline, query_id, r.batch_id, r.row_index,
                  key_json(keys, [(r.key or {}).get(k) for k in keys]), Jsonb(r.row, dumps=_dumps), r.error)
                 for r in rejected],
            )

    # -- BatchSink: the rows -----------------------------------------------------------------

    def setup(self, conn: Any, table: pa.Table) -> None:
        self._ensure_tables(conn, table)

    def _key_columns(self, names: Sequence[str]) -> list[str]:
        keys = self.key_columns if self.key_columns is not None else names[: names.index("window_start")]
        missing = [k for k in keys if k not in names]
        if missing:
            raise ValueError(f"PostgresSink: key_columns {missing} are not columns of the pane table (has {list(names)})")
        return list(keys)

    def prepare(self, table: pa.Table, batch_id: int, query_id: str):
        from psycopg.types.json import Jsonb

        names = table.column_names
        for column in PANE_REQUIRED:
            if column not in names:
                raise ValueError(f"PostgresSink: the pane table has no column {column!r} (has {names})")
        for column in ("query_id", "batch_id", "written_at"):
            if column in names:
                raise ValueError(f"PostgresSink: the pane column {column!r} collides with a column the sink adds")
        self._keys = self._key_columns(names)
        # of the panes of one (key, window) in this batch the last (highest pane_index) is
        # written; rows go in the order of key, window start and end (the same on a replay)
        keys = [_dumps(list(k)) for k in zip(*(table.column(c).to_pylist() for c in self._keys))] if self._keys else [""] * table.num_rows
        starts = pc.cast(table.column("window_start"), pa.int64()).to_pylist()
        ends = pc.cast(table.column("window_end"), pa.int64()).to_pylist()
        indexes = table.column("pane_index").to_pylist()
        latest: dict = {}
        for i, window in enumerate(zip(keys, starts, ends)):
            j = latest.get(window)
            if j is None or indexes[i] >= indexes[j]:
                latest[window] = i
        # a session a pane of the batch supersedes: its stored row deleted, none of its panes written
        self._gone: list = []
        if "merged_from" in names:
            unit = table.schema.field("window_start").type
            gone = superseded(keys, starts, ends, _bounds(table.column("merged_from"), unit))
            latest = {w: i for w, i in latest.items() if w not in gone}
            key_values = dict(zip(keys, zip(*(table.column(c).to_pylist() for c in self._keys)))) if self._keys else {"": ()}
            self._gone = [(*key_values[k], *pa.array([s, e], pa.int64()).cast(unit).to_pylist()) for k, s, e in sorted(gone)]
        last = [latest[window] for window in sorted(latest)]
        picked = table.take(pa.array(last, pa.int64()))
        columns = list(names) + ["query_id", "batch_id"]
        values = []
        for name in names:
            column = picked.column(name)
            data = column.to_pylist()
            if pa.types.is_nested(column.type):
                data = [None if v is None else Jsonb(v, dumps=_dumps) for v in data]
            values.append(data)
        values.append([query_id] * len(last))
        values.append([batch_id] * len(last))
        self._columns_per_row = len(columns)
        self._columns = columns
        return columns, list(zip(*values)), last

    def _delete_superseded(self, conn: Any) -> None:
        """Delete the rows of the sessions the batch's panes supersede (their ``merged_from``): one
        row per current window, as in ``DeltaResultsSink``'s upsert table."""
        from psycopg import sql

        if self._gone:
            keys = [sql.SQL("{} IS NOT DISTINCT FROM %s AND ").format(sql.Identifier(k)) for k in self._keys]
            with conn.cursor() as cur:
                cur.executemany(sql.SQL("DELETE FROM {} WHERE {}window_start = %s AND window_end = %s").format(
                    self._ident(self.table), sql.SQL("").join(keys)), self._gone)

    def chunks(self, rows: Sequence[tuple]) -> list[tuple[int, int]]:
        cap = max(1, _MAX_PARAMS // self._columns_per_row)
        out = []
        for lo, hi in super().chunks(rows):
            out += [(s, min(hi, s + cap)) for s in range(lo, hi, cap)]
        return out

    def row_key(self, row: dict) -> Optional[dict]:
        return {k: row.get(k) for k in self._keys}

    def row_bytes(self, row: tuple) -> int:
        from psycopg.types.json import Jsonb

        return super().row_bytes(tuple(_dumps(v.obj) if isinstance(v, Jsonb) else v for v in row))

    def write_rows(self, conn: Any, columns: Sequence[str], rows: Sequence[tuple]) -> None:
        from psycopg import sql

        if self._statement_columns != tuple(columns):
            update = [c for c in columns if c not in (*self._keys, "window_start", "window_end")]
            self._head = sql.SQL("INSERT INTO {} AS t ({}) VALUES ").format(
                self._ident(self.table), sql.SQL(", ").join(sql.Identifier(c) for c in columns))
            self._tail = sql.SQL(" ON CONFLICT ({}) DO UPDATE SET {}, written_at = now() WHERE t.pane_index <= EXCLUDED.pane_index").format(
                sql.SQL(", ").join(sql.Identifier(c) for c in (*self._keys, "window_start", "window_end")),
                sql.SQL(", ").join(sql.SQL("{} = EXCLUDED.{}").format(sql.Identifier(c), sql.Identifier(c)) for c in update),
            )
            self._statement_columns = tuple(columns)
        row_sql = sql.SQL("({})").format(sql.SQL(", ").join(sql.Placeholder() * len(columns)))
        statement = self._head + sql.SQL(", ").join([row_sql] * len(rows)) + self._tail
        conn.execute(statement, [v for row in rows for v in row])


def _bounds(merged_from: Any, unit: pa.DataType) -> list:
    """Each pane's ``merged_from`` bounds as integers of the window columns' unit."""
    out: list = [[] for _ in range(len(merged_from))]
    flat = pc.list_flatten(merged_from)
    if not len(flat):  # (no bounds: a list of nulls, when the column was inferred from empty lists)
        return out
    parents = pc.list_parent_indices(merged_from).to_pylist()
    starts, ends = (pc.cast(pc.cast(pc.struct_field(flat, [i]), unit), pa.int64()).to_pylist() for i in (0, 1))
    for p, s, e in zip(parents, starts, ends):
        out[p].append({"start": s, "end": e})
    return out
