"""A user's sink whose rows Spark's tasks write: :class:`TaskSink`.

A callable sink (``panes=lambda table, batch_id, query_id: ...``) gets the batch's rows on the
driver: fine while a batch's output is small. A :class:`TaskSink` gets them where they are, in
the tasks, each task its part of the batch, and is committed once per batch on the driver, as
the Delta sinks are: a flood of invalid records never crosses the driver.
"""

from __future__ import annotations

import datetime as _dt
from typing import Any

__all__ = ["TaskSink", "TaskWriter"]


class TaskWriter:
    """What one task writes of one batch (made by :meth:`TaskSink.open`)."""

    def write(self, table: Any) -> None:
        """One chunk of the task's rows: a ``pyarrow.Table`` with the columns a callable sink
        gets (panes, or late and invalid records)."""
        raise NotImplementedError

    def close(self) -> list:
        """The task's rows are all written: what it wrote, as a JSON-able list (e.g. file
        names), handed to :meth:`TaskSink.commit` with every other task's."""
        raise NotImplementedError


class TaskSink:
    """A sink whose rows Spark's tasks write, committed once per batch on the driver.

    Subclass it with :meth:`open` (in every task of a batch that has rows for the sink) and
    :meth:`commit` (on the driver, after every task of the batch ended). The contract:

    * **What a task receives**: its part of the batch (one Spark partition of the operator's
      output), in chunks, as ``pyarrow`` tables with the columns a callable sink gets. A task
      with no row for the sink opens no writer.
    * **Exactly once** is the sink's, as in Flink's two-phase commit sinks: a task may run more
      than once (a retry, a speculative copy) and a batch may run again after a crash (Spark
      re-runs the last batch it did not checkpoint), so a task's writes must stay invisible
      until :meth:`commit` names them (files in a staging folder, rows in a staging table),
      and :meth:`commit` must make them visible atomically and do nothing for a
      ``(query_id, batch_id)`` it already committed (keep a ledger beside the data). Only
      the tasks that succeeded are in ``written``; what the others wrote is never committed
      and is the sink's to clean up.
    * The sink is pickled to the tasks: keep connections and clients out of its fields until
      :meth:`open` (or :meth:`commit`, on the driver) makes them.

    >>> import json, os
    >>> class JsonLines(TaskSink):  # doctest: +SKIP
    ...     def __init__(self, folder): self.folder = folder
    ...     def open(self, batch_id, query_id, task):
    ...         return Lines(os.path.join(self.folder, "staging", f"{query_id}-{batch_id}-{task}.jsonl"))
    ...     def commit(self, written, batch_id, query_id):
    ...         ...  # move the named files into place, unless this (query_id, batch_id) is done
    >>> eventtime.route(out, late=JsonLines("/data/late"))  # doctest: +SKIP
    """

    #: ``route`` writes this sink's rows in the tasks (checked with ``getattr``, as on every sink).
    writes_in_tasks = True

    def open(self, batch_id: int, query_id: str, task: str) -> TaskWriter:
        """In a task: the writer of its rows of batch ``batch_id``. ``task``: the task's
        partition and attempt (``"3-0"``), to name what it writes by."""
        raise NotImplementedError

    def commit(self, written: list, batch_id: int, query_id: str) -> Any:
        """On the driver, once a batch: make what the tasks wrote (``written``: every successful
        task's :meth:`TaskWriter.close` lists joined) visible, exactly once per
        ``(query_id, batch_id)``."""
        raise NotImplementedError

    def __call__(self, table: Any, batch_id: int, query_id: str) -> Any:
        """The batch's rows handed over on the driver (as to a callable sink): written by one
        writer (task ``"driver"``) and committed."""
        writer = self.open(batch_id, query_id, "driver")
        writer.write(table)
        return self.commit(writer.close(), batch_id, query_id)

    # -- what route calls (the protocol the Delta sinks share) ------------------------------
    def open_files(self, batch_id: int, query_id: str, now: _dt.datetime, task: str) -> TaskWriter:
        return self.open(batch_id, query_id, task)

    def commit_files(self, files: list, batch_id: int, query_id: str) -> Any:
        return self.commit(files, batch_id, query_id)

    def _now(self) -> _dt.datetime:
        return _dt.datetime.now(_dt.timezone.utc)
