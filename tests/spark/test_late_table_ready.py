"""The late table a team queries exists from the moment route() is set up, and the delay
histograms `eventtime late advise` reads are written beside it without being asked for."""

from __future__ import annotations

import contextlib
import io
import os

import pytest
from streams import write_json_lines

import eventtime
from eventtime.cli.late import main as late_main
from eventtime.query.late import read_late, read_late_pandas
from eventtime.sinks import DeltaDelaySink, DeltaLateSink, DeltaResultsSink

pytestmark = pytest.mark.spark
T0 = 1_700_000_040_000


def _out(spark, source):
    events = spark.readStream.schema("user_id STRING, ts STRING, partition INT").json(str(source))
    return events.transform(eventtime.with_event_time("ts", unit="ms", max_future="3650 days",
                                                      max_out_of_orderness="10 seconds")).transform(
        eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute"), partition_col="partition"))


def test_the_late_table_can_be_queried_before_its_first_late_record(spark, tmp_path):
    """It appeared only with the first late record: read_late raised and the CLI said "no such
    path" for the whole first part of a job's life."""
    source = tmp_path / "in"
    source.mkdir()
    late_path = str(tmp_path / "late")
    eventtime.route(_out(spark, source), panes=lambda *a: None, late=DeltaLateSink(late_path, pipeline="orders"),
                    pipeline="orders")
    assert read_late(late_path).num_rows == 0
    assert read_late_pandas(late_path, partition=2).empty
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert late_main(["late", "summary", "--table", late_path], hard_exit=False) == 0
    assert out.getvalue() == f"late-data table {late_path}\n  no late or invalid records yet\n"
    # the delay table beside it exists as well, empty, and of the delays kind
    assert os.path.isdir(os.path.join(late_path + "_delays", "_delta_log"))
    DeltaDelaySink(late_path + "_delays", pipeline="orders")  # accepted: a delay table, not a foreign one


def test_route_writes_the_delay_histograms_beside_the_late_table_by_default(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    late_path = str(tmp_path / "late")
    router = eventtime.route(_out(spark, source), panes=DeltaResultsSink(str(tmp_path / "results"), pipeline="orders"),
                             late=DeltaLateSink(late_path, pipeline="orders"), pipeline="orders", progress=False)
    assert router.delays_sink is not None and router.delays_sink.path == late_path + "_delays"
    write_json_lines(str(source), "b0.json", [{"user_id": "u", "ts": str(T0 + i * 1000), "partition": 0}
                                              for i in range(5)])
    query = router.start(str(tmp_path / "chk"), trigger={"availableNow": True})
    query.awaitTermination()
    write_json_lines(str(source), "b1.json", [{"user_id": "u", "ts": str(T0 + 3000), "partition": 0},
                                              {"user_id": "u", "ts": str(T0 - 120_000), "partition": 1}])
    query = router.start(str(tmp_path / "chk"), trigger={"availableNow": True})
    query.awaitTermination()
    from eventtime.query.advise import advise

    advice = advise(late_path + "_delays")
    # batch 1's two records: 1 s and 2 min 1 s behind the running maximum (T0 + 4 s)
    assert advice.records == 2
    assert (advice.current_b_ms, advice.current_l_ms) == (10_000, 0)
    assert read_late(late_path).column("kind").to_pylist() == ["late"]


def test_the_delay_table_can_be_turned_off_or_put_elsewhere(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    off = eventtime.route(_out(spark, source), late=DeltaLateSink(str(tmp_path / "a"), pipeline="p", delays=False))
    assert off.delays_sink is None and not os.path.exists(str(tmp_path / "a_delays"))
    elsewhere = str(tmp_path / "stats" / "delays")
    there = eventtime.route(_out(spark, source), late=DeltaLateSink(str(tmp_path / "b"), pipeline="p", delays=elsewhere))
    assert there.delays_sink.path == elsewhere
    given = DeltaDelaySink(str(tmp_path / "mine"), pipeline="p")
    assert eventtime.route(_out(spark, source), late=DeltaLateSink(str(tmp_path / "c"), pipeline="p"),
                           delays=given).delays_sink is given
    with pytest.raises(TypeError, match=r"^delays must be True, False or a table path, got int 3$"):
        DeltaLateSink(str(tmp_path / "d"), pipeline="p", delays=3)
    with pytest.raises(ValueError, match=r"^delays must be a table of its own, not the late table"):
        DeltaLateSink(str(tmp_path / "e"), pipeline="p", delays=str(tmp_path / "e"))


def test_the_results_table_can_be_read_before_its_first_pane(spark, tmp_path):
    """It appeared only with the first pane: a dashboard polling it had to handle a missing table."""
    import pyarrow as pa

    source = tmp_path / "in"
    source.mkdir()
    results = str(tmp_path / "results")
    router = eventtime.route(_out(spark, source), panes=DeltaResultsSink(results, pipeline="orders"),
                             late=DeltaLateSink(str(tmp_path / "late"), pipeline="orders"), pipeline="orders",
                             progress=False)
    empty = eventtime.latest_panes(results, pipeline="orders")
    assert len(empty) == 0 and {"user_id", "window_start", "window_end", "pane_timing", "pane_index", "is_final",
                                "count", "pipeline", "query_id", "batch_id", "written_at", "key"} <= set(empty.columns)
    from deltalake import DeltaTable

    created = DeltaTable(results).schema().to_arrow()
    write_json_lines(str(source), "b0.json", [{"user_id": "u", "ts": str(T0 + i * 1000), "partition": 0}
                                              for i in range(5)])
    router.start(str(tmp_path / "chk"), trigger={"availableNow": True}, end_of_input=True)
    table = DeltaTable(results)
    assert pa.schema(table.schema().to_arrow()) == pa.schema(created)  # the panes fit the columns made up front
    assert eventtime.latest_panes(results, pipeline="orders")["count"].tolist() == [5]
