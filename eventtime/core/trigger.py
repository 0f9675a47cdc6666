"""Watermark and firing rules, each written once (see docs/semantics.md).

Pure Python; shared by the reference model and the Spark engine.
"""

from __future__ import annotations

from typing import Optional

from .contract import LONGS, STRINGS
from .window import Window

__all__ = [
    "ON_TIME",
    "LATE",
    "FINAL",
    "ACCUMULATING",
    "DISCARDING",
    "ACCUMULATION_MODES",
    "ON_TIME_AND_LATE",
    "FINAL_ONLY",
    "EMIT_MODES",
    "END_OF_INPUT_MS",
    "MAX_INSTANT_MS",
    "cleanup_time",
    "next_watermark",
    "is_due",
    "is_expired",
]

# pane timings and modes (the contract with the engine: eventtime/contract.json)
ON_TIME = STRINGS["ON_TIME"]
LATE = STRINGS["LATE"]
FINAL = STRINGS["FINAL"]

ACCUMULATING = STRINGS["ACCUMULATING"]
DISCARDING = STRINGS["DISCARDING"]
ACCUMULATION_MODES = (ACCUMULATING, DISCARDING)

ON_TIME_AND_LATE = STRINGS["ON_TIME_AND_LATE"]
FINAL_ONLY = STRINGS["FINAL_ONLY"]
EMIT_MODES = (ON_TIME_AND_LATE, FINAL_ONLY)

# The watermark at the end of a bounded input (Flink's Long.MAX_VALUE watermark): every window
# is due and expired. 9999-12-31T23:59:59.999Z, the largest instant a Spark timestamp holds.
END_OF_INPUT_MS = LONGS["END_OF_INPUT_MS"]


def next_watermark(current_ms: Optional[int], max_event_time_ms: Optional[int], max_out_of_orderness_ms: int) -> Optional[int]:
    """``W' = max(W, 0, max event time seen - B)``; ``None`` means no timestamp seen yet.

    The floor at 0 is Spark's initial watermark; with every valid event time >= 1 it never
    decides a window (docs/semantics.md, "Initial watermark").

    >>> next_watermark(5000, 7000, 3000)
    5000
    >>> next_watermark(None, 7000, 3000)
    4000
    >>> next_watermark(None, 1000, 3000)
    0
    """
    if max_event_time_ms is None:
        return current_ms
    candidate = max(0, max_event_time_ms - max_out_of_orderness_ms)
    return candidate if current_ms is None else max(current_ms, candidate)


def is_due(window: Window, watermark_ms: Optional[int]) -> bool:
    """A window's ON_TIME pane is due once ``end - 1 <= W``.

    >>> is_due(Window(0, 3000), 2999), is_due(Window(0, 3000), 2998)
    (True, False)
    """
    return watermark_ms is not None and window.max_timestamp_ms <= watermark_ms


#: The largest instant the engine's epoch milliseconds hold (a Java ``long``).
MAX_INSTANT_MS = 2**63 - 1


def cleanup_time(window: Window, allowed_lateness_ms: int) -> int:
    """When a window's state is purged: ``end - 1 + L``, held at :data:`MAX_INSTANT_MS` when
    that is out of range (a window with such a lateness is never purged; Flink's guard).

    >>> cleanup_time(Window(0, 3000), 1000), cleanup_time(Window(0, 3000), MAX_INSTANT_MS)
    (3999, 9223372036854775807)
    """
    return min(window.max_timestamp_ms + allowed_lateness_ms, MAX_INSTANT_MS)


def is_expired(window: Window, watermark_ms: Optional[int], allowed_lateness_ms: int) -> bool:
    """A window is expired (state purged, new records late) once ``cleanup_time <= W``.

    >>> is_expired(Window(0, 3000), 3999, 1000), is_expired(Window(0, 3000), 3998, 1000)
    (True, False)
    """
    return watermark_ms is not None and cleanup_time(window, allowed_lateness_ms) <= watermark_ms
