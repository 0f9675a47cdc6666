"""A Kafka topic of JSON values as a DataFrame: the value's fields, Kafka's ``partition`` and
``offset``, and a corrupt-record column for values that are not JSON.

``from_json`` runs in PERMISSIVE mode: a value that is not JSON (or has a field of the wrong
type, or is null) is not dropped; its raw text goes to ``_corrupt_record`` and
``with_event_time(..., corrupt_record_col="_corrupt_record")`` quarantines the row as
``malformed_record``, with its partition and offset. Used by ``examples/kafka_job.py`` and
``eventtime demo --source kafka``. Importing this module imports no pyspark.

>>> events = read_kafka_json(spark, "127.0.0.1:9092", "events")  # doctest: +SKIP
"""

from __future__ import annotations

from typing import Optional

from .kafka_check import check_kafka_source

__all__ = ["KAFKA_JSON_SCHEMA", "CORRUPT_RECORD", "read_kafka_json"]

#: The example job's JSON value fields, and Spark's corrupt-record column (the raw value of a bad record).
KAFKA_JSON_SCHEMA = "user_id STRING, amount DOUBLE, ts BIGINT, _corrupt_record STRING"
CORRUPT_RECORD = "_corrupt_record"


def read_kafka_json(spark, bootstrap_servers: str, topic: str, schema: str = KAFKA_JSON_SCHEMA,
                    starting_offsets: str = "earliest", max_offsets_per_trigger: Optional[int] = None,
                    check: bool = True, streaming: bool = True):
    """The topic as a DataFrame (streaming, or with ``streaming=False`` a bounded read from
    ``starting_offsets`` to the latest offsets): the value's JSON fields (``schema``, with a
    ``_corrupt_record`` column for values that are not JSON), plus Kafka's ``topic``,
    ``partition`` and ``offset``. ``check``: ask the broker for the topic first
    (:func:`eventtime.sources.check_kafka_source`), so a missing broker or topic fails here.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if check:
        check_kafka_source(bootstrap_servers, topic)
    struct = T._parse_datatype_string(schema) if isinstance(schema, str) else schema
    if CORRUPT_RECORD not in struct.fieldNames():
        raise ValueError(f"schema must have a {CORRUPT_RECORD} string column (malformed values go there), got {schema!r}")
    reader = (
        (spark.readStream if streaming else spark.read).format("kafka")
        .option("kafka.bootstrap.servers", bootstrap_servers)
        .option("subscribe", topic)
        .option("startingOffsets", starting_offsets)
        .option("failOnDataLoss", "true")
    )
    if not streaming:
        reader = reader.option("endingOffsets", "latest")
    if max_offsets_per_trigger is not None:
        if not streaming:
            raise ValueError("max_offsets_per_trigger is for streaming reads only")
        reader = reader.option("maxOffsetsPerTrigger", int(max_offsets_per_trigger))
    raw = reader.load()
    value = F.col("value").cast("string")
    parsed = F.from_json(value, struct, {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": CORRUPT_RECORD})
    return raw.select(
        parsed.alias("v"), value.alias("__raw_value"), "topic", "partition", "offset"
    ).select(
        *[F.col(f"v.{name}").alias(name) for name in struct.fieldNames() if name != CORRUPT_RECORD],
        # a null value (tombstone) is malformed too: its raw text is the empty string
        F.when(F.col("v").isNull() | F.col(f"v.{CORRUPT_RECORD}").isNotNull(),
               F.coalesce(F.col(f"v.{CORRUPT_RECORD}"), F.col("__raw_value"), F.lit("")))
        .alias(CORRUPT_RECORD),
        "topic", "partition", "offset",
    )
