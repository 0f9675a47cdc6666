"""Running the demo's streaming query: from its input files, or from a local Kafka broker.

``eventtime demo`` (:mod:`eventtime.cli.demo`) builds the pipeline and prints the summary;
this module runs the query to the end of its input and prints a line per micro-batch. With
``--source kafka`` it produces the demo stream to a 4-partition topic of a
:class:`eventtime.sources.LocalKafka` broker and reads it back with Spark's Kafka source
(pyspark 4.2 only; refused at once elsewhere, see :func:`check_kafka_available`).
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Optional

from ..core.watermark import PER_PARTITION

from .demo_data import DemoStream

__all__ = ["run_query", "run_kafka_query", "DemoError", "PIPELINE", "KAFKA_TOPIC", "KAFKA_PARTITIONS",
           "KAFKA_PRODUCED", "KAFKA_VALUE_SCHEMA", "kafka_demo_source", "produce_batch", "check_kafka_available"]

PIPELINE = "demo"
KAFKA_TOPIC = "eventtime-demo"
KAFKA_PARTITIONS = 4
#: Every record the Kafka demo produced, as the broker acknowledged it (JSON lines in ``DIR``).
KAFKA_PRODUCED = "kafka-produced.jsonl"
#: The JSON value of a demo record in Kafka: the row without ``partition`` and ``offset`` (Kafka
#: has them), and the corrupt-record column of ``from_json`` (PERMISSIVE).
KAFKA_VALUE_SCHEMA = "user_id STRING, amount DOUBLE, ts STRING, heartbeat BOOLEAN, _corrupt_record STRING"


class DemoError(RuntimeError):
    """The demo cannot run on this output directory (the message says why)."""


def kafka_demo_source(spark, bootstrap_servers: str, topic: str = KAFKA_TOPIC, streaming: bool = True,
                      max_offsets_per_trigger: Optional[int] = None):
    """The demo topic as the file source's rows: ``user_id, amount, ts, partition, offset,
    heartbeat`` (Kafka's partition and offset) plus ``_corrupt_record`` (null unless a value
    is not a demo JSON object: such a record is quarantined as ``malformed_record``)."""
    from ..sources import CORRUPT_RECORD, read_kafka_json

    events = read_kafka_json(spark, bootstrap_servers, topic, KAFKA_VALUE_SCHEMA, check=False, streaming=streaming,
                             max_offsets_per_trigger=max_offsets_per_trigger)
    return events.select("user_id", "amount", "ts", "partition", "offset", "heartbeat", CORRUPT_RECORD)


def produce_batch(kafka, rows: list, topic: str = KAFKA_TOPIC) -> list:
    """Produce one demo micro-batch to ``topic``, each row to the partition it names (its
    value: the row's JSON without partition and offset, which Kafka gives; its key: the user
    id); returns each row's ``(partition, offset)``, in ``rows``' order. The rows go out in
    offset order (a batch's rows are shuffled across partitions; a partition is a log), so a
    data row lands at the offset it carries (the topic holds nothing else), else :class:`DemoError`."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i]["offset"] is None, rows[i]["offset"] or 0))
    values = []
    for row in (rows[i] for i in order):
        value = {name: row[name] for name in ("user_id", "amount", "ts", "heartbeat")}
        values.append((row["user_id"], json.dumps(value, sort_keys=True), int(row["partition"])))
    sent: list = [None] * len(rows)
    for i, where in zip(order, kafka.produce(topic, values)):
        sent[i] = where
    for row, (partition, offset) in zip(rows, sent):
        if partition != row["partition"] or (row["offset"] is not None and offset != row["offset"]):
            raise DemoError(f"a demo record produced to partition {row['partition']} as offset {row['offset']} landed at "
                            f"partition {partition}, offset {offset}: is something else writing to topic {topic!r}?")
    return sent


def _watermark_text(progress: dict) -> str:
    """The batch's watermark for a person: ``none`` before any valid event moved it (Spark
    reports the epoch, 1970-01-01T00:00:00.000Z, there; docs/semantics.md: no watermark yet)."""
    watermark = (progress.get("eventTime") or {}).get("watermark")
    if not watermark or watermark.startswith("1970-01-01T00:00:00.000"):
        return "none"
    return watermark


def _progress_line(progress: dict, where: str) -> str:
    """One micro-batch's line: its id, ``where`` (which input), rows, panes, late and invalid
    records (the router's observed metrics), the watermark and how long it took."""
    metrics = progress["observedMetrics"].get(f"eventtime_{PIPELINE}") if progress["observedMetrics"] else None
    metrics = metrics.asDict() if metrics is not None else {}
    # the source's records: Spark's numInputRows also counts the per-partition watermark's tick row
    rows = metrics.get("rows_in", progress["numInputRows"])
    return (
        f"  batch {progress['batchId']:>3}  {where}  rows {rows:>6}  "
        f"panes {metrics.get('panes', 0):>5}  late {metrics.get('late', 0):>4}  "
        f"invalid {metrics.get('invalid', 0):>3}  watermark {_watermark_text(progress)}  "
        f"({progress['batchDuration'] / 1000:.1f} s)"
    )


def _raise_if_failed(query) -> None:
    if query.exception() is not None:
        from ..ops.failures import describe_failure

        failure = describe_failure(query.exception())
        raise DemoError(f"the streaming query failed: {failure}") from failure


def run_query(router, checkpoint: str, files: int, say: Callable[[str], None], timeout_s: float) -> int:
    """Run until every input file is processed and the no-data batch after the last has run."""
    from ..spark.replay import file_source_offset

    query = router.start(checkpoint=checkpoint)
    started = time.monotonic()
    printed: set = set()
    last_file = files - 1

    def say_new() -> None:  # a line for each batch not shown yet
        for progress in query.recentProgress:
            if progress["batchId"] not in printed:
                printed.add(progress["batchId"])
                file_no = file_source_offset(progress) + 1
                say(_progress_line(progress, f"file {min(file_no, files):>3}/{files}"))

    try:
        while True:
            _raise_if_failed(query)
            say_new()
            progress = query.lastProgress
            offset = file_source_offset(progress)
            status = query.status
            idle = not status["isDataAvailable"] and not status["isTriggerActive"]
            if (offset >= last_file or (progress is None and idle and time.monotonic() - started > 5)) and idle:
                # The last file's watermark is applied by the no-data batch Spark runs after it
                # (and, with per-partition watermarks, by the tick batch): shown too.
                query.processAllAvailable()
                if not query.status["isTriggerActive"]:
                    _raise_if_failed(query)
                    say_new()
                    break
            if time.monotonic() - started > timeout_s:
                raise DemoError(f"the demo did not finish within {timeout_s:.0f} s")
            time.sleep(0.5)
    finally:
        query.stop()
    return len(printed)


def run_kafka_query(make_router: Callable[[], Any], kafka, stream: DemoStream, checkpoint: str, watermark: str,
                     say: Callable[[str], None], timeout_s: float, produced_log: str) -> tuple[int, int]:
    """Produce the demo's micro-batches to Kafka one by one; after each, run the query on
    ``checkpoint`` until it has read everything produced (``availableNow``: the data batch,
    and Spark's no-data batch when its watermark moved; per-partition watermarks take one
    more ``once`` run for the tick batch that fires and purges by the new watermark), a line
    per micro-batch. So each micro-batch reads exactly one demo batch, as the file source's
    ``maxFilesPerTrigger=1`` does. Every record as the broker acknowledged it goes to
    ``produced_log`` (JSON lines: ``batch``, ``partition``, ``offset``, ``key``, ``value``).
    Returns (micro-batches run, records produced)."""
    deadline = time.monotonic() + timeout_s
    micro_batches = list(stream.micro_batches())
    triggers = ({"availableNow": True}, {"once": True}) if watermark == PER_PARTITION else ({"availableNow": True},)
    ran = produced = 0
    log_file = open(produced_log, "w", encoding="utf-8")
    try:
        for i, rows in enumerate(micro_batches):
            for row, (partition, offset) in zip(rows, produce_batch(kafka, rows)):
                value = {name: row[name] for name in ("user_id", "amount", "ts", "heartbeat")}
                log_file.write(json.dumps({"batch": i, "partition": partition, "offset": offset, "key": row["user_id"],
                                           "value": value}, sort_keys=True) + "\n")
            log_file.flush()
            produced += len(rows)
            ran += _read_produced(make_router, checkpoint, triggers, f"kafka {i + 1:>3}/{len(micro_batches)}",
                                  say, deadline, timeout_s)
    finally:
        log_file.close()
    return ran, produced


def _read_produced(make_router: Callable[[], Any], checkpoint: str, triggers: tuple, where: str,
                   say: Callable[[str], None], deadline: float, timeout_s: float) -> int:
    """Run the query once per trigger until it stops; returns the micro-batches it ran."""
    ran = 0
    for trigger in triggers:
        query = make_router().start(checkpoint=checkpoint, trigger=trigger)
        try:
            try:
                done = query.awaitTermination(max(1.0, deadline - time.monotonic()))
            except Exception:  # the query failed: its exception says why
                done = True
            _raise_if_failed(query)
            if not done:
                raise DemoError(f"the demo did not finish within {timeout_s:.0f} s")
            for progress in query.recentProgress:
                ran += 1
                say(_progress_line(progress, where))
        finally:
            query.stop()
    return ran


def check_kafka_available() -> None:
    """Refuse ``--source kafka`` at once, before a broker starts, when this pyspark has no
    Kafka source or the broker jars (or java) are missing."""
    import pyspark

    from ..sources import KafkaUnavailableError, broker_jars
    from ..spark.connectors import ConnectorUnavailableError, require_connector_jars

    try:
        require_connector_jars("kafka", pyspark.__version__)
        broker_jars()
    except (ConnectorUnavailableError, KafkaUnavailableError) as exc:
        raise DemoError(f"--source kafka is not available here: {exc}. "
                        "(--source files, the default, runs with any pyspark.)") from None
