"""``with_event_time``: parse and classify the event time in Spark SQL, define the watermark.

The rules are those of :mod:`eventtime.core.timestamps` (``parse_timestamp`` + ``classify``),
written as Spark column expressions (no Python UDF), so that the quarantine costs no
Python round trip. Each input type's parsing (and where it differs from the Python rules) is
in :mod:`eventtime.spark.event_time_sql`; here, the quarantine's order, its bounds and the
watermark.

Malformed records: when the DataFrame has the corrupt-record column of Spark's PERMISSIVE
JSON / CSV reader (``_corrupt_record`` by default, ``corrupt_record_col``), a row where it
is non-null is invalid with reason ``malformed_record``, whatever its timestamp: the reader
could not parse the line, or a field had the wrong type (it is then null in the row), so
the row is quarantined whole rather than aggregated with a null. The raw line stays in the
corrupt-record column, hence in the record's ``payload``; ``__et_raw`` stays the event-time
column's text (null when the reader could not get that far). A row whose async enrichment
failed under ``on_failure="invalid"`` (``eventtime.enrich_async``: the non-null marker column
``__et_enrich_failed``, dropped here) is invalid with reason ``enrichment_failed``, second
after ``malformed_record``.

The transform adds internal columns (all prefixed ``__et_``):

* ``__et_ms`` (bigint): the parsed event time in epoch ms, null when it cannot be parsed;
* ``__et_reason`` (string): null for a valid event time, else the invalid reason
  (``malformed_record`` first, see above);
* ``__et_raw`` (string): the original value as text, for invalid records (null otherwise);
* ``__et_wm`` (timestamp): the event time when valid, null otherwise. The watermark is
  defined on it (``withWatermark``); Spark ignores nulls when it takes the batch's maximum
  event time, so invalid records never move the watermark (measured, Spark 4.3).

The settings are kept as metadata of ``__et_ms`` for :func:`window_aggregate`.
"""

from __future__ import annotations

import json
from typing import Any, Callable, Optional

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core._duration import event_zone, to_instant_ms
from ..core.timestamps import (
    BEFORE_MIN_VALID,
    DEFAULT_MAX_FUTURE_MS,
    DEFAULT_MIN_VALID_MS,
    ENRICHMENT_FAILED,
    MALFORMED_RECORD,
    TOO_FAR_IN_FUTURE,
    UNITS,
    quarantine_bounds,
)
from ..core.trigger import END_OF_INPUT_MS
from .connect import require_classic
from .event_time_sql import parse_expr, reason_of, spark_pattern

__all__ = ["with_event_time", "META_KEY", "event_time_settings", "DEFAULT_CORRUPT_RECORD_COL", "ENRICHMENT_FAILED_COL"]

META_KEY = "eventtime"
# Spark's default ``columnNameOfCorruptRecord`` (spark.sql.columnNameOfCorruptRecord).
DEFAULT_CORRUPT_RECORD_COL = "_corrupt_record"
# Set by eventtime.enrich_async(on_failure="invalid") where the record's lookup failed.
ENRICHMENT_FAILED_COL = "__et_enrich_failed"


def event_time_settings(df: DataFrame) -> dict:
    """The settings :func:`with_event_time` stored on ``__et_ms`` (raises if it was not applied)."""
    if "__et_ms" not in df.columns:
        raise ValueError(
            "window_aggregate needs the event time: apply eventtime.with_event_time(...) first, "
            "e.g. df.transform(eventtime.with_event_time('ts', unit='ms'))"
        )
    meta = df.schema["__et_ms"].metadata.get(META_KEY)
    return json.loads(meta) if isinstance(meta, str) else dict(meta or {})


def with_event_time(
    column: str,
    unit: Optional[str] = None,
    fmt: Optional[str] = None,
    max_out_of_orderness: Any = 0,
    min_valid: Any = DEFAULT_MIN_VALID_MS,
    max_future: Any = DEFAULT_MAX_FUTURE_MS,
    now: Any = None,
    corrupt_record_col: Optional[str] = DEFAULT_CORRUPT_RECORD_COL,
    tz: Optional[str] = None,
    _string_fallback: Optional[str] = None,
) -> Callable[[DataFrame], DataFrame]:
    """A ``DataFrame.transform`` step: parse ``column`` to event time, quarantine bogus values, set the watermark.

    ``unit`` (``s``, ``ms``, ``us``, ``ns``) applies to numbers (and, when given, numeric
    strings); strings are ISO-8601 or follow ``fmt`` (a strptime format). A record is
    invalid when its time is null, unparseable, before ``min_valid`` or after processing time
    + ``max_future``; processing time is the micro-batch's ``current_timestamp()`` unless
    ``now`` (epoch ms, datetime or ISO string) pins it (tests, replays).

    ``corrupt_record_col``: the corrupt-record column of Spark's PERMISSIVE reader (e.g.
    ``spark.readStream.schema("..., _corrupt_record string").json(path)``). When the
    DataFrame has it, a row where it is non-null is invalid with reason ``malformed_record``
    (before any timestamp check); a DataFrame without it is unaffected. ``None`` disables the
    check. A record whose ``eventtime.enrich_async(..., on_failure="invalid")`` lookup failed
    is invalid with reason ``enrichment_failed`` (after ``malformed_record``).

    ``tz``: the zone of values that carry none — strings without an offset, ``fmt`` without
    ``%z``, DATE and TIMESTAMP_NTZ columns — as a fixed offset (``"UTC+8"``, ``"+08:00"``) or
    an IANA name (``"Asia/Shanghai"``); UTC when ``None``. An explicit offset in a string is
    kept; TIMESTAMP columns and epoch numbers are instants and unaffected. A local time in a
    DST gap takes the offset before the gap, one in an overlap the earlier instant (as
    ``to_utc_timestamp``; docs/semantics.md). The session time zone plays no part.

    >>> events.transform(with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds"))  # doctest: +SKIP
    >>> events.transform(with_event_time("local_ts", tz="Asia/Shanghai"))  # "2024-05-01 09:00:00" is 01:00Z  # doctest: +SKIP
    """
    zone = event_zone(tz)
    zone_id = zone[1] if zone else None
    if unit is not None and unit not in UNITS:
        raise ValueError(f"unit must be one of {sorted(UNITS)}, got {unit!r}")
    if corrupt_record_col is not None and not isinstance(corrupt_record_col, str):
        raise TypeError(f"corrupt_record_col must be a column name (str) or None, got {corrupt_record_col!r}")
    if fmt is not None:
        spark_pattern(fmt)  # validate early
    b_ms, min_valid_ms, max_future_ms = quarantine_bounds(max_out_of_orderness, min_valid, max_future)
    now_ms = None if now is None else to_instant_ms(now, "now")

    def apply(df: DataFrame) -> DataFrame:
        # a stream needs the engine (control source, batch time): not reachable from Spark Connect
        require_classic(df, "with_event_time on a streaming DataFrame", streaming_only=True)
        if column not in df.columns:
            raise ValueError(f"with_event_time: column {column!r} not found; columns: {df.columns}")
        dtype = df.schema[column].dataType
        main = parse_expr(F.col(column), dtype, unit, fmt, prefix="__et_p", zone=zone_id)
        stages = list(main.stages)
        ms, reason = main.ms, main.reason
        raw = F.col(column).cast("string")
        if _string_fallback is not None:
            fb = parse_expr(F.col(_string_fallback), T.StringType(), unit, fmt, prefix="__et_f", zone=zone_id)
            stages += fb.stages
            use_str = F.col(column).isNull() & F.col(_string_fallback).isNotNull()
            ms = F.when(use_str, fb.ms).otherwise(ms)
            reason = F.when(use_str, fb.reason).otherwise(reason)
            raw = F.coalesce(raw, F.col(_string_fallback))
        for name, expr in stages:
            df = df.withColumn(name, expr)
        # Few projections, each written as Spark's optimizer leaves it (it optimizes the plan again
        # in every micro-batch): the quarantine as checks in order, and __et_valid (exactly
        # "__et_reason is null") as a plain conjunction, so that nothing the map side reads
        # holds a test on a CASE of texts for the optimizer to take apart.
        checks = main.checks if _string_fallback is None else None
        df = df.withColumn("__et_ms_raw", ms)
        ms = F.col("__et_ms_raw")
        if checks is None:  # text: the staged parse's reason, as one check of its own
            df = df.withColumn("__et_parse_reason", reason)
            parsed = F.col("__et_parse_reason")
            checks = [(parsed.isNotNull(), None, parsed)]
        now_col = F.lit(now_ms).cast("long") if now_ms is not None else _batch_now_ms(df)
        enrich_failed = [ENRICHMENT_FAILED_COL] if ENRICHMENT_FAILED_COL in df.columns else []
        corrupt = corrupt_record_col if corrupt_record_col is not None and corrupt_record_col in df.columns else None
        late_bound = now_col + F.lit(max_future_ms)
        # The quarantine's order: malformed (the row's fields are not to be trusted, the event
        # time included), not enriched (its fields may be fine), the value, then the bounds.
        first = [(F.col(c).isNotNull(), F.col(c).isNull(), r) for c, r in
                 ([(corrupt, MALFORMED_RECORD)] if corrupt else []) + [(m, ENRICHMENT_FAILED) for m in enrich_failed]]
        # once the value parsed, ms is not null: each bound's two sides are exact opposites
        bounds = [(ms < F.lit(min_valid_ms), ms >= F.lit(min_valid_ms), BEFORE_MIN_VALID),
                  (ms > late_bound, ms <= late_bound, TOO_FAR_IN_FUTURE)]
        every = [*first, *checks, *bounds]
        if all(passes is not None for _, passes, _ in every):
            valid = every[0][1]
            for _, passes, _ in every[1:]:
                valid = valid & passes
            df = df.withColumns({"__et_reason": reason_of(every), "__et_valid": valid})
        else:  # a text's parse may leave ms null without a reason: "no reason" as it is
            df = df.withColumn("__et_reason", reason_of(every))
            df = df.withColumn("__et_valid", F.col("__et_reason").isNull())
        settings = {  # what window_aggregate reads (event_time_settings)
            "column": column,
            "max_out_of_orderness_ms": b_ms,
            "min_valid_ms": min_valid_ms,
            "max_future_ms": max_future_ms,
        }
        control = None
        if df.isStreaming:
            # End of input (docs/semantics.md): a control stream whose one row, once raised, moves
            # the watermark to END_OF_INPUT_MS; every key's timers then fire and purge its state.
            from .control import control_stream

            control, signal_path = control_stream(df.sparkSession)
            settings["end_of_input_signal"] = signal_path
        dropped = {"__et_ms_raw", "__et_parse_reason", *enrich_failed, *[name for name, _ in stages]}
        valid = F.col("__et_valid")
        out = df.select(
            *[F.col(c) for c in df.columns if c not in dropped and c not in ("__et_reason", "__et_valid")],
            F.col("__et_reason"),
            # only invalid records keep their raw text (a cast per row costs, measured)
            F.when(F.col("__et_reason").isNotNull(), raw).alias("__et_raw"),
            F.when(valid, F.col("__et_ms_raw")).alias("__et_ms", metadata={META_KEY: json.dumps(settings)}),
            F.when(valid, F.timestamp_millis(F.col("__et_ms_raw"))).alias("__et_wm"),
            valid,
            *([F.lit(False).alias("__et_end")] if control is not None else []),
        )
        if control is not None:
            # The row is marked (__et_end), not recognised by its time: with no out-of-orderness
            # its time is END_OF_INPUT_MS itself, and it must never be counted as a record.
            end_ms = END_OF_INPUT_MS + b_ms
            out = out.unionByName(  # the union's columns are the first side's (with the metadata)
                control.select(
                    *[F.lit(None).cast(f.dataType).alias(f.name) for f in out.schema.fields if not f.name.startswith("__et_")],
                    F.lit(None).cast("string").alias("__et_reason"),
                    F.lit(None).cast("string").alias("__et_raw"),
                    F.lit(end_ms).alias("__et_ms"),
                    F.timestamp_millis(F.lit(end_ms)).alias("__et_wm"),
                    F.lit(True).alias("__et_valid"),
                    F.lit(True).alias("__et_end"),
                )
            )
        return out.withWatermark("__et_wm", f"{b_ms} milliseconds")

    return apply


def _batch_now_ms(df: DataFrame) -> Column:
    """Processing time in ms: the micro-batch's ``current_timestamp()``. In a stream it goes to
    the generated code as a value, not as a constant in the code (``BatchValue.java``): with
    the constant, each batch compiled its code anew and ran it without a JIT profile."""
    now = F.unix_millis(F.current_timestamp())
    if not df.isStreaming:
        return now
    from .engine import ensure_engine

    ensure_engine(df.sparkSession)
    return Column(df.sparkSession._jvm.eventtime.jvm.spark.BatchValue.column(now._jc))
