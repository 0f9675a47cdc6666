"""Feeding the Kafka example's pipeline scenario batch by scenario batch, for the tests.

A scenario batch (eventtime/harness/scenario.py: records with ``key``, ``ts``, ``value``,
``partition``) is produced to the real Kafka partitions its records name, then the query of
``examples/kafka_job.py`` (``build_query``) runs with ``trigger={"availableNow": True}`` on
one checkpoint until it ends: one data micro-batch per scenario batch (everything produced
is available when it starts; nothing is produced while it runs) plus the no-data batch a
watermark move causes -- the micro-batch boundaries the reference model gets. Processing
time is the scenario's (``now`` literal in the plan; the per-partition watermark driver's
batch time set before the router handles each batch).
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Optional

import eventtime
from eventtime.harness.scenario import SCENARIO_AGGREGATIONS, Scenario, parse_scenario

ROOT = Path(__file__).parents[2]
SCENARIO_SCHEMA = "rid BIGINT, key STRING, ts BIGINT, value BIGINT, _corrupt_record STRING"


def load_kafka_job():
    """examples/kafka_job.py as a module."""
    spec = importlib.util.spec_from_file_location("kafka_job", ROOT / "examples" / "kafka_job.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class CapturingAlerter(eventtime.Alerter):
    """An Alerter without a DSN (alerts go to the log) that keeps what each batch raised."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.batches: list = []

    def on_batch(self, batch_id, records, stats):
        result = super().on_batch(batch_id, records, stats)
        self.batches.append(result)
        return result

    @property
    def alerts(self) -> list:
        return [a for b in self.batches if b is not None for a in b.alerts]


class KafkaReplay:
    """One scenario through Kafka and the example's query, a restarted availableNow run per batch."""

    def __init__(self, scenario: dict, spark, kafka, topic: str, workdir: str, alerter=None) -> None:
        self.scenario: Scenario = parse_scenario(scenario)
        self.spark, self.kafka, self.topic, self.dir = spark, kafka, topic, workdir
        self.job = load_kafka_job()
        self.records: list = []  # by rid
        self.produced: dict = {}  # rid -> (partition, offset)
        self.late_tables: list = []  # the raw late/invalid tables the router handed over
        self.alerter = alerter
        self._event_time_seen = False
        self._index = 0

    def _row(self, rec) -> dict:
        rid = len(self.records)
        self.records.append(rec)
        row = {"rid": rid, "key": None if rec.key is None else json.dumps(rec.key), "ts": rec.ts}
        if rec.fields.get("value") is not None:
            row["value"] = rec.fields["value"]
        return row

    def run_batch(self, batch) -> dict:
        i = self._index
        self._index += 1
        rows = [(self._row(rec), rec.partition) for rec in batch]
        sent = self.kafka.produce(self.topic, [(str(r["rid"]), json.dumps(r), p) for r, p in rows])
        for (row, partition), where in zip(rows, sent):
            assert where[0] == partition, (where, partition)
            self.produced[row["rid"]] = where
        panes, records = [], []
        # availableNow runs the data batch and Spark's own no-data batch when its watermark moved;
        # the per-partition watermark's tick batch (its signal source) comes after the run ended,
        # so there one more run (trigger once) takes it.
        per_partition = self.scenario.config.watermark.mode == "per_partition"
        for trigger in ({"availableNow": True}, {"once": True}) if per_partition else ({"availableNow": True},):
            router, query = self._start(i, panes, records, trigger)
            query.awaitTermination()
            assert query.exception() is None, query.exception()
            self._event_time_seen |= bool(router.event_time_seen)
            if router.partition_watermark is not None:
                if router.partition_watermark.watermark_ms is not None:
                    watermark = router.partition_watermark.watermark_ms
                else:
                    watermark = self._last_watermark
            else:
                from eventtime.spark.replay import _watermark_ms

                marks = [_watermark_ms(p) for p in query.recentProgress if (p.get("eventTime") or {}).get("watermark")]
                watermark = marks[-1] if self._event_time_seen and marks else self._last_watermark
            self._last_watermark = watermark
        self._last_watermark = watermark
        self.late_tables += records
        from eventtime.spark.replay import ReplayRunner

        view = SimpleNamespace(records=self.records, sessions=self.scenario.config.window.merging)
        return ReplayRunner._render(view, panes, records, watermark)

    _last_watermark: Optional[int] = None

    def _start(self, i: int, panes: list, records: list, trigger: dict):
        cfg = self.scenario.config
        router = self.job.build_query(
            self.spark, self.kafka.bootstrap_servers, self.topic,
            panes=lambda table, batch_id, query_id: panes.append(table),
            late=lambda table, batch_id, query_id: records.append(table),
            alerter=self.alerter or CapturingAlerter(pipeline="kafka_replay"), pipeline="kafka_replay",
            keys=["key"], aggregations=list(SCENARIO_AGGREGATIONS), schema=SCENARIO_SCHEMA,
            window=cfg.window, allowed_lateness=cfg.allowed_lateness_ms,
            max_out_of_orderness=cfg.max_out_of_orderness_ms, watermark=cfg.watermark.mode,
            idle_timeout=cfg.watermark.idle_timeout_ms, min_valid=cfg.min_valid_ms,
            max_future=cfg.max_future_ms, now=self.scenario.now_ms, check=False,
        )
        handle = router._handle
        processing_time = self.scenario.processing_time_ms(i)

        def at_scenario_time(df, batch_id):  # before the router reads the batch's processing time
            if router.partition_watermark is not None:
                router.partition_watermark.processing_time_ms = processing_time
            return handle(df, batch_id)

        router._handle = at_scenario_time
        query = router.start(checkpoint=os.path.join(self.dir, "checkpoint"), trigger=trigger)
        return router, query

    def run(self) -> dict:
        return {"batches": [self.run_batch(batch) for batch in self.scenario.batches]}
