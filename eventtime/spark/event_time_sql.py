"""The event-time column parsed in Spark SQL, per input type: epoch ms and the invalid reason.

The rules are those of :mod:`eventtime.core.timestamps` (``parse_timestamp`` + ``classify``),
written as Spark column expressions (no Python UDF), so that the quarantine costs no Python
round trip; :func:`eventtime.spark.extract.with_event_time` puts them on the DataFrame.
:func:`parse_expr` is the entry: integers, floats and decimals in a unit, booleans, TIMESTAMP,
TIMESTAMP_NTZ and DATE columns, and strings (ISO-8601, numbers in a unit, or a strptime
``fmt``). Known differences from the Python rules (tested cases agree, see
tests/spark/test_spark_engine.py::test_spark_classification_equals_python):

* ISO-8601 strings: the forms ``YYYY-MM-DD`` and ``YYYY-MM-DD<sep>HH[:MM[:SS[.f|,f]]][Z|±HH[[:]MM]]``
  are accepted; the basic forms (``20231114``, ``T2213``), week dates and offsets with seconds,
  which Python 3.11's ``fromisoformat`` also takes, are ``unparseable_timestamp`` here, and so
  are offsets beyond ±18:00 (Spark's limit).
* Decimal columns are parsed like floats (the Python rules call a ``Decimal`` unparseable).
* ``fmt``: the strptime directives in ``_STRPTIME`` only (others raise at definition time):

>>> spark_pattern("%Y-%m-%d %H:%M:%S%z")
('yyyy-MM-dd HH:mm:ssZ', True)
"""

from __future__ import annotations

import re
from typing import NamedTuple, Optional

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ..core.timestamps import NULL_TIMESTAMP, UNITS, UNPARSEABLE_TIMESTAMP

__all__ = ["Parse", "parse_expr", "reason_of", "spark_pattern"]

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


class Parse(NamedTuple):
    """One column's parse: the columns to add first, then its epoch ms and its invalid reason."""

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
    return ms, reason_of(_float_checks(v))


def _float_checks(v: Column) -> list:
    """A floating value's checks (see Parse.checks): NaN is a null timestamp, +-inf unparseable."""
    v = v.cast("double")
    infinite = F.abs(v) == F.lit(float("inf"))
    return [(F.isnan(v), ~F.isnan(v), NULL_TIMESTAMP), (infinite, ~infinite, UNPARSEABLE_TIMESTAMP)]


def reason_of(checks: list) -> Column:
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


def spark_pattern(fmt: str) -> tuple[str, bool]:
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


def _string_ms(s: Column, unit: Optional[str], fmt: Optional[str], prefix: str, zone: Optional[str] = None) -> Parse:
    # The stripped text and the parsed timestamp are columns of their own (stages): inlined,
    # the nested CASE WHENs repeat the ISO regexes ~170 times and the generated Java code
    # outgrows the JVM's 64 KB method limit (Spark then falls back to interpreted code).
    txt, iso = f"{prefix}_txt", f"{prefix}_parsed"
    stages = [(txt, F.regexp_replace(s, _STRIP, ""))]
    text = F.col(txt)
    empty = text == ""
    if fmt is not None:
        pattern, has_zone = spark_pattern(fmt)
        if has_zone:
            stages.append((iso, F.try_to_timestamp(text, F.lit(pattern))))
        else:  # naive: local time in ``zone`` (UTC by default), whatever the session time zone
            stages.append((iso, _local(F.try_to_timestamp(F.concat(text, F.lit(" +0000")), F.lit(pattern + " Z")), zone)))
        parsed = F.col(iso)
        reason = F.when(empty, F.lit(NULL_TIMESTAMP)).when(parsed.isNull(), F.lit(UNPARSEABLE_TIMESTAMP))
        return Parse(stages, _ts_ms(parsed), reason)
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
        return Parse(stages, iso_ms, reason)
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
    return Parse(stages, ms, reason)


def parse_expr(
    col: Column, dtype: T.DataType, unit: Optional[str], fmt: Optional[str], prefix: str = "__et_p", zone: Optional[str] = None
) -> Parse:
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
    return Parse(stages, ms, null if reason is None else null.otherwise(reason), checks)
