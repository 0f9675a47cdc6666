"""``KafkaSink``: panes, or late and invalid records, to a Kafka topic, written by Spark's tasks
through Spark's own Kafka writer (the ``spark-sql-kafka-0-10`` connector,
``local_session(kafka=True)``).

Each message is one row of what the Delta sinks store, as JSON (the results table's row of a
pane, the late table's row of a record), with headers ``pipeline``, ``query_id``,
``batch_id``, ``kind`` (``pane``, ``late``, ``invalid``), ``reason`` (records) and
``watermark`` (ISO-8601 UTC, when there is one). Its key names what the row is about, the
same in every run of the batch:

* a pane: ``<pipeline>|<key JSON>|<window_start>|<window_end>`` (ISO-8601 UTC);
* a record: ``<pipeline>|<source partition>|<offset>`` when the record has an offset (a Kafka
  source with ``offset_col``), else ``<pipeline>|sha256:<hex>`` of its kind, reason, event
  time, raw timestamp and payload.

Delivery is **at least once**, as Spark's Kafka sink is: a batch that Spark runs again after a
crash between the write and its checkpoint commit sends its messages again, with the same
keys. A consumer that keeps, per key, one record message, and for panes the message of the
highest ``pane_index`` (a later pane of the window replaces an earlier one; a repeated pane has
the same index and the same aggregates), sees every row once. A log-compacted topic does that
for records by itself.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import time
from typing import Any, Callable, Mapping, Optional, Sequence

import pyarrow as pa
import pyarrow.compute as pc

from ..ops.json_text import rows_json_array
from ..ops.kafka_topics import KafkaTopicError, topic_partitions
from .exactly_once import WriteResult, check_batch
from .schema import prepare_panes, prepare_records

__all__ = ["KafkaSink", "MESSAGE_SCHEMA"]

_HEADER = pa.struct([("key", pa.string()), ("value", pa.binary())])
#: The messages' columns, as Spark's Kafka writer reads them.
MESSAGE_SCHEMA = pa.schema([("key", pa.string()), ("value", pa.string()), ("headers", pa.list_(_HEADER))])
_KAFKA_PROVIDER = "org.apache.spark.sql.kafka010.KafkaSourceProvider"


def _iso(value: Any) -> Optional[str]:
    if value is None:
        return None
    return value.astimezone(_dt.timezone.utc).isoformat().replace("+00:00", "Z")


def _record_key(pipeline: str, row: dict) -> str:
    if row.get("offset") is not None:
        return f"{pipeline}|{row.get('partition')}|{row['offset']}"
    digest = hashlib.sha256("\x1f".join(str(row.get(c)) for c in (
        "kind", "reason", "event_time", "raw_timestamp", "payload")).encode()).hexdigest()
    return f"{pipeline}|sha256:{digest}"


class KafkaSink:
    """Panes, or late and invalid records, to the Kafka ``topic`` at ``bootstrap_servers``,
    written by Spark's tasks (at least once; the module docstring gives the consumer's rule
    that makes it effectively once). ``options``: more of the writer's options, e.g.
    ``{"kafka.security.protocol": "SSL"}``. The session ``route`` runs on must have Spark's Kafka
    connector (``eventtime.local_session(kafka=True)``), and the topic must exist: both are
    checked before the query starts.

    >>> panes = KafkaSink("127.0.0.1:9092", "clicks-panes", pipeline="clicks")
    >>> late = KafkaSink("127.0.0.1:9092", "clicks-late", pipeline="clicks")
    >>> route(out, panes=panes, late=late).start("/chk/clicks")  # doctest: +SKIP
    """

    #: ``route`` has Spark's tasks make this sink's messages and Spark's Kafka writer send them.
    writes_in_tasks = True
    writes_frames = True

    def __init__(self, bootstrap_servers: str, topic: str, pipeline: str, *, key_columns: Optional[Sequence[str]] = None,
                 options: Optional[Mapping[str, str]] = None, now: Optional[Callable[[], _dt.datetime]] = None) -> None:
        for name, value in (("bootstrap_servers", bootstrap_servers), ("topic", topic), ("pipeline", pipeline)):
            if not isinstance(value, str):
                raise TypeError(f"KafkaSink: {name} must be a str, got {type(value).__name__} {value!r}")
            if not value.strip():
                raise ValueError(f"KafkaSink: {name} must not be empty, got {value!r}")
        if options is not None and (not isinstance(options, Mapping)
                                    or not all(isinstance(k, str) and isinstance(v, str) for k, v in options.items())):
            raise TypeError(f"KafkaSink: options must be a mapping of str to str, got {options!r}")
        if key_columns is not None and (isinstance(key_columns, str) or not all(isinstance(c, str) for c in key_columns)):
            raise TypeError(f"KafkaSink: key_columns must be a sequence of column names, got {key_columns!r}")
        self.bootstrap_servers, self.topic, self.pipeline = bootstrap_servers, topic, pipeline
        self.key_columns = list(key_columns) if key_columns is not None else None
        self.options = dict(options or {})
        self._now = now or (lambda: _dt.datetime.now(_dt.timezone.utc))
        self.spark: Any = None

    def __repr__(self) -> str:
        return f"KafkaSink({self.bootstrap_servers!r}, {self.topic!r}, pipeline={self.pipeline!r})"

    def __getstate__(self) -> dict:
        return {**self.__dict__, "spark": None}  # a task needs no session

    def bind_route(self, spark: Any, others: Sequence[Any] = ()) -> None:
        """Called by ``route`` before the query starts: refuses a session without Spark's Kafka
        connector, and a broker that does not answer or has no such topic (Spark's writer would
        fail the batch after a minute)."""
        try:
            jvm = spark._jvm
            jvm.java.lang.Class.forName(_KAFKA_PROVIDER, True, jvm.Thread.currentThread().getContextClassLoader())
        except Exception as exc:  # noqa: BLE001 - Py4J's error for a class that is not there
            raise ValueError(
                f"{self!r}: the Spark session has no Kafka connector ({_KAFKA_PROVIDER} is not on its class path): "
                f"make it with eventtime.local_session(kafka=True) (pyspark 4.2 and earlier: Maven Central serves "
                f"no connector for 4.3), or pass --packages org.apache.spark:spark-sql-kafka-0-10_2.13:<Spark's "
                f"version> to spark-submit") from exc
        try:
            topic_partitions(self.bootstrap_servers, self.topic, servers_option="KafkaSink's bootstrap_servers",
                             use="write")
        except KafkaTopicError as exc:
            raise ValueError(f"{self!r}: {exc}") from None
        self.spark = spark

    def _prepare(self, table: pa.Table, batch_id: int, query_id: str, now: _dt.datetime, id_prefix: str = "") -> pa.Table:
        """The batch's rows (panes, or records) as messages: ``key``, ``value``, ``headers``."""
        panes = "pane_timing" in table.column_names
        if panes:
            rows = prepare_panes(table, self.pipeline, query_id, batch_id, now, self.key_columns)
        else:
            rows = prepare_records(table, self.pipeline, query_id, batch_id, now, id_prefix)
        values = rows_json_array(pa.StructArray.from_arrays([c.combine_chunks() for c in rows.columns],
                                                            names=rows.column_names)) if rows.num_rows else \
            pa.array([], pa.string())
        keys, headers = [], []
        common = [("pipeline", self.pipeline), ("query_id", query_id), ("batch_id", str(batch_id))]
        watermarks = table.column("watermark").to_pylist() if "watermark" in table.column_names else [None] * len(rows)
        for row, watermark in zip(rows.to_pylist(), watermarks):
            if panes:
                keys.append(f"{self.pipeline}|{row['key']}|{_iso(row['window_start'])}|{_iso(row['window_end'])}")
                tags = [("kind", "pane"), ("pane_timing", row["pane_timing"])]
            else:
                keys.append(_record_key(self.pipeline, row))
                tags = [("kind", row["kind"]), ("reason", row["reason"])]
            tags += [("watermark", _iso(watermark))] if watermark is not None else []
            headers.append([{"key": k, "value": None if v is None else str(v).encode()} for k, v in common + tags])
        return pa.table([pa.array(keys, pa.string()), pc.cast(values, pa.string()), pa.array(headers, pa.list_(_HEADER))],
                        schema=MESSAGE_SCHEMA)

    def write_frame(self, frame: Any, rows: int, batch_id: int, query_id: str) -> WriteResult:
        """On the driver: Spark's Kafka writer sends ``frame`` (the messages the tasks made)."""
        started = time.perf_counter()
        batch_id, query_id = check_batch(batch_id, query_id)
        if not rows:
            return WriteResult(False, 0, 0, skipped="empty", duration_s=time.perf_counter() - started)
        writer = frame.write.format("kafka").option("kafka.bootstrap.servers", self.bootstrap_servers).option(
            "topic", self.topic)
        for key, value in self.options.items():
            writer = writer.option(key, value)
        writer.save()
        return WriteResult(True, rows, 1, duration_s=time.perf_counter() - started)

    def __call__(self, table: pa.Table, batch_id: int, query_id: str) -> WriteResult:
        """Send one batch's table (panes or records) from the driver (outside ``route``)."""
        if not isinstance(table, pa.Table):
            raise TypeError(f"table must be a pyarrow.Table, got {type(table).__name__}")
        if self.spark is None:
            raise ValueError(f"{self!r} sends through a Spark session: route(...) gives it one, or call bind_route(spark)")
        now = self._now()
        messages = self._prepare(table, batch_id, query_id, now if now.tzinfo else now.replace(tzinfo=_dt.timezone.utc))
        return self.write_frame(self.spark.createDataFrame(messages), messages.num_rows, batch_id, query_id)
