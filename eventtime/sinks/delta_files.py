"""A Delta table's rows written as Parquet files by Spark's tasks and committed by the driver.

A task (:class:`TaskFiles`, made by :meth:`eventtime.sinks.DeltaSink.open_files`) writes the
rows the sink would store (its ``_prepare``) into new files inside the table's folder, one
file per partition value, and returns what a Delta ``add`` action needs: path, size, rows,
partition values and the files' Arrow schema. No reader sees a file before a commit names it.
The driver (:func:`commit_files`) commits every task's files of a batch in one Delta
transaction with the batch's app transaction: a batch already committed by the same query
(Spark re-ran it after a crash) is not committed again and its new files are removed; new
columns (the key columns a late table gains) are added to the table's schema first.
"""

from __future__ import annotations

import base64
import datetime as _dt
import json
import logging
import os
import time
import urllib.parse
import uuid
from typing import Any, Optional

import pyarrow as pa

from ..ops.paths import local_path

__all__ = ["TaskFiles", "commit_files", "commit_batch", "remove_files"]

log = logging.getLogger("eventtime.sinks.delta_write")

_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


def _partition_text(value: Any) -> Optional[str]:
    """A partition value as the Delta log writes it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, str)):
        return str(value)
    if isinstance(value, _dt.date) and not isinstance(value, _dt.datetime):
        return value.isoformat()
    raise ValueError(f"a table written by Spark's tasks is partitioned by dates, text, integers or booleans, "
                     f"got the value {value!r} ({type(value).__name__})")


class TaskFiles:
    """The files one task writes into one Delta table for one batch (``write`` each chunk of
    rows as the caller has them, ``close`` for the add actions' data)."""

    def __init__(self, sink: Any, root: str, partition_by: list, batch_id: int, query_id: str, now: _dt.datetime,
                 task: str) -> None:
        self.sink, self.root, self.partition_by = sink, root, list(partition_by)
        self.batch_id, self.query_id, self.now, self.task = batch_id, query_id, now, task
        self._writers: dict = {}  # partition values -> [relative path, ParquetWriter, rows]
        self._chunks = 0
        self._schema: Optional[pa.Schema] = None

    def write(self, rows: pa.Table) -> None:
        import pyarrow.compute as pc

        data = self.sink._prepare(rows, self.batch_id, self.query_id, self.now, id_prefix=f"{self.task}.{self._chunks}.")
        self._chunks += 1
        if self._schema is None:
            self._schema = data.schema
        if not self.partition_by:
            self._append((), data)
            return
        columns = [data.column(c) for c in self.partition_by]
        if all(len(pc.unique(c)) == 1 for c in columns):  # the usual case: one date per batch
            self._append(tuple(c[0].as_py() for c in columns), data)
            return
        values = list(zip(*[c.to_pylist() for c in columns]))
        for group in dict.fromkeys(values):
            mask = pa.array([v == group for v in values])
            self._append(group, data.filter(mask))

    def _append(self, group: tuple, data: pa.Table) -> None:
        import pyarrow.parquet as pq

        texts = tuple(_partition_text(v) for v in group)
        stored = data.drop_columns(self.partition_by) if self.partition_by else data
        entry = self._writers.get(texts)
        if entry is None:
            # Hive folders (what readers of the files alone take the values from), escaped as
            # URIs, and a null as Hive's default partition
            folder = "/".join(f"{c}={_HIVE_NULL if t is None else urllib.parse.quote(t, safe='')}"
                              for c, t in zip(self.partition_by, texts))
            name = f"part-{self.task}-{uuid.uuid4()}-c000.snappy.parquet"
            relative = f"{folder}/{name}" if folder else name

            def create(attempt: int) -> Any:
                os.makedirs(os.path.dirname(os.path.join(self.root, relative)), exist_ok=True)
                return pq.ParquetWriter(os.path.join(self.root, relative), stored.schema)

            entry = [relative, self._retried(create), 0]
            self._writers[texts] = entry
        entry[1].write_table(stored)
        entry[2] += stored.num_rows

    def _retried(self, create: Any) -> Any:
        """A file made under the sink's retry policy (a table folder that cannot be written):
        the sink's ``DeltaSinkError`` when it gives up, which fails the task and the batch."""
        from .exactly_once import run_with_retries

        sink = self.sink

        def on_error(exc: Exception, attempt: int, delay: Optional[float]) -> BaseException:
            if delay is not None:
                log.warning("eventtime: writing batch %d of query %s to Delta table %s failed (attempt %d of %d), "
                            "retrying in %.2fs: %s", self.batch_id, self.query_id, sink.path, attempt + 1,
                            sink.policy.attempts, delay, exc)
            return exc

        return run_with_retries(sink.policy, create, on_error=on_error, sleep=sink._sleep,
                                give_up=lambda exc, attempts: sink.write_error(exc, self.batch_id, self.query_id, attempts))

    def close(self) -> list:
        files = []
        schema = base64.b64encode(self._schema.serialize().to_pybytes()).decode() if self._schema is not None else None
        for texts, (relative, writer, rows) in self._writers.items():
            writer.close()
            files.append({"path": relative,  # delta-rs writes it to the log as a URI
                          "size": os.path.getsize(os.path.join(self.root, relative)), "rows": rows,
                          "partition_values": dict(zip(self.partition_by, texts)), "schema": schema})
        self._writers = {}
        return files


def _schema_of(files: list) -> pa.Schema:
    """The stored rows' schema: the files' own, with the columns only some tasks had (a key
    column that was all null in one task's rows is still text in another's) unified."""
    schemas = [pa.ipc.read_schema(pa.py_buffer(base64.b64decode(f["schema"]))) for f in files if f.get("schema")]
    return pa.unify_schemas(schemas, promote_options="permissive") if len(schemas) > 1 else schemas[0]


def remove_files(root: str, files: list) -> None:
    """Delete files a commit will never name (the batch was committed before)."""
    for f in files:
        try:
            os.remove(os.path.join(root, f["path"]))
        except FileNotFoundError:
            pass


def commit_files(table: Any, root: str, files: list, partition_by: list, props: Any, storage_options: Any) -> int:
    """Commit ``files`` (what :meth:`TaskFiles.close` returned in every task) to the table at
    ``root`` in one transaction (``table``: its ``DeltaTable``, or ``None`` to create it), the
    table's schema first gaining the files' new columns. Returns the rows committed. A file
    column of another type than the table's is refused (``ValueError``) before anything is
    committed."""
    from deltalake import Schema
    from deltalake.transaction import AddAction, create_table_with_add_actions

    schema = _schema_of(files)
    now_ms = int(time.time() * 1000)
    actions = [AddAction(f["path"], f["size"], f["partition_values"], now_ms, True, json.dumps({"numRecords": f["rows"]}))
               for f in files]
    if table is None:
        create_table_with_add_actions(root, Schema.from_arrow(schema), actions, mode="append", partition_by=partition_by,
                                      storage_options=storage_options, commit_properties=props)
        return sum(f["rows"] for f in files)
    have = {f.name: f for f in table.schema().fields}
    theirs = Schema.from_arrow(schema).fields
    def text(t: Any) -> str:
        return t.type if isinstance(getattr(t, "type", None), str) else str(t)

    wrong = [f"{f.name} ({text(f.type)} in the rows, {text(have[f.name].type)} in the table)" for f in theirs
             if f.name in have and f.type != have[f.name].type]
    if wrong:
        raise ValueError(f"the rows do not fit the Delta table at {root!r}: {', '.join(wrong)}")
    new = [f for f in theirs if f.name not in have]
    if new:
        table.alter.add_columns(new)
        table.update_incremental()
    table.create_write_transaction(actions, mode="append", schema=table.schema(), partition_by=partition_by or None,
                                   commit_properties=props)
    return sum(f["rows"] for f in files)


def commit_batch(sink: Any, files: list, batch_id: int, query_id: str, not_transient: Any) -> Any:
    """A Delta sink's commit of the files every task wrote for a batch, exactly once per
    ``(query_id, batch_id)``: its app transaction checked before every attempt (the files of a
    batch committed before are removed), retried by the sinks' one loop, the sink's
    ``write_error`` naming the table and the batch when it gives up; ``not_transient(exc)``: a
    write error no retry fixes."""
    import dataclasses

    from .exactly_once import FaultPoint, WriteResult, check_batch, run_with_retries

    started = time.perf_counter()
    batch_id, query_id = check_batch(batch_id, query_id)
    root = local_path(sink.path)
    if not files:
        return WriteResult(False, 0, 0, skipped="empty", duration_s=time.perf_counter() - started)
    app_id = sink.app_id(query_id)

    def attempt_write(attempt: int) -> WriteResult:
        from deltalake import CommitProperties, Transaction

        if sink.fault_injector is not None:
            sink.fault_injector(FaultPoint("write", batch_id, attempt))
        table = sink._table()
        skipped = sink._committed(table, app_id, batch_id, query_id, attempt + 1)
        if skipped is not None:
            remove_files(root, files)
            return skipped
        props = CommitProperties(app_transactions=[Transaction(app_id, batch_id)],
                                 custom_metadata=sink._commit_metadata(query_id, batch_id))
        rows = commit_files(table, root, files, sink._partitioning() or [], props, sink.storage_options)
        sink._dt_cache = None
        return WriteResult(True, rows, attempt + 1, version=sink._table().version())

    def give_up(exc: BaseException, attempts: int) -> Any:
        return sink.write_error(exc, batch_id, query_id, attempts)

    def on_error(exc: Exception, attempt: int, delay: Optional[float]) -> BaseException:
        sink._dt_cache = None
        if isinstance(exc, ValueError) or not_transient(exc):  # the rows do not fit the table
            raise give_up(exc, attempt + 1) from exc
        if delay is not None:
            log.warning("eventtime: committing batch %d of query %s to Delta table %s failed (attempt %d of %d), "
                        "retrying in %.2fs: %s", batch_id, query_id, sink.path, attempt + 1, sink.policy.attempts,
                        delay, exc)
        return exc

    result = run_with_retries(sink.policy, attempt_write, on_error=on_error, give_up=give_up, sleep=sink._sleep)
    return dataclasses.replace(result, duration_s=time.perf_counter() - started)
