"""A throwaway one-node Apache Kafka broker (KRaft, no ZooKeeper) for local runs and tests.

Started from the broker jars that ``python -m eventtime.spark.connectors broker`` resolves
(``org.apache.kafka:kafka_2.13``, see :data:`eventtime.spark.connectors.KAFKA_BROKER`) with
``java``: the storage is formatted (``kafka.tools.StorageTool format --standalone``) in a
temporary directory, then ``kafka.Kafka server.properties`` runs as a subprocess that listens
on 127.0.0.1 only, on free ports. :meth:`LocalKafka.stop` (or leaving the ``with`` block)
terminates it (SIGTERM, then SIGKILL) and removes the directory. Pure Python: importing
this module starts nothing and imports no pyspark; the admin / producer helpers use
``kafka-python``.

>>> with LocalKafka() as kafka:  # doctest: +SKIP
...     kafka.create_topic("events", partitions=4)
...     kafka.produce("events", [(b"user-1", b'{"ts": 1700000000000}')], partition=2)
...     kafka.bootstrap_servers
'127.0.0.1:...'
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Iterable, Optional, Union

__all__ = ["LocalKafka", "KafkaUnavailableError", "broker_jars", "free_port"]

_Bytes = Union[bytes, str, None]


class KafkaUnavailableError(RuntimeError):
    """The local broker cannot start (no jars, no java) or did not answer in time."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def broker_jars() -> Path:
    """The folder of Apache Kafka's broker jars, or an error saying how to get them."""
    from ..spark.connectors import KAFKA_BROKER, bundle_name, jars_home

    folder = jars_home() / bundle_name(KAFKA_BROKER)
    if not (folder / ".complete").exists() or not any(folder.glob("kafka_2.13-*.jar")):
        raise KafkaUnavailableError(
            f"Apache Kafka's broker jars ({KAFKA_BROKER}) are not installed in {folder}: run "
            f"`python -m eventtime.spark.connectors broker` (needs mvn and Maven Central; `make install` does it)"
        )
    return folder


def _cluster_id() -> str:
    """A random KRaft cluster id (a UUID in URL-safe base64), not starting with ``-``: the
    storage tool would take ``-t -abc...`` for an option (Kafka's ``Uuid.randomUuid`` avoids
    a leading dash for the same reason)."""
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode("ascii").rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def _bytes(value: _Bytes) -> Optional[bytes]:
    return value.encode("utf-8") if isinstance(value, str) else value


class LocalKafka:
    """One Kafka broker and controller in one JVM (KRaft), on 127.0.0.1, in a temp directory.

    ``start_timeout_s``: how long to wait for the broker to answer an admin request;
    ``heap``: the JVM's ``-Xmx``. Use it as a context manager, or call :meth:`start` and
    :meth:`stop`.

    >>> kafka = LocalKafka(start_timeout_s=60)  # doctest: +SKIP
    >>> kafka.start().create_topic("t", 4)      # doctest: +SKIP
    >>> kafka.stop()                            # doctest: +SKIP
    """

    def __init__(self, start_timeout_s: float = 90.0, heap: str = "384m", java: str = "java") -> None:
        self.start_timeout_s = float(start_timeout_s)
        self.heap = heap
        self.java = java
        self.dir: Optional[str] = None
        self.port: Optional[int] = None
        self.controller_port: Optional[int] = None
        self.process: Optional[subprocess.Popen] = None
        self._log = None

    # -- lifecycle ---------------------------------------------------------------------------
    @property
    def bootstrap_servers(self) -> str:
        """``127.0.0.1:PORT`` of the PLAINTEXT listener (only once started)."""
        if self.port is None:
            raise RuntimeError("LocalKafka is not started")
        return f"127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Optional[str]:
        """The broker's stdout / stderr file (in the temp directory)."""
        return None if self.dir is None else os.path.join(self.dir, "broker.log")

    def log_tail(self, chars: int = 4000) -> str:
        """The end of the broker's output, for error messages."""
        path = self.log_path
        if path is None or not os.path.exists(path):
            return ""
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()[-chars:]

    def _properties(self) -> str:
        return "\n".join([
            "process.roles=broker,controller",
            "node.id=1",
            f"controller.quorum.bootstrap.servers=127.0.0.1:{self.controller_port}",
            f"listeners=PLAINTEXT://127.0.0.1:{self.port},CONTROLLER://127.0.0.1:{self.controller_port}",
            f"advertised.listeners=PLAINTEXT://127.0.0.1:{self.port}",
            "controller.listener.names=CONTROLLER",
            "inter.broker.listener.name=PLAINTEXT",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            f"log.dirs={os.path.join(self.dir, 'data')}",
            "num.partitions=1",
            "offsets.topic.replication.factor=1",
            "offsets.topic.num.partitions=1",
            "transaction.state.log.replication.factor=1",
            "transaction.state.log.min.isr=1",
            "share.coordinator.state.topic.replication.factor=1",
            "share.coordinator.state.topic.min.isr=1",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.retention.hours=-1",
            "",
        ])

    def _java(self, main: str, *args: str) -> list[str]:
        return [self.java, f"-Xmx{self.heap}", "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                "-cp", str(broker_jars() / "*"), main, *args]

    def start(self) -> "LocalKafka":
        """Format the storage, start the broker, wait until it answers; returns ``self``."""
        if self.process is not None:
            raise RuntimeError("LocalKafka is already started")
        jars = broker_jars()  # the clear error first
        if shutil.which(self.java) is None and not os.path.exists(self.java):
            raise KafkaUnavailableError(f"{self.java!r} not found: Kafka {jars.name} needs a JDK 17 (apt-get install openjdk-17-jdk-headless)")
        self.dir = tempfile.mkdtemp(prefix="eventtime-kafka-")
        try:
            self.port, self.controller_port = free_port(), free_port()
            while self.controller_port == self.port:
                self.controller_port = free_port()
            config = os.path.join(self.dir, "server.properties")
            with open(config, "w", encoding="utf-8") as handle:
                handle.write(self._properties())
            cluster_id = _cluster_id()
            formatted = subprocess.run(
                self._java("kafka.tools.StorageTool", "format", "-t", cluster_id, "-c", config, "--standalone"),
                capture_output=True, text=True, timeout=self.start_timeout_s)
            if formatted.returncode != 0:
                raise KafkaUnavailableError(
                    f"formatting the Kafka storage failed ({formatted.returncode}):\n{formatted.stdout[-2000:]}{formatted.stderr[-2000:]}")
            self._log = open(self.log_path, "wb")
            self.process = subprocess.Popen(self._java("kafka.Kafka", config), stdout=self._log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            cwd=self.dir, start_new_session=True)
            self._wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_ready(self) -> None:
        from kafka import KafkaAdminClient

        deadline = time.monotonic() + self.start_timeout_s
        last: Optional[BaseException] = None
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise KafkaUnavailableError(
                    f"the Kafka broker exited with code {self.process.returncode} while starting; its log:\n{self.log_tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    pass
                admin = KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=5000, bootstrap_timeout_ms=5000,
                                         client_id="eventtime-local-kafka")
                try:
                    admin.list_topics()
                    return
                finally:
                    admin.close()
            except Exception as exc:  # not up yet
                last = exc
                time.sleep(0.25)
        raise KafkaUnavailableError(
            f"the Kafka broker did not answer on {self.bootstrap_servers} within {self.start_timeout_s:.0f} s "
            f"(last error: {last!r}); its log:\n{self.log_tail()}")

    def stop(self, timeout_s: float = 20.0) -> None:
        """SIGTERM the broker, SIGKILL it after ``timeout_s``; remove the temp directory."""
        process, self.process = self.process, None
        if process is not None and process.poll() is None:
            try:
                os.killpg(process.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(process.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                process.wait(10)
        if self._log is not None:
            self._log.close()
            self._log = None
        if self.dir is not None:
            shutil.rmtree(self.dir, ignore_errors=True)
            self.dir = None

    def __enter__(self) -> "LocalKafka":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- helpers -----------------------------------------------------------------------------
    def admin(self):
        """A ``kafka.KafkaAdminClient`` on this broker (close it after use)."""
        from kafka import KafkaAdminClient

        return KafkaAdminClient(bootstrap_servers=self.bootstrap_servers, request_timeout_ms=10000,
                                client_id="eventtime-local-kafka")

    def create_topic(self, name: str, partitions: int = 1) -> None:
        """Create topic ``name`` with ``partitions`` partitions (replication factor 1); waits
        until every partition has a leader."""
        from kafka.admin import NewTopic

        admin = self.admin()
        try:
            admin.create_topics([NewTopic(name, partitions, 1)])
            deadline = time.monotonic() + 30
            while True:
                described = admin.describe_topics([name])[0]
                parts = described.get("partitions") or []
                if len(parts) == partitions and all(p.get("leader_id", p.get("leader", -1)) >= 0 for p in parts):
                    return
                if time.monotonic() > deadline:
                    raise KafkaUnavailableError(f"topic {name!r} has no leader for all {partitions} partitions: {described}")
                time.sleep(0.1)
        finally:
            admin.close()

    def produce(self, topic: str, records: Iterable, partition: Optional[int] = None) -> list[tuple[int, int]]:
        """Produce ``records`` (``value`` or ``(key, value)``; bytes or str) to ``topic``,
        all to ``partition`` when given (else each ``(key, value, partition)`` names its own,
        or Kafka's partitioner picks). Waits for every acknowledgement; returns each record's
        ``(partition, offset)`` in order."""
        from kafka import KafkaProducer

        producer = KafkaProducer(bootstrap_servers=self.bootstrap_servers, acks="all", linger_ms=0,
                                 max_in_flight_requests_per_connection=1, client_id="eventtime-local-kafka")
        try:
            futures = []
            for record in records:
                key, value, part = None, record, partition
                if isinstance(record, tuple):
                    if len(record) == 3:
                        key, value, part = record
                    else:
                        key, value = record
                futures.append(producer.send(topic, key=_bytes(key), value=_bytes(value), partition=part))
            producer.flush()
            return [(m.partition, m.offset) for m in (f.get(timeout=30) for f in futures)]
        finally:
            producer.close()
