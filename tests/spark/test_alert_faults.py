"""Sentry unreachable or slow while a real query runs: each batch waits at most the bounded
delay, every record is still written, and the counts are in the log."""

from __future__ import annotations

import json
import logging
import time

import pytest
from sentry_receiver import SentryReceiver, closed_port
from streams import drain, write_json_lines

import eventtime
from eventtime.ops.alerts import Alerter

pytestmark = pytest.mark.spark

MIN = 60_000
T0 = 1_700_000_040_000  # a minute boundary
SEND_TIMEOUT_S = 0.5
NO_PROXY = {"http_proxy": ""}


class _Recording:
    """The real alerter, timed per batch."""

    def __init__(self, alerter: Alerter) -> None:
        self.alerter = alerter
        self.calls: list[tuple[int, float, object]] = []

    def on_batch(self, batch_id, records, stats):
        started = time.perf_counter()
        out = self.alerter.on_batch(batch_id, records, stats)
        self.calls.append((batch_id, time.perf_counter() - started, out))
        return out


def _batches():
    on_time = [{"user_id": f"u{i % 3}", "amount": 1.0, "ts": str(T0 + 10 * MIN + i)} for i in range(6)]
    late = [[{"user_id": f"u{i % 3}", "amount": 1.0, "ts": str(T0 + b * MIN + i)} for i in range(5)] for b in range(3)]
    return [on_time, *late]


@pytest.mark.slow
@pytest.mark.parametrize("server", ["closed_port", "slow"])
def test_unreachable_or_slow_sentry_costs_a_bounded_delay_and_loses_nothing(spark, tmp_path, caplog, server):
    source = tmp_path / "in"
    source.mkdir()
    receiver = SentryReceiver(delay_s=5.0).start() if server == "slow" else None
    dsn = receiver.dsn if receiver else f"http://key@127.0.0.1:{closed_port()}/1"
    alerter = _Recording(Alerter(dsn=dsn, pipeline="faulty", send_timeout_s=SEND_TIMEOUT_S,
                                 late_threshold_count=1, cooldown_s=0, client_options=NO_PROXY))
    written: list = []
    events = spark.readStream.schema("user_id STRING, amount DOUBLE, ts STRING").option("maxFilesPerTrigger", 1).json(str(source))
    out = events.transform(eventtime.with_event_time("ts", unit="ms", max_future="3650 days")).transform(
        eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute"))
    )
    router = eventtime.route(out, late=lambda table, batch_id, qid: written.append(table), alerter=alerter, pipeline="faulty")
    query = router.start(checkpoint=str(tmp_path / "chk"))
    try:
        with caplog.at_level(logging.WARNING, logger="eventtime.ops.alerts"):
            for i, rows in enumerate(_batches()):
                write_json_lines(str(source), f"{i:03d}.json", rows)
                drain(query, i)
        assert query.exception() is None
    finally:
        query.stop()
        alerter.alerter.close()
        if receiver:
            receiver.stop()

    late_written = sum(t.num_rows for t in written)
    assert late_written == 15, "every late record reaches the sink whatever Sentry does"
    late_alerts = [a for _, _, o in alerter.calls for a in o.alerts if a.kind == "late"]
    assert sum(a.count for a in late_alerts) == 15
    assert all(o.error is None for _, _, o in alerter.calls)
    slowest = max(d for _, d, _ in alerter.calls)
    assert slowest < SEND_TIMEOUT_S + 2.0, f"a batch waited {slowest:.2f} s for Sentry"
    logged = [r.getMessage() for r in caplog.records if "late record(s)" in r.getMessage()]
    assert sum(int(m.split("] ")[1].split(" ")[0]) for m in logged) == 15, logged
    payload_ids = sorted(json.loads(p)["ts"] for t in written for p in t.column("payload").to_pylist())
    assert len(set(payload_ids)) == 15
