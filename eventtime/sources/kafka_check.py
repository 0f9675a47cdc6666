"""Checks a Kafka source before a streaming query starts.

Spark's Kafka source does not fail fast: with a broker that is down it retries until
``kafka.default.api.timeout.ms``, and with a topic that does not exist it waits for it (or
fails in the first micro-batch with a message about offsets). :func:`check_kafka_source`
asks the broker first, with a short timeout, and says what is wrong and what to do
(:func:`eventtime.ops.kafka_topics.topic_partitions`).

>>> check_kafka_source("127.0.0.1:9", "events", timeout_s=1)  # doctest: +SKIP
Traceback (most recent call last):
...
eventtime.sources.kafka_check.KafkaSourceError: no Kafka broker answers at 127.0.0.1:9 ...
"""

from __future__ import annotations

from typing import Union

from ..ops.kafka_topics import KafkaTopicError, topic_partitions

__all__ = ["KafkaSourceError", "check_kafka_source"]


class KafkaSourceError(KafkaTopicError):
    """A Kafka source that cannot be read: broker unreachable, or topic missing / empty of partitions."""


def check_kafka_source(bootstrap_servers: Union[str, list], topic: str, timeout_s: float = 10.0) -> list[int]:
    """The partitions of ``topic`` on the cluster at ``bootstrap_servers``, or
    :class:`KafkaSourceError` naming the broker or topic and what to do."""
    try:
        return topic_partitions(bootstrap_servers, topic, timeout_s,
                                servers_option="--bootstrap-servers / kafka.bootstrap.servers", use="read")
    except KafkaTopicError as exc:
        raise KafkaSourceError(str(exc)) from None
