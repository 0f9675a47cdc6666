"""Window assignment: which half-open windows ``[start, end)`` contain an event time.

Pure Python; shared by the reference model and the Spark engine.
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from datetime import date, datetime, timedelta, timezone
from typing import Any, NamedTuple

from ._duration import event_zone, to_ms, tz_offset_ms
from ._spec import spec_fields, spec_ms
from .contract import STRINGS

__all__ = ["Window", "WindowAssigner", "Tumbling", "Sliding", "Calendar", "Session", "CALENDAR_UNITS", "WEEKDAYS"]


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


class WindowAssigner(abc.ABC):
    """Base of the window assigners: which windows an event time belongs to."""

    #: Whether windows merge per key as records arrive (sessions) instead of being fixed.
    merging = False
    #: The ``type`` of :meth:`to_dict` (eventtime/contract.json).
    TYPE: str

    @abc.abstractmethod
    def assign(self, ts_ms: int) -> list[Window]:
        """All windows containing ``ts_ms``, ordered by start (for sessions: the record's own
        ``[ts, ts + gap)``, before merging)."""

    @abc.abstractmethod
    def to_dict(self) -> dict:
        """The assigner as the spec's ``window`` object (the engine spec, the replay scenario,
        the checkpoint's fingerprint): integer milliseconds, :meth:`from_dict` reads it back."""

    @staticmethod
    def from_dict(data: Any) -> "WindowAssigner":
        """The assigner of a :meth:`to_dict` object (``TypeError`` / ``ValueError`` naming the field).

        >>> WindowAssigner.from_dict({"type": "sliding", "size_ms": 600_000, "slide_ms": 300_000})
        Sliding(size_ms=600000, slide_ms=300000, offset_ms=0)
        >>> w = Calendar("week", tz="UTC+8", week_start="sunday")
        >>> WindowAssigner.from_dict(w.to_dict()) == w
        True
        """
        if not isinstance(data, dict):
            raise TypeError(f"window must be a dict with a 'type', got {type(data).__name__} {data!r}")
        kinds = {cls.TYPE: cls for cls in (Tumbling, Sliding, Calendar, Session)}
        if data.get("type") not in kinds:
            raise ValueError(f"window.type must be one of {sorted(kinds)}, got {data.get('type')!r}")
        return kinds[data["type"]]._from_fields(data)


class _SlicedAssigner(WindowAssigner):
    """Fixed windows (not merging), each a union of consecutive *slices*.

    A record lies in exactly one slice, and every window containing the record contains its
    whole slice. The Spark engine aggregates per slice and merges slices when a window fires.
    """

    @abc.abstractmethod
    def slice_start(self, ts_ms: int) -> int:
        """Start of the slice containing ``ts_ms``."""

    @abc.abstractmethod
    def windows_of_slice(self, slice_start_ms: int) -> list[Window]:
        """The windows that contain the whole slice starting at ``slice_start_ms``."""

    @abc.abstractmethod
    def slices_of(self, window: Window) -> list[int]:
        """Starts of the slices that make up ``window``."""


class _FixedGrid(_SlicedAssigner):
    """Windows of a fixed size starting at ``offset_ms + k * slide_ms``."""

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


def _aligned_offset(offset: object, tz: object) -> int:
    offset_ms = to_ms(offset, "offset")
    if tz is not None:
        try:
            zone_offset = tz_offset_ms(tz, "tz")
        except ValueError:
            if isinstance(tz, str) and _is_zone_name(tz):
                raise ValueError(
                    f"tz={tz!r} is a named zone whose offset can change (daylight saving time); fixed-size "
                    f"windows need a fixed offset such as 'UTC+8'. For local days, weeks or months in "
                    f"{tz!r} use Calendar('day', tz={tz!r})"
                ) from None
            raise
        # Local midnight in UTC+z is at -z UTC, so windows shift back by the zone's offset.
        offset_ms -= zone_offset
    return offset_ms


def _is_zone_name(tz: str) -> bool:
    try:
        event_zone(tz)
    except ValueError:
        return False
    return True


@dataclass(frozen=True, init=False)
class Tumbling(_FixedGrid):
    """Fixed-size, non-overlapping windows, aligned to the epoch plus ``offset`` or to ``tz``'s midnight.

    >>> Tumbling("1 day", tz="UTC+8").assign(0)   # 1970-01-01T00:00Z is 08:00 local
    [Window(start_ms=-28800000, end_ms=57600000)]
    """

    TYPE = STRINGS["WINDOW_TUMBLING"]
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
        return {"type": self.TYPE, "size_ms": self.size_ms, "offset_ms": self.offset_ms}

    @classmethod
    def _from_fields(cls, data: dict) -> "Tumbling":
        spec_fields(data, "window", required=("type", "size_ms"), optional=("offset_ms",))
        return cls(spec_ms(data, "size_ms", "window"), offset=spec_ms(data, "offset_ms", "window", 0))


@dataclass(frozen=True, init=False)
class Sliding(_FixedGrid):
    """Windows of ``size`` starting every ``slide``; a record falls in about ``size / slide`` windows.

    >>> Sliding("10 minutes", "5 minutes").assign(0)
    [Window(start_ms=-300000, end_ms=300000), Window(start_ms=0, end_ms=600000)]
    """

    TYPE = STRINGS["WINDOW_SLIDING"]
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
        return {"type": self.TYPE, "size_ms": self.size_ms, "slide_ms": self.slide_ms, "offset_ms": self.offset_ms}

    @classmethod
    def _from_fields(cls, data: dict) -> "Sliding":
        spec_fields(data, "window", required=("type", "size_ms", "slide_ms"), optional=("offset_ms",))
        return cls(spec_ms(data, "size_ms", "window"), spec_ms(data, "slide_ms", "window"),
                   offset=spec_ms(data, "offset_ms", "window", 0))


CALENDAR_UNITS = (STRINGS["UNIT_DAY"], STRINGS["UNIT_WEEK"], STRINGS["UNIT_MONTH"])
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_MS = timedelta(milliseconds=1)


@dataclass(frozen=True, init=False)
class Calendar(_SlicedAssigner):
    """Local days, weeks or months in a time zone, from local midnight to local midnight.

    ``tz`` is an IANA zone (``"Europe/Berlin"``) or a fixed offset (``"UTC+8"``). In a zone
    with daylight saving time a day is 23 or 25 hours long twice a year; a month has its real
    length. Weeks start on ``week_start``. Windows are half-open and tile time without gaps:
    each ends where the next begins.

    >>> day = Calendar("day", tz="Europe/Berlin").assign(1_711_846_800_000)  # 2024-03-31T01:00Z
    >>> (day[0].end_ms - day[0].start_ms) // 3_600_000                       # the 23-hour day
    23
    >>> Calendar("month", tz="UTC+8").assign(0)                               # Jan 1970 in UTC+8
    [Window(start_ms=-28800000, end_ms=2649600000)]
    """

    TYPE = STRINGS["WINDOW_CALENDAR"]
    unit: str
    tz: str
    week_start: str

    def __init__(self, unit: str, tz: object = "UTC", week_start: str = "monday") -> None:
        if not isinstance(unit, str):
            raise TypeError(f"unit must be one of {CALENDAR_UNITS}, got {type(unit).__name__} {unit!r}")
        if unit not in CALENDAR_UNITS:
            raise ValueError(f"unit must be one of {CALENDAR_UNITS}, got {unit!r}")
        if not isinstance(week_start, str):
            raise TypeError(f"week_start must be one of {WEEKDAYS}, got {type(week_start).__name__} {week_start!r}")
        if week_start.lower() not in WEEKDAYS:
            raise ValueError(f"week_start must be one of {WEEKDAYS}, got {week_start!r}")
        if tz is None:
            raise TypeError("tz must be a zone name like 'Europe/Berlin' or 'UTC+8', got None")
        zone, zone_id = event_zone(tz, "tz")
        object.__setattr__(self, "unit", unit)
        object.__setattr__(self, "tz", zone_id)
        object.__setattr__(self, "week_start", week_start.lower())
        object.__setattr__(self, "_zone", zone)

    def _midnight_ms(self, day: date) -> int:
        # A local midnight that falls in a DST gap is read with the offset before the gap (fold=0),
        # which is the instant the gap starts; in an overlap, the first of the two midnights.
        return (datetime(day.year, day.month, day.day, tzinfo=self._zone) - _EPOCH) // _MS

    def _first_day(self, ts_ms: int) -> date:
        day = (_EPOCH + timedelta(milliseconds=ts_ms)).astimezone(self._zone).date()
        if self.unit == "week":
            return day - timedelta(days=(day.weekday() - WEEKDAYS.index(self.week_start)) % 7)
        if self.unit == "month":
            return day.replace(day=1)
        return day

    def _next_day(self, first: date) -> date:
        if self.unit == "day":
            return first + timedelta(days=1)
        if self.unit == "week":
            return first + timedelta(days=7)
        return date(first.year + first.month // 12, first.month % 12 + 1, 1)

    def assign(self, ts_ms: int) -> list[Window]:
        """The one window containing ``ts_ms``.

        >>> Calendar("week", tz="UTC", week_start="sunday").assign(0)  # 1970-01-01 was a Thursday
        [Window(start_ms=-345600000, end_ms=259200000)]
        """
        first = self._first_day(ts_ms)
        return [Window(self._midnight_ms(first), self._midnight_ms(self._next_day(first)))]

    def slice_start(self, ts_ms: int) -> int:
        """A calendar window is its own slice."""
        return self.assign(ts_ms)[0].start_ms

    def windows_of_slice(self, slice_start_ms: int) -> list[Window]:
        return self.assign(slice_start_ms)

    def slices_of(self, window: Window) -> list[int]:
        return [window.start_ms]

    def to_dict(self) -> dict:
        out = {"type": self.TYPE, "unit": self.unit, "tz": self.tz}
        if self.unit == STRINGS["UNIT_WEEK"]:
            out["week_start"] = self.week_start
        return out

    @classmethod
    def _from_fields(cls, data: dict) -> "Calendar":
        spec_fields(data, "window", required=("type", "unit", "tz"), optional=("week_start",))
        return cls(data["unit"], tz=data["tz"], week_start=data.get("week_start", "monday"))


@dataclass(frozen=True, init=False)
class Session(WindowAssigner):
    """Per key, records closer than ``gap`` form one session ``[first ts, last ts + gap)``.

    A record's own window is ``[ts, ts + gap)``; windows of a key that overlap (as half-open
    intervals) merge into one session. Records exactly ``gap`` apart are two sessions. The
    merging, lateness and firing rules are in docs/semantics.md ("Session windows").

    >>> Session("30 minutes").assign(0)
    [Window(start_ms=0, end_ms=1800000)]
    >>> Session(10).merge([Window(0, 10), Window(5, 15), Window(15, 25)])
    [Window(start_ms=0, end_ms=15), Window(start_ms=15, end_ms=25)]
    """

    TYPE = STRINGS["WINDOW_SESSION"]
    gap_ms: int
    merging = True

    def __init__(self, gap: object) -> None:
        object.__setattr__(self, "gap_ms", to_ms(gap, "gap"))
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.gap_ms <= 0:
            raise ValueError(f"gap must be > 0, got {self.gap_ms} ms")

    def assign(self, ts_ms: int) -> list[Window]:
        return [Window(ts_ms, ts_ms + self.gap_ms)]

    @staticmethod
    def merge(windows: "list[Window]") -> list[Window]:
        """The sessions the given windows form: overlapping ones (``b.start < a.end``) merged."""
        merged: list[Window] = []
        for w in sorted(windows):
            if merged and w.start_ms < merged[-1].end_ms:
                merged[-1] = Window(merged[-1].start_ms, max(merged[-1].end_ms, w.end_ms))
            else:
                merged.append(w)
        return merged

    def to_dict(self) -> dict:
        return {"type": self.TYPE, "gap_ms": self.gap_ms}

    @classmethod
    def _from_fields(cls, data: dict) -> "Session":
        spec_fields(data, "window", required=("type", "gap_ms"))
        return cls(spec_ms(data, "gap_ms", "window"))
