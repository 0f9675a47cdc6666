"""eventtime: event-time windowing with allowed lateness and a late-data side output for PySpark.

The package's folders are its architecture (docs/architecture.md): ``core`` (window
assignment, firing rules, timestamps, aggregations, config, the reference model; pure
Python), ``harness`` (scenario replay through the model, conservation checks), ``spark``
(the adapter: extraction, the JVM operator, routing), ``sinks`` (Delta, Kafka, PostgreSQL,
your own), ``sources`` (Kafka JSON), ``enrich`` (async enrichment before the window), ``ops``
(statistics, alerts, restart compatibility, fault points, the JSON text of rows), ``query``
(reading the late-data table, the advisor, reconcile) and ``cli`` (commands and the demo). The Spark transforms, Delta sinks and
alerts are imported lazily, so that ``import eventtime`` does not start or import Spark.

>>> import eventtime
>>> eventtime.Tumbling("1 day", tz="UTC+8").assign(1_700_000_000_000)[0].start_ms
1699977600000
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .core.aggregations import Aggregation, agg, aggregate, count, first, last, max, mean, min, pane_columns, sum
from .core.config import EngineConfig
from .core.reference import BatchResult, InvalidRecord, LateRecord, Pane, Record, ReferenceEngine
from .core.timestamps import INVALID_REASONS, TOO_LATE, classify, extract, parse_timestamp
from .core.trigger import FINAL, LATE, ON_TIME, is_due, is_expired, next_watermark
from .core.window import Calendar, Session, Sliding, Tumbling, Window, WindowAssigner

__version__ = "0.1.0"

# Public names that need Spark, Delta or Sentry: imported on first use.
_LAZY = {
    "with_event_time": "eventtime.spark",
    "window_aggregate": "eventtime.spark",
    "route": "eventtime.spark",
    "Router": "eventtime.spark",
    "local_session": "eventtime.spark",
    "engine_jar": "eventtime.spark",
    "ClassicSessionRequiredError": "eventtime.spark",
    "DeltaLateSink": "eventtime.sinks",
    "DeltaDelaySink": "eventtime.sinks",
    "DeltaResultsSink": "eventtime.sinks",
    "Alerter": "eventtime.ops.alerts",
    "BatchStats": "eventtime.ops.monitor",
    "PartitionStats": "eventtime.ops.monitor",
    "PartitionMonitor": "eventtime.ops.monitor",
    "read_late": "eventtime.query.late",
    "latest_panes": "eventtime.sinks",
    "reconcile": "eventtime.query.reconcile",
    "ReconcileReport": "eventtime.query.reconcile",
    "enrich_async": "eventtime.enrich.spark",
    "EnrichConfig": "eventtime.enrich.config",
}

__all__ = [
    "Aggregation",
    "aggregate",
    "agg",
    "count",
    "first",
    "last",
    "pane_columns",
    "max",
    "mean",
    "min",
    "sum",
    "EngineConfig",
    "BatchResult",
    "InvalidRecord",
    "LateRecord",
    "Pane",
    "Record",
    "ReferenceEngine",
    "INVALID_REASONS",
    "TOO_LATE",
    "classify",
    "extract",
    "parse_timestamp",
    "FINAL",
    "LATE",
    "ON_TIME",
    "is_due",
    "is_expired",
    "next_watermark",
    "Calendar",
    "Session",
    "Sliding",
    "Tumbling",
    "Window",
    "WindowAssigner",
    *_LAZY,
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'eventtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
