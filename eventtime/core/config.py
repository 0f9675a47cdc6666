"""The frozen, validated description of one event-time windowed aggregation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from ._duration import to_ms
from ._spec import spec_fields, spec_ms
from .aggregations import Aggregation, count, pane_columns
from .timestamps import DEFAULT_MAX_FUTURE_MS, DEFAULT_MIN_VALID_MS, quarantine_bounds
from .trigger import ACCUMULATING, ACCUMULATION_MODES, EMIT_MODES, ON_TIME_AND_LATE
from .watermark import WatermarkPolicy
from .window import WindowAssigner

__all__ = ["EngineConfig"]

_SPEC_MS = ("max_out_of_orderness_ms", "allowed_lateness_ms", "min_valid_ms", "max_future_ms")


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
    #: Report a record too late for some of its windows (a sliding window's, whose earlier windows
    #: expired) in the late output as well, reason ``partly_late``, with the windows it missed;
    #: it is still added to its live windows. Off by default, as in Flink.
    report_partly_late: bool = False

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
        columns = pane_columns(aggregations)
        taken = sorted({n for n in columns if columns.count(n) > 1})
        if taken:
            raise ValueError(f"aggregations: the name(s) {taken} are also accumulator columns of a pane (a mean's "
                             f"<name>__sum and <name>__n, first / last's <name>__ms): rename the aggregation")
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
        if not isinstance(self.report_partly_late, bool):
            raise TypeError(f"report_partly_late must be a bool, got {type(self.report_partly_late).__name__} "
                            f"{self.report_partly_late!r}")
        if isinstance(self.watermark, str):
            object.__setattr__(self, "watermark", WatermarkPolicy(self.watermark))
        elif not isinstance(self.watermark, WatermarkPolicy):
            raise TypeError(f"watermark must be a WatermarkPolicy or a mode string, got {type(self.watermark).__name__}")

    def to_spec(self) -> dict:
        """The configuration as JSON-ready data, every field written: the ``config`` of the
        operator's plan document (``spark/plan.py``), which :func:`eventtime.route` reads back
        with :meth:`from_spec`, and from which the checkpoint's fingerprint is derived
        (``ops/compat.py`` keeps the parts that decide the state's meaning).

        >>> from eventtime import Tumbling
        >>> spec = EngineConfig(Tumbling("1 minute"), allowed_lateness_ms="30 seconds").to_spec()
        >>> spec["window"], spec["allowed_lateness_ms"]
        ({'type': 'tumbling', 'size_ms': 60000, 'offset_ms': 0}, 30000)
        >>> EngineConfig.from_spec(spec) == EngineConfig(Tumbling("1 minute"), allowed_lateness_ms="30 seconds")
        True
        """
        return {
            "window": self.window.to_dict(),
            "aggregations": [agg.to_dict() for agg in self.aggregations],
            **{name: getattr(self, name) for name in _SPEC_MS},
            "accumulation": self.accumulation,
            "emit": self.emit,
            "watermark": self.watermark.to_dict(),
            "report_partly_late": self.report_partly_late,
        }

    @classmethod
    def from_spec(cls, spec: Any) -> "EngineConfig":
        """The configuration of a :meth:`to_spec` object (a field left out takes its default;
        ``TypeError`` / ``ValueError`` naming the field)."""
        spec_fields(spec, "spec", required=("window",),
                    optional=("aggregations", *_SPEC_MS, "accumulation", "emit", "watermark", "report_partly_late"))
        options: dict = {name: spec_ms(spec, name, "spec") for name in _SPEC_MS if name in spec}
        options.update({name: spec[name] for name in ("accumulation", "emit", "report_partly_late") if name in spec})
        if "aggregations" in spec:
            if not isinstance(spec["aggregations"], list):
                raise TypeError(f"spec.aggregations must be a list, got {type(spec['aggregations']).__name__}")
            options["aggregations"] = tuple(Aggregation.from_dict(a) for a in spec["aggregations"])
        return cls(WindowAssigner.from_dict(spec["window"]), watermark=WatermarkPolicy.from_dict(spec.get("watermark")),
                   **options)

    def aggregation(self, name: str) -> Optional[Aggregation]:
        return next((agg for agg in self.aggregations if agg.name == name), None)
