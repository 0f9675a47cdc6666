"""A Kafka topic's partitions, asked of the broker before a query starts (a source's topic, a
sink's topic), with a short timeout: Spark's Kafka source waits for a topic that does not
exist, and its writer fails the batch after a minute; asked first, a missing broker or topic
is refused at once, naming it and what to do.

>>> topic_partitions("127.0.0.1:9", "events", timeout_s=1)  # doctest: +SKIP
Traceback (most recent call last):
...
eventtime.ops.kafka_topics.KafkaTopicError: no Kafka broker answers at 127.0.0.1:9 ...
"""

from __future__ import annotations

from typing import Union

__all__ = ["KafkaTopicError", "topic_partitions"]


class KafkaTopicError(RuntimeError):
    """A Kafka topic that cannot be used: broker unreachable, or topic missing / empty of partitions."""


def topic_partitions(bootstrap_servers: Union[str, list], topic: str, timeout_s: float = 10.0,
                     servers_option: str = "kafka.bootstrap.servers", use: str = "read") -> list[int]:
    """The partitions of ``topic`` on the cluster at ``bootstrap_servers``, or
    :class:`KafkaTopicError` naming the broker or topic and what to do (``servers_option``: the
    option to fix; ``use``: what the caller does with the topic, ``read`` or ``write``)."""
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    servers = bootstrap_servers if isinstance(bootstrap_servers, str) else ",".join(bootstrap_servers)
    ms = max(1000, int(timeout_s * 1000))
    try:
        admin = KafkaAdminClient(bootstrap_servers=servers.split(","), request_timeout_ms=ms, bootstrap_timeout_ms=ms,
                                 client_id=f"eventtime-{use}-check")
    except (KafkaError, OSError) as exc:
        raise KafkaTopicError(
            f"no Kafka broker answers at {servers} ({type(exc).__name__}: {exc}): start the broker or fix "
            f"{servers_option}, then start the query again") from None
    try:
        topics = admin.list_topics()
        if topic not in topics:
            shown = ", ".join(sorted(t for t in topics if not t.startswith("__"))) or "none"
            raise KafkaTopicError(
                f"Kafka topic {topic!r} does not exist on {servers} (topics there: {shown}): create it "
                f"(kafka-topics.sh --create --topic {topic} --partitions N) or fix the topic name; "
                f"the broker does not create topics on {use}")
        described = admin.describe_topics([topic])[0]
        partitions = sorted(p.get("partition_index", p.get("partition")) for p in described.get("partitions") or [])
        if not partitions:
            raise KafkaTopicError(f"Kafka topic {topic!r} on {servers} has no partitions: {described.get('error_code')}")
        return partitions
    except KafkaError as exc:
        raise KafkaTopicError(f"the Kafka broker at {servers} did not describe topic {topic!r}: {exc}") from None
    finally:
        admin.close()
