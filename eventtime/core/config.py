"""The frozen, validated description of one event-time windowed aggregation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ._duration import to_ms
from .aggregations import Aggregation, count
from .timestamps import DEFAULT_MAX_FUTURE_MS, DEFAULT_MIN_VALID_MS, quarantine_bounds
from .trigger import ACCUMULATING, ACCUMULATION_MODES, EMIT_MODES, ON_TIME_AND_LATE
from .watermark import WatermarkPolicy
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
    #: How the watermark moves (:class:`~eventtime.core.watermark.WatermarkPolicy`; a mode
    #: string such as ``"per_partition"`` is accepted).
    watermark: Any = WatermarkPolicy()

    def __post_init__(self) -> None:
        if not isinstance(self.window, WindowAssigner):
            raise TypeError(f"window must be Tumbling(...), Sliding(...), Calendar(...) or Session(...), got {type(self.window).__name__} {self.window!r}")
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
        allowed_lateness = to_ms(self.allowed_lateness_ms, "allowed_lateness_ms")
        if allowed_lateness < 0:
            raise ValueError(f"allowed_lateness_ms must be >= 0, got {allowed_lateness}")
        object.__setattr__(self, "allowed_lateness_ms", allowed_lateness)
        bounds = quarantine_bounds(self.max_out_of_orderness_ms, self.min_valid_ms, self.max_future_ms,
                                   names=("max_out_of_orderness_ms", "min_valid_ms", "max_future_ms"))
        for name, value in zip(("max_out_of_orderness_ms", "min_valid_ms", "max_future_ms"), bounds):
            object.__setattr__(self, name, value)
        if self.accumulation not in ACCUMULATION_MODES:
            raise ValueError(f"accumulation must be one of {ACCUMULATION_MODES}, got {self.accumulation!r}")
        if self.emit not in EMIT_MODES:
            raise ValueError(f"emit must be one of {EMIT_MODES}, got {self.emit!r}")
        if isinstance(self.watermark, str):
            object.__setattr__(self, "watermark", WatermarkPolicy(self.watermark))
        elif not isinstance(self.watermark, WatermarkPolicy):
            raise TypeError(f"watermark must be a WatermarkPolicy or a mode string, got {type(self.watermark).__name__}")

    def aggregation(self, name: str) -> Optional[Aggregation]:
        return next((agg for agg in self.aggregations if agg.name == name), None)
