"""A streaming job that reads a Kafka topic: per-partition watermarks, late data to Delta.

    python examples/kafka_job.py --bootstrap-servers 127.0.0.1:9092 --topic events --output kafka-output

Needs the pyspark 4.2 environment (``.venv-spark4.2``): Maven Central serves Spark's Kafka
source (``spark-sql-kafka-0-10_2.13``) only up to 4.2.0, and ``eventtime.local_session(kafka=True)``
says so on 4.3. Each Kafka record's value is a JSON object (``user_id``, ``amount``, ``ts`` in
epoch ms). The job counts and sums ``amount`` per user in 10-second tumbling windows with 5
seconds of allowed lateness, with one watermark per Kafka partition (``watermark="per_partition"``:
a lagging partition's records are judged by its own progress; a partition silent for
``--idle-timeout`` no longer holds the watermark back), and writes panes to
``OUTPUT/results`` and late and invalid records to ``OUTPUT/late`` (Delta tables), with its
checkpoint in ``OUTPUT/checkpoint``. It runs until the topic is drained (``availableNow``);
run it again and it resumes from the checkpoint.

The topic is read with :func:`eventtime.sources.read_kafka_json`. Every late or invalid row
carries the Kafka ``partition`` and ``offset`` of its record. A value that is not JSON (or has
a field of the wrong type) is not dropped: ``from_json`` in PERMISSIVE mode puts the raw value
in ``_corrupt_record`` and ``with_event_time`` quarantines the row as ``malformed_record``,
with its partition and offset.

Before the query starts, :func:`eventtime.sources.check_kafka_source` asks the broker for the
topic: a broker that is down or a topic that does not exist fails at once, naming it.

From Python (tests use this)::

    spark = eventtime.local_session(kafka=True)
    router = build_query(spark, "127.0.0.1:9092", "events", "kafka-output")
    router.start(checkpoint="kafka-output/checkpoint", trigger={"availableNow": True}).awaitTermination()
"""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any, Callable, Optional, Sequence

import eventtime
from eventtime.sources import check_kafka_source
from eventtime.sources.kafka_json import CORRUPT_RECORD, KAFKA_JSON_SCHEMA, read_kafka_json

__all__ = ["SCHEMA", "read_kafka_json", "build_query", "run", "main"]

#: The JSON value's fields, and Spark's corrupt-record column (the raw value of a bad record).
SCHEMA = KAFKA_JSON_SCHEMA
CORRUPT = CORRUPT_RECORD


def build_query(spark, bootstrap_servers: str, topic: str, output: Optional[str] = None, *,
                panes: Any = None, late: Any = None, alerter: Any = None, pipeline: str = "kafka_example",
                keys: Sequence[str] = ("user_id",), aggregations: Optional[list] = None, ts: str = "ts",
                schema: str = SCHEMA, window: Any = None, allowed_lateness: Any = "5 seconds",
                max_out_of_orderness: Any = "2 seconds", watermark: str = "per_partition",
                idle_timeout: Any = "30 seconds", min_valid: Any = "2000-01-01", max_future: Any = "1 day",
                now: Any = None, max_offsets_per_trigger: Optional[int] = None, check: bool = True):
    """The job as an unstarted :class:`eventtime.route` router: Kafka -> JSON ->
    ``with_event_time`` -> ``window_aggregate`` (Kafka's ``partition`` and ``offset`` as the
    partition and offset columns) -> panes / late sinks. The sinks default to Delta tables
    under ``output`` (``results``, ``late``); ``panes`` / ``late`` may be any eventtime sink
    or callable ``(table, batch_id, query_id)``. Start it with
    ``router.start(checkpoint=..., trigger=...)``.

    >>> router = build_query(spark, "127.0.0.1:9092", "events", "out")  # doctest: +SKIP
    """
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink

    events = read_kafka_json(spark, bootstrap_servers, topic, schema, max_offsets_per_trigger=max_offsets_per_trigger,
                             check=check)
    events = events.transform(eventtime.with_event_time(
        ts, unit="ms", max_out_of_orderness=max_out_of_orderness, min_valid=min_valid, max_future=max_future,
        now=now, corrupt_record_col=CORRUPT))
    policy = {"watermark": watermark}
    if watermark == "per_partition":
        policy["idle_timeout"] = idle_timeout
    out = events.transform(eventtime.window_aggregate(
        keys=list(keys),
        window=window if window is not None else eventtime.Tumbling("10 seconds"),
        allowed_lateness=allowed_lateness,
        aggregations=aggregations if aggregations is not None else [eventtime.count(), eventtime.sum("amount")],
        partition_col="partition",
        offset_col="offset",
        **policy,
    ))
    if panes is None or late is None:
        if output is None:
            raise ValueError("build_query needs output (a folder for the Delta tables) or both panes and late sinks")
    panes = panes if panes is not None else DeltaResultsSink(os.path.join(output, "results"), pipeline=pipeline)
    late = late if late is not None else DeltaLateSink(os.path.join(output, "late"), pipeline=pipeline)
    return eventtime.route(out, panes=panes, late=late, pipeline=pipeline,
                           alerter=alerter if alerter is not None else eventtime.Alerter(pipeline=pipeline))


def run(bootstrap_servers: str, topic: str, output: str, *, spark=None, on_batch: Optional[Callable] = None,
        **options: Any) -> dict:
    """Run the job until the topic is drained (``availableNow``), resuming from
    ``output/checkpoint``; returns the last progress. ``options``: as :func:`build_query`.

    >>> run("127.0.0.1:9092", "events", "kafka-output")  # doctest: +SKIP
    """
    spark = spark or eventtime.local_session(app_name="eventtime-kafka-example", kafka=True, delta=False)
    router = build_query(spark, bootstrap_servers, topic, output, **options)
    query = router.start(checkpoint=os.path.join(output, "checkpoint"), trigger={"availableNow": True})
    seen = -1
    while not query.awaitTermination(0.5):
        progress = query.lastProgress or {}
        if progress.get("batchId", -1) > seen:
            seen = progress["batchId"]
            print(f"  batch {seen} rows {progress.get('numInputRows')}", flush=True)
    progress = query.lastProgress or {}
    return progress


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", required=True, help="host:port[,host:port...] of the Kafka cluster")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--output", required=True, help="folder of the Delta tables (results, late) and the checkpoint")
    parser.add_argument("--watermark", choices=("per_partition", "global"), default="per_partition")
    parser.add_argument("--idle-timeout", default="30 seconds")
    parser.add_argument("--max-offsets-per-trigger", type=int, default=None)
    args = parser.parse_args(argv)
    try:
        check_kafka_source(args.bootstrap_servers, args.topic)
    except Exception as exc:
        print(f"kafka_job: {exc}", file=sys.stderr)
        return 2
    progress = run(args.bootstrap_servers, args.topic, args.output, watermark=args.watermark,
                   idle_timeout=args.idle_timeout, max_offsets_per_trigger=args.max_offsets_per_trigger, check=False)
    print("last batch:", progress.get("batchId"))
    print(f"results: {args.output}/results  late data: {args.output}/late")
    print(f"query them: eventtime late summary --table {args.output}/late")
    return 0


if __name__ == "__main__":
    sys.exit(main())
