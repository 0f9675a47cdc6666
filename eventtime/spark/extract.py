"""``with_event_time``: parse and classify the event time in Spark SQL, define the watermark.

The rules are those of :mod:`eventtime.core.timestamps` (``parse_timestamp`` + ``classify``),
written as Spark column expressions (no Python UDF), so that the quarantine costs no
Python round trip. Known differences from the Python rules (tested cases agree, see
tests/spark/test_spark_engine.py::test_spark_classification_equals_python):

* ISO-8601 strings: the forms ``YYYY-MM-DD`` and ``YYYY-MM-DD<sep>HH[:MM[:SS[.f|,f]]][Z|±HH[[:]MM]]``
  are accepted; the basic forms (``20231114``, ``T2213``), week dates and offsets with seconds,
  which Python 3.11's ``fromisoformat`` also takes, are ``unparseable_timestamp`` here, and so
  are offsets beyond ±18:00 (Spark's limit).
* Decimal columns are parsed like floats (the Python rules call a ``Decimal`` unparseable).
* ``fmt``: the strptime directives in ``_STRPTIME`` only (others raise at definition time).

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
import re
from typing import Any, Callable, NamedTuple, Optional

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
    NULL_TIMESTAMP,
    TOO_FAR_IN_FUTURE,
    UNITS,
    UNPARSEABLE_TIMESTAMP,
    quarantine_bounds,
)
from ..core.trigger import END_OF_INPUT_MS
from .connect import require_classic

__all__ = ["with_event_time", "META_KEY", "event_time_settings", "DEFAULT_CORRUPT_RECORD_COL", "ENRICHMENT_FAILED_COL"]

META_KEY = "eventtime"
# Spark's default ``columnNameOfCorruptRecord`` (spark.sql.columnNameOfCorruptRecord).
DEFAULT_CORRUPT_RECORD_COL = "_corrupt_record"
# Set by eventtime.enrich_async(on_failure="invalid") where the record's lookup failed.
ENRICHMENT_FAILED_COL = "__et_enrich_failed"
_LMAX = 2**63 - 1
_LMIN = -(2**63)
# Sentinels for "parsed, but outside the long range": classified by sign.
_HUGE = 2**62
_TINY = -(2**62)

# Python's str.strip() strips whitespace; Java's \s covers ASCII whitespace.
_STRIP = r"^\s+|\s+$"
_NUMBER = r"^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?$"
# The ISO-8601 forms both datetime.fromisoformat (3.11) and Spark accept, after normalising.
_ISO = (
    r"^(\d{4}-\d{2}-\d{2})(?:.(\d{2})(?::(\d{2})(?::(\d{2})(?:[.,](\d+))?)?)?"
    r"(Z|z|[+-]\d{2}(?::?\d{2})?)?)?$"
)


class _Parse(NamedTuple):
    stages: list  # [(column name, expression)], added in order before ms / reason
    ms: Column
    reason: Column
    # The same parse as checks in order, when it can be written so: (fails, passes, reason),
    # ``passes`` never null and exactly ``not fails``, ``ms`` not null once every check passes.
    checks: Optional[list] = None


def _int_ms(v: Column, unit: str, cast: bool = True) -> Column:
    """Integral value in ``unit`` -> ms (floored), guarding the long range (``cast``: to long
    first; not for a long column)."""
    mul, div = UNITS[unit]
    v = v.cast("long") if cast else v
    if mul > 1:
        return (
            F.when(v > F.lit(_LMAX // mul), F.lit(_HUGE))
            .when(v < F.lit(_LMIN // mul), F.lit(_TINY))
            .otherwise(v * F.lit(mul))
        )
    if div > 1:
        # exact floor division: v - pmod(v, div) is a multiple of div
        return ((v - F.pmod(v, F.lit(div))).cast("decimal(20,0)") / F.lit(div)).cast("long")
    return v


def _float_ms(v: Column, unit: str) -> tuple[Column, Column]:
    """Floating value in ``unit`` -> (ms, reason); NaN is a null timestamp, +-inf unparseable."""
    mul, div = UNITS[unit]
    v = v.cast("double")
    x = v * F.lit(float(mul)) / F.lit(float(div))
    ms = (
        F.when(F.isnan(v) | (F.abs(v) == F.lit(float("inf"))), F.lit(None).cast("long"))
        .when(x >= F.lit(4.0e18), F.lit(_HUGE))
        .when(x <= F.lit(-4.0e18), F.lit(_TINY))
        .otherwise(F.floor(x).cast("long"))
    )
    return ms, _reason_of(_float_checks(v))


def _float_checks(v: Column) -> list:
    """A floating value's checks (see _Parse.checks): NaN is a null timestamp, +-inf unparseable."""
    v = v.cast("double")
    infinite = F.abs(v) == F.lit(float("inf"))
    return [(F.isnan(v), ~F.isnan(v), NULL_TIMESTAMP), (infinite, ~infinite, UNPARSEABLE_TIMESTAMP)]


def _reason_of(checks: list) -> Column:
    """The reason of the first failing check (a text, or a column), as one flat CASE; null when
    every check passes."""
    reason = None
    for fails, _, why in checks:
        value = F.lit(why) if isinstance(why, str) else why
        reason = F.when(fails, value) if reason is None else reason.when(fails, value)
    return reason


def _ts_ms(ts: Column) -> Column:
    # unix_millis truncates; it differs from flooring only before 1970, where every
    # event time is before min_valid (>= 1 ms) either way.
    return F.unix_millis(ts)


_STRPTIME = {
    "%Y": "yyyy", "%m": "MM", "%d": "dd", "%H": "HH", "%M": "mm", "%S": "ss", "%f": "SSSSSS",
    "%y": "yy", "%b": "MMM", "%B": "MMMM", "%j": "DDD", "%z": "Z", "%I": "hh", "%p": "a",
    "%a": "EEE", "%A": "EEEE", "%%": "%",
}


def _spark_pattern(fmt: str) -> tuple[str, bool]:
    """Translate a strptime format to a Spark datetime pattern; second value: has a zone."""
    out, i, has_zone, literal = [], 0, False, []

    def flush() -> None:
        if literal:
            text = "".join(literal).replace("'", "''")
            out.append(f"'{text}'" if re.search(r"[A-Za-z]", text) else text)
            literal.clear()

    while i < len(fmt):
        if fmt[i] == "%" and i + 1 < len(fmt):
            directive = fmt[i : i + 2]
            if directive not in _STRPTIME:
                raise ValueError(f"fmt directive {directive!r} is not supported by the Spark engine; supported: {sorted(_STRPTIME)}")
            flush()
            out.append(_STRPTIME[directive])
            has_zone |= directive == "%z"
            i += 2
        else:
            literal.append(fmt[i])
            i += 1
    flush()
    return "".join(out), has_zone


def _local(ts: Column, zone: Optional[str]) -> Column:
    """A timestamp parsed as if its wall-clock time were UTC, re-read as local time in ``zone``
    (java.time's rule, the same as Python's fold=0: a time in a DST gap moves forward by the gap,
    an ambiguous time takes the earlier instant)."""
    return ts if zone is None else F.to_utc_timestamp(ts, zone)


def _ntz_wall_ms(ntz: Column) -> Column:
    """A TIMESTAMP_NTZ's wall-clock time as ms since 1970-01-01T00:00, from its fields.

    Not ``timestamp_diff`` nor a cast to TIMESTAMP: both read the value in the session time
    zone, and a wall-clock time in one of that zone's DST gaps moves by the gap."""
    return (
        F.unix_date(ntz.cast("date")).cast("long") * F.lit(86_400_000)
        + F.hour(ntz).cast("long") * F.lit(3_600_000)
        + F.minute(ntz).cast("long") * F.lit(60_000)
        + F.floor(F.date_part(F.lit("SECOND"), ntz) * F.lit(1000)).cast("long")
    )


def _string_ms(s: Column, unit: Optional[str], fmt: Optional[str], prefix: str, zone: Optional[str] = None) -> _Parse:
    # The stripped text and the parsed timestamp are columns of their own (stages): inlined,
    # the nested CASE WHENs repeat the ISO regexes ~170 times and the generated Java code
    # outgrows the JVM's 64 KB method limit (Spark then falls back to interpreted code).
    txt, iso = f"{prefix}_txt", f"{prefix}_parsed"
    stages = [(txt, F.regexp_replace(s, _STRIP, ""))]
    text = F.col(txt)
    empty = text == ""
    if fmt is not None:
        pattern, has_zone = _spark_pattern(fmt)
        if has_zone:
            stages.append((iso, F.try_to_timestamp(text, F.lit(pattern))))
        else:  # naive: local time in ``zone`` (UTC by default), whatever the session time zone
            stages.append((iso, _local(F.try_to_timestamp(F.concat(text, F.lit(" +0000")), F.lit(pattern + " Z")), zone)))
        parsed = F.col(iso)
        reason = F.when(empty, F.lit(NULL_TIMESTAMP)).when(parsed.isNull(), F.lit(UNPARSEABLE_TIMESTAMP))
        return _Parse(stages, _ts_ms(parsed), reason)
    # ISO-8601, normalised to yyyy-MM-ddTHH:mm:ss.ffffff+HH:MM before Spark's cast.
    g = lambda n: F.regexp_extract(text, _ISO, n)  # noqa: E731
    frac = F.rpad(F.substring(g(5), 1, 6), 6, "0")
    off = g(6)
    if zone is not None:  # the offset is read twice: a stage of its own keeps one regexp call
        stages.append((f"{prefix}_off", off))
        off = F.col(f"{prefix}_off")
    off_norm = (
        F.when(off == "", F.lit("+00:00"))
        # not upper(): Spark's ICU case mapping loads ICU's data on first use (~2 s per JVM)
        .when(off.isin("Z", "z"), F.lit("+00:00"))
        .when(F.length(off) == 3, F.concat(off, F.lit(":00")))
        .when(F.length(off) == 5, F.concat(F.substring(off, 1, 3), F.lit(":"), F.substring(off, 4, 2)))
        .otherwise(off)
    )
    norm = F.concat(
        g(1), F.lit("T"),
        F.when(g(2) == "", F.lit("00")).otherwise(g(2)), F.lit(":"),
        F.when(g(3) == "", F.lit("00")).otherwise(g(3)), F.lit(":"),
        F.when(g(4) == "", F.lit("00")).otherwise(g(4)), F.lit("."), frac, off_norm,
    )
    parsed_utc = norm.try_cast("timestamp")
    stages.append((iso, F.when(text.rlike(_ISO), parsed_utc if zone is None else F.when(off == "", _local(parsed_utc, zone)).otherwise(parsed_utc))))
    parsed = F.col(iso)
    iso_ms = _ts_ms(parsed)
    iso_reason = F.when(parsed.isNull(), F.lit(UNPARSEABLE_TIMESTAMP))
    short = F.length(text) < 10  # not even a full date (fromisoformat would take "2024")
    if unit is None:
        reason = F.when(empty, F.lit(NULL_TIMESTAMP)).when(short, F.lit(UNPARSEABLE_TIMESTAMP)).otherwise(iso_reason)
        return _Parse(stages, iso_ms, reason)
    is_number = text.rlike(_NUMBER)
    is_float = text.rlike(r"[.eE]")
    as_long = text.try_cast("long")
    int_ms = (
        F.when(as_long.isNotNull(), _int_ms(as_long, unit))
        .when(F.substring(text, 1, 1) == "-", F.lit(_TINY))
        .otherwise(F.lit(_HUGE))
    )
    f_ms, f_reason = _float_ms(text.try_cast("double"), unit)
    ms = F.when(is_number & is_float, f_ms).when(is_number, int_ms).otherwise(iso_ms)
    reason = (
        F.when(empty, F.lit(NULL_TIMESTAMP))
        .when(is_number & is_float, f_reason)
        .when(is_number, F.lit(None).cast("string"))
        .when(short, F.lit(UNPARSEABLE_TIMESTAMP))
        .otherwise(iso_reason)
    )
    return _Parse(stages, ms, reason)


def parse_expr(
    col: Column, dtype: T.DataType, unit: Optional[str], fmt: Optional[str], prefix: str = "__et_p", zone: Optional[str] = None
) -> _Parse:
    """How to parse a raw column of type ``dtype``: intermediate columns to add first, in
    order (names start with ``prefix``), then the epoch-ms and parse-failure-reason
    expressions over them (``ms`` is meaningful only where ``reason`` is null)."""
    stages: list = []
    reason: Optional[Column] = None  # None: every non-null value parses
    checks: Optional[list] = []  # after the null check; None: only as ``reason``
    if isinstance(dtype, (T.ByteType, T.ShortType, T.IntegerType, T.LongType)):
        ms = _int_ms(col, unit or "ms", cast=not isinstance(dtype, T.LongType))
    elif isinstance(dtype, (T.FloatType, T.DoubleType, T.DecimalType)):
        ms, reason = _float_ms(col, unit or "ms")
        checks = _float_checks(col)
    elif isinstance(dtype, T.BooleanType):
        ms, reason, checks = F.lit(None).cast("long"), F.lit(UNPARSEABLE_TIMESTAMP), None
    elif isinstance(dtype, T.TimestampType):
        ms = _ts_ms(col)
    elif isinstance(dtype, T.TimestampNTZType):  # naive: local time in ``zone``
        ms = _ntz_wall_ms(col)
        ms = ms if zone is None else _ts_ms(_local(F.timestamp_millis(ms), zone))
    elif isinstance(dtype, T.DateType):  # a date is local midnight in ``zone``
        ms = F.unix_date(col).cast("long") * F.lit(86_400_000)
        ms = ms if zone is None else _ts_ms(_local(F.timestamp_millis(ms), zone))
    elif isinstance(dtype, T.StringType):
        stages, ms, reason, _ = _string_ms(col, unit, fmt, prefix, zone)
        checks = None
    else:
        ms, reason, checks = F.lit(None).cast("long"), F.lit(UNPARSEABLE_TIMESTAMP), None
    # written as Spark's optimizer would leave it (no ELSE NULL): it re-optimizes every micro-batch
    null = F.when(col.isNull(), F.lit(NULL_TIMESTAMP))
    if checks is not None:
        checks = [(col.isNull(), col.isNotNull(), NULL_TIMESTAMP), *checks]
    return _Parse(stages, ms, null if reason is None else null.otherwise(reason), checks)


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
        _spark_pattern(fmt)  # validate early
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
            df = df.withColumns({"__et_reason": _reason_of(every), "__et_valid": valid})
        else:  # a text's parse may leave ms null without a reason: "no reason" as it is
            df = df.withColumn("__et_reason", _reason_of(every))
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
    return Column(df.sparkSession._jvm.eventtime.jvm.BatchValue.column(now._jc))
