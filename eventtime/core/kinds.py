"""The kinds of output rows (the ``kind`` column of the engine's output and the late-data
table) and of aggregations, written once (docs/architecture.md, "Contract between the
engine, the router and the sinks")."""

from __future__ import annotations

__all__ = [
    "PANE", "LATE_RECORD", "INVALID_RECORD", "PARTITION_STATS", "RECORD_KINDS",
    "COUNT", "SUM", "MEAN", "MIN", "MAX", "FIRST", "LAST", "UDAF", "BUILTIN_AGGREGATIONS",
]

# output rows
PANE = "pane"
LATE_RECORD = "late"  # a valid record added to no window (reason too_late)
INVALID_RECORD = "invalid"  # a record whose timestamp or source line was quarantined
PARTITION_STATS = "partition_stats"
RECORD_KINDS = (LATE_RECORD, INVALID_RECORD)

# aggregations
COUNT, SUM, MEAN, MIN, MAX, FIRST, LAST = "count", "sum", "mean", "min", "max", "first", "last"
UDAF = "udaf"
BUILTIN_AGGREGATIONS = (COUNT, SUM, MIN, MAX, MEAN, FIRST, LAST)
