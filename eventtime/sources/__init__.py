"""Sources for eventtime pipelines: a local Kafka broker for runs and tests, and the checks
a Kafka-fed query runs before it starts.

>>> from eventtime.sources import LocalKafka, check_kafka_source
>>> with LocalKafka() as kafka:  # doctest: +SKIP
...     kafka.create_topic("events", 4)
...     check_kafka_source(kafka.bootstrap_servers, "events")
[0, 1, 2, 3]
"""

from .kafka_check import KafkaSourceError, check_kafka_source
from .local_kafka import KafkaUnavailableError, LocalKafka, broker_jars, free_port

__all__ = ["LocalKafka", "KafkaUnavailableError", "KafkaSourceError", "check_kafka_source", "broker_jars", "free_port"]
