"""eventtime: event-time windowing with allowed lateness and a late-data side output for PySpark.

The core (window assignment, firing rules, aggregations, the reference model) is pure
Python. The Spark transforms, Delta sinks and alerts are imported lazily, so that
``import eventtime`` does not start or import Spark.

>>> import eventtime
>>> eventtime.Tumbling("1 day", tz="UTC+8").assign(1_700_000_000_000)[0].start_ms
1699977600000
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .aggregations import Aggregation, aggregate, count, first, last, max, mean, min, sum
from .config import EngineConfig
from .reference import BatchResult, InvalidRecord, LateRecord, Pane, Record, ReferenceEngine
from .timestamps import INVALID_REASONS, TOO_LATE, classify, extract, parse_timestamp
from .trigger import FINAL, LATE, ON_TIME, is_due, is_expired, next_watermark
from .window import Sliding, Tumbling, Window, WindowAssigner

__version__ = "0.1.0"

# Public names that need Spark, Delta or Sentry: imported on first use.
_LAZY = {
    "with_event_time": "eventtime.spark",
    "window_aggregate": "eventtime.spark",
    "route": "eventtime.spark",
    "Router": "eventtime.spark",
    "local_session": "eventtime.spark",
    "engine_jar": "eventtime.spark",
    "DeltaLateSink": "eventtime.sinks",
    "DeltaResultsSink": "eventtime.sinks",
    "Alerter": "eventtime.alerts",
    "BatchStats": "eventtime.monitor",
    "PartitionStats": "eventtime.monitor",
    "PartitionMonitor": "eventtime.monitor",
    "read_late": "eventtime.late",
    "latest_panes": "eventtime.sinks",
}

__all__ = [
    "Aggregation",
    "aggregate",
    "count",
    "first",
    "last",
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
