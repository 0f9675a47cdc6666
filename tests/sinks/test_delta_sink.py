"""DeltaLateSink / DeltaResultsSink: creation, schema merge, exactly-once, retries, compaction."""

from __future__ import annotations

import datetime as dt
import glob
import json
import os
from pathlib import Path

import deltalake
import pyarrow as pa
import pytest
from deltalake import DeltaTable

from eventtime.sinks import (
    DeltaDelaySink,
    DeltaLateSink,
    DeltaResultsSink,
    DeltaSinkError,
    compact,
    latest_panes,
    snapshot_dataset,
    spark_has_delta,
)

UTC = dt.timezone.utc
T0 = dt.datetime(2024, 3, 1, 12, 0, tzinfo=UTC)
DETECTED = dt.datetime(2024, 3, 1, 12, 30, tzinfo=UTC)


def records(n: int, start: int = 0, *, extra: dict | None = None) -> pa.Table:
    """n late/invalid records shaped like the router's record table."""
    users = [f"u{(start + i) % 3}" for i in range(n)]
    kinds = ["invalid" if (start + i) % 4 == 3 else "late" for i in range(n)]
    cols = {
        "kind": kinds,
        "reason": ["null_timestamp" if k == "invalid" else "too_late" for k in kinds],
        "key": [json.dumps({"user": u}, separators=(",", ":")) for u in users],
        "user": users,
        "event_time": pa.array(
            [None if k == "invalid" else T0 - dt.timedelta(minutes=start + i) for i, k in enumerate(kinds)],
            pa.timestamp("ms", tz="UTC"),
        ),
        "raw_timestamp": [None if k == "invalid" else str(start + i) for i, k in enumerate(kinds)],
        "watermark": pa.array([T0] * n, pa.timestamp("us", tz="UTC")),
        "lateness_ms": pa.array([None if k == "invalid" else 60_000 * (start + i) for i, k in enumerate(kinds)], pa.int64()),
        "window_start": pa.array([None] * n, pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([None] * n, pa.timestamp("us", tz="UTC")),
        "partition": [str((start + i) % 2) for i in range(n)],
        "offset": pa.array([start + i for i in range(n)], pa.int64()),
        "payload": [json.dumps({"user": u, "i": start + i}) for i, u in enumerate(users)],
    }
    cols.update(extra or {})
    return pa.table(cols)


def rows(path: str) -> pa.Table:
    # not DeltaTable.to_pyarrow_table(): it makes the process abort at exit (delta-rs#2184)
    return snapshot_dataset(DeltaTable(path)).to_table()


def make_sink(path: str, **kw) -> DeltaLateSink:
    kw.setdefault("now", lambda: DETECTED)
    kw.setdefault("sleep", lambda s: None)
    return DeltaLateSink(path, pipeline="clicks", **kw)


def test_created_on_first_write_with_contract_columns(tmp_path):
    path = str(tmp_path / "late")
    assert not os.path.exists(path)
    res = make_sink(path)(records(5), 0, "q1")
    assert res.written and res.rows == 5 and res.attempts == 1 and res.version == 0
    t = rows(path)
    assert t.num_rows == 5
    for col in ["pipeline", "query_id", "batch_id", "detected_at", "detected_date", "kind", "reason", "key",
                "event_time", "raw_timestamp", "watermark", "lateness_ms", "window_start", "window_end",
                "partition", "offset", "payload", "user"]:
        assert col in t.column_names, col
    assert t.schema.field("event_time").type == pa.timestamp("us", tz="UTC")
    assert set(t.column("pipeline").to_pylist()) == {"clicks"}
    assert set(t.column("query_id").to_pylist()) == {"q1"}
    assert set(t.column("detected_date").to_pylist()) == {dt.date(2024, 3, 1)}
    assert DeltaTable(path).metadata().partition_columns == ["detected_date"]
    assert glob.glob(os.path.join(path, "detected_date=2024-03-01", "*.parquet"))
    # event times survive the ms -> us conversion
    assert sorted(v for v in t.column("event_time").to_pylist() if v)[-1] == T0


def test_empty_batch_writes_nothing(tmp_path):
    path = str(tmp_path / "late")
    sink = make_sink(path)
    res = sink(records(0), 0, "q1")
    assert not res.written and res.skipped == "empty"
    assert not DeltaTable.is_deltatable(path)
    sink(records(2), 1, "q1")
    assert sink(records(0), 2, "q1").skipped == "empty"
    assert DeltaTable(path).version() == 0


def test_same_batch_twice_is_written_once(tmp_path):
    path = str(tmp_path / "late")
    sink = make_sink(path)
    assert sink(records(4), 0, "q1").written
    again = sink(records(4), 0, "q1")
    assert not again.written and again.skipped == "already_committed"
    assert sink(records(3, 4), 1, "q1").written
    assert not sink(records(4), 0, "q1").written  # an older batch re-run is skipped too
    assert rows(path).num_rows == 7
    assert DeltaTable(path).transaction_version(sink.app_id("q1")) == 1


def test_fresh_query_id_on_old_table_does_not_skip(tmp_path):
    path = str(tmp_path / "late")
    old = make_sink(path)
    for b in range(3):
        old(records(2, 2 * b), b, "old-query")
    new = make_sink(path)
    res = new(records(2, 100), 0, "new-query")  # fresh checkpoint: batch ids restart at 0
    assert res.written
    t = rows(path)
    assert t.num_rows == 8
    assert t.filter(pa.compute.equal(t.column("query_id"), "new-query")).num_rows == 2


def test_rerun_after_kill_between_delta_commit_and_checkpoint(tmp_path):
    """Batch 5 committed to Delta, then the process died before Spark committed the
    batch to its checkpoint: on restart Spark re-runs batch 5 through a new sink."""
    path = str(tmp_path / "late")
    first_process = make_sink(path)
    first_process(records(3), 4, "q1")
    first_process(records(3, 3), 5, "q1")
    restarted = make_sink(path)  # new process, same checkpoint -> same query id
    res = restarted(records(3, 3), 5, "q1")
    assert not res.written and res.skipped == "already_committed"
    assert restarted(records(3, 6), 6, "q1").written
    t = rows(path)
    assert t.num_rows == 9
    assert sorted(t.column("offset").to_pylist()) == list(range(9))


def test_commit_that_raised_afterwards_is_not_duplicated_by_retry(tmp_path, monkeypatch):
    path = str(tmp_path / "late")
    real = deltalake.write_deltalake
    calls = {"n": 0}

    def commit_then_fail(*args, **kwargs):
        calls["n"] += 1
        real(*args, **kwargs)
        if calls["n"] == 1:
            raise OSError("connection reset after commit")

    monkeypatch.setattr(deltalake, "write_deltalake", commit_then_fail)
    res = make_sink(path)(records(4), 0, "q1")
    assert res.skipped == "already_committed" and res.attempts == 2
    assert rows(path).num_rows == 4


def test_schema_additions_merge(tmp_path):
    path = str(tmp_path / "late")
    sink = make_sink(path)
    sink(records(2), 0, "q1")
    sink(records(2, 2, extra={"region": ["eu", "us"]}), 1, "q1")
    t = rows(path).sort_by("offset")
    assert "region" in t.column_names
    assert t.column("region").to_pylist() == [None, None, "eu", "us"]
    # a batch without the new column still writes
    sink(records(1, 4), 2, "q1")
    assert rows(path).num_rows == 5


def test_missing_contract_columns_are_filled_and_types_normalised(tmp_path):
    path = str(tmp_path / "late")
    minimal = pa.table({
        "kind": ["invalid"], "reason": ["unparseable_timestamp"],
        "raw_timestamp": ["yesterday"], "partition": pa.array([None], pa.null()),
    })
    make_sink(path)(minimal, 0, "q1")
    t = rows(path)
    assert t.schema.field("partition").type == pa.string()
    assert t.schema.field("lateness_ms").type == pa.int64()
    assert t.column("raw_timestamp").to_pylist() == ["yesterday"]


def test_retries_with_exponential_backoff_then_success(tmp_path):
    path = str(tmp_path / "late")
    sleeps = []
    failures = {"left": 2}

    def flaky(point):
        if failures["left"]:
            failures["left"] -= 1
            raise OSError("simulated storage fault")

    sink = make_sink(path, retries=3, backoff_s=0.5, max_backoff_s=10, fault_injector=flaky, sleep=sleeps.append)
    res = sink(records(3), 0, "q1")
    assert res.written and res.attempts == 3
    assert sleeps == [0.5, 1.0]
    assert rows(path).num_rows == 3


def test_retries_exhausted_then_recovery_without_loss_or_duplicate(tmp_path):
    path = str(tmp_path / "late")
    broken = {"on": False}

    def fault(point):
        if broken["on"]:
            raise OSError("disk unavailable")

    sleeps = []
    sink = make_sink(path, retries=2, backoff_s=0.1, fault_injector=fault, sleep=sleeps.append)
    sink(records(2), 0, "q1")
    broken["on"] = True
    with pytest.raises(DeltaSinkError) as info:
        sink(records(2, 2), 1, "q1")
    err = info.value
    msg = str(err)
    assert path in msg and "batch 1" in msg and "disk unavailable" in msg and "3 attempt" in msg
    assert err.batch_id == 1 and err.path == path and err.attempts == 3
    assert sleeps == [0.1, 0.2]
    assert rows(path).num_rows == 2  # nothing partial
    broken["on"] = False
    # Spark re-runs batch 1 after the query restarts
    assert sink(records(2, 2), 1, "q1").written
    assert not sink(records(2, 2), 1, "q1").written
    t = rows(path)
    assert sorted(t.column("offset").to_pylist()) == [0, 1, 2, 3]


def test_path_replaced_by_a_file_fails_clearly_then_recovers(tmp_path):
    path = str(tmp_path / "late")
    sink = make_sink(path, retries=1)  # made while the path can be written (else refused at once)
    with open(path, "w") as fh:  # then replaced by a file while the pipeline runs
        fh.write("not a table")
    with pytest.raises(DeltaSinkError, match="batch 0") as info:
        sink(records(2), 0, "q1")
    assert path in str(info.value)
    os.remove(path)
    assert sink(records(2), 0, "q1").written
    assert rows(path).num_rows == 2


def test_argument_validation():
    with pytest.raises(TypeError, match="path"):
        DeltaLateSink(123, pipeline="p")
    with pytest.raises(ValueError, match="pipeline"):
        DeltaLateSink("/tmp/x", pipeline=" ")
    with pytest.raises(ValueError, match="retries"):
        DeltaLateSink("/tmp/x", pipeline="p", retries=-1)
    with pytest.raises(TypeError, match="backoff_s"):
        DeltaLateSink("/tmp/x", pipeline="p", backoff_s="1s")
    with pytest.raises(ValueError, match="engine"):
        DeltaLateSink("/tmp/x", pipeline="p", engine="duckdb")
    sink = DeltaLateSink("/tmp/never-written", pipeline="p")
    with pytest.raises(ValueError, match="batch_id"):
        sink(records(1), -1, "q")
    with pytest.raises(TypeError, match="batch_id"):
        sink(records(1), "0", "q")
    with pytest.raises(ValueError, match="query_id"):
        sink(records(1), 0, "")
    with pytest.raises(ValueError, match="reason"):
        sink(pa.table({"kind": ["late"]}), 0, "q")
    with pytest.raises(ValueError, match="pipeline"):
        sink(records(1, extra={"pipeline": ["x"]}), 0, "q")
    assert not os.path.exists("/tmp/never-written")


def panes(rows_: list[tuple]) -> pa.Table:
    """(user, window minute, timing, index, is_final, count) tuples -> pane table."""
    return pa.table({
        "user": [r[0] for r in rows_],
        "window_start": pa.array([T0 + dt.timedelta(minutes=r[1]) for r in rows_], pa.timestamp("us", tz="UTC")),
        "window_end": pa.array([T0 + dt.timedelta(minutes=r[1] + 1) for r in rows_], pa.timestamp("us", tz="UTC")),
        "pane_timing": [r[2] for r in rows_],
        "pane_index": pa.array([r[3] for r in rows_], pa.int64()),
        "is_final": [r[4] for r in rows_],
        "count": pa.array([r[5] for r in rows_], pa.int64()),
    })


def test_results_sink_and_latest_panes(tmp_path):
    path = str(tmp_path / "results")
    sink = DeltaResultsSink(path, pipeline="clicks", sleep=lambda s: None)
    sink(panes([("a", 0, "ON_TIME", 0, False, 3), ("b", 0, "ON_TIME", 0, False, 1)]), 0, "q1")
    sink(panes([("a", 0, "LATE", 1, False, 4), ("a", 1, "ON_TIME", 0, False, 2)]), 1, "q1")
    sink(panes([("a", 0, "LATE", 1, False, 4)]), 1, "q1")  # re-run: skipped
    sink(panes([("a", 0, "FINAL", 2, True, 5)]), 2, "q1")
    t = rows(path)
    assert t.num_rows == 5
    assert set(t.column("key").to_pylist()) == {'{"user":"a"}', '{"user":"b"}'}
    latest = latest_panes(path)
    got = {(r.user, r.window_start.minute): (r.pane_timing, r.pane_index, r.is_final, r.count)
           for r in latest.itertuples()}
    assert got == {
        ("a", 0): ("FINAL", 2, True, 5),
        ("b", 0): ("ON_TIME", 0, False, 1),
        ("a", 1): ("ON_TIME", 0, False, 2),
    }


def test_results_sink_requires_pane_columns(tmp_path):
    sink = DeltaResultsSink(str(tmp_path / "r"), pipeline="p")
    with pytest.raises(ValueError, match="pane_index"):
        sink(pa.table({"window_start": [T0], "window_end": [T0], "pane_timing": ["ON_TIME"], "is_final": [False]}), 0, "q")


def test_compact_and_vacuum_keep_rows_and_exactly_once(tmp_path):
    path = str(tmp_path / "late")
    sink = make_sink(path)
    for b in range(6):
        sink(records(2, 2 * b), b, "q1")
    before = len(DeltaTable(path).file_uris())
    assert before == 6
    result = compact(path, vacuum=True, retention_hours=0, enforce_retention_duration=False)
    assert result["compact"]["numFilesRemoved"] == 6 and result["compact"]["numFilesAdded"] == 1
    assert len(result["vacuumed"]) == 6
    dt_ = DeltaTable(path)
    assert len(dt_.file_uris()) == 1
    assert rows(path).num_rows == 12
    assert len(glob.glob(os.path.join(path, "detected_date=*", "*.parquet"))) == 1
    # the app transaction survives the compaction commit
    assert not make_sink(path)(records(2, 10), 5, "q1").written
    assert rows(path).num_rows == 12


def test_spark_engine_requires_session():
    with pytest.raises(ValueError, match="spark"):
        DeltaLateSink("/tmp/x", pipeline="p", engine="spark")
    assert spark_has_delta(None) is False


def test_auto_without_a_session_writes_through_delta_rs(tmp_path):
    sink = make_sink(str(tmp_path / "late"), engine="auto")
    assert sink(records(2), 0, "q1").written
    assert DeltaTable(str(tmp_path / "late")).transaction_version(sink.app_id("q1")) == 0


def _foreign_table(path: str) -> None:
    deltalake.write_deltalake(path, pa.table({"customer": ["acme"], "revenue": [12.5]}))


@pytest.mark.parametrize("sink_class", [DeltaLateSink, DeltaResultsSink, DeltaDelaySink])
def test_a_table_of_another_schema_is_refused_when_the_sink_is_made(tmp_path, sink_class):
    path = str(tmp_path / "crm")
    _foreign_table(path)
    with pytest.raises(ValueError) as err:
        sink_class(path, pipeline="clicks")
    text = str(err.value)
    for part in (sink_class.__name__, repr(path), "customer string, revenue double", "pipeline", "path of its own"):
        assert part in text, (part, text)
    assert DeltaTable(path).version() == 0  # nothing written


def test_a_late_sink_on_a_results_table_is_refused(tmp_path):
    path = str(tmp_path / "results")
    DeltaResultsSink(path, pipeline="clicks")(panes([("a", 0, "ON_TIME", 0, False, 3)]), 0, "q1")
    with pytest.raises(ValueError, match=r"lacks the column\(s\) detected_at, detected_date, kind, reason") as err:
        DeltaLateSink(path, pipeline="clicks")
    assert repr(path) in str(err.value) and "window_start timestamp" in str(err.value)
    # the results sink itself still opens it, and a column of another type is named
    DeltaResultsSink(path, pipeline="clicks")
    late = str(tmp_path / "late")
    deltalake.write_deltalake(late, pa.table({"pipeline": ["p"], "query_id": ["q"], "batch_id": [0],
                                              "detected_at": pa.array([DETECTED], pa.timestamp("us", tz="UTC")),
                                              "detected_date": [DETECTED.date()], "kind": ["late"],
                                              "reason": ["too_late"], "offset": ["7"]}),
                              partition_by=["detected_date"])
    with pytest.raises(ValueError, match="offset is string, not long"):
        DeltaLateSink(late, pipeline="clicks")


def test_route_checks_are_made_by_bind_route(tmp_path):
    """route(...) calls bind_route on each sink before the query starts: two kinds of rows on
    one path, or two late sinks of one pipeline on one table, are refused."""
    path = str(tmp_path / "t")
    results, late = DeltaResultsSink(path, pipeline="p"), DeltaLateSink(path, pipeline="p")
    with pytest.raises(ValueError, match="both write to the Delta table at") as err:
        late.bind_route(None, [results])
    assert repr(path) in str(err.value) and "path of its own" in str(err.value)
    with pytest.raises(ValueError, match="same app transaction"):
        late.bind_route(None, [DeltaLateSink(path, pipeline="p")])
    late.bind_route(None, [DeltaResultsSink(str(tmp_path / "r"), pipeline="p")])
    assert late.writer == "delta-rs"


def test_pipeline_query_ids_tell_which_queries_wrote_the_table(tmp_path):
    sink = DeltaLateSink(str(tmp_path / "late"), pipeline="orders")
    assert sink.pipeline_query_ids() == []
    other = DeltaLateSink(str(tmp_path / "late"), pipeline="payments")
    rows = pa.table({"kind": ["late"], "reason": ["too_late"], "key": ['{"u": 1}'], "payload": ['{"u": 1}']})
    sink(rows, 0, "q-1")
    sink(rows, 0, "q-2")
    other(rows, 0, "q-3")
    assert sink.pipeline_query_ids() == ["q-1", "q-2"]
    assert other.pipeline_query_ids() == ["q-3"]


@pytest.mark.parametrize("sink_class", [DeltaLateSink, DeltaResultsSink])
def test_a_path_that_cannot_be_created_is_refused_when_the_sink_is_made(sink_class):
    """Checked by creating it, not by asking os.access (which says yes to root everywhere):
    /proc takes no new directory, even from root."""
    if not os.path.isdir("/proc/self"):
        pytest.skip("needs Linux /proc")
    with pytest.raises(ValueError, match=rf"^{sink_class.__name__}: the table path '/proc/eventtime-t/late' cannot be "
                                         r"written: /proc/eventtime-t cannot be created or written: "):
        sink_class("/proc/eventtime-t/late", pipeline="p")
    with pytest.raises(ValueError, match=r"'file:///proc/late' cannot be written"):
        sink_class("file:///proc/late", pipeline="p")


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_a_directory_without_write_permission_is_refused(tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    with pytest.raises(ValueError, match=r"DeltaLateSink: the table path .*cannot be written: .*Permission denied"):
        DeltaLateSink(str(locked / "late"), pipeline="p")


def test_the_write_check_leaves_nothing_behind(tmp_path):
    path = tmp_path / "a" / "b" / "late"
    make_sink(str(path))
    make_sink(f"file://{path}")
    assert os.listdir(tmp_path) == []
    make_sink(str(path))(records(2), 0, "q")
    make_sink(str(path))  # an existing table: its directory and _delta_log are written to, then cleaned
    assert sorted(os.listdir(path / "_delta_log")) == ["00000000000000000000.json"]
    assert not [p for p in os.listdir(path) if p.startswith(".eventtime")]


def test_latest_panes_leaves_out_sessions_a_merged_session_replaced(tmp_path):
    """Transcript 15 through the results sink, batch by batch: after each batch latest_panes shows
    exactly the model's current sessions (a replaced session is gone)."""
    from eventtime.core.reference import ReferenceEngine
    from eventtime.harness.scenario import parse_scenario

    scenario = json.loads((Path(__file__).parents[1] / "transcripts" / "15_session_merge_of_fired_sessions.json").read_text())["scenario"]
    parsed = parse_scenario(scenario)
    engine = ReferenceEngine(parsed.config)
    path = str(tmp_path / "results")
    sink = DeltaResultsSink(path, pipeline="s", sleep=lambda s: None)
    ms = lambda v: dt.datetime.fromtimestamp(v / 1000, dt.timezone.utc)  # noqa: E731
    current: dict = {}
    for batch_id, batch in enumerate(parsed.batches):
        result = engine.process_batch(batch, parsed.now_ms)
        for p in result.panes:
            for w in p.merged_from:
                current.pop((p.key, w.start_ms), None)
            current[(p.key, p.window.start_ms)] = (p.window.end_ms, p.index, p.values["count"])
        if not result.panes:
            continue
        sink(pa.table({
            "user": [p.key for p in result.panes],
            "window_start": pa.array([ms(p.window.start_ms) for p in result.panes], pa.timestamp("ms", tz="UTC")),
            "window_end": pa.array([ms(p.window.end_ms) for p in result.panes], pa.timestamp("ms", tz="UTC")),
            "pane_timing": [p.timing for p in result.panes],
            "pane_index": pa.array([p.index for p in result.panes], pa.int64()),
            "is_final": [p.is_final for p in result.panes],
            "count": pa.array([p.values["count"] for p in result.panes], pa.int64()),
            "merged_from": pa.array(
                [[{"start": ms(w.start_ms), "end": ms(w.end_ms)} for w in p.merged_from] for p in result.panes],
                pa.list_(pa.struct([("start", pa.timestamp("ms", tz="UTC")), ("end", pa.timestamp("ms", tz="UTC"))]))),
        }), batch_id, "q")
        latest = latest_panes(path)
        got = {(r.user, int(r.window_start.timestamp() * 1000)): (int(r.window_end.timestamp() * 1000), r.pane_index, r.count)
               for r in latest.itertuples()}
        assert got == current, f"after batch {batch_id}"
    # the record at 130 started a new session [130, 140) inside the replaced (and expired) [100, 135)
    assert set(current) == {("a", 100), ("a", 130)}


def test_latest_panes_keeps_a_later_session_with_the_bounds_of_a_replaced_one(tmp_path):
    """[100, 110) is replaced by [100, 118) in batch 1; after that session expired, a new
    session [100, 110) is written in batch 3: it is current, the replaced one is not."""
    path = str(tmp_path / "results")
    sink = DeltaResultsSink(path, pipeline="s", sleep=lambda s: None)
    ms = lambda v: dt.datetime.fromtimestamp(v / 1000, dt.timezone.utc)  # noqa: E731
    bounds = pa.list_(pa.struct([("start", pa.timestamp("ms", tz="UTC")), ("end", pa.timestamp("ms", tz="UTC"))]))

    def pane(start, end, index, count, merged):
        return pa.table({
            "user": ["a"], "window_start": pa.array([ms(start)], pa.timestamp("ms", tz="UTC")),
            "window_end": pa.array([ms(end)], pa.timestamp("ms", tz="UTC")), "pane_timing": ["ON_TIME"],
            "pane_index": pa.array([index], pa.int64()), "is_final": [False], "count": pa.array([count], pa.int64()),
            "merged_from": pa.array([[{"start": ms(s), "end": ms(e)} for s, e in merged]], bounds),
        })

    sink(pane(100, 110, 0, 1, []), 0, "q")
    sink(pane(100, 118, 1, 2, [(100, 110)]), 1, "q")
    assert [(r.pane_index, r.count) for r in latest_panes(path).itertuples()] == [(1, 2)]
    sink(pane(100, 110, 0, 7, []), 3, "q")
    got = sorted((int(r.window_end.timestamp() * 1000), r.pane_index, r.count) for r in latest_panes(path).itertuples())
    assert got == [(110, 0, 7), (118, 1, 2)]


def test_latest_panes_marks_the_windows_the_recorded_watermark_expired(tmp_path):
    """A window is closed once the watermark a batch that wrote panes ran at reaches its end
    - 1 ms + the allowed lateness (equality included); not before, and not for a pipeline that
    recorded none."""
    path = str(tmp_path / "results")
    sink = DeltaResultsSink(path, pipeline="clicks", sleep=lambda s: None)
    end0 = int((T0 + dt.timedelta(minutes=1)).timestamp() * 1000)  # window 0's end; window 1 ends a minute later
    lateness = 30_000
    sink.batch_watermark(end0 - 1)  # at window 0's end: due (an ON_TIME pane), not expired
    sink(panes([("a", 0, "ON_TIME", 0, False, 3)]), 0, "q1")
    sink.record_pipeline({"config": {"allowed_lateness_ms": lateness}, "keys": ["user"]})
    assert latest_panes(path)["closed"].tolist() == [False]
    sink.batch_watermark(end0 - 1 + lateness)  # window 0 expires exactly here
    sink(panes([("a", 1, "ON_TIME", 0, False, 2)]), 1, "q1")
    got = {r.window_start.minute: (r.is_final, r.closed) for r in latest_panes(path).itertuples()}
    assert got == {0: (False, True), 1: (False, False)}
    other = DeltaResultsSink(path, pipeline="other", sleep=lambda s: None)  # recorded no watermark
    other(panes([("b", 0, "ON_TIME", 0, False, 1)]), 0, "q2")
    assert latest_panes(path, pipeline="other")["closed"].tolist() == [False]
