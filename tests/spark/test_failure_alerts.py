"""pipeline_failed: route reports each failure of its query once, by the innermost error class,
whatever else reports it; a later failure after a restart is reported again."""

from __future__ import annotations

import time

import pytest
from sentry_receiver import SentryReceiver
from streams import write_json_lines

import eventtime
from eventtime.ops.alerts import Alerter

pytestmark = pytest.mark.spark
T0 = 1_700_000_040_000


class WarehouseDown(Exception):
    pass


def _failures(receiver, count: int, timeout_s: float = 30) -> list:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = [e for e in receiver.events if e["fingerprint"][:3] == ["eventtime", "fails", "pipeline_failed"]]
        if len(found) >= count:
            break
        time.sleep(0.1)
    time.sleep(1.0)  # and nothing more arrives
    return [e for e in receiver.events if e["fingerprint"][:3] == ["eventtime", "fails", "pipeline_failed"]]


def test_each_failure_is_one_event_by_its_inner_class_and_a_restart_that_fails_again_is_reported(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()

    def results_sink(table, batch_id, query_id):
        raise WarehouseDown("the results database refused the write")

    checkpoint = str(tmp_path / "chk")
    with SentryReceiver() as receiver:
        alerter = Alerter(dsn=receiver.dsn, pipeline="fails", cooldown_s=0, send_timeout_s=5, client_options={"http_proxy": ""})
        try:
            events = spark.readStream.schema("user_id STRING, ts STRING").json(str(source))
            out = events.transform(eventtime.with_event_time("ts", unit="ms", max_future="3650 days")).transform(
                eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute")))
            router = eventtime.route(out, panes=results_sink, alerter=alerter, pipeline="fails")
            query = router.start(checkpoint=checkpoint)
            write_json_lines(str(source), "b0.json", [{"user_id": "u1", "ts": str(T0)}])
            with pytest.raises(Exception):
                query.awaitTermination(120)
            assert router.wait_failure_reported(30)
            assert router.failure.error_class == "WarehouseDown"
            # What a job (or the demo) did before route reported by itself: one more report of the
            # same stop, with PySpark's StreamingQueryException. It adds nothing.
            assert alerter.on_failure(query.exception(), checkpoint=checkpoint) is None
            first = _failures(receiver, 1)
            assert len(first) == 1, receiver.events

            # The job restarts the query; batch 0 runs again and fails again: a second failure.
            query = router.start(checkpoint=checkpoint)
            with pytest.raises(Exception):
                query.awaitTermination(120)
            assert router.wait_failure_reported(30)
            both = _failures(receiver, 2)
        finally:
            alerter.close()
    assert len(both) == 2, receiver.events
    assert [e["fingerprint"][3] for e in both] == ["WarehouseDown", "WarehouseDown"]
    assert all(e["level"] == "error" and e["contexts"]["eventtime"]["checkpoint"] == checkpoint for e in both)
    runs = [e["contexts"]["eventtime"]["run_id"] for e in both]
    assert runs[0] != runs[1] and all(runs)
    message = both[0]["message"]["formatted"] if isinstance(both[0]["message"], dict) else both[0]["message"]
    assert message == "[fails] pipeline stopped: WarehouseDown: the results database refused the write"
    assert not spark.streams.active
