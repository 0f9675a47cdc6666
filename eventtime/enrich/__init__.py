"""Async enrichment before the window: each record gets a value from an external service.

``config`` (the options, the failure reasons), ``cache`` (TTL cache) and ``engine`` (the
asyncio machinery on lists of keys) are pure Python; ``spark`` is the ``mapInArrow`` adapter,
:func:`enrich_async`, imported on first use so that ``import eventtime.enrich`` does not
import Spark.

>>> from eventtime.enrich import EnrichConfig
>>> EnrichConfig(chunk_size=200, max_in_flight=4, rate_limit=50).rate_limit
50.0
"""

from __future__ import annotations

from importlib import import_module
from typing import Any

from .config import EnrichConfig
from .engine import Enricher, EnrichStats

__all__ = ["EnrichConfig", "Enricher", "EnrichStats", "enrich_async"]


def __getattr__(name: str) -> Any:
    if name == "enrich_async":
        value = import_module("eventtime.enrich.spark").enrich_async
        globals()[name] = value
        return value
    raise AttributeError(f"module 'eventtime.enrich' has no attribute {name!r}")
