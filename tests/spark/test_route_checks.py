"""route(): mistakes refused at once, and pipeline_failed sent by route itself when the query dies."""

from __future__ import annotations

import time

import pytest
from sentry_receiver import SentryReceiver
from streams import write_json_lines

import eventtime
from eventtime.ops.alerts import Alerter

pytestmark = pytest.mark.spark
T0 = 1_700_000_040_000


@pytest.fixture(scope="module")
def out(spark):
    events = spark.createDataFrame([], "user_id string, ts bigint").transform(eventtime.with_event_time("ts", unit="ms"))
    return events.transform(eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute")))


def test_a_sink_that_is_not_callable_is_refused(out):
    with pytest.raises(TypeError, match=r"route: panes must be a sink, a callable \(table, batch_id, query_id\).*got str 'path'"):
        eventtime.route(out, panes="path")
    with pytest.raises(TypeError, match=r"route: late must be a sink"):
        eventtime.route(out, panes=lambda *a: None, late=42)


def test_route_without_any_sink_is_refused(out):
    with pytest.raises(ValueError, match=r"route: no sink given .*would be discarded"):
        eventtime.route(out, alerter=Alerter(pipeline="x"))


def test_an_alerter_without_on_batch_is_refused(out):
    with pytest.raises(TypeError, match=r"route: alerter must have on_batch"):
        eventtime.route(out, panes=lambda *a: None, alerter=object())


class SinkFailure(Exception):
    pass


def test_route_sends_pipeline_failed_once_fingerprinted_by_the_inner_error(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()

    def broken_sink(table, batch_id, query_id):
        raise SinkFailure("the results database refused the write")

    with SentryReceiver() as receiver:
        alerter = Alerter(dsn=receiver.dsn, pipeline="failing", send_timeout_s=5, client_options={"http_proxy": ""})
        events = spark.readStream.schema("user_id STRING, ts STRING").json(str(source))
        out = events.transform(eventtime.with_event_time("ts", unit="ms", max_future="3650 days")).transform(
            eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute")))
        router = eventtime.route(out, panes=broken_sink, alerter=alerter, pipeline="failing")
        checkpoint = str(tmp_path / "chk")
        query = router.start(checkpoint=checkpoint)
        write_json_lines(str(source), "b0.json", [{"user_id": "u1", "ts": str(T0)}])
        with pytest.raises(Exception):
            query.awaitTermination(120)
        # the demo's own report of the same stop adds nothing (one event per failure)
        assert alerter.on_failure(router.failure or RuntimeError("x"), checkpoint=checkpoint) is None
        deadline = time.monotonic() + 30
        while not receiver.events and time.monotonic() < deadline:
            time.sleep(0.1)
        time.sleep(1.0)
        alerter.close()
        failures = [e for e in receiver.events if e["fingerprint"][:3] == ["eventtime", "failing", "pipeline_failed"]]
        assert len(failures) == 1, receiver.events
        assert failures[0]["fingerprint"][3] == "SinkFailure"
        assert failures[0]["level"] == "error"
        assert failures[0]["contexts"]["eventtime"]["checkpoint"] == checkpoint


def test_results_and_late_tables_render_the_same_key_text(spark, tmp_path):
    """A user joined the two tables on ``key`` and matched 0 of 510 rows: the spacing differed."""
    from deltalake import DeltaTable

    from eventtime.sinks import DeltaLateSink, DeltaResultsSink

    rows = [("a \"quoted\" user", 2**53 + 1, "1700000040000"), ("a \"quoted\" user", 2**53 + 1, None)]
    df = spark.createDataFrame(rows, "user_id string, shop bigint, ts string")
    out = df.transform(eventtime.with_event_time("ts", unit="ms", max_future="3650 days")).transform(
        eventtime.window_aggregate(keys=["user_id", "shop"], window=eventtime.Tumbling("1 minute")))
    results, late = str(tmp_path / "results"), str(tmp_path / "late")
    eventtime.route(out, panes=DeltaResultsSink(results, pipeline="k"), late=DeltaLateSink(late, pipeline="k"),
                    pipeline="k").start(end_of_input=True)
    pane_keys = DeltaTable(results).to_pyarrow_table().column("key").to_pylist()
    late_keys = DeltaTable(late).to_pyarrow_table().column("key").to_pylist()
    assert pane_keys == late_keys == ['{"user_id":"a \\"quoted\\" user","shop":9007199254740993}']


@pytest.mark.parametrize("sink", ["DeltaResultsSink", "DeltaLateSink"])
def test_a_sink_path_that_cannot_be_written_is_refused_when_the_sink_is_made(tmp_path, sink):
    from eventtime import sinks

    a_file = tmp_path / "not-a-dir"
    a_file.write_text("x")
    with pytest.raises(ValueError, match=rf"{sink}: the table path .* cannot be written: it is a file"):
        getattr(sinks, sink)(str(a_file), pipeline="p")
    with pytest.raises(ValueError, match=rf"{sink}: the table path .* cannot be written: .*not-a-dir is a file"):
        getattr(sinks, sink)(str(a_file / "late"), pipeline="p")
    getattr(sinks, sink)(str(tmp_path / "new" / "table"), pipeline="p")  # a path to create is fine
    getattr(sinks, sink)("s3://bucket/table", pipeline="p")  # remote: checked by the store at write time
