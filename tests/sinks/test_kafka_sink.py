"""KafkaSink's messages (eventtime/sinks/kafka.py), made without a broker: what each row's key,
value and headers are, that keys are the same in every run of a batch, and that the sink is
refused with what to do before a query starts. The writes to a real broker are
tests/integration/test_kafka_sink.py's (pyspark 4.2, where Spark's Kafka connector is served)."""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest

from eventtime.sinks import KafkaSink
from eventtime.sinks.kafka import MESSAGE_SCHEMA

W = dt.datetime(2024, 1, 1, tzinfo=dt.timezone.utc)
NOW = dt.datetime(2026, 12, 7, 12, tzinfo=dt.timezone.utc)


def _panes() -> pa.Table:
    return pa.table({"user": ["a", None], "window_start": [W, W], "window_end": [W + dt.timedelta(minutes=1)] * 2,
                     "pane_timing": ["ON_TIME", "LATE"], "pane_index": [0, 1], "is_final": [False, True],
                     "count": [3, 4]})


def _records() -> pa.Table:
    ts = pa.timestamp("us", tz="UTC")
    return pa.table({"kind": ["late", "invalid"], "reason": ["too_late", "before_min_valid"],
                     "key": ['{"user":"a"}', '{"user":"b"}'], "user": ["a", "b"],
                     "event_time": pa.array([W, None], ts), "raw_timestamp": [None, "0"],
                     "watermark": pa.array([W + dt.timedelta(minutes=5), None], ts),
                     "lateness_ms": pa.array([300_000, None], pa.int64()),
                     "partition": ["3", None], "offset": pa.array([17, None], pa.int64()),
                     "payload": ['{"user": "a", "ts": 1704067200000}', '{"user": "b", "ts": 0}']})


def _headers(message: dict) -> dict:
    return {h["key"]: h["value"].decode() for h in message["headers"]}


def test_a_pane_message_is_the_results_row_keyed_by_its_window():
    messages = KafkaSink("127.0.0.1:9092", "panes", "clicks")._prepare(_panes(), 4, "q1", NOW)
    assert messages.schema == MESSAGE_SCHEMA
    first, second = messages.to_pylist()
    assert first["key"] == 'clicks|{"user":"a"}|2024-01-01T00:00:00Z|2024-01-01T00:01:00Z'
    assert second["key"] == 'clicks|{"user":null}|2024-01-01T00:00:00Z|2024-01-01T00:01:00Z'
    value = json.loads(second["value"])
    assert (value["user"], value["pane_timing"], value["pane_index"], value["is_final"], value["count"]) == \
        (None, "LATE", 1, True, 4)
    assert (value["pipeline"], value["query_id"], value["batch_id"]) == ("clicks", "q1", 4)
    assert _headers(second) == {"pipeline": "clicks", "query_id": "q1", "batch_id": "4", "kind": "pane",
                                "pane_timing": "LATE"}


def test_a_record_message_is_keyed_by_its_source_offset_or_its_content():
    sink = KafkaSink("127.0.0.1:9092", "late", "clicks")
    late, invalid = sink._prepare(_records(), 4, "q1", NOW).to_pylist()
    assert late["key"] == "clicks|3|17"
    assert invalid["key"].startswith("clicks|sha256:") and len(invalid["key"]) == len("clicks|sha256:") + 64
    assert json.loads(invalid["value"])["payload"] == '{"user": "b", "ts": 0}'
    assert _headers(late) == {"pipeline": "clicks", "query_id": "q1", "batch_id": "4", "kind": "late",
                              "reason": "too_late", "watermark": "2024-01-01T00:05:00Z"}
    assert "watermark" not in _headers(invalid)
    # the batch again (a re-run after a crash, at another time, in other tasks): the same keys
    again = sink._prepare(_records(), 4, "q1", NOW + dt.timedelta(hours=1), id_prefix="1-1.0.").column("key")
    assert again.to_pylist() == [late["key"], invalid["key"]]


def test_no_rows_make_no_messages_of_the_same_schema():
    sink = KafkaSink("127.0.0.1:9092", "late", "clicks")
    assert sink._prepare(_records().slice(0, 0), 0, "q", NOW).schema == MESSAGE_SCHEMA
    assert sink._prepare(_panes().slice(0, 0), 0, "q", NOW).num_rows == 0


@pytest.mark.parametrize("args, kwargs, error, match", [
    ((None, "t", "p"), {}, TypeError, "bootstrap_servers must be a str"),
    (("h:1", "", "p"), {}, ValueError, "topic must not be empty"),
    (("h:1", "t", 3), {}, TypeError, "pipeline must be a str"),
    (("h:1", "t", "p"), {"options": {"linger.ms": 5}}, TypeError, "options must be a mapping of str to str"),
    (("h:1", "t", "p"), {"key_columns": "user"}, TypeError, "key_columns must be a sequence"),
])
def test_a_bad_argument_is_refused_naming_it(args, kwargs, error, match):
    with pytest.raises(error, match=match):
        KafkaSink(*args, **kwargs)


@pytest.mark.spark
def test_a_session_without_the_kafka_connector_is_refused_before_the_query_starts(spark):
    sink = KafkaSink("127.0.0.1:9092", "t", "p")
    try:
        spark._jvm.java.lang.Class.forName("org.apache.spark.sql.kafka010.KafkaSourceProvider")
    except Exception:  # noqa: BLE001 - a Spark session without the connector (pyspark 4.3)
        with pytest.raises(ValueError, match=r"no Kafka connector.*local_session\(kafka=True\)"):
            sink.bind_route(spark)
    else:
        sink.bind_route(spark)
        assert sink.spark is spark
