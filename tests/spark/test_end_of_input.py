"""End of input: a bounded run fires and purges every window (docs/semantics.md, "End of input").

The same rows through a static DataFrame (one batch) and an ``availableNow`` stream read in
one batch give the same output, equal to the reference model's ``process_batch`` +
``end_of_input``; a stream of several micro-batches equals the model batch by batch.
"""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from typed_harness import (
    AGGREGATIONS,
    ARROW_SCHEMA,
    config_of,
    diff_typed,
    render_panes,
    render_records,
    run_reference_typed,
)

import eventtime
from eventtime.core.trigger import END_OF_INPUT_MS
from eventtime.ops.compat import IncompatibleRestartError
from property_tests.strategies import MAX_FUTURE_MS, NOW_MS, TYPED_COLUMNS

pytestmark = pytest.mark.spark
DDL = ", ".join(f"{name} {t}" for name, t in TYPED_COLUMNS)


def _row(rid, ts, key, **values):
    row = {name: None for name, _ in TYPED_COLUMNS}
    row.update(rid=rid, ts=ts, hb=False, k_big=key, v_big=rid, **values)
    return row


def _scenario(emit="on_time_and_late", max_out_of_orderness_ms=1000):
    # Windows [0, 3000) and [3000, 6000) are due in the stream; [6000, 9000) and [9000, 12000)
    # are not: without an end of input they would never fire.
    batches = [
        [_row(0, 1000, 1), _row(1, 2000, 2), _row(2, 6500, 1)],
        [_row(3, 500, 1), _row(4, 7000, 2), _row(5, 9500, None)],
        [_row(6, 3500, 1), _row(7, 9800, 2, part=3)],
    ]
    return {
        "keys": ("k_big",),
        "window": {"type": "tumbling", "size_ms": 3000, "offset_ms": 0},
        "max_out_of_orderness_ms": max_out_of_orderness_ms,
        "allowed_lateness_ms": 2000,
        "accumulation": "accumulating",
        "emit": emit,
        "batches": batches,
    }


def _aggregate(df, sc):
    cfg = config_of(sc)
    events = df.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=cfg.max_out_of_orderness_ms,
                                                    min_valid=1, max_future=MAX_FUTURE_MS, now=NOW_MS))
    return events.transform(eventtime.window_aggregate(
        keys=list(sc["keys"]), window=cfg.window, allowed_lateness=cfg.allowed_lateness_ms, aggregations=AGGREGATIONS,
        accumulation=cfg.accumulation, emit=cfg.emit, partition_col="part", offset_col="off", heartbeat_col="hb"))


def _write(directory, batches):
    os.makedirs(directory, exist_ok=True)
    for i, rows in enumerate(batches):
        path = os.path.join(directory, f"part-{i:05d}.parquet")
        pq.write_table(pa.Table.from_pylist(rows, schema=ARROW_SCHEMA), path)
        # the file source takes files in modification-time order: make it the batch order
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def _flatten(entries):
    return [{"watermark_ms": None, "panes": [p for e in entries for p in e["panes"]],
             "records": [r for e in entries for r in e["records"]]}]


class _Capture:
    def __init__(self):
        self.panes, self.records, self.batches = [], [], set()

    def pane_sink(self, table, batch_id, query_id):
        self.panes.append(table)
        self.batches.add(batch_id)

    def record_sink(self, table, batch_id, query_id):
        self.records.append(table)

    def output(self, keys):
        return _flatten([{"panes": render_panes(self.panes, keys), "records": render_records(self.records, keys)}])


@pytest.mark.parametrize("emit", ["on_time_and_late", "final_only"])
def test_static_dataframe_fires_every_window_at_end_of_input(spark, tmp_path, emit):
    sc = _scenario(emit)
    everything = {**sc, "batches": [[r for b in sc["batches"] for r in b]]}
    _write(str(tmp_path / "in"), sc["batches"])
    out = _aggregate(spark.read.schema(DDL).parquet(str(tmp_path / "in")), sc)
    cap = _Capture()
    stats = eventtime.route(out, panes=cap.pane_sink, late=cap.record_sink, pipeline="static").start(end_of_input=True)
    expected = _flatten(run_reference_typed(everything, end_of_input=True))
    assert diff_typed(expected, cap.output(sc["keys"])) is None
    got = cap.output(sc["keys"])[0]["panes"]
    assert {p["window_start"] for p in got} == {0, 3000, 6000, 9000}  # the last two only fire at the end
    assert all(p["is_final"] for p in got)
    assert stats.watermark_ms == END_OF_INPUT_MS and stats.rows_in == 8


def test_static_dataframe_needs_the_option(spark):
    out = _aggregate(spark.createDataFrame([], DDL), _scenario())
    router = eventtime.route(out, panes=lambda *a: None)
    with pytest.raises(ValueError, match=r"static DataFrame.*Call start\(end_of_input=True\)"):
        router.start()
    with pytest.raises(ValueError, match=r"keeps no checkpoint or trigger"):
        router.start("/tmp/chk", end_of_input=True)


def test_streaming_end_of_input_equals_the_static_run_and_the_model(spark, tmp_path):
    sc = _scenario()
    src = str(tmp_path / "in")
    _write(src, sc["batches"])
    # One micro-batch per file, then the end of input.
    stream = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(src)
    cap = _Capture()
    chk = str(tmp_path / "chk")
    router = eventtime.route(_aggregate(stream, sc), panes=cap.pane_sink, late=cap.record_sink, pipeline="bounded")
    query = router.start(chk, trigger={"availableNow": True}, end_of_input=True)
    assert not query.isActive and query.exception() is None
    assert diff_typed(_flatten(run_reference_typed(sc, end_of_input=True)), cap.output(sc["keys"])) is None
    assert {p["window_start"] for p in cap.output(sc["keys"])[0]["panes"] if p["is_final"]} >= {6000, 9000}
    # The finished checkpoint is not resumed: new records would reopen fired windows.
    with pytest.raises(IncompatibleRestartError, match="reached the end of its input"):
        eventtime.route(_aggregate(stream, sc), panes=cap.pane_sink).start(chk, trigger={"availableNow": True})

    # The same rows read as one batch give what the static run gives.
    one = {**sc, "batches": [[r for b in sc["batches"] for r in b]]}
    cap1 = _Capture()
    stream1 = spark.readStream.schema(DDL).parquet(src)
    eventtime.route(_aggregate(stream1, sc), panes=cap1.pane_sink, late=cap1.record_sink, pipeline="bounded1").start(
        str(tmp_path / "chk1"), trigger={"availableNow": True}, end_of_input=True)
    assert diff_typed(_flatten(run_reference_typed(one, end_of_input=True)), cap1.output(sc["keys"])) is None


def test_the_end_of_input_row_is_no_record_without_out_of_orderness(spark, tmp_path):
    """With max_out_of_orderness 0 the control row's time is END_OF_INPUT_MS itself; it was
    counted as a record with a null key (a pane for the window of 9999-12-31T23:59)."""
    sc = _scenario(max_out_of_orderness_ms=0)
    src = str(tmp_path / "in")
    _write(src, sc["batches"])
    stream = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(src)
    cap = _Capture()
    eventtime.route(_aggregate(stream, sc), panes=cap.pane_sink, late=cap.record_sink, pipeline="b0").start(
        str(tmp_path / "chk"), trigger={"availableNow": True}, end_of_input=True)
    got = cap.output(sc["keys"])
    assert diff_typed(_flatten(run_reference_typed(sc, end_of_input=True)), got) is None
    assert max(p["window_start"] for p in got[0]["panes"]) == 9000


def test_end_of_input_needs_a_bounded_trigger(spark, tmp_path):
    stream = spark.readStream.schema(DDL).parquet(str(tmp_path))
    router = eventtime.route(_aggregate(stream, _scenario()), panes=lambda *a: None)
    with pytest.raises(ValueError, match=r"end_of_input=True needs a bounded run"):
        router.start(str(tmp_path / "chk"), trigger="1 second", end_of_input=True)


class _Stats:
    def __init__(self):
        self.batches = []

    def on_batch(self, batch_id, records, stats):
        self.batches.append(stats)


def test_per_partition_end_of_input_says_so_and_holds_nothing_back(spark, tmp_path):
    """With per-partition watermarks the batches after the end of input run past it: the
    progress line says "end of input" (not a watermark tick) and no slow partition is said to
    hold the windows back; the windows the stream's watermark never made due fired at its end."""
    sc = _scenario()
    src = str(tmp_path / "in")
    _write(src, sc["batches"])
    cfg = config_of(sc)
    events = spark.readStream.schema(DDL).option("maxFilesPerTrigger", 1).parquet(src).transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=cfg.max_out_of_orderness_ms, min_valid=1,
                                  max_future=MAX_FUTURE_MS, now=NOW_MS))
    out = events.transform(eventtime.window_aggregate(
        keys=list(sc["keys"]), window=cfg.window, allowed_lateness=cfg.allowed_lateness_ms,
        aggregations=AGGREGATIONS, partition_col="part", offset_col="off", watermark="per_partition"))
    lines, seen, cap = [], _Stats(), _Capture()
    eventtime.route(out, panes=cap.pane_sink, late=cap.record_sink, alerter=seen, progress=lines.append,
                    pipeline="pp").start(str(tmp_path / "chk"), trigger={"availableNow": True}, end_of_input=True)
    assert "watermark end of input" in lines[-1] and "tick" not in lines[-1], lines
    assert seen.batches[-1].watermark_ms == END_OF_INPUT_MS and seen.batches[-1].holdback_ms is None
    assert {p["window_start"] for p in cap.output(sc["keys"])[0]["panes"]} >= {6000, 9000}
