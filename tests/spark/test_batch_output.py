"""The batch's output written by Spark's tasks (eventtime.spark.batch_output.py,
eventtime/sinks/delta_files.py): the Delta sinks through delta-rs.

The same rows through the tasks and through the driver (the sinks wrapped in callables, which
``route`` hands ``pyarrow.Table``s) give the same tables; the driver gets the batch's counts and
a bounded sample, never the rows; a batch committed before is not committed again and its new
files are removed; files no commit names are invisible and vacuumed.
"""

from __future__ import annotations

import datetime as dt
import os

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from hypothesis import HealthCheck, example, given, settings
from pyspark.sql import functions as F

import eventtime
from eventtime.sinks import DeltaLateSink, DeltaResultsSink
from eventtime.sinks.tables import compact
from eventtime.spark.batch_output import SAMPLE_ROWS
from property_tests.strategies import typed_scenarios

pytestmark = pytest.mark.spark
NOW = dt.datetime(2026, 12, 7, 10, tzinfo=dt.timezone.utc)


def _flood(spark, rows: int):
    # 99 % of the rows carry ts = 0 (1970), the rest one event a 10 ms; a null user among them
    ts = F.when(F.col("id") % 100 == 0, F.lit(1_700_000_000_000) + F.col("id") * 10).otherwise(F.lit(0))
    user = F.when(F.col("id") % 7 == 3, F.lit(None)).otherwise(F.concat(F.lit("u"), (F.col("id") % 13).cast("string")))
    df = spark.range(rows).select(user.alias("user"), (F.col("id") % 97).cast("double").alias("amount"),
                                  F.col("id").cast("long").alias("big"), ts.alias("ts")).repartition(3)
    return (df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01", max_future="36500 days"))
              .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 second"),
                                                    aggregations=[eventtime.count(), eventtime.sum("amount")])))


def _sinks(root: str):
    return (DeltaResultsSink(os.path.join(root, "results"), pipeline="flood", now=lambda: NOW),
            DeltaLateSink(os.path.join(root, "late"), pipeline="flood", now=lambda: NOW))


def _table(path: str, drop=("record_id", "query_id")) -> list:
    table = DeltaTable(path).to_pyarrow_table()
    table = table.drop_columns([c for c in drop if c in table.column_names])
    return sorted(table.to_pylist(), key=repr)


@pytest.fixture
def sent(monkeypatch) -> list:
    """What every batch's tasks sent the driver (``BatchOutput``), in order."""
    import eventtime.spark.batch_output as batch_output

    outputs = []
    gather = batch_output.run_in_tasks

    def spy(df, plan, *args):
        written = gather(df, plan, *args)
        outputs.append(written)
        return written

    monkeypatch.setattr(batch_output, "run_in_tasks", spy)
    return outputs


def test_tasks_write_the_same_tables_as_the_driver_and_send_it_no_row(spark, tmp_path, sent):
    panes, late = _sinks(str(tmp_path / "tasks"))
    router = eventtime.route(_flood(spark, 20_000), panes=panes, late=late, pipeline="flood", progress=False)
    assert router._in_tasks
    stats = router.start(end_of_input=True)
    # the same through the driver: the sinks called with the batch's tables
    d_panes, d_late = _sinks(str(tmp_path / "driver"))
    driver = eventtime.route(_flood(spark, 20_000), panes=lambda t, b, q: d_panes(t, b, q),
                             late=lambda t, b, q: d_late(t, b, q), pipeline="flood", progress=False)
    assert not driver._in_tasks
    expected = driver.start(end_of_input=True)
    assert (stats.rows_in, stats.panes, stats.late, stats.invalid) == (expected.rows_in, expected.panes, expected.late,
                                                                       expected.invalid) == (20_000, 200, 0, 19_800)
    assert _table(str(tmp_path / "tasks" / "results")) == _table(str(tmp_path / "driver" / "results"))
    assert _table(str(tmp_path / "tasks" / "late")) == _table(str(tmp_path / "driver" / "late"))
    ids = DeltaTable(str(tmp_path / "tasks" / "late")).to_pyarrow_table().column("record_id")
    assert len(pc.unique(ids)) == 19_800  # one id per record, across the tasks
    (written,) = sent
    assert written.sample.num_rows <= 3 * SAMPLE_ROWS  # three input partitions: a sample, not the rows
    assert written.counts.reasons == {"invalid/before_min_valid": {"count": 19_800, "partitions": [],
                                                                   "max_lateness_ms": None}}
    assert stats.records_by_reason["invalid/before_min_valid"]["count"] == 19_800


def test_a_batch_committed_before_is_skipped_and_its_new_files_removed(spark, tmp_path):
    _, late = _sinks(str(tmp_path))
    late.ensure_table()
    rows = pa.table({"kind": ["invalid"] * 3, "reason": ["null_timestamp"] * 3, "k": [1, None, 3]})

    def write(task: str) -> list:
        files = late.open_files(5, "q", NOW, task)
        files.write(rows)
        return files.close()

    first = write("0-0")
    assert late.commit_files(first, 5, "q").written
    again = write("0-1")  # Spark re-ran the batch after a crash between the commit and its checkpoint
    assert all(os.path.exists(os.path.join(late.path, f["path"])) for f in again)
    result = late.commit_files(again, 5, "q")
    assert not result.written and result.skipped == "already_committed"
    assert not any(os.path.exists(os.path.join(late.path, f["path"])) for f in again)
    table = DeltaTable(late.path).to_pyarrow_table()
    assert table.num_rows == 3 and table.column("k").to_pylist() == [1, None, 3]  # the key column added to the table


def test_files_no_commit_names_are_invisible_and_vacuumed(spark, tmp_path):
    _, late = _sinks(str(tmp_path))
    late.ensure_table()
    files = late.open_files(0, "q", NOW, "0-0")
    files.write(pa.table({"kind": ["late"], "reason": ["too_late"]}))
    (orphan,) = files.close()  # the task wrote, the driver died before the commit
    assert DeltaTable(late.path).to_pyarrow_table().num_rows == 0
    path = os.path.join(late.path, orphan["path"])
    assert os.path.exists(path)
    vacuumed = compact(late.path, vacuum=True, retention_hours=0, enforce_retention_duration=False)["vacuumed"]
    assert orphan["path"] in vacuumed and not os.path.exists(path)


def test_rows_of_another_type_than_the_table_are_refused_before_a_commit(spark, tmp_path):
    from eventtime.sinks import DeltaSinkError

    _, late = _sinks(str(tmp_path))
    late(pa.table({"kind": ["invalid"], "reason": ["null_timestamp"], "k": ["text"]}), 0, "q")
    files = late.open_files(1, "q", NOW, "0-0")
    files.write(pa.table({"kind": ["invalid"], "reason": ["null_timestamp"], "k": [7]}))
    with pytest.raises(DeltaSinkError, match=r"k \(long in the rows, string in the table\)"):
        late.commit_files(files.close(), 1, "q")
    assert DeltaTable(late.path).transaction_version(late.app_id("q")) == 0


def _with_records():
    """Records of every kind beside the panes: keys above 2^53 and null, null and bogus times."""
    from test_end_of_input import _row, _scenario

    scenario = _scenario()
    extra = [_row(10, None, 2**53 + 1, part=None), _row(11, 0, None, v_dec=None), _row(12, 5, -(2**63), part=7)]
    return {**scenario, "batches": [*scenario["batches"], extra]}


@pytest.mark.slow
@settings(max_examples=4, derandomize=True, deadline=None, suppress_health_check=list(HealthCheck))
@given(typed_scenarios(max_batches=3, max_records=6))
@example(_with_records())
def test_tasks_and_driver_write_the_same_typed_rows(spark, tmp_path_factory, scenario):
    """Generated rows of every supported type as one static DataFrame (keys and values with
    nulls, BIGINT keys above 2^53, decimals, dates, timestamps, null partitions, bogus
    timestamps): the tables the tasks write equal, cell for cell, those the driver writes."""
    from test_end_of_input import DDL, _aggregate, _write

    root = tmp_path_factory.mktemp("typed")
    _write(str(root / "in"), scenario["batches"])
    tables = {}
    for how in ("tasks", "driver"):
        panes, late = _sinks(str(root / how))
        out = _aggregate(spark.read.schema(DDL).parquet(str(root / "in")), scenario)
        if how == "driver":
            router = eventtime.route(out, panes=lambda t, b, q, s=panes: s(t, b, q),
                                     late=lambda t, b, q, s=late: s(t, b, q), pipeline="flood", progress=False)
        else:
            router = eventtime.route(out, panes=panes, late=late, pipeline="flood", progress=False)
        assert router._in_tasks == (how == "tasks")
        stats = router.start(end_of_input=True)
        tables[how] = [_table(p.path) if DeltaTable.is_deltatable(p.path) else [] for p in (panes, late)]
        assert [len(t) for t in tables[how]] == [stats.panes, stats.late + stats.invalid]
    assert tables["tasks"] == tables["driver"]


def test_partition_values_that_need_escaping_read_back_as_written(spark, tmp_path):
    """A table partitioned by text: values with spaces, slashes, percent signs and null land in
    Hive folders escaped as URIs, and every reader gets them back."""
    late = DeltaLateSink(str(tmp_path / "late"), pipeline="p", partition_by=["partition"], now=lambda: NOW)
    late.ensure_table()
    values = ["a b/c", "100%", None, "plain", "é"]
    files = late.open_files(0, "q", NOW, "0-0")
    files.write(pa.table({"kind": ["late"] * 5, "reason": ["too_late"] * 5, "partition": values}))
    assert late.commit_files(files.close(), 0, "q").written
    assert sorted(map(str, eventtime.read_late(late.path).column("partition").to_pylist())) == sorted(map(str, values))
    assert sorted(map(str, DeltaTable(late.path).to_pyarrow_table().column("partition").to_pylist())) == \
        sorted(map(str, values))


def test_a_sink_on_the_driver_gets_its_rows_from_the_tasks_and_the_delta_sink_none(spark, tmp_path, sent):
    got, expected = [], []
    _, late = _sinks(str(tmp_path / "tasks"))
    router = eventtime.route(_flood(spark, 20_000), panes=lambda t, b, q: got.append(t), late=late, pipeline="flood",
                             progress=False)
    assert router._in_tasks  # the late table written by the tasks, the panes sent to the driver
    stats = router.start(end_of_input=True)
    _, d_late = _sinks(str(tmp_path / "driver"))
    driver = eventtime.route(_flood(spark, 20_000), panes=lambda t, b, q: expected.append(t),
                             late=lambda t, b, q: d_late(t, b, q), pipeline="flood", progress=False)
    assert not driver._in_tasks
    driver.start(end_of_input=True)
    (panes,), (driver_panes,) = got, expected
    assert panes.schema == driver_panes.schema
    assert sorted(panes.to_pylist(), key=repr) == sorted(driver_panes.to_pylist(), key=repr) and panes.num_rows == 200
    assert _table(str(tmp_path / "tasks" / "late")) == _table(str(tmp_path / "driver" / "late"))
    (written,) = sent
    assert set(written.tables) == {0} and written.sample.num_rows <= 3 * SAMPLE_ROWS  # the panes, not the records
    assert stats.invalid == 19_800


def test_a_driver_sink_given_no_row_gets_a_table_of_no_row(spark, tmp_path):
    got = []
    _, late = _sinks(str(tmp_path))
    eventtime.route(_flood(spark, 0), panes=lambda t, b, q: got.append(t), late=late, pipeline="flood",
                    progress=False).start(end_of_input=True)
    (panes,) = got
    assert panes.num_rows == 0 and {"user", "window_start", "window_end", "count", "sum_amount"} <= set(panes.column_names)
