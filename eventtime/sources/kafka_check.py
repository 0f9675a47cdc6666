"""Checks a Kafka source before a streaming query starts.

Spark's Kafka source does not fail fast: with a broker that is down it retries until
``kafka.default.api.timeout.ms``, and with a topic that does not exist it waits for it (or
fails in the first micro-batch with a message about offsets). :func:`check_kafka_source`
asks the broker first, with a short timeout, and says what is wrong and what to do.

>>> check_kafka_source("127.0.0.1:9", "events", timeout_s=1)  # doctest: +SKIP
Traceback (most recent call last):
...
eventtime.sources.kafka_check.KafkaSourceError: no Kafka broker answers at 127.0.0.1:9 ...
"""

from __future__ import annotations

from typing import Union

__all__ = ["KafkaSourceError", "check_kafka_source"]


class KafkaSourceError(RuntimeError):
    """A Kafka source that cannot be read: broker unreachable, or topic missing / empty of partitions."""


def check_kafka_source(bootstrap_servers: Union[str, list], topic: str, timeout_s: float = 10.0) -> list[int]:
    """The partitions of ``topic`` on the cluster at ``bootstrap_servers``, or
    :class:`KafkaSourceError` naming the broker or topic and what to do."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
    ms = max(1000, int(timeout_s * 1000))
    try:
        admin = KafkaAdminClient(bootstrap_servers=servers.split(","), request_timeout_ms=ms, bootstrap_timeout_ms=ms,
                                 client_id="eventtime-source-check")
    except (KafkaError, OSError) as exc:
        raise KafkaSourceError(
            f"no Kafka broker answers at {servers} ({type(exc).__name__}: {exc}): start the broker or fix "
            f"--bootstrap-servers / kafka.bootstrap.servers, then start the query again") from None
    try:
        topics = admin.list_topics()
        if topic not in topics:
            shown = ", ".join(sorted(t for t in topics if not t.startswith("__"))) or "none"
            raise KafkaSourceError(
                f"Kafka topic {topic!r} does not exist on {servers} (topics there: {shown}): create it "
                f"(kafka-topics.sh --create --topic {topic} --partitions N) or fix the topic name; "
                f"the broker does not create topics on read")
        described = admin.describe_topics([topic])[0]
        partitions = sorted(p.get("partition_index", p.get("partition")) for p in described.get("partitions") or [])
        if not partitions:
            raise KafkaSourceError(f"Kafka topic {topic!r} on {servers} has no partitions: {described.get('error_code')}")
        return partitions
    except KafkaError as exc:
        raise KafkaSourceError(f"the Kafka broker at {servers} did not describe topic {topic!r}: {exc}") from None
    finally:
        admin.close()
