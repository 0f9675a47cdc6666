"""Window assignment: which half-open windows ``[start, end)`` contain an event time.

Pure Python; shared by the reference model and the Spark engine.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import NamedTuple

from ._duration import to_ms, tz_offset_ms

__all__ = ["Window", "WindowAssigner", "Tumbling", "Sliding"]


class Window(NamedTuple):
    """A half-open window ``[start_ms, end_ms)``.

    >>> Window(0, 3000).max_timestamp_ms
    2999
    """

    start_ms: int
    end_ms: int

    @property
    def max_timestamp_ms(self) -> int:
        """The largest event time inside the window: ``end_ms - 1``."""
        return self.end_ms - 1

    def contains(self, ts_ms: int) -> bool:
        return self.start_ms <= ts_ms < self.end_ms


class WindowAssigner(abc.ABC):
    """Base of the window assigners. Windows start at ``offset_ms + k * slide_ms``."""

    size_ms: int
    slide_ms: int
    offset_ms: int

    def _validate(self) -> None:
        for name in ("size_ms", "slide_ms", "offset_ms"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int):
                raise TypeError(f"{name} must be int milliseconds, got {type(value).__name__} {value!r}")
        if self.size_ms <= 0:
            raise ValueError(f"size must be > 0, got {self.size_ms} ms")
        if not 0 < self.slide_ms <= self.size_ms:
            raise ValueError(f"slide must satisfy 0 < slide <= size ({self.size_ms} ms), got {self.slide_ms} ms")
        # Normalise so that equal window grids compare equal.
        object.__setattr__(self, "offset_ms", self.offset_ms % self.slide_ms)

    def _last_start(self, ts_ms: int, step_ms: int) -> int:
        return ts_ms - (ts_ms - self.offset_ms) % step_ms

    def assign(self, ts_ms: int) -> list[Window]:
        """All windows containing ``ts_ms``, ordered by start.

        >>> Sliding(3000, 1000).assign(2500)
        [Window(start_ms=0, end_ms=3000), Window(start_ms=1000, end_ms=4000), Window(start_ms=2000, end_ms=5000)]
        """
        start = self._last_start(ts_ms, self.slide_ms)
        windows = []
        while start + self.size_ms > ts_ms:
            windows.append(Window(start, start + self.size_ms))
            start -= self.slide_ms
        windows.reverse()
        return windows

    @property
    def slice_ms(self) -> int:
        """Width of the slices every window is a union of: ``gcd(size, slide)``."""
        return math.gcd(self.size_ms, self.slide_ms)

    def slice_start(self, ts_ms: int) -> int:
        """Start of the slice containing ``ts_ms``."""
        return self._last_start(ts_ms, self.slice_ms)

    def windows_of_slice(self, slice_start_ms: int) -> list[Window]:
        """The windows that contain the whole slice starting at ``slice_start_ms``."""
        return self.assign(slice_start_ms)

    def slices_of(self, window: Window) -> list[int]:
        """Starts of the slices that make up ``window``."""
        return list(range(window.start_ms, window.end_ms, self.slice_ms))

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """The assigner as the replay contract's ``window`` object."""


def _aligned_offset(offset: object, tz: object) -> int:
    offset_ms = to_ms(offset, "offset")
    if tz is not None:
        # Local midnight in UTC+z is at -z UTC, so windows shift back by the zone's offset.
        offset_ms -= tz_offset_ms(tz, "tz")
    return offset_ms


@dataclass(frozen=True, init=False)
class Tumbling(WindowAssigner):
    """Fixed-size, non-overlapping windows, aligned to the epoch plus ``offset`` or to ``tz``'s midnight.

    >>> Tumbling("1 day", tz="UTC+8").assign(0)   # 1970-01-01T00:00Z is 08:00 local
    [Window(start_ms=-28800000, end_ms=57600000)]
    """

    size_ms: int
    offset_ms: int

    def __init__(self, size: object, offset: object = 0, tz: object = None) -> None:
        object.__setattr__(self, "size_ms", to_ms(size, "size"))
        object.__setattr__(self, "offset_ms", _aligned_offset(offset, tz))
        self.__post_init__()

    def __post_init__(self) -> None:
        self._validate()

    @property
    def slide_ms(self) -> int:  # type: ignore[override]
        return self.size_ms

    def to_dict(self) -> dict:
        return {"type": "tumbling", "size_ms": self.size_ms, "offset_ms": self.offset_ms}


@dataclass(frozen=True, init=False)
class Sliding(WindowAssigner):
    """Windows of ``size`` starting every ``slide``; a record falls in about ``size / slide`` windows.

    >>> Sliding("10 minutes", "5 minutes").assign(0)
    [Window(start_ms=-300000, end_ms=300000), Window(start_ms=0, end_ms=600000)]
    """

    size_ms: int
    slide_ms: int
    offset_ms: int

    def __init__(self, size: object, slide: object, offset: object = 0, tz: object = None) -> None:
        object.__setattr__(self, "size_ms", to_ms(size, "size"))
        object.__setattr__(self, "slide_ms", to_ms(slide, "slide"))
        object.__setattr__(self, "offset_ms", _aligned_offset(offset, tz))
        self.__post_init__()

    def __post_init__(self) -> None:
        self._validate()

    def to_dict(self) -> dict:
        return {"type": "sliding", "size_ms": self.size_ms, "slide_ms": self.slide_ms, "offset_ms": self.offset_ms}
