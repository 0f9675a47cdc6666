"""Timestamp extraction: every supported input form, and every invalid reason at its boundary."""

from datetime import date, datetime, timedelta, timezone

import pytest

from eventtime.timestamps import (
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


# --- naive values in a zone (with_event_time(tz=...), the replay contract's "tz") ---------
import pytest as _pytest

from eventtime.timestamps import parse_timestamp as _parse

_MAY1_0900_CST = 1714525200000  # 2024-05-01T01:00:00Z = 09:00 in UTC+8


@_pytest.mark.parametrize("tz", ["UTC+8", "+08:00", "UTC+08:00", "Asia/Shanghai"])
def test_naive_strings_are_local_time_in_tz(tz):
    assert _parse("2024-05-01 09:00:00", tz=tz) == (_MAY1_0900_CST, None)
    assert _parse("2024-05-01T09:00:00.000", tz=tz) == (_MAY1_0900_CST, None)
    assert _parse("2024-05-01", tz=tz) == (_MAY1_0900_CST - 9 * 3_600_000, None)  # local midnight
    assert _parse("01/05/2024 09:00", fmt="%d/%m/%Y %H:%M", tz=tz) == (_MAY1_0900_CST, None)


def test_explicit_offsets_are_kept_and_the_default_stays_utc():
    assert _parse("2024-05-01T09:00:00Z", tz="UTC+8") == (1714554000000, None)
    assert _parse("2024-05-01T09:00:00+02:00", tz="Asia/Shanghai") == (1714546800000, None)
    assert _parse("2024-05-01 09:00:00") == (1714554000000, None)  # tz=None: UTC, as before
    assert _parse(1714554000000, tz="UTC+8") == (1714554000000, None)  # epoch numbers are instants


def test_dst_gap_and_overlap_in_an_iana_zone():
    # Europe/Berlin 2024-03-31: 02:00-03:00 does not exist; 02:30 is read with the offset
    # before the gap (+01:00) = 01:30Z (java.time moves it to 03:30+02:00, the same instant).
    assert _parse("2024-03-31 02:30:00", tz="Europe/Berlin") == (1711848600000, None)
    # 2024-10-27: 02:00-03:00 happens twice; the earlier instant (+02:00) = 00:30Z.
    assert _parse("2024-10-27 02:30:00", tz="Europe/Berlin") == (1729989000000, None)
    assert _parse("2024-10-27 03:30:00", tz="Europe/Berlin") == (1729996200000, None)  # +01:00


@_pytest.mark.parametrize("tz, error", [(8, TypeError), ("UTC+25", ValueError), ("Mars/Olympus", ValueError), ("CEST", ValueError)])
def test_bad_zones_are_refused_naming_tz(tz, error):
    with _pytest.raises(error, match="tz"):
        _parse("2024-05-01 09:00:00", tz=tz)
