"""Timestamp extraction and the quarantine of bogus timestamps.

A raw event-time value becomes epoch milliseconds or an invalid reason; it is never raised
and never silently dropped. Pure Python; the Spark engine implements the same rules.
"""

from __future__ import annotations

import math
import re
from datetime import date, datetime, timezone
from typing import Optional

from ._duration import event_zone, to_instant_ms
from .contract import STRINGS

__all__ = [
    "NULL_TIMESTAMP",
    "UNPARSEABLE_TIMESTAMP",
    "BEFORE_MIN_VALID",
    "TOO_FAR_IN_FUTURE",
    "MALFORMED_RECORD",
    "ENRICHMENT_FAILED",
    "TOO_LATE",
    "PARTLY_LATE",
    "INVALID_REASONS",
    "UNITS",
    "DEFAULT_MIN_VALID_MS",
    "DEFAULT_MAX_FUTURE_MS",
    "parse_timestamp",
    "quarantine_bounds",
    "classify",
    "extract",
]

NULL_TIMESTAMP = "null_timestamp"
UNPARSEABLE_TIMESTAMP = "unparseable_timestamp"
BEFORE_MIN_VALID = "before_min_valid"
TOO_FAR_IN_FUTURE = "too_far_in_future"
# The source could not parse the row (Spark's PERMISSIVE JSON/CSV reader put it in the
# corrupt-record column): set by the Spark engine only; a timestamp value never has it.
MALFORMED_RECORD = "malformed_record"
# The record's async enrichment failed and the step said on_failure="invalid"
# (eventtime.enrich_async, applied before with_event_time): set by the Spark engine only,
# after malformed_record and before any timestamp check.
ENRICHMENT_FAILED = "enrichment_failed"
TOO_LATE = STRINGS["TOO_LATE"]  # the contract with the engine (eventtime/contract.json)
# Too late for some of its windows only (EngineConfig.report_partly_late): also added to the others.
PARTLY_LATE = STRINGS["PARTLY_LATE"]
INVALID_REASONS = (NULL_TIMESTAMP, UNPARSEABLE_TIMESTAMP, BEFORE_MIN_VALID, TOO_FAR_IN_FUTURE, MALFORMED_RECORD,
                   ENRICHMENT_FAILED)

DEFAULT_MIN_VALID_MS = to_instant_ms("2000-01-01T00:00:00Z", "min_valid")
DEFAULT_MAX_FUTURE_MS = 86_400_000

# How many of the unit make one millisecond, as (multiply, divide).
UNITS = {"s": (1000, 1), "ms": (1, 1), "us": (1, 1000), "ns": (1, 1_000_000)}
_NUMBER = re.compile(r"^\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*$")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)


def _number_to_ms(value: float | int, unit: str) -> Optional[int]:
    mul, div = UNITS[unit]
    if isinstance(value, int):
        return value * mul // div
    if not math.isfinite(value):
        return None
    return math.floor(value * mul / div)


def _datetime_to_ms(value: datetime, zone=None) -> int:
    if value.tzinfo is None:
        # Naive: local time in ``zone`` (UTC by default). fold=0: in a DST gap the offset
        # before the gap, in an overlap the first (earlier) of the two instants.
        value = value.replace(tzinfo=zone or timezone.utc)
    delta = value - _EPOCH
    return (delta.days * 86_400 + delta.seconds) * 1000 + delta.microseconds // 1000


def parse_timestamp(
    value: object, unit: Optional[str] = None, fmt: Optional[str] = None, tz: Optional[str] = None
) -> tuple[Optional[int], Optional[str]]:
    """Parse a raw event time to ``(epoch_ms, None)`` or ``(None, reason)``.

    Numbers are in ``unit`` (``s``, ``ms`` — the default —, ``us``, ``ns``) and floored to
    the millisecond. Strings are ISO-8601 or follow ``fmt`` (a :func:`datetime.strptime`
    format); with an explicit ``unit`` a numeric string is a number. A value without a zone
    (a string without an offset, a date, a naive ``datetime``) is local time in ``tz`` (a
    fixed offset or an IANA name; UTC when ``None``); an explicit offset is kept. A local time
    in a DST gap takes the offset before the gap, one in an overlap the earlier instant
    (docs/semantics.md, as Spark's ``to_utc_timestamp``).

    >>> parse_timestamp("2024-01-01T08:00:00+08:00")
    (1704067200000, None)
    >>> parse_timestamp("2024-01-01 08:00:00", tz="UTC+8")
    (1704067200000, None)
    >>> parse_timestamp(1704067200, unit="s")
    (1704067200000, None)
    >>> parse_timestamp("yesterday")
    (None, 'unparseable_timestamp')
    """
    if unit is not None and unit not in UNITS:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
    zone = event_zone(tz)
    zone = zone[0] if zone else None
    if value is None:
        return None, NULL_TIMESTAMP
    if isinstance(value, float) and math.isnan(value):
        return None, NULL_TIMESTAMP
    if isinstance(value, bool):
        return None, UNPARSEABLE_TIMESTAMP
    if isinstance(value, (int, float)):
        ms = _number_to_ms(value, unit or "ms")
        return (ms, None) if ms is not None else (None, UNPARSEABLE_TIMESTAMP)
    if isinstance(value, datetime):
        return _datetime_to_ms(value, zone), None
    if isinstance(value, date):
        return _datetime_to_ms(datetime(value.year, value.month, value.day), zone), None
    if isinstance(value, str):
        text = value.strip()
        if text == "":
            return None, NULL_TIMESTAMP
        try:
            if fmt is not None:
                return _datetime_to_ms(datetime.strptime(text, fmt), zone), None
            if unit is not None and _NUMBER.match(text):
                number = float(text) if any(c in text for c in ".eE") else int(text)
                ms = _number_to_ms(number, unit)
                return (ms, None) if ms is not None else (None, UNPARSEABLE_TIMESTAMP)
            if len(text) < 10:  # not even a full date; fromisoformat would take "2024" and such
                return None, UNPARSEABLE_TIMESTAMP
            return _datetime_to_ms(datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00")), zone), None
        except (ValueError, OverflowError):
            return None, UNPARSEABLE_TIMESTAMP
    return None, UNPARSEABLE_TIMESTAMP


def quarantine_bounds(
    max_out_of_orderness: object,
    min_valid: object,
    max_future: object,
    names: tuple[str, str, str] = ("max_out_of_orderness", "min_valid", "max_future"),
) -> tuple[int, int, int]:
    """The validated ``(max_out_of_orderness_ms, min_valid_ms, max_future_ms)``: durations
    (int ms, ``timedelta``, ``"10 seconds"``) >= 0 and an instant >= 1 ms after the epoch;
    errors name the parameter by ``names``.

    >>> quarantine_bounds("10 seconds", "2000-01-01", "1 day")
    (10000, 946684800000, 86400000)
    """
    from ._duration import to_ms

    b_name, min_name, future_name = names
    out_of_orderness_ms = to_ms(max_out_of_orderness, b_name)
    if out_of_orderness_ms < 0:
        raise ValueError(f"{b_name} must be >= 0, got {out_of_orderness_ms} ms")
    min_valid_ms = to_instant_ms(min_valid, min_name)
    if min_valid_ms < 1:
        # Spark's watermark starts at 0, ours at "none"; with every valid event time >= 1
        # the two cannot be told apart (docs/semantics.md, "Initial watermark").
        raise ValueError(f"{min_name} must be >= 1 (1970-01-01T00:00:00.001Z), got {min_valid_ms}")
    max_future_ms = to_ms(max_future, future_name)
    if max_future_ms < 0:
        raise ValueError(f"{future_name} must be >= 0, got {max_future_ms} ms")
    return out_of_orderness_ms, min_valid_ms, max_future_ms


def classify(ts_ms: int, now_ms: int, min_valid_ms: int, max_future_ms: int) -> Optional[str]:
    """The invalid reason for a parsed timestamp, or ``None`` when it is valid.

    Valid means ``min_valid_ms <= ts_ms <= now_ms + max_future_ms`` (both ends included).

    >>> classify(0, now_ms=1_700_000_000_000, min_valid_ms=946684800000, max_future_ms=3_600_000)
    'before_min_valid'
    """
    if ts_ms < min_valid_ms:
        return BEFORE_MIN_VALID
    if ts_ms > now_ms + max_future_ms:
        return TOO_FAR_IN_FUTURE
    return None


def extract(
    value: object,
    now_ms: int,
    min_valid_ms: int = DEFAULT_MIN_VALID_MS,
    max_future_ms: int = DEFAULT_MAX_FUTURE_MS,
    unit: Optional[str] = None,
    fmt: Optional[str] = None,
    tz: Optional[str] = None,
) -> tuple[Optional[int], Optional[str]]:
    """Parse and classify: ``(epoch_ms, None)`` for a valid event time, else ``(epoch_ms or None, reason)``.

    >>> extract(0, now_ms=1_700_000_000_000)
    (0, 'before_min_valid')
    """
    ts_ms, reason = parse_timestamp(value, unit=unit, fmt=fmt, tz=tz)
    if reason is not None:
        return None, reason
    return ts_ms, classify(ts_ms, now_ms, min_valid_ms, max_future_ms)
