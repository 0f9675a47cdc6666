"""The frozen, validated description of one event-time windowed aggregation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ._duration import to_instant_ms, to_ms
from .aggregations import Aggregation, count
from .timestamps import DEFAULT_MAX_FUTURE_MS, DEFAULT_MIN_VALID_MS
from .trigger import ACCUMULATING, ACCUMULATION_MODES, EMIT_MODES, ON_TIME_AND_LATE
from .window import WindowAssigner

__all__ = ["EngineConfig"]


@dataclass(frozen=True)
class EngineConfig:
    """Everything that decides which pane a record lands in (docs/semantics.md).

    Durations accept int milliseconds, ``timedelta`` or strings such as ``"10 minutes"``;
    ``min_valid_ms`` also accepts a date or ISO-8601 string. They are stored as int ms.

    >>> from eventtime import Tumbling
    >>> cfg = EngineConfig(Tumbling("1 minute"), allowed_lateness_ms="30 seconds")
    >>> cfg.allowed_lateness_ms
    30000
    """

    window: WindowAssigner
    aggregations: tuple[Aggregation, ...] = (count(),)
    max_out_of_orderness_ms: Any = 0
    allowed_lateness_ms: Any = 0
    accumulation: str = ACCUMULATING
    emit: str = ON_TIME_AND_LATE
    min_valid_ms: Any = DEFAULT_MIN_VALID_MS
    max_future_ms: Any = DEFAULT_MAX_FUTURE_MS

    def __post_init__(self) -> None:
        if not isinstance(self.window, WindowAssigner):
            raise TypeError(f"window must be Tumbling(...) or Sliding(...), got {type(self.window).__name__} {self.window!r}")
        aggregations = self.aggregations
        if isinstance(aggregations, Aggregation):
            aggregations = (aggregations,)
        if not isinstance(aggregations, (list, tuple)):
            raise TypeError(f"aggregations must be a list of aggregations, got {type(aggregations).__name__}")
        for agg in aggregations:
            if not isinstance(agg, Aggregation):
                raise TypeError(f"aggregations must contain eventtime aggregations (count(), sum(...)), got {agg!r}")
        if not aggregations:
            raise ValueError("aggregations must not be empty")
        names = [agg.name for agg in aggregations]
        duplicated = sorted({n for n in names if names.count(n) > 1})
        if duplicated:
            raise ValueError(f"aggregations must have distinct names, {duplicated} appear more than once")
        object.__setattr__(self, "aggregations", tuple(aggregations))
        for name in ("max_out_of_orderness_ms", "allowed_lateness_ms", "max_future_ms"):
            value = to_ms(getattr(self, name), name)
            if value < 0:
                raise ValueError(f"{name} must be >= 0, got {value}")
            object.__setattr__(self, name, value)
        min_valid = to_instant_ms(self.min_valid_ms, "min_valid_ms")
        if min_valid < 1:
            # Spark's watermark starts at 0, ours at "none"; with every valid event time >= 1
            # the two cannot be told apart (docs/semantics.md, "Initial watermark").
            raise ValueError(f"min_valid_ms must be >= 1 (1970-01-01T00:00:00.001Z), got {min_valid}")
        object.__setattr__(self, "min_valid_ms", min_valid)
        if self.accumulation not in ACCUMULATION_MODES:
            raise ValueError(f"accumulation must be one of {ACCUMULATION_MODES}, got {self.accumulation!r}")
        if self.emit not in EMIT_MODES:
            raise ValueError(f"emit must be one of {EMIT_MODES}, got {self.emit!r}")

    def aggregation(self, name: str) -> Optional[Aggregation]:
        return next((agg for agg in self.aggregations if agg.name == name), None)
