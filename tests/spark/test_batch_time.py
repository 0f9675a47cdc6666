"""Processing time in a stream: with_event_time's far-future check uses the micro-batch's
timestamp, and that timestamp is not written into Spark's generated code (each batch would
then compile its code again and run it with no JIT profile; eventtime/spark/engine/.../BatchValue.java).
And what every batch would otherwise repeat: the operator's state encoders are resolved once
per JVM, not in every task (ResolvedOnce.java)."""

from __future__ import annotations

import json
import time

import pytest

import eventtime
from codegen_modes import CODEGEN_MODES, codegen_mode

pytestmark = pytest.mark.spark

DAY = 86_400_000
HOUR = 3_600_000
MAX_FUTURE = DAY + 7_013  # unusual, so that no earlier test's generated code is this one's


def _compiles(spark) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


@pytest.fixture(params=sorted(CODEGEN_MODES))
def codegen(request, spark):
    with codegen_mode(spark, request.param) as mode:
        yield mode


def test_far_future_check_uses_the_batch_timestamp_and_later_batches_compile_nothing(spark, tmp_path, codegen):
    source = tmp_path / "in"
    source.mkdir()
    seen: list[dict] = []

    def collect(df, batch_id):
        seen.extend(r.asDict() for r in df.select("id", "__et_reason").collect())

    events = (
        spark.readStream.schema("id string, ts long").option("maxFilesPerTrigger", 1).json(str(source))
        .transform(eventtime.with_event_time("ts", unit="ms", max_future=MAX_FUTURE, min_valid="2000-01-01"))
    )
    compiled_before = _compiles(spark)
    query = events.writeStream.foreachBatch(collect).option("checkpointLocation", str(tmp_path / "chk")).start()
    compiled_after: list[int] = []
    try:
        for batch in range(4):
            now = int(time.time() * 1000)
            # One hour inside and one hour outside "batch timestamp + max_future" (the batch
            # starts after `now` is taken, and well within the hour).
            rows = [{"id": f"{batch}-ok", "ts": now + MAX_FUTURE - HOUR}, {"id": f"{batch}-future", "ts": now + MAX_FUTURE + HOUR},
                    {"id": f"{batch}-past", "ts": now - HOUR}]
            (source / f"{batch}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            query.processAllAvailable()
            compiled_after.append(_compiles(spark))
    finally:
        query.stop()
    reasons = {r["id"]: r["__et_reason"] for r in seen}
    for batch in range(4):
        assert reasons[f"{batch}-ok"] is None and reasons[f"{batch}-past"] is None, reasons
        assert reasons[f"{batch}-future"] == "too_far_in_future", reasons
    # Batches 2 and 3 are planned like batch 1 with another batch timestamp: the same code.
    assert compiled_after[3] == compiled_after[1], f"classes compiled after each batch: {compiled_after}"
    if codegen == "generated":
        assert compiled_after[0] > compiled_before, "the first batch compiled nothing: the metric does not count"


@pytest.mark.slow
def test_window_aggregate_later_batches_compile_nothing(spark, tmp_path, codegen):
    """The same through window_aggregate and route: the map side's fold filter, pushed down to
    the scan, reads the quarantine's bounds from its event time and its class alike (the batch
    timestamp twice in one stage), and no batch after the first writes it into the code."""
    source = tmp_path / "in"
    source.mkdir()
    events = (
        spark.readStream.schema("k string, ts long, x double").option("maxFilesPerTrigger", 1).json(str(source))
        .transform(eventtime.with_event_time("ts", unit="ms", max_future=MAX_FUTURE, min_valid="2000-01-01"))
        .transform(eventtime.window_aggregate(keys=["k"], window=eventtime.Tumbling("1 minute"), allowed_lateness=0,
                                              aggregations=[eventtime.count(), eventtime.sum("x")]))
    )
    panes: list = []
    query = eventtime.route(events, panes=lambda t, b, q: panes.extend(t.to_pylist()), late=lambda t, b, q: None,
                            pipeline="compiles").start(checkpoint=str(tmp_path / "chk"))
    compiled_after: list[int] = []
    try:
        start = int(time.time() * 1000) // 60_000 * 60_000 - 10 * 60_000
        for batch in range(4):
            rows = [{"k": key, "ts": start + batch * 60_000 + i * 1_000, "x": 1.0} for i, key in enumerate("abc")]
            (source / f"{batch}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            query.processAllAvailable()
            compiled_after.append(_compiles(spark))
    finally:
        query.stop()
    assert panes, "no pane: the query did not run"
    assert compiled_after[3] == compiled_after[1], f"classes compiled after each batch: {compiled_after}"


def test_window_aggregate_later_batches_resolve_no_state_encoder(spark, tmp_path):
    """Each task of each batch makes the operator's state variables again; Spark's analyzer
    resolves their encoders in the first batch only (a key of a type no other test uses, so its
    encoders are new to this JVM)."""
    source = tmp_path / "in"
    source.mkdir()
    events = (
        spark.readStream.schema("k decimal(13,7), ts long, x double").option("maxFilesPerTrigger", 1).json(str(source))
        .transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01"))
        .transform(eventtime.window_aggregate(keys=["k"], window=eventtime.Tumbling("1 minute"), allowed_lateness=0,
                                              aggregations=[eventtime.count(), eventtime.sum("x")]))
    )
    resolutions = spark._jvm.eventtime.jvm.Engine.stateEncoderResolutions
    before = resolutions()
    panes: list = []
    query = eventtime.route(events, panes=lambda t, b, q: panes.extend(t.to_pylist()), late=lambda t, b, q: None,
                            pipeline="resolves").start(checkpoint=str(tmp_path / "chk"))
    after: list[int] = []
    try:
        start = 1_700_000_000_000
        for batch in range(4):
            rows = [{"k": key, "ts": start + batch * 60_000 + i * 1_000, "x": 1.0} for i, key in enumerate((1.5, 2.5, 3.5))]
            (source / f"{batch}.json").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
            query.processAllAvailable()
            after.append(resolutions())
    finally:
        query.stop()
    assert [p["count"] for p in panes if p["k"] == 1.5] == [1, 1, 1], panes
    assert after[0] > before, "the first batch resolved no encoder of this key: the count does not count"
    assert after[3] == after[0], f"encoders resolved after each batch: {before} then {after}"
