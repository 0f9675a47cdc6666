"""Timestamp extraction: every supported input form, and every invalid reason at its boundary."""

import re
from datetime import date, datetime, timedelta, timezone

import pytest

from eventtime.core.timestamps import (
    BEFORE_MIN_VALID,
    DEFAULT_MIN_VALID_MS,
    NULL_TIMESTAMP,
    TOO_FAR_IN_FUTURE,
    UNPARSEABLE_TIMESTAMP,
    classify,
    extract,
    parse_timestamp,
)

T = 1_700_000_000_000  # 2023-11-14T22:13:20Z


@pytest.mark.parametrize(
    "value, unit, expected",
    [
        (T, None, T),
        (T, "ms", T),
        (T // 1000, "s", T),
        (T / 1000 + 0.25, "s", T + 250),
        (T * 1000 + 999, "us", T),
        (T * 1_000_000 + 999_999, "ns", T),
        (str(T // 1000), "s", T),
        ("1700000000.5", "s", T + 500),
        ("2023-11-14T22:13:20Z", None, T),
        ("2023-11-14T22:13:20.123Z", None, T + 123),
        ("2023-11-15T06:13:20+08:00", None, T),
        ("2023-11-14 22:13:20", None, T),
        ("2023-11-14", None, T - (22 * 3600 + 13 * 60 + 20) * 1000),
        (datetime(2023, 11, 14, 22, 13, 20, tzinfo=timezone.utc), None, T),
        (datetime(2023, 11, 15, 6, 13, 20, tzinfo=timezone(timedelta(hours=8))), None, T),
        (datetime(2023, 11, 14, 22, 13, 20), None, T),
        (date(1970, 1, 2), None, 86_400_000),
    ],
)
def test_parse_supported_forms(value, unit, expected):
    assert parse_timestamp(value, unit=unit) == (expected, None)


def test_explicit_format():
    assert parse_timestamp("14/11/2023 22:13:20", fmt="%d/%m/%Y %H:%M:%S") == (T, None)
    assert parse_timestamp("2023-11-14T22:13:20Z", fmt="%d/%m/%Y %H:%M:%S") == (None, UNPARSEABLE_TIMESTAMP)


@pytest.mark.parametrize(
    "value, reason",
    [
        (None, NULL_TIMESTAMP),
        (float("nan"), NULL_TIMESTAMP),
        ("", NULL_TIMESTAMP),
        ("   ", NULL_TIMESTAMP),
        ("yesterday", UNPARSEABLE_TIMESTAMP),
        ("2023", UNPARSEABLE_TIMESTAMP),
        ("2023-13-45T00:00:00Z", UNPARSEABLE_TIMESTAMP),
        (str(T), UNPARSEABLE_TIMESTAMP),  # digits without a unit are not ISO-8601
        (float("inf"), UNPARSEABLE_TIMESTAMP),
        (True, UNPARSEABLE_TIMESTAMP),
        ([T], UNPARSEABLE_TIMESTAMP),
    ],
)
def test_unusable_values_are_classified_never_raised(value, reason):
    assert parse_timestamp(value) == (None, reason)


def test_unknown_unit_is_a_configuration_error():
    with pytest.raises(ValueError, match="unit must be one of"):
        parse_timestamp(1, unit="minutes")


def test_validity_bounds_are_inclusive():
    now, future = T, 3_600_000
    assert classify(DEFAULT_MIN_VALID_MS, now, DEFAULT_MIN_VALID_MS, future) is None
    assert classify(DEFAULT_MIN_VALID_MS - 1, now, DEFAULT_MIN_VALID_MS, future) == BEFORE_MIN_VALID
    assert classify(now + future, now, DEFAULT_MIN_VALID_MS, future) is None
    assert classify(now + future + 1, now, DEFAULT_MIN_VALID_MS, future) == TOO_FAR_IN_FUTURE


@pytest.mark.parametrize(
    "value, unit, reason",
    [
        (0, None, BEFORE_MIN_VALID),
        (-5, None, BEFORE_MIN_VALID),
        ("1970-01-01T00:00:00Z", None, BEFORE_MIN_VALID),
        ("9999-12-31T23:59:59Z", None, TOO_FAR_IN_FUTURE),
        (T // 1000, None, BEFORE_MIN_VALID),  # seconds where milliseconds were expected: 1970-01-20
        (T * 1000, None, TOO_FAR_IN_FUTURE),  # microseconds where milliseconds were expected
    ],
)
def test_bogus_timestamps_are_quarantined(value, unit, reason):
    ts_ms, got = extract(value, now_ms=T, unit=unit)
    assert got == reason
    assert ts_ms == parse_timestamp(value, unit=unit)[0]  # the parsed value is kept for the record


# --- naive values in a zone: with_event_time(tz=...), ReferenceEngine(tz=...), the replay "tz" ---


def _utc(*fields: int, ms: int = 0) -> int:
    """Epoch ms of a UTC wall-clock time (independent of the code under test)."""
    return int(datetime(*fields, tzinfo=timezone.utc).timestamp()) * 1000 + ms


MAY1_0900_UTC8 = _utc(2024, 5, 1, 1)  # 2024-05-01 09:00 in UTC+8


@pytest.mark.parametrize("tz", ["UTC+8", "+08:00", "UTC+08:00", "+0800", "GMT+8", "Asia/Shanghai", " Asia/Shanghai "])
def test_values_without_a_zone_are_local_time_in_tz(tz):
    assert parse_timestamp("2024-05-01 09:00:00", tz=tz) == (MAY1_0900_UTC8, None)
    assert parse_timestamp("2024-05-01T09:00:00.250", tz=tz) == (MAY1_0900_UTC8 + 250, None)
    assert parse_timestamp(" 2024-05-01T09:00 ", tz=tz) == (MAY1_0900_UTC8, None)
    assert parse_timestamp("2024-05-01", tz=tz) == (MAY1_0900_UTC8 - 9 * 3_600_000, None)  # local midnight
    assert parse_timestamp("01/05/2024 09:00", fmt="%d/%m/%Y %H:%M", tz=tz) == (MAY1_0900_UTC8, None)
    assert parse_timestamp(datetime(2024, 5, 1, 9), tz=tz) == (MAY1_0900_UTC8, None)
    assert parse_timestamp(date(2024, 5, 1), tz=tz) == (MAY1_0900_UTC8 - 9 * 3_600_000, None)
    assert extract("2024-05-01 09:00:00", now_ms=T + 10**12, tz=tz) == (MAY1_0900_UTC8, None)


@pytest.mark.parametrize("tz", ["UTC+8", "Asia/Shanghai", "America/New_York"])
def test_explicit_offsets_and_instants_are_kept_in_any_tz(tz):
    assert parse_timestamp("2024-05-01T09:00:00Z", tz=tz) == (_utc(2024, 5, 1, 9), None)
    assert parse_timestamp("2024-05-01T09:00:00z", tz=tz) == (_utc(2024, 5, 1, 9), None)
    assert parse_timestamp("2024-05-01T09:00:00+02:00", tz=tz) == (_utc(2024, 5, 1, 7), None)
    assert parse_timestamp("2024-05-01T09:00:00-0530", tz=tz) == (_utc(2024, 5, 1, 14, 30), None)
    assert parse_timestamp("01/05/2024 09:00 +0000", fmt="%d/%m/%Y %H:%M %z", tz=tz) == (_utc(2024, 5, 1, 9), None)
    assert parse_timestamp(datetime(2024, 5, 1, 9, tzinfo=timezone.utc), tz=tz) == (_utc(2024, 5, 1, 9), None)
    assert parse_timestamp(T, tz=tz) == (T, None)  # epoch numbers are instants
    assert parse_timestamp(T / 1000, unit="s", tz=tz) == (T, None)
    assert parse_timestamp(str(T), unit="ms", tz=tz) == (T, None)
    assert parse_timestamp("yesterday", tz=tz) == (None, UNPARSEABLE_TIMESTAMP)
    assert parse_timestamp(None, tz=tz) == (None, NULL_TIMESTAMP)


@pytest.mark.parametrize(
    "value, fmt",
    [("2024-05-01 09:00:00", None), ("2024-05-01", None), ("2024-05-01T09:00:00.5+08:00", None),
     ("01/05/2024 09:00", "%d/%m/%Y %H:%M"), (datetime(2024, 5, 1, 9), None), (date(2024, 5, 1), None), (T, None)],
)
def test_the_default_tz_is_utc_as_before(value, fmt):
    assert parse_timestamp(value, fmt=fmt) == parse_timestamp(value, fmt=fmt, tz=None) == parse_timestamp(value, fmt=fmt, tz="UTC")
    assert parse_timestamp("2024-05-01 09:00:00") == (_utc(2024, 5, 1, 9), None)


# The DST rule at the boundary (docs/semantics.md, "Naive values and tz"): a local time in the
# spring-forward gap is read with the offset in force before the gap (java.time moves it forward
# by the gap: the same instant), an ambiguous local time in the fall-back overlap is the earlier
# instant, as Spark's to_utc_timestamp.
@pytest.mark.parametrize(
    "tz, local, expected",
    [
        # Europe/Berlin 2024-03-31: 02:00 +01:00 -> 03:00 +02:00
        ("Europe/Berlin", "2024-03-31 01:59:59.999", _utc(2024, 3, 31, 0, 59, 59, ms=999)),
        ("Europe/Berlin", "2024-03-31 02:00:00", _utc(2024, 3, 31, 1)),  # gap: = 03:00+02:00
        ("Europe/Berlin", "2024-03-31 02:30:00", _utc(2024, 3, 31, 1, 30)),
        ("Europe/Berlin", "2024-03-31 02:59:59.999", _utc(2024, 3, 31, 1, 59, 59, ms=999)),
        ("Europe/Berlin", "2024-03-31 03:00:00", _utc(2024, 3, 31, 1)),
        # Europe/Berlin 2024-10-27: 03:00 +02:00 -> 02:00 +01:00
        ("Europe/Berlin", "2024-10-27 01:59:59.999", _utc(2024, 10, 26, 23, 59, 59, ms=999)),
        ("Europe/Berlin", "2024-10-27 02:00:00", _utc(2024, 10, 27, 0)),  # overlap: the earlier, +02:00
        ("Europe/Berlin", "2024-10-27 02:59:59.999", _utc(2024, 10, 27, 0, 59, 59, ms=999)),
        ("Europe/Berlin", "2024-10-27 03:00:00", _utc(2024, 10, 27, 2)),
        ("Europe/Berlin", "2024-10-27T02:30:00+01:00", _utc(2024, 10, 27, 1, 30)),  # the later one, by offset
        # America/New_York: 2024-03-10 02:00 -05:00 -> 03:00 -04:00; 2024-11-03 02:00 -04:00 -> 01:00 -05:00
        ("America/New_York", "2024-03-10 02:30:00", _utc(2024, 3, 10, 7, 30)),
        ("America/New_York", "2024-03-10 03:00:00", _utc(2024, 3, 10, 7)),
        ("America/New_York", "2024-11-03 01:30:00", _utc(2024, 11, 3, 5, 30)),
        ("America/New_York", "2024-11-03 02:00:00", _utc(2024, 11, 3, 7)),
        # Australia/Lord_Howe, a 30-minute shift: 2024-10-06 02:00 +10:30 -> 02:30 +11:00;
        # 2024-04-07 02:00 +11:00 -> 01:30 +10:30
        ("Australia/Lord_Howe", "2024-10-06 02:15:00", _utc(2024, 10, 5, 15, 45)),
        ("Australia/Lord_Howe", "2024-04-07 01:45:00", _utc(2024, 4, 6, 14, 45)),
        # America/Santiago shifts at midnight: 2024-09-08 00:00 -04:00 -> 01:00 -03:00 (the date's
        # midnight does not exist); 2024-04-07 00:00 -03:00 -> 2024-04-06 23:00 -04:00
        ("America/Santiago", "2024-09-08", _utc(2024, 9, 8, 4)),
        ("America/Santiago", "2024-04-06 23:30:00", _utc(2024, 4, 7, 2, 30)),
    ],
)
def test_dst_gap_and_overlap_at_the_boundary(tz, local, expected):
    assert parse_timestamp(local, tz=tz) == (expected, None)
    naive = datetime.fromisoformat(local)
    if naive.tzinfo is None:
        assert parse_timestamp(naive, tz=tz) == (expected, None)
        assert parse_timestamp(naive.strftime("%d/%m/%Y %H:%M:%S.%f"), fmt="%d/%m/%Y %H:%M:%S.%f", tz=tz) == (expected, None)


def test_a_date_in_a_dst_zone_is_its_local_midnight():
    assert parse_timestamp(date(2024, 9, 8), tz="America/Santiago") == (_utc(2024, 9, 8, 4), None)
    assert parse_timestamp(date(2024, 7, 1), tz="Europe/Berlin") == (_utc(2024, 6, 30, 22), None)
    assert parse_timestamp(date(2024, 1, 1), tz="Europe/Berlin") == (_utc(2023, 12, 31, 23), None)


@pytest.mark.parametrize(
    "tz, error",
    [(8, TypeError), (b"UTC", TypeError), (timezone.utc, TypeError), ("UTC+25", ValueError), ("+08:60", ValueError),
     ("Mars/Olympus", ValueError), ("CEST", ValueError), ("EST", ValueError), ("", ValueError), ("Europe/", ValueError),
     ("../etc/passwd", ValueError)],
)
def test_bad_zones_are_refused_naming_tz_and_the_value(tz, error):
    with pytest.raises(error, match=r"^tz .*" + re.escape(repr(tz) if isinstance(tz, str) else str(tz))):
        parse_timestamp("2024-05-01 09:00:00", tz=tz)
    with pytest.raises(error, match="tz"):
        parse_timestamp(None, tz=tz)  # refused whatever the value
    with pytest.raises(error, match="tz"):
        extract("2024-05-01 09:00:00", now_ms=T, tz=tz)


def test_the_reference_engine_reads_naive_strings_in_its_tz_and_refuses_a_bad_one():
    from eventtime import EngineConfig, Record, ReferenceEngine, Tumbling

    config = EngineConfig(Tumbling("1 day"), min_valid_ms=1)
    batch = [Record("a", "2024-05-01 09:00:00"), Record("a", "2024-05-01T09:00:00Z")]
    utc = ReferenceEngine(config).process_batch(batch, now_ms=T + 10**12).watermark_ms
    local = ReferenceEngine(config, tz="UTC+8").process_batch(batch[:1], now_ms=T + 10**12).watermark_ms
    assert (utc, local) == (_utc(2024, 5, 1, 9), MAY1_0900_UTC8)
    with pytest.raises(ValueError, match="tz.*'Mars/Olympus'"):
        ReferenceEngine(config, tz="Mars/Olympus")
    with pytest.raises(TypeError, match="tz"):
        ReferenceEngine(config, tz=8)


@pytest.mark.parametrize("tz", ["America/Argentina", "posix/Europe/Berlin", "right/Europe/Berlin"])
def test_zone_folders_and_python_only_zone_copies_are_refused(tz):
    """A folder of zones raised IsADirectoryError; posix/ and right/ copies are unknown to Spark."""
    with pytest.raises(ValueError, match="tz must be a fixed UTC offset .* or an IANA zone name"):
        parse_timestamp("2024-05-01 09:00:00", tz=tz)
