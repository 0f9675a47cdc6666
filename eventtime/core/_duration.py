"""Durations, instants and fixed UTC offsets at the public edge, as integer milliseconds."""

from __future__ import annotations

import re
from datetime import date, datetime, timedelta, timezone

_UNIT_MS = {
    "ms": 1,
    "millisecond": 1,
    "milliseconds": 1,
    "s": 1000,
    "sec": 1000,
    "secs": 1000,
    "second": 1000,
    "seconds": 1000,
    "m": 60_000,
    "min": 60_000,
    "mins": 60_000,
    "minute": 60_000,
    "minutes": 60_000,
    "h": 3_600_000,
    "hour": 3_600_000,
    "hours": 3_600_000,
    "d": 86_400_000,
    "day": 86_400_000,
    "days": 86_400_000,
    "w": 604_800_000,
    "week": 604_800_000,
    "weeks": 604_800_000,
}
_PART = re.compile(r"\s*(-?\d+)\s*([a-zA-Z]+)\s*")


def to_ms(value: object, name: str) -> int:
    """Convert a duration given as int ms, ``timedelta`` or ``"10 minutes"`` to int ms.

    ``name`` is the parameter name used in error messages.

    >>> to_ms("1 day 2 hours", "size")
    93600000
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be int milliseconds, timedelta or a string like '10 minutes', got bool {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, timedelta):
        micros = (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds
        if micros % 1000:
            raise ValueError(f"{name} must be a whole number of milliseconds, got {value!r}")
        return micros // 1000
    if isinstance(value, str):
        text = value.strip().lower()
        if text.startswith("interval "):
            text = text[len("interval ") :]
        pos, total, parts = 0, 0, 0
        while pos < len(text):
            match = _PART.match(text, pos)
            if match is None or match.group(2) not in _UNIT_MS:
                raise ValueError(
                    f"{name} must look like '10 minutes' or '1 day 2 hours' "
                    f"(units: ms, seconds, minutes, hours, days, weeks), got {value!r}"
                )
            total += int(match.group(1)) * _UNIT_MS[match.group(2)]
            pos = match.end()
            parts += 1
        if parts == 0:
            raise ValueError(f"{name} must not be empty, got {value!r}")
        return total
    raise TypeError(
        f"{name} must be int milliseconds, timedelta or a string like '10 minutes', "
        f"got {type(value).__name__} {value!r}"
    )


_HUMAN = (("d", 86_400_000), ("h", 3_600_000), ("min", 60_000), ("s", 1000))


def human_ms(ms: int | float, parts: int = 2) -> str:
    """A duration for people: the ``parts`` largest units, rounded at the last one.

    >>> human_ms(11_474_336), human_ms(58_928), human_ms(-90_000), human_ms(250), human_ms(0)
    ('3 h 11 min', '59 s', '-1 min 30 s', '250 ms', '0 ms')
    >>> human_ms(3_599_999), human_ms(59_999), human_ms(172_800_001)
    ('1 h', '1 min', '2 d')
    """
    ms = int(round(ms))
    if ms < 0:
        return "-" + human_ms(-ms, parts)
    if ms < 1000:
        return f"{ms} ms"
    rest = ms
    for _ in range(2):  # rounding may carry into a larger unit (59.9 s -> 1 min)
        units = [(name, size) for name, size in _HUMAN if size <= rest][:parts]
        last = units[-1][1]
        rest = (ms + last // 2) // last * last  # rounded at the smallest unit shown
    out = []
    for name, size in units:
        count, rest = divmod(rest, size)
        if count:
            out.append(f"{count} {name}")
    return " ".join(out) if out else "0 ms"


def to_instant_ms(value: object, name: str) -> int:
    """Convert an instant (int epoch ms, ``datetime``, ``date`` or ISO-8601 string) to epoch ms.

    Naive datetimes and strings without an offset are taken as UTC.

    >>> to_instant_ms("2000-01-01", "min_valid")
    946684800000
    """
    if isinstance(value, bool):
        raise TypeError(f"{name} must be epoch milliseconds, datetime, date or ISO-8601 string, got bool")
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise ValueError(f"{name} must be an ISO-8601 date or timestamp, got {value!r}") from None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=timezone.utc)
        delta = value - datetime(1970, 1, 1, tzinfo=timezone.utc)
        return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days * 86_400_000
    raise TypeError(
        f"{name} must be epoch milliseconds, datetime, date or ISO-8601 string, got {type(value).__name__} {value!r}"
    )


_TZ = re.compile(r"^(?:utc|gmt)?\s*(?:([+-])\s*(\d{1,2})(?::?(\d{2}))?)?$")


def tz_offset_ms(tz: object, name: str = "tz") -> int:
    """Offset of a fixed time zone from UTC in ms: ``"UTC+8"``, ``"+08:00"``, ``"UTC-05:30"``, ``"UTC"``.

    Named zones with daylight saving time are refused: a window aligned to them would change
    length twice a year, which fixed-size windows cannot express.

    >>> tz_offset_ms("UTC+8")
    28800000
    """
    if isinstance(tz, timedelta):
        return to_ms(tz, name)
    if isinstance(tz, timezone):
        return to_ms(tz.utcoffset(None), name)
    if not isinstance(tz, str):
        raise TypeError(f"{name} must be a string like 'UTC+8' or '+08:00', got {type(tz).__name__} {tz!r}")
    match = _TZ.match(tz.strip().lower())
    if match is None or tz.strip() == "":
        raise ValueError(
            f"{name} must be a fixed UTC offset like 'UTC+8', '+08:00' or 'UTC-05:30', got {tz!r}"
        )
    sign, hours, minutes = match.groups()
    if sign is None:
        return 0
    hours_i, minutes_i = int(hours), int(minutes or 0)
    if hours_i > 14 or minutes_i >= 60:
        raise ValueError(f"{name} must be between UTC-14:00 and UTC+14:00, got {tz!r}")
    offset = (hours_i * 60 + minutes_i) * 60_000
    return -offset if sign == "-" else offset


def event_zone(tz: object, name: str = "tz"):
    """``(tzinfo, Spark zone id)`` of the zone naive timestamps are read in: a fixed offset
    (``"UTC+8"``, ``"+08:00"``, ``"UTC"``) or an IANA name (``"Asia/Shanghai"``,
    ``"Europe/Berlin"``); ``None`` for UTC (the default).

    >>> event_zone("UTC+8")[1], event_zone("Europe/Berlin")[1]
    ('+08:00', 'Europe/Berlin')
    """
    if tz is None:
        return None
    if not isinstance(tz, str):
        raise TypeError(f"{name} must be a zone name like 'UTC+8' or 'Asia/Shanghai', got {type(tz).__name__} {tz!r}")
    text = tz.strip()
    if _TZ.match(text.lower()) and text:
        offset = tz_offset_ms(text, name)
        sign = "-" if offset < 0 else "+"
        minutes = abs(offset) // 60_000
        return timezone(timedelta(milliseconds=offset)), f"{sign}{minutes // 60:02d}:{minutes % 60:02d}"
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        # posix/ and right/ copies exist for Python but not for Spark (right/ counts leap seconds)
        if ("/" not in text and text not in ("UTC", "GMT")) or text.split("/", 1)[0] in ("posix", "right"):
            raise ZoneInfoNotFoundError(text)
        return ZoneInfo(text), text
    except (ZoneInfoNotFoundError, ValueError, OSError):  # OSError: a folder such as America/Argentina
        raise ValueError(
            f"{name} must be a fixed UTC offset ('UTC+8', '+08:00') or an IANA zone name ('Asia/Shanghai', "
            f"'Europe/Berlin'), got {tz!r}"
        ) from None
