"""Sources for eventtime pipelines: a local Kafka broker for runs and tests, the checks a
Kafka-fed query runs before it starts, and a Kafka topic of JSON values as a DataFrame
(:func:`read_kafka_json`).

>>> from eventtime.sources import LocalKafka, check_kafka_source
>>> with LocalKafka() as kafka:  # doctest: +SKIP
...     kafka.create_topic("events", 4)
...     check_kafka_source(kafka.bootstrap_servers, "events")
[0, 1, 2, 3]
"""

from .kafka_check import KafkaSourceError, check_kafka_source
from .kafka_json import CORRUPT_RECORD, KAFKA_JSON_SCHEMA, read_kafka_json
from .local_kafka import KafkaUnavailableError, LocalKafka, broker_jars, free_port

__all__ = ["LocalKafka", "KafkaUnavailableError", "KafkaSourceError", "check_kafka_source", "broker_jars", "free_port",
           "read_kafka_json", "KAFKA_JSON_SCHEMA", "CORRUPT_RECORD"]
