"""Alerter: events received by a local Sentry envelope receiver through the real HTTP transport."""

from __future__ import annotations

import logging
import time

import pyarrow as pa
import pytest
import sentry_sdk
from sentry_receiver import SentryReceiver, closed_port

from eventtime.ops.alerts import Alerter
from eventtime.ops.monitor import BatchStats, PartitionStats

NO_PROXY = {"http_proxy": ""}


def late_records(n: int, partitions=("0", "1"), lateness_step=1_000) -> pa.Table:
    return pa.table({
        "kind": ["late"] * n,
        "reason": ["too_late"] * n,
        "key": [f'{{"user":"u{i}"}}' for i in range(n)],
        "raw_timestamp": [f"2024-01-01T00:00:{i % 60:02d}Z" for i in range(n)],
        "lateness_ms": pa.array([lateness_step * (i + 1) for i in range(n)], pa.int64()),
        "partition": [partitions[i % len(partitions)] for i in range(n)],
        "offset": pa.array(range(n), pa.int64()),
        "payload": ['{"user":"u%d","v":%d}' % (i, i) for i in range(n)],
    })


def invalid_records() -> pa.Table:
    raws = ["0", "0", "1970-01-01T00:00:00Z", "2999-12-31T00:00:00Z", None]
    reasons = ["before_min_valid", "before_min_valid", "before_min_valid", "too_far_in_future", "null_timestamp"]
    return pa.table({
        "kind": ["invalid"] * 5, "reason": reasons, "raw_timestamp": raws,
        "lateness_ms": pa.array([None] * 5, pa.int64()), "partition": ["2"] * 5, "payload": ["{}"] * 5,
    })


def stats(batch_id, rows_in, late=0, invalid=0, partitions=None, watermark_ms=None):
    return BatchStats(batch_id, rows_in, 0, late, invalid, watermark_ms, partitions or {})


@pytest.fixture
def receiver():
    with SentryReceiver() as rx:
        yield rx


class FakeClock:
    def __init__(self):
        self.now = 1000.0

    def __call__(self):
        return self.now


def test_late_alert_is_one_aggregated_event_with_fingerprint_tags_counts_samples(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", environment="staging", max_samples=3,
                      client_options=NO_PROXY)
    try:
        out = alerter.on_batch(7, late_records(40), stats(7, rows_in=200, late=40))
        assert out.error is None
        assert [(a.kind, a.reason, a.count, a.sent) for a in out.alerts] == [("late", "too_late", 40, True)]
        events = receiver.wait_for(1)
        time.sleep(0.2)
        assert len(receiver.events) == 1  # never one event per record
        ev = events[0]
        assert ev["fingerprint"] == ["eventtime", "orders", "late", "too_late"]
        assert ev["environment"] == "staging"
        assert ev["tags"]["pipeline"] == "orders"
        assert ev["tags"]["eventtime.reason"] == "too_late"
        assert ev["level"] == "warning"
        data = ev["contexts"]["eventtime"]
        assert data["count"] == 40 and data["rows_in"] == 200 and data["share"] == pytest.approx(0.2)
        assert data["max_lateness_ms"] == 40_000
        assert ev["message"] == ("[orders] 40 late record(s) in batch 7, too late for all their windows (20.0% of 200 rows), "
                                 "max lateness 40 s, partitions 0, 1")  # durations for people, raw ms in the data
        assert data["partitions"] == ["0", "1"]
        assert data["batch_id"] == 7
        assert len(data["samples"]) == 3
        assert data["samples"][0]["key"] == '{"user":"u0"}' and data["samples"][0]["lateness_ms"] == 1000
        assert "40 late record(s)" in ev["message"] and "orders" in ev["message"]
        assert receiver.requests[0]["path"] == "/api/42/envelope/"
    finally:
        alerter.close()


def test_bogus_timestamp_alerts_carry_raw_values(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", client_options=NO_PROXY)
    try:
        out = alerter.on_batch(1, invalid_records(), stats(1, rows_in=5, invalid=5))
        assert sorted((a.reason, a.count) for a in out.alerts) == [
            ("before_min_valid", 3), ("null_timestamp", 1), ("too_far_in_future", 1)]
        events = {e["fingerprint"][3]: e for e in receiver.wait_for(3)}
        assert set(events) == {"before_min_valid", "null_timestamp", "too_far_in_future"}
        assert events["before_min_valid"]["fingerprint"] == ["eventtime", "orders", "invalid", "before_min_valid"]
        raw = events["before_min_valid"]["contexts"]["eventtime"]["raw_values"]
        assert raw == [{"raw_timestamp": "0", "count": 2}, {"raw_timestamp": "1970-01-01T00:00:00Z", "count": 1}]
        assert "2999-12-31" in events["too_far_in_future"]["message"]
    finally:
        alerter.close()


def test_threshold_and_cooldown_bound_a_storm(receiver):
    clock = FakeClock()
    alerter = Alerter(dsn=receiver.dsn, pipeline="storm", late_threshold_count=5, late_threshold_share=0.01,
                      cooldown_s=60, clock=clock, client_options=NO_PROXY)
    try:
        sent = []
        # below the count threshold: nothing
        assert alerter.on_batch(0, late_records(4), stats(0, rows_in=10)).alerts == ()
        # below the share threshold (5 of 1000 = 0.5% < 1%): nothing
        assert alerter.on_batch(1, late_records(5), stats(1, rows_in=1000)).alerts == ()
        # a storm: 100 batches of 50 late records, 10 s apart -> 1000 s -> at most 17 events
        for b in range(2, 102):
            out = alerter.on_batch(b, late_records(50), stats(b, rows_in=100))
            sent.extend(a for a in out.alerts if a.sent)
            clock.now += 10
        assert len(sent) == 17  # t = 0, 60, ..., 960
        assert sent[0].suppressed_count == 0
        assert sent[1].suppressed_count == 5 * 50 and sent[1].data["suppressed_batches"] == 5
        events = receiver.wait_for(17)
        time.sleep(0.2)
        assert len(receiver.events) == 17
        assert events[1]["contexts"]["eventtime"]["suppressed_count"] == 250
        assert "suppressed by the cooldown" in events[1]["message"]
        # total reported = sent counts + carried counts covers the whole storm except the tail
        reported = sum(a.count + a.suppressed_count for a in sent)
        assert reported == 100 * 50 - 3 * 50  # the 3 batches after the last event are still pending
    finally:
        alerter.close()


def test_cooldown_is_per_reason(receiver):
    clock = FakeClock()
    alerter = Alerter(dsn=receiver.dsn, pipeline="p", cooldown_s=300, clock=clock, client_options=NO_PROXY)
    try:
        alerter.on_batch(0, late_records(2), stats(0, 10))
        out = alerter.on_batch(1, invalid_records(), stats(1, 10))
        assert all(a.sent for a in out.alerts)  # other reasons are not held back by too_late's cooldown
        out = alerter.on_batch(2, late_records(2), stats(2, 10))
        assert [a.suppressed for a in out.alerts] == [True]
        assert len(receiver.wait_for(4)) == 4
    finally:
        alerter.close()


def test_partition_skew_alert_names_partition_and_lag(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="p", partition_lag_ms=60_000, client_options=NO_PROXY)
    try:
        parts = {"0": PartitionStats(10_000_000, 50), "1": PartitionStats(10_000_000 - 300_000, 50),
                 "2": PartitionStats(10_000_000 - 30_000, 50)}
        out = alerter.on_batch(3, None, stats(3, 150, partitions=parts))
        assert [(a.kind, a.reason) for a in out.alerts] == [("partition_lag", "1")]
        ev = receiver.wait_for(1)[0]
        assert ev["fingerprint"] == ["eventtime", "p", "partition_lag", "1"]
        assert ev["contexts"]["eventtime"]["lag_ms"] == 300_000
        assert ev["message"] == (
            "[p] partition 1 lags the global max event time by 5 min (threshold 1 min) (batch 3); the global watermark "
            "follows the fastest partitions: its records whose windows end more than the allowed lateness behind the "
            "watermark are late (watermark='per_partition' waits for it instead)")
        m = alerter.monitor.metrics()
        assert m["1"]["lag_ms"] == 300_000 and m["1"]["lagging"] and not m["2"]["lagging"]
        assert out.metrics.keys() == m.keys() == {"0", "1", "2"}
        assert {k: v["lag_ms"] for k, v in out.metrics.items()} == {"0": 0, "1": 300_000, "2": 30_000}
    finally:
        alerter.close()


def test_default_lag_threshold_is_the_out_of_orderness():
    # watermark = global max - 2 min: a partition more than 2 min behind is lagging
    alerter = Alerter(dsn=None, pipeline="p")
    parts = {"0": PartitionStats(1_000_000, 5), "1": PartitionStats(1_000_000 - 150_000, 5),
             "2": PartitionStats(1_000_000 - 90_000, 5)}
    out = alerter.on_batch(0, None, stats(0, 15, partitions=parts, watermark_ms=1_000_000 - 120_000))
    assert [(a.kind, a.reason, a.data["threshold_ms"]) for a in out.alerts] == [("partition_lag", "1", 120_000)]


def test_idle_partition_alert():
    clock = FakeClock()
    alerter = Alerter(dsn=None, pipeline="p", idle_timeout_s=30, clock=clock)
    alerter.on_batch(0, None, stats(0, 2, partitions={"0": PartitionStats(1000, 1), "1": PartitionStats(1000, 1)}))
    clock.now += 45
    out = alerter.on_batch(1, None, stats(1, 1, partitions={"0": PartitionStats(2000, 1)}))
    assert [(a.kind, a.reason) for a in out.alerts] == [("partition_idle", "1")]
    assert "sent no rows for 45.0 s" in out.alerts[0].message


def test_no_dsn_logs_only(caplog, monkeypatch):
    monkeypatch.delenv("SENTRY_DSN", raising=False)
    alerter = Alerter(pipeline="quiet")
    assert not alerter.enabled
    with caplog.at_level(logging.WARNING, logger="eventtime.ops.alerts"):
        out = alerter.on_batch(0, late_records(3), stats(0, 10))
    assert [(a.sent, a.count) for a in out.alerts] == [(False, 3)]
    assert any("3 late record(s)" in r.getMessage() and "quiet" in r.getMessage() for r in caplog.records)


def test_a_malformed_sentry_dsn_in_the_environment_is_named(monkeypatch):
    monkeypatch.setenv("SENTRY_DSN", "not a dsn")
    with pytest.raises(ValueError) as info:
        Alerter(pipeline="env")
    message = str(info.value)
    assert message.startswith("the environment variable SENTRY_DSN is not a valid Sentry DSN ('not a dsn')"), message
    assert "unset it to log alerts only" in message
    with pytest.raises(ValueError, match=r"^dsn is not a valid Sentry DSN \('also not'\)"):
        Alerter(dsn="also not", pipeline="param")


def test_dsn_from_environment(receiver, monkeypatch):
    monkeypatch.setenv("SENTRY_DSN", receiver.dsn)
    alerter = Alerter(pipeline="env", client_options=NO_PROXY)
    try:
        assert alerter.enabled
        alerter.on_batch(0, late_records(1), stats(0, 1))
        assert receiver.wait_for(1)[0]["tags"]["pipeline"] == "env"
    finally:
        alerter.close()


@pytest.mark.parametrize("dsn", ["not a dsn", "ftp://key@host/1", "http://host/1", "http://key@host/notaproject"])
def test_malformed_dsn_is_a_configuration_error(dsn):
    with pytest.raises(ValueError, match="dsn"):
        Alerter(dsn=dsn)


def test_bad_config_values_name_the_parameter():
    with pytest.raises(ValueError, match="late_threshold_share"):
        Alerter(late_threshold_share=1.5)
    with pytest.raises(TypeError, match="late_threshold_count"):
        Alerter(late_threshold_count=2.0)
    with pytest.raises(ValueError, match="cooldown_s"):
        Alerter(cooldown_s=-1)
    with pytest.raises(TypeError, match="partition_lag_ms"):
        Alerter(partition_lag_ms=2.5)
    assert Alerter(partition_lag_ms="5 minutes").partition_lag_ms == 300_000


def test_closed_port_returns_within_the_bounded_delay():
    alerter = Alerter(dsn=f"http://key@127.0.0.1:{closed_port()}/1", send_timeout_s=1.0, client_options=NO_PROXY)
    try:
        started = time.perf_counter()
        out = alerter.on_batch(0, late_records(10), stats(0, 10))
        elapsed = time.perf_counter() - started
        assert out.error is None and out.alerts[0].count == 10
        assert elapsed < 5.0  # bounded by send_timeout_s (1 s) plus scheduling slack
    finally:
        alerter.close()


def test_slow_server_does_not_block_the_batch():
    with SentryReceiver(delay_s=4.0) as slow:
        alerter = Alerter(dsn=slow.dsn, send_timeout_s=0.5, client_options=NO_PROXY)
        started = time.perf_counter()
        out = alerter.on_batch(0, late_records(10), stats(0, 10))
        elapsed = time.perf_counter() - started
        assert out.error is None and out.alerts[0].sent
        assert elapsed < 3.0  # far below the server's 4 s delay


def test_errors_inside_alerting_are_logged_not_raised(caplog):
    alerter = Alerter(dsn=None)
    with caplog.at_level(logging.WARNING, logger="eventtime.ops.alerts"):
        out = alerter.on_batch(0, "not a table", stats(0, 1))
    assert out.error and "records must be a pyarrow.Table" in out.error
    assert any("alerting failed" in r.getMessage() for r in caplog.records)


def test_does_not_touch_the_users_sentry_setup(receiver):
    """The application's own Sentry client keeps working and gets none of our events or tags."""
    with SentryReceiver() as user_rx:
        sentry_sdk.init(dsn=user_rx.dsn, default_integrations=False, http_proxy="")
        try:
            user_client = sentry_sdk.get_client()
            alerter = Alerter(dsn=receiver.dsn, pipeline="ours", client_options=NO_PROXY)
            alerter.on_batch(0, late_records(1), stats(0, 1))
            alerter.close()
            assert sentry_sdk.get_client() is user_client
            sentry_sdk.capture_message("the application's own message")
            sentry_sdk.flush(timeout=5)
            user_events = user_rx.wait_for(1)
            assert [e.get("message") or e.get("logentry", {}).get("message") for e in user_events] == [
                "the application's own message"]
            assert "pipeline" not in user_events[0].get("tags", {})
            ours = receiver.wait_for(1)
            assert len(ours) == 1 and ours[0]["tags"]["pipeline"] == "ours"
        finally:
            sentry_sdk.get_client().close(timeout=1)
            sentry_sdk.get_global_scope().set_client(None)


def test_pipeline_failure_is_one_error_event(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", send_timeout_s=5)
    alert = alerter.on_failure(RuntimeError("[CANNOT_LOAD_STATE_STORE] An error occurred during loading state."), checkpoint="/cp")
    alerter.close()
    assert alert.sent and alert.kind == "pipeline_failed"
    (event,) = receiver.wait_for(1)
    assert event["level"] == "error"
    assert event["fingerprint"] == ["eventtime", "orders", "pipeline_failed", "RuntimeError"]
    message = event["message"]["formatted"] if isinstance(event["message"], dict) else event["message"]
    assert "CANNOT_LOAD_STATE_STORE" in message
    assert event["contexts"]["eventtime"]["checkpoint"] == "/cp"


def test_route_sets_the_default_lag_threshold_to_the_configured_out_of_orderness():
    """The watermark a batch reports is the one from before it (Spark's), so ``global max -
    watermark`` is B plus the batch's progress: a partition 90 s behind with B = 60 s went
    unreported. With the pipeline's B (given by route) it is reported, threshold 60 s."""
    alerter = Alerter(dsn=None, pipeline="p")
    alerter.use_pipeline_defaults(60_000)
    parts = {"0": PartitionStats(1_000_000, 5), "3": PartitionStats(1_000_000 - 90_000, 5)}
    out = alerter.on_batch(0, None, stats(0, 10, partitions=parts, watermark_ms=1_000_000 - 180_000))
    assert [(a.kind, a.reason, a.data["threshold_ms"]) for a in out.alerts] == [("partition_lag", "3", 60_000)]
    explicit = Alerter(dsn=None, pipeline="p", partition_lag_ms=120_000)
    explicit.use_pipeline_defaults(60_000)  # an explicit threshold wins
    assert explicit.on_batch(0, None, stats(0, 10, partitions=parts, watermark_ms=1_000_000 - 180_000)).alerts == ()


def test_malformed_records_are_not_called_bogus_timestamps(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", client_options=NO_PROXY)
    try:
        table = pa.table({"kind": ["invalid"] * 2, "reason": ["malformed_record"] * 2, "raw_timestamp": [None, "x"],
                          "lateness_ms": pa.array([None] * 2, pa.int64()), "partition": ["1"] * 2, "payload": ["{}"] * 2})
        out = alerter.on_batch(1, table, stats(1, rows_in=2, invalid=2))
        assert [(a.reason, a.count) for a in out.alerts] == [("malformed_record", 2)]
        (event,) = receiver.wait_for(1)
        message = event["message"]["formatted"] if isinstance(event["message"], dict) else event["message"]
        assert "2 malformed record(s) (the source could not parse the row)" in message
        assert "bogus timestamps" not in message
        assert event["fingerprint"] == ["eventtime", "orders", "invalid", "malformed_record"]
    finally:
        alerter.close()


# The text a StreamingQueryListener gets when a sink raised inside foreachBatch (shortened).
LISTENER_TEXT = """org.apache.spark.sql.execution.streaming.sources.ForeachBatchUserFuncException: \
[FOREACH_BATCH_USER_FUNCTION_ERROR] An error occurred in the user provided function in foreach batch sink. \
Reason: An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):
  File "/app/eventtime/spark/transforms.py", line 671, in _handle
    self.panes_sink(panes, batch_id, qid)
  File "/app/job.py", line 9, in write
    raise WarehouseDown("the results database refused the write")
job.WarehouseDown: the results database refused the write
 SQLSTATE: 39000
\tat org.apache.spark.sql.execution.streaming.sources.ForeachBatchSink.callBatchWriter(ForeachBatchSink.scala:56)
"""


def test_a_query_failure_is_fingerprinted_by_its_innermost_class_not_the_wrapper(receiver):
    """The listener's text (or query.exception()) used to be fingerprinted 'error' /
    'StreamingQueryException': every failure of every kind in one Sentry issue."""
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", send_timeout_s=5, client_options=NO_PROXY)
    try:
        alert = alerter.on_failure(LISTENER_TEXT, checkpoint="/cp")
        (event,) = receiver.wait_for(1)
    finally:
        alerter.close()
    assert alert.reason == "WarehouseDown"
    assert event["fingerprint"] == ["eventtime", "orders", "pipeline_failed", "WarehouseDown"]
    message = event["message"]["formatted"] if isinstance(event["message"], dict) else event["message"]
    assert message == "[orders] pipeline stopped: WarehouseDown: the results database refused the write"


def test_the_same_stop_reported_twice_is_one_event_but_a_later_failure_is_sent_again():
    """route reports a stop with its run id; the caller's own report of it is dropped. A failure
    of the same class an hour later (the query was restarted) was dropped forever."""
    clock = FakeClock()
    alerter = Alerter(dsn=None, pipeline="p", cooldown_s=0, clock=clock)
    assert alerter.on_failure(LISTENER_TEXT, checkpoint="/cp", run_id="run-1").sent is False  # logged: no DSN
    assert alerter.on_failure(RuntimeError("x"), checkpoint="/cp") is not None  # another class: another failure
    clock.now += 1
    assert alerter.on_failure(LISTENER_TEXT, checkpoint="/cp") is None  # the caller's report of route's
    assert alerter.on_failure(LISTENER_TEXT, checkpoint="/cp", run_id="run-1") is None  # the same run
    assert alerter.on_failure(LISTENER_TEXT, checkpoint="/cp", run_id="run-2") is not None  # a restart failed again
    clock.now += 3600
    later = alerter.on_failure(LISTENER_TEXT, checkpoint="/cp")
    assert later is not None and later.kind == "pipeline_failed" and later.reason == "WarehouseDown"
    assert alerter.on_failure(LISTENER_TEXT, checkpoint="/other") is not None  # another pipeline run


def test_malformed_record_alerts_show_the_raw_lines(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", client_options=NO_PROXY)
    try:
        payloads = ['{"id": null, "_corrupt_record": "this is not json id=32"}',
                    '{"id": null, "_corrupt_record": "{\\"id\\": 31, \\"ts\\": "}', "{}"]
        table = pa.table({"kind": ["invalid"] * 3, "reason": ["malformed_record"] * 3, "raw_timestamp": [None] * 3,
                          "lateness_ms": pa.array([None] * 3, pa.int64()), "partition": ["1"] * 3, "payload": payloads})
        (alert,) = alerter.on_batch(1, table, stats(1, rows_in=10, invalid=3)).alerts
        (event,) = receiver.wait_for(1)
    finally:
        alerter.close()
    assert alert.data["raw_lines"] == ["this is not json id=32", '{"id": 31, "ts": ']
    assert "raw_values" not in alert.data  # no timestamp was read: no raw timestamp values
    message = event["message"]["formatted"] if isinstance(event["message"], dict) else event["message"]
    assert message.startswith("[orders] 3 malformed record(s) (the source could not parse the row) quarantined in batch 1")
    assert "'this is not json id=32'" in message
    assert event["contexts"]["eventtime"]["raw_lines"] == alert.data["raw_lines"]


def test_per_partition_watermark_alerts_idle_active_and_holdback(receiver):
    import dataclasses

    alerter = Alerter(dsn=receiver.dsn, pipeline="p", holdback_threshold_ms="1 minute", client_options=NO_PROXY)
    try:
        base = stats(5, 10, watermark_ms=1_000_000)
        idle = dataclasses.replace(base, idle_partitions=("3",), became_idle=("3",), holdback_ms=60_001)
        out = alerter.on_batch(5, None, idle)
        assert [(a.kind, a.reason) for a in out.alerts] == [("watermark_idle", "3"), ("watermark_holdback", "")]
        events = {tuple(e["fingerprint"]): e for e in receiver.wait_for(2)}
        assert set(events) == {("eventtime", "p", "watermark_idle", "3"), ("eventtime", "p", "watermark_holdback", "")}
        assert "partition 3 is idle" in events[("eventtime", "p", "watermark_idle", "3")]["message"]
        held = events[("eventtime", "p", "watermark_holdback", "")]
        assert held["contexts"]["eventtime"]["holdback_ms"] == 60_001 and held["contexts"]["eventtime"]["threshold_ms"] == 60_000
        # at the threshold: no hold-back alert; a partition back from idleness is reported
        back = dataclasses.replace(base, batch_id=6, became_active=("3",), holdback_ms=60_000)
        out = alerter.on_batch(6, None, back)
        assert [(a.kind, a.reason) for a in out.alerts] == [("watermark_active", "3")]
        assert receiver.wait_for(3)[-1]["level"] == "info"
    finally:
        alerter.close()


def test_the_default_holdback_threshold_is_twice_the_out_of_orderness():
    import dataclasses

    alerter = Alerter(pipeline="p")
    alerter.use_pipeline_defaults(10_000)
    out = alerter.on_batch(1, None, dataclasses.replace(stats(1, 1), holdback_ms=20_001))
    assert [a.kind for a in out.alerts] == ["watermark_holdback"]
    assert not alerter.on_batch(2, None, dataclasses.replace(stats(2, 1), holdback_ms=20_000)).alerts
    with pytest.raises(ValueError, match="holdback_threshold_ms"):
        Alerter(pipeline="p", holdback_threshold_ms=-1)


def _enrichment(failed, rows=100, on_failure="null", **reasons):
    return {"rows": rows, "failed": failed, "timeout": 0, "lookup_error": 0, "missing": 0, "bad_result": 0,
            "bad_value": 0, "requests": 12, "retries": 4, "cache_hits": 30, **reasons, "on_failure": on_failure}


def test_enrichment_failures_alert_per_output_column_with_reasons(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", client_options=NO_PROXY)
    try:
        batch = BatchStats(3, 100, 0, 0, 0, None, {}, enrichment={
            "profile": _enrichment(7, timeout=5, lookup_error=2),
            "price": _enrichment(0),  # nothing failed
            "geo": _enrichment(9, on_failure="invalid", timeout=9),  # invalid records: alerted as such
        })
        out = alerter.on_batch(3, None, batch)
        assert [(a.kind, a.reason, a.count) for a in out.alerts] == [("enrichment_failed", "profile", 7)]
        (event,) = receiver.wait_for(1)
        assert event["fingerprint"] == ["eventtime", "orders", "enrichment_failed", "profile"]
        context = event["contexts"]["eventtime"]
        assert context["reasons"] == {"timeout": 5, "lookup_error": 2} and context["retries"] == 4
        message = event["message"]["formatted"] if isinstance(event["message"], dict) else event["message"]
        assert "failed for 7 of 100 record(s)" in message and "timeout 5, lookup_error 2" in message
    finally:
        alerter.close()


def test_enrichment_failure_alerts_follow_the_thresholds():
    alerter = Alerter(dsn=None, pipeline="p", late_threshold_count=5, late_threshold_share=0.1)
    below_count = BatchStats(0, 10, 0, 0, 0, None, {}, enrichment={"profile": _enrichment(4, rows=10, timeout=4)})
    below_share = BatchStats(1, 100, 0, 0, 0, None, {}, enrichment={"profile": _enrichment(6, rows=100, timeout=6)})
    above = BatchStats(2, 100, 0, 0, 0, None, {}, enrichment={"profile": _enrichment(11, rows=100, timeout=11)})
    assert alerter.on_batch(0, None, below_count).alerts == ()
    assert alerter.on_batch(1, None, below_share).alerts == ()
    assert [a.count for a in alerter.on_batch(2, None, above).alerts] == [11]


def test_enrichment_failed_records_are_not_called_bogus_timestamps():
    table = pa.table({"kind": ["invalid"] * 2, "reason": ["enrichment_failed"] * 2, "raw_timestamp": ["1", "2"],
                      "lateness_ms": pa.array([None] * 2, pa.int64()), "partition": ["1"] * 2,
                      "payload": ['{"profile":null,"profile_error":"timeout"}'] * 2})
    (alert,) = Alerter(dsn=None, pipeline="p").on_batch(0, table, stats(0, rows_in=2, invalid=2)).alerts
    assert (alert.kind, alert.reason, alert.count) == ("invalid", "enrichment_failed", 2)
    assert "whose async enrichment failed" in alert.message and "bogus timestamps" not in alert.message
    assert '"profile_error":"timeout"' in alert.data["samples"][0]["payload"]


def test_rows_a_sink_refused_are_one_error_event_per_batch_and_sink(receiver):
    alerter = Alerter(dsn=receiver.dsn, pipeline="orders", client_options=NO_PROXY, max_samples=2)
    try:
        refused = {"postgres table totals": tuple((i, {"user": f"u{i}"}, "NumericValueOutOfRange: smallint out of range")
                                                  for i in (4, 9, 17))}
        out = alerter.on_batch(5, None, BatchStats(5, 40, 30, 0, 0, None, {}, rejected=refused))
        assert [(a.kind, a.reason, a.count) for a in out.alerts] == [("rows_rejected", "postgres table totals", 3)]
        (event,) = receiver.wait_for(1)
        assert event["fingerprint"] == ["eventtime", "orders", "rows_rejected", "postgres table totals"]
        assert event["level"] == "error"
        context = event["contexts"]["eventtime"]
        assert context["count"] == 3 and [s["row_index"] for s in context["samples"]] == [4, 9]
        message = event["message"]["formatted"] if isinstance(event["message"], dict) else event["message"]
        assert "refused 3 row(s) of batch 5, e.g. row 4" in message and "the rest of the batch was written" in message
        assert alerter.on_batch(6, None, BatchStats(6, 40, 30, 0, 0, None, {})).alerts == ()
    finally:
        alerter.close()
