"""eventtime: event-time windowing with allowed lateness and a late-data side output for PySpark.

The package's folders are its architecture (docs/architecture.md): ``core`` (window
assignment, firing rules, timestamps, aggregations, config, the reference model; pure
Python), ``harness`` (scenario replay through the model, conservation checks), ``spark``
(the adapter: extraction, the JVM operator, routing), ``sinks`` (Delta), ``ops``
(statistics, alerts, restart compatibility, fault points, the JSON text of rows), ``query``
(reading the late-data table) and ``cli`` (commands and the demo). The Spark transforms, Delta sinks and
alerts are imported lazily, so that ``import eventtime`` does not start or import Spark.

>>> import eventtime
>>> eventtime.Tumbling("1 day", tz="UTC+8").assign(1_700_000_000_000)[0].start_ms
1699977600000
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import sys
import warnings
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


# Module paths before the package was split into folders (0.1), and those of the modules
# since moved out of ``core``: they still import, as the modules they became, with a
# DeprecationWarning.
_MOVED = {
    "eventtime.window": "eventtime.core.window",
    "eventtime.trigger": "eventtime.core.trigger",
    "eventtime.timestamps": "eventtime.core.timestamps",
    "eventtime.aggregations": "eventtime.core.aggregations",
    "eventtime.config": "eventtime.core.config",
    "eventtime.reference": "eventtime.core.reference",
    "eventtime.scenario": "eventtime.harness.scenario",
    "eventtime.conservation": "eventtime.harness.conservation",
    "eventtime.monitor": "eventtime.ops.monitor",
    "eventtime.alerts": "eventtime.ops.alerts",
    "eventtime.compat": "eventtime.ops.compat",
    "eventtime.faults": "eventtime.ops.faults",
    "eventtime.late": "eventtime.query.late",
    "eventtime.cli_late": "eventtime.cli.late",
    "eventtime.demo": "eventtime.cli.demo",
    "eventtime.demo_data": "eventtime.cli.demo_data",
    "eventtime.core.scenario": "eventtime.harness.scenario",
    "eventtime.core.conservation": "eventtime.harness.conservation",
}


class _MovedModule(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """``import eventtime.late`` gives the module ``eventtime.query.late`` itself."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        return importlib.util.spec_from_loader(name, self) if name in _MOVED else None

    _specs: dict = {}

    def create_module(self, spec: Any) -> Any:
        warnings.warn(f"{spec.name} is now {_MOVED[spec.name]}", DeprecationWarning, stacklevel=2)
        module = import_module(_MOVED[spec.name])
        self._specs.setdefault(module.__name__, module.__spec__)
        return module

    def exec_module(self, module: Any) -> None:
        module.__spec__ = self._specs[module.__name__]  # import set it to the old path's spec


if not any(isinstance(finder, _MovedModule) for finder in sys.meta_path):
    sys.meta_path.append(_MovedModule())


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'eventtime' has no attribute {name!r}")
    value = getattr(import_module(module), name)
    globals()[name] = value
    return value
