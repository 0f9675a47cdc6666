"""The kinds of output rows (the ``kind`` column of the engine's output and the late-data
table) and of aggregations, written once (docs/architecture.md, "Contract between the
engine, the router and the sinks")."""

from __future__ import annotations

from .contract import STRINGS

__all__ = [
    "PANE", "LATE_RECORD", "INVALID_RECORD", "PARTITION_STATS", "RECORD_KINDS",
    "COUNT", "SUM", "MEAN", "MIN", "MAX", "FIRST", "LAST", "UDAF", "BUILTIN_AGGREGATIONS", "SQL_AGGREGATE",
    "TIMEOUT", "LOOKUP_ERROR", "MISSING", "BAD_RESULT", "BAD_VALUE", "ENRICHMENT_FAILURE_REASONS",
]

# output rows (the contract with the engine: eventtime/contract.json)
PANE = STRINGS["PANE"]
LATE_RECORD = STRINGS["LATE_RECORD"]  # a valid record added to no window (reason too_late)
INVALID_RECORD = STRINGS["INVALID_RECORD"]  # a record whose timestamp or source line was quarantined
PARTITION_STATS = STRINGS["PARTITION_STATS"]
RECORD_KINDS = (LATE_RECORD, INVALID_RECORD)

# aggregations
COUNT, SUM, MEAN, MIN, MAX, FIRST, LAST = (STRINGS[f"AGG_{n}"] for n in ("COUNT", "SUM", "MEAN", "MIN", "MAX", "FIRST", "LAST"))
UDAF = "udaf"
BUILTIN_AGGREGATIONS = (COUNT, SUM, MIN, MAX, MEAN, FIRST, LAST)
SQL_AGGREGATE = STRINGS["AGG_SQL"]  # a Spark SQL aggregate expression, run by the Spark engine only

# why an async enrichment's lookup failed: its error column's values start with one of these
# (``"lookup_error: ClientResponseError"``), and BatchStats.enrichment counts them
TIMEOUT = "timeout"  # every attempt of the key's chunk ran past ``timeout_ms``
LOOKUP_ERROR = "lookup_error"  # every attempt raised; the detail is the last exception's type
MISSING = "missing"  # the lookup returned a dict without the key
BAD_RESULT = "bad_result"  # the lookup broke its contract (not a list/dict, a list of another length)
BAD_VALUE = "bad_value"  # the value does not convert to the step's value type
ENRICHMENT_FAILURE_REASONS = (TIMEOUT, LOOKUP_ERROR, MISSING, BAD_RESULT, BAD_VALUE)
