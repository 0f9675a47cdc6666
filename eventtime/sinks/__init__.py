"""Sinks for the router's outputs: Delta tables for late/invalid records and panes.

Example:
    >>> from eventtime.sinks import DeltaLateSink, DeltaResultsSink
    >>> late_sink = DeltaLateSink("/tmp/eventtime-doc/late", pipeline="clicks")  # doctest: +SKIP
"""

from eventtime.sinks.delta import (
    RECORD_SCHEMA,
    DeltaDelaySink,
    DeltaLateSink,
    DeltaResultsSink,
    DeltaSinkError,
    WriteResult,
    compact,
    latest_panes,
    snapshot_dataset,
    spark_has_delta,
    write_via_spark,
)

__all__ = [
    "RECORD_SCHEMA",
    "DeltaDelaySink",
    "DeltaLateSink",
    "DeltaResultsSink",
    "DeltaSinkError",
    "WriteResult",
    "compact",
    "latest_panes",
    "snapshot_dataset",
    "spark_has_delta",
    "write_via_spark",
]
