"""Querying the late table: filters, summary numbers, Spark reader over the snapshot files."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import subprocess
import sys

import pyarrow as pa
import pytest
from deltalake import DeltaTable

from eventtime.query.late import (
    LateFilter,
    LateTableNotFoundError,
    parse_instant,
    read_late,
    read_late_pandas,
    read_late_spark,
    summarize,
)
from eventtime.sinks import DeltaLateSink, compact

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=UTC)


def rec(kind, reason, user, minutes_before, partition, offset, lateness_ms=None, raw=None):
    return {
        "kind": kind, "reason": reason,
        "key": json.dumps({"user": user, "n": 1}, separators=(",", ":")),
        "user": user,
        "event_time": None if kind == "invalid" else T0 - dt.timedelta(minutes=minutes_before),
        "raw_timestamp": raw,
        "lateness_ms": lateness_ms, "partition": partition, "offset": offset, "payload": "{}",
    }


SCHEMA = pa.schema([
    ("kind", pa.string()), ("reason", pa.string()), ("key", pa.string()), ("user", pa.string()),
    ("event_time", pa.timestamp("us", tz="UTC")), ("raw_timestamp", pa.string()),
    ("lateness_ms", pa.int64()), ("partition", pa.string()), ("offset", pa.int64()), ("payload", pa.string()),
])

# batch 0 detected at 12:10, batch 1 at 13:20 (next hour, same day)
BATCH0 = [
    rec("late", "too_late", "a", 30, "0", 0, 120_000, "2024-03-01T11:30:00Z"),
    rec("late", "too_late", "a", 20, "0", 1, 60_000, "2024-03-01T11:40:00Z"),
    rec("invalid", "null_timestamp", "b", 0, "1", 2, None, None),
    rec("invalid", "too_far_in_future", "c", 0, "1", 3, None, "2999-01-01T00:00:00Z"),
]
BATCH1 = [
    rec("late", "too_late", "b", 90, "1", 4, 900_000, "2024-03-01T10:30:00Z"),
    rec("late", "too_late", "a", 5, None, 5, 30_000, "2024-03-01T11:55:00Z"),
    rec("invalid", "before_min_valid", "a", 0, "0", 6, None, "0"),
]


@pytest.fixture(scope="module")
def late_table(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("late") / "table")
    clock = iter([T0 + dt.timedelta(minutes=10), T0 + dt.timedelta(minutes=80)])
    sink = DeltaLateSink(path, pipeline="clicks", now=lambda: next(clock))
    sink(pa.Table.from_pylist(BATCH0, SCHEMA), 0, "q1")
    sink(pa.Table.from_pylist(BATCH1, SCHEMA), 1, "q1")
    return path


def offsets(t: pa.Table) -> list[int]:
    return sorted(t.column("offset").to_pylist())


def test_read_all_ordered(late_table):
    t = read_late(late_table)
    assert t.num_rows == 7
    assert t.column("batch_id").to_pylist() == [0, 0, 0, 0, 1, 1, 1]
    assert set(t.column("detected_date").to_pylist()) == {dt.date(2024, 3, 1)}


def test_filter_reason_kind_partition(late_table):
    assert offsets(read_late(late_table, reason="too_late")) == [0, 1, 4, 5]
    assert offsets(read_late(late_table, reason=["null_timestamp", "before_min_valid"])) == [2, 6]
    assert offsets(read_late(late_table, kind="invalid")) == [2, 3, 6]
    assert offsets(read_late(late_table, partition="1")) == [2, 3, 4]
    assert offsets(read_late(late_table, partition="0", reason="too_late")) == [0, 1]
    assert read_late(late_table, pipeline="other").num_rows == 0


def test_partition_filter_takes_the_source_column_s_int(late_table):
    """The source's partition column is an INT (Kafka's, a file's): filtering by that int selects
    the same rows as by its text, alone or in a list."""
    assert offsets(read_late(late_table, partition=1)) == offsets(read_late(late_table, partition="1")) == [2, 3, 4]
    assert offsets(read_late(late_table, partition=[0, "1"])) == offsets(read_late(late_table, partition=["0", "1"]))
    assert len(read_late_pandas(late_table, partition=0)) == len(read_late_pandas(late_table, partition="0")) > 0
    with pytest.raises(TypeError, match="partition"):
        read_late(late_table, partition=True)


def test_filter_key_forms(late_table):
    assert offsets(read_late(late_table, key='{"n": 1, "user": "a"}')) == [0, 1, 5, 6]  # JSON object
    assert offsets(read_late(late_table, key="user=b")) == [2, 4]  # col=value
    assert offsets(read_late(late_table, key="c")) == [3]  # bare value
    assert read_late(late_table, key="user=zzz").num_rows == 0


def test_filter_event_time_range(late_table):
    # event_time in [11:25, 11:50): offsets 0 (11:30) and 1 (11:40); invalid rows excluded
    t = read_late(late_table, since="2024-03-01T11:25:00Z", until=dt.datetime(2024, 3, 1, 11, 50))
    assert offsets(t) == [0, 1]


def test_filter_detected_at_range(late_table):
    t = read_late(late_table, since="2024-03-01T13:00:00+00:00", time_column="detected_at")
    assert offsets(t) == [4, 5, 6]
    assert set(t.column("batch_id").to_pylist()) == {1}
    t = read_late(late_table, until="2024-03-01T13:00:00Z", time_column="detected_at")
    assert offsets(t) == [0, 1, 2, 3]


def test_limit_columns_and_pandas(late_table):
    t = read_late(late_table, limit=2, columns=["offset", "reason"])
    assert t.column_names == ["offset", "reason"] and t.num_rows == 2
    df = read_late_pandas(late_table, reason="too_late")
    assert len(df) == 4 and df["lateness_ms"].max() == 900_000


def test_bad_filters_name_the_parameter(late_table):
    with pytest.raises(ValueError, match="since"):
        read_late(late_table, since="not a time")
    with pytest.raises(ValueError, match="time_column"):
        read_late(late_table, time_column="watermark")
    with pytest.raises(ValueError, match="since .* before until"):
        LateFilter(since="2024-01-02", until="2024-01-01")
    with pytest.raises(TypeError, match="reason"):
        read_late(late_table, reason=[1])
    with pytest.raises(ValueError, match="limit"):
        read_late(late_table, limit=-1)
    with pytest.raises(ValueError, match="columns"):
        read_late(late_table, columns=["nope"])
    assert parse_instant("x", "2024-03-01T12:00:00Z") == T0


def test_missing_table(tmp_path):
    with pytest.raises(LateTableNotFoundError, match="no Delta table"):
        read_late(str(tmp_path / "missing"))


def test_summary_numbers(late_table):
    s = summarize(read_late(late_table))
    assert s["total"] == 7
    assert s["by_kind"] == {"late": 4, "invalid": 3}
    assert s["by_reason"] == {"too_late": 4, "before_min_valid": 1, "null_timestamp": 1, "too_far_in_future": 1}
    assert s["by_partition"] == {"0": 3, "1": 3, "(none)": 1}
    assert s["by_hour"] == {"2024-03-01T12:00:00+00:00": 4, "2024-03-01T13:00:00+00:00": 3}
    assert s["by_event_hour"] == {"2024-03-01T10:00:00+00:00": 1, "2024-03-01T11:00:00+00:00": 3}
    assert s["max_lateness_ms"] == 900_000
    assert s["mean_lateness_ms"] == pytest.approx((120_000 + 60_000 + 900_000 + 30_000) / 4)
    assert s["top_keys"][0] == {"key": '{"user":"a","n":1}', "count": 4}
    assert s["first_detected_at"] == "2024-03-01T12:10:00+00:00"
    assert s["last_detected_at"] == "2024-03-01T13:20:00+00:00"


def test_summary_of_empty_selection(late_table):
    s = summarize(read_late(late_table, reason="malformed_record"))  # a valid reason that no row has
    assert s["total"] == 0 and s["by_reason"] == {} and s["max_lateness_ms"] is None


def test_read_after_compaction_sees_the_same_rows(late_table, tmp_path):
    copy = str(tmp_path / "copy")
    shutil.copytree(late_table, copy)
    compact(copy)
    assert offsets(read_late(copy)) == list(range(7))


READ_SCRIPT = """
import sys
from eventtime.query.late import read_late, summarize
for _ in range(3):
    print(summarize(read_late(sys.argv[1], reason="too_late"))["total"])
"""


def test_reading_does_not_abort_the_process_at_exit(late_table):
    """delta-rs' own pyarrow reader makes ~9 in 10 processes abort at exit (exit 134);
    read_late reads the snapshot files with pyarrow's filesystem instead."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for _ in range(4):
        proc = subprocess.run([sys.executable, "-c", READ_SCRIPT, late_table], capture_output=True,
                              text=True, timeout=120, env=env, cwd=root)
        assert proc.stdout.split() == ["4", "4", "4"]
        assert proc.returncode == 0, proc.stderr


@pytest.mark.slow
@pytest.mark.spark
def test_spark_reader_reads_the_snapshot_files(late_table, tmp_path, spark):
    copy = str(tmp_path / "copy")
    shutil.copytree(late_table, copy)
    compact(copy)  # the table now has unreferenced (removed) files next to the live one
    assert len(DeltaTable(copy).file_uris()) == 1
    df = read_late_spark(spark, copy)
    assert df.count() == 7  # removed files are not read twice
    assert "detected_date" in df.columns
    too_late = read_late_spark(spark, copy, reason="too_late", partition=["0", "1"])
    assert sorted(r["offset"] for r in too_late.collect()) == [0, 1, 4]
    by_key = read_late_spark(spark, copy, key="user=a", since="2024-03-01T13:00:00Z", time_column="detected_at")
    assert sorted(r["offset"] for r in by_key.collect()) == [5, 6]
    # the filters are stated once (LateFilter.conditions): both readers give the same rows
    cases = [
        {}, {"reason": "too_late"}, {"kind": ["invalid"]}, {"partition": "1"}, {"pipeline": "nope"},
        {"since": "2024-03-01T12:30:00Z"}, {"until": "2024-03-01T12:30:00Z"},
        {"since": "2024-03-01T13:00:00Z", "until": "2024-03-02", "time_column": "detected_at"},
        {"until": "2024-03-01T13:00:00Z", "time_column": "detected_at", "kind": "late"},
        {"key": "user=a", "reason": ["too_late", "null_timestamp"]},
    ]
    for filters in cases:
        spark_offsets = sorted(r["offset"] for r in read_late_spark(spark, copy, **filters).collect())
        arrow_offsets = sorted(read_late(copy, **filters).column("offset").to_pylist())
        assert spark_offsets == arrow_offsets, filters
    assert len({tuple(sorted(r["offset"] for r in read_late_spark(spark, copy, **f).collect())) for f in cases}) > 4


def test_an_unknown_reason_filter_is_an_error_not_an_empty_answer():
    from eventtime.query.late import LateFilter

    with pytest.raises(ValueError, match=r"reason 'too-late' is not a reason eventtime writes; valid: too_late, partly_late, null_timestamp"):
        LateFilter(reason="too-late")


def test_reading_a_table_that_is_not_a_late_table_is_an_error(tmp_path):
    """read_late on the results table gave its panes (and summarize an all-empty summary)."""
    from eventtime.query.late import NotALateTableError, open_late_table
    from eventtime.sinks import DeltaResultsSink

    path = str(tmp_path / "results")
    DeltaResultsSink(path, pipeline="p")(pa.table({
        "user": ["a"], "window_start": pa.array([T0], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([T0], pa.timestamp("us", tz="UTC")), "pane_timing": ["ON_TIME"],
        "pane_index": pa.array([0], pa.int64()), "is_final": [True], "count": pa.array([1], pa.int64())}), 0, "q")
    message = (rf"^'{path}' is not a late-data table \(it looks like a results table: DeltaResultsSink writes panes\): "
               r"it has no column\(s\) kind, reason, event_time, payload; give the table written by DeltaLateSink$")
    for read in (open_late_table, read_late, read_late_pandas):
        with pytest.raises(NotALateTableError, match=message):
            read(path)
    assert issubclass(NotALateTableError, ValueError)
