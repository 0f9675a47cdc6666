"""A user's sink written by Spark's tasks (eventtime.sinks.TaskSink): each task gets its part
of the batch as the tables a callable sink gets, the driver commits what the successful tasks
wrote once per (query, batch), and the rows equal a callable sink's."""

from __future__ import annotations

import json
import os
import sys

import pyarrow as pa
import pytest
from pyspark import cloudpickle
from pyspark.sql import functions as F

import eventtime
from eventtime.sinks import TaskSink, TaskWriter

pytestmark = pytest.mark.spark
cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers need not import this file


class _Lines(TaskWriter):
    def __init__(self, path: str) -> None:
        self.path, self.rows = path, 0
        os.makedirs(os.path.dirname(path), exist_ok=True)
        self.handle = open(path, "w")

    def write(self, table) -> None:
        for row in table.to_pylist():
            self.handle.write(json.dumps(row, default=str) + "\n")
        self.rows += table.num_rows

    def close(self) -> list:
        self.handle.close()
        return [{"file": os.path.basename(self.path), "rows": self.rows}]


class JsonLines(TaskSink):
    """JSON lines: each task writes a staging file; the commit moves the named ones into place
    and keeps a ledger of the batches it committed."""

    def __init__(self, folder: str) -> None:
        self.folder = folder
        self.commits: list = []

    def open(self, batch_id, query_id, task):
        return _Lines(os.path.join(self.folder, "staging", f"{batch_id}-{task}.jsonl"))

    def commit(self, written, batch_id, query_id):
        self.commits.append((batch_id, sum(w["rows"] for w in written)))
        ledger = os.path.join(self.folder, "ledger", f"{query_id}-{batch_id}")
        if os.path.exists(ledger):
            return None
        os.makedirs(os.path.join(self.folder, "data"), exist_ok=True)
        for w in written:
            os.replace(os.path.join(self.folder, "staging", w["file"]), os.path.join(self.folder, "data", w["file"]))
        os.makedirs(os.path.dirname(ledger), exist_ok=True)
        open(ledger, "w").close()
        return None

    def rows(self) -> list:
        data = os.path.join(self.folder, "data")
        out = []
        for name in sorted(os.listdir(data)) if os.path.isdir(data) else []:
            with open(os.path.join(data, name)) as handle:
                out.extend(json.loads(line) for line in handle)
        return out


def _out(spark, rows: int):
    ts = F.when(F.col("id") % 10 == 0, F.lit(1_700_000_000_000) + F.col("id") * 100).otherwise(F.lit(0))
    df = spark.range(rows).select(F.concat(F.lit("u"), (F.col("id") % 3).cast("string")).alias("user"),
                                  F.col("id").alias("off"), ts.alias("ts")).repartition(3)
    return (df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01"))
              .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 second"),
                                                    offset_col="off")))


def _key(row: dict) -> tuple:
    return tuple(str(row[c]) for c in sorted(row) if c not in ("watermark",))


def test_a_task_sink_gets_the_rows_a_callable_gets_written_in_the_tasks(spark, tmp_path):
    late = JsonLines(str(tmp_path / "late"))
    panes = JsonLines(str(tmp_path / "panes"))
    stats = eventtime.route(_out(spark, 3000), panes=panes, late=late, progress=False).start(end_of_input=True)
    assert stats.invalid == 2700 and stats.panes == 300
    assert len(late.commits) == 1 and late.commits[0][1] == 2700  # the driver committed the tasks' files once
    assert len(os.listdir(tmp_path / "late" / "data")) > 1  # one file per task that had rows
    tables: dict = {"panes": [], "late": []}
    eventtime.route(_out(spark, 3000), panes=lambda t, b, q: tables["panes"].append(t),
                    late=lambda t, b, q: tables["late"].append(t), progress=False).start(end_of_input=True)
    for name, sink in (("late", late), ("panes", panes)):
        expected = [json.loads(json.dumps(r, default=str)) for t in tables[name] for r in t.to_pylist()]
        assert sorted(map(_key, sink.rows())) == sorted(map(_key, expected)), name
    assert {r["kind"] for r in late.rows()} == {"invalid"}


def test_a_batch_committed_before_is_not_committed_again(tmp_path):
    sink = JsonLines(str(tmp_path / "out"))
    writer = sink.open(4, "q", "0-0")
    writer.write(pa.table({"kind": ["invalid"], "offset": [7]}))
    written = writer.close()
    sink.commit(written, 4, "q")
    again = sink.open(4, "q", "0-1")  # the batch re-run after a crash before Spark's checkpoint
    again.write(pa.table({"kind": ["invalid"], "offset": [7]}))
    sink.commit(again.close(), 4, "q")
    assert [r["offset"] for r in sink.rows()] == [7]


def test_handed_a_table_on_the_driver_it_writes_and_commits_it_once(tmp_path):
    sink = JsonLines(str(tmp_path / "out"))
    sink(pa.table({"kind": ["late", "invalid"], "offset": [1, 2]}), 0, "q")
    assert sink.commits == [(0, 2)] and [r["offset"] for r in sink.rows()] == [1, 2]
