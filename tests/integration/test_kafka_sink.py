"""KafkaSink against a real broker (pyspark 4.2, where Spark's Kafka connector is served): the
panes and the late and invalid records of a route, made by Spark's tasks and sent by Spark's
Kafka writer, read back from the topics.

* the pane messages hold Spark's batch ``groupBy`` of the valid rows, one per key and window;
  the record messages hold every bogus row's payload, each keyed by its source partition and
  offset (the consumer's key), and the driver gets none of the rows;
* a topic that does not exist is refused before the query starts, naming it;
* at least once, effectively once: the same bounded run sent twice doubles the messages, and
  the consumer's rule of the module docstring (one message per key; the highest
  ``pane_index`` of a pane's key) gives back one run's messages.
"""

from __future__ import annotations

import collections
import json

import pytest

pytestmark = pytest.mark.spark

ROWS = 6_000
PIPELINE = "kflood"


@pytest.fixture(scope="module")
def kafka():
    from eventtime.sources import LocalKafka, broker_jars

    broker_jars()  # fails (never skips) without the broker jars `make install` resolves
    with LocalKafka() as broker:
        for topic in ("panes-once", "late-once", "panes-twice", "late-twice"):
            broker.create_topic(topic, partitions=2)
        yield broker


def _input(spark):
    from pyspark.sql import functions as F

    # 95 % of the rows carry ts = 0 (1970); every row has a source partition and offset
    ts = F.when(F.col("id") % 20 == 0, F.lit(1_700_000_000_000) + F.col("id") * 100).otherwise(F.lit(0))
    return spark.range(ROWS).select(F.concat(F.lit("u"), (F.col("id") % 7).cast("string")).alias("user"),
                                    (F.col("id") % 4).cast("int").alias("part"), F.col("id").alias("off"),
                                    ts.alias("ts")).repartition(3)


def _route(spark, kafka, topics: tuple):
    import eventtime
    from eventtime.sinks import KafkaSink

    out = (_input(spark).transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01",
                                                             max_future="36500 days"))
           .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 second"),
                                                 aggregations=[eventtime.count()], partition_col="part",
                                                 offset_col="off")))
    return eventtime.route(out, panes=KafkaSink(kafka.bootstrap_servers, topics[0], PIPELINE),
                           late=KafkaSink(kafka.bootstrap_servers, topics[1], PIPELINE), pipeline=PIPELINE,
                           progress=False)


def _messages(spark, kafka, topic: str) -> list:
    rows = (spark.read.format("kafka").option("kafka.bootstrap.servers", kafka.bootstrap_servers)
            .option("subscribe", topic).option("startingOffsets", "earliest").option("includeHeaders", "true").load()
            .selectExpr("CAST(key AS STRING) AS key", "CAST(value AS STRING) AS value", "headers").collect())
    return [{"key": r.key, "value": json.loads(r.value),
             "headers": {h.key: bytes(h.value).decode() for h in r.headers}} for r in rows]


def _consumed(messages: list) -> dict:
    """The consumer's rule: per key one message, of a pane the one of the highest pane_index."""
    kept: dict = {}
    for m in messages:
        have = kept.get(m["key"])
        if have is None or m["value"].get("pane_index", 0) > have["value"].get("pane_index", 0):
            kept[m["key"]] = m
    return kept


def test_the_tasks_send_the_panes_and_every_bogus_row_to_kafka(spark, kafka, monkeypatch):
    import eventtime.spark.router as router_module

    monkeypatch.setattr(router_module, "write_on_driver", lambda *a, **k: pytest.fail("rows handed to the driver"))
    topics = ("panes-once", "late-once")
    router = _route(spark, kafka, topics)
    assert router._in_tasks
    stats = router.start(end_of_input=True)
    assert (stats.panes, stats.invalid) == (ROWS // 20, ROWS - ROWS // 20)
    panes, records = _messages(spark, kafka, topics[0]), _messages(spark, kafka, topics[1])
    # the panes: Spark's own batch groupBy of the valid rows
    from pyspark.sql import functions as F

    valid = _input(spark).where("ts > 0").withColumn("t", F.timestamp_millis("ts"))
    expected = {(r.user, r.w.start.strftime("%Y-%m-%dT%H:%M:%S+00:00"), r["count"])
                for r in valid.groupBy("user", F.window("t", "1 second").alias("w")).count().collect()}
    assert {(m["value"]["user"], m["value"]["window_start"], m["value"]["count"]) for m in panes} == expected
    assert len(panes) == len(expected) and all(m["headers"]["kind"] == "pane" for m in panes)
    # the records: every bogus row, keyed by its source partition and offset
    assert len(records) == ROWS - ROWS // 20
    assert {m["key"] for m in records} == {f"{PIPELINE}|{i % 4}|{i}" for i in range(ROWS) if i % 20}
    assert all(m["headers"]["kind"] == "invalid" and m["headers"]["reason"] == "before_min_valid" for m in records)
    payloads = sorted((json.loads(m["value"]["payload"]) for m in records), key=lambda p: p["off"])
    assert payloads == [{"user": f"u{i % 7}", "part": i % 4, "off": i, "ts": 0} for i in range(ROWS) if i % 20]


def test_a_batch_sent_twice_is_consumed_once_by_its_keys(spark, kafka):
    topics = ("panes-twice", "late-twice")
    for _ in range(2):  # at least once: a second run of the same rows sends them all again
        _route(spark, kafka, topics).start(end_of_input=True)
    for topic, one_run in zip(topics, (ROWS // 20, ROWS - ROWS // 20)):
        messages = _messages(spark, kafka, topic)
        assert len(messages) == 2 * one_run
        assert collections.Counter(collections.Counter(m["key"] for m in messages).values()) == {2: one_run}
        consumed = _consumed(messages)
        assert len(consumed) == one_run
        drop = ("query_id", "written_at", "detected_at", "detected_date", "record_id")
        by_key = collections.defaultdict(list)
        for m in messages:
            by_key[m["key"]].append({k: v for k, v in m["value"].items() if k not in drop})
        assert all(a == b for a, b in by_key.values())  # the two messages of a key say the same


def test_a_topic_that_does_not_exist_is_refused_before_the_query_starts(spark, kafka):
    with pytest.raises(ValueError, match=r"KafkaSink\(.*'no-such-topic'.*\): Kafka topic 'no-such-topic' does not "
                                         r"exist on 127\.0\.0\.1:\d+ .*create it.*on write"):
        _route(spark, kafka, ("panes-once", "no-such-topic"))
