"""Sinks for the router's outputs: Delta tables for late/invalid records and panes, PostgreSQL
for panes (:class:`PostgresSink`, on the generic exactly-once :class:`BatchSink`), Kafka topics
for either (:class:`KafkaSink`, at least once with idempotent keys), and a user's sink written
by Spark's tasks and committed once per batch (:class:`TaskSink`).

Example:
    >>> from eventtime.sinks import DeltaLateSink, DeltaResultsSink
    >>> late_sink = DeltaLateSink("/tmp/eventtime-doc/late", pipeline="clicks")  # doctest: +SKIP
"""

from eventtime.sinks.batch import BatchSink, BatchSinkError, BatchWriteResult, RejectedRow
from eventtime.sinks.exactly_once import FaultPoint, RetryPolicy, SinkError, WriteResult
from eventtime.sinks.delta import (
    RECORD_SCHEMA,
    DeltaDelaySink,
    DeltaLateSink,
    DeltaResultsSink,
    DeltaSinkError,
    compact,
    latest_panes,
    snapshot_dataset,
    spark_has_delta,
    write_via_spark,
)
from eventtime.sinks.kafka import KafkaSink
from eventtime.sinks.postgres import PostgresSink
from eventtime.sinks.task import TaskSink, TaskWriter

__all__ = [
    "BatchSink",
    "BatchSinkError",
    "BatchWriteResult",
    "FaultPoint",
    "KafkaSink",
    "PostgresSink",
    "RejectedRow",
    "RetryPolicy",
    "SinkError",
    "TaskSink",
    "TaskWriter",
    "RECORD_SCHEMA",
    "DeltaDelaySink",
    "DeltaLateSink",
    "DeltaResultsSink",
    "DeltaSinkError",
    "WriteResult",
    "compact",
    "latest_panes",
    "snapshot_dataset",
    "spark_has_delta",
    "write_via_spark",
]
