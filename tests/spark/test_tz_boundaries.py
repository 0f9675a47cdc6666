"""with_event_time(tz=...) at the DST boundaries, on Spark as in the reference model.

Every form of a value without a zone (an ISO string, a ``fmt`` string, a DATE, a
TIMESTAMP_NTZ) is read at the instants where the rule matters (docs/semantics.md, "Naive
values and tz"): the spring-forward gap, the fall-back overlap, their edges, 30-minute and
midnight shifts. Spark must give what ``parse_timestamp`` gives, whatever the session time
zone. A bad zone is refused before any query starts.
"""

from __future__ import annotations

import datetime as dt

import pytest

import eventtime
from eventtime.core.timestamps import parse_timestamp
from eventtime.harness.scenario import ScenarioError
from eventtime.spark.replay import run_scenario

pytestmark = pytest.mark.spark

FMT = "%d/%m/%Y %H:%M:%S.%f"
LOCAL = [
    # Europe/Berlin and the EU: 2024-03-31 02:00 +01:00 -> 03:00 +02:00; 2024-10-27 03:00 +02:00 -> 02:00 +01:00
    "2024-03-31 01:59:59.999", "2024-03-31 02:00:00", "2024-03-31 02:30:00", "2024-03-31 02:59:59.999",
    "2024-03-31 03:00:00", "2024-10-27 01:59:59.999", "2024-10-27 02:00:00", "2024-10-27 02:30:00",
    "2024-10-27 02:59:59.999", "2024-10-27 03:00:00",
    # America/New_York: 2024-03-10 02:00 -> 03:00; 2024-11-03 02:00 -> 01:00
    "2024-03-10 02:00:00", "2024-03-10 02:30:00", "2024-03-10 03:00:00", "2024-11-03 00:59:59.999",
    "2024-11-03 01:00:00", "2024-11-03 01:30:00", "2024-11-03 02:00:00",
    # Australia/Lord_Howe (30 minutes): 2024-10-06 02:00 -> 02:30; 2024-04-07 02:00 -> 01:30
    "2024-10-06 02:15:00", "2024-10-06 02:30:00", "2024-04-07 01:30:00", "2024-04-07 01:45:00",
    # America/Santiago (at midnight): 2024-09-08 00:00 -> 01:00; 2024-04-07 00:00 -> 2024-04-06 23:00
    "2024-09-08 00:00:00", "2024-09-08 00:30:00", "2024-04-06 23:30:00", "2024-04-07 00:00:00",
    "2024-05-01 09:00:00",
]
ZONES = [None, "UTC", "UTC+8", "-05:30", "Asia/Shanghai", "Europe/Berlin", "America/New_York",
         "Australia/Lord_Howe", "America/Santiago"]


def _frame(spark):
    rows = []
    for i, text in enumerate(LOCAL):
        naive = dt.datetime.fromisoformat(text)
        rows.append((i, text, text.replace(" ", "T") + "+01:00", naive.strftime(FMT), naive, naive.date()))
    return spark.createDataFrame(rows, "i int, s string, o string, f string, n timestamp_ntz, d date")


def _event_times(df, column: str, tz, fmt=None) -> dict:
    step = eventtime.with_event_time(column, fmt=fmt, min_valid=1, max_future="100000 days", now=0, tz=tz)
    return {r.i: (r["__et_ms"], r["__et_reason"]) for r in df.transform(step).select("i", "__et_ms", "__et_reason").collect()}


def _check_every_form(df, tz) -> None:
    got = {
        "s": _event_times(df, "s", tz),
        "o": _event_times(df, "o", tz),
        "f": _event_times(df, "f", tz, fmt=FMT),
        "n": _event_times(df, "n", tz),
        "d": _event_times(df, "d", tz),
    }
    for i, text in enumerate(LOCAL):
        naive = dt.datetime.fromisoformat(text)
        expected = {
            "s": parse_timestamp(text, tz=tz),
            "o": parse_timestamp(text.replace(" ", "T") + "+01:00", tz=tz),
            "f": parse_timestamp(naive.strftime(FMT), fmt=FMT, tz=tz),
            "n": parse_timestamp(naive, tz=tz),
            "d": parse_timestamp(naive.date(), tz=tz),
        }
        for form, value in expected.items():
            assert got[form][i] == value, f"{form} {text!r} in {tz}: spark {got[form][i]}, model {value}"


@pytest.mark.parametrize("tz", ZONES, ids=str)
def test_every_form_without_a_zone_equals_the_model_at_dst_boundaries(spark, tz):
    _check_every_form(_frame(spark), tz)


def test_the_session_time_zone_does_not_matter(spark):
    previous = spark.conf.get("spark.sql.session.timeZone")
    spark.conf.set("spark.sql.session.timeZone", "America/Los_Angeles")
    try:
        df = _frame(spark)
        for tz in (None, "Europe/Berlin", "UTC+8"):
            _check_every_form(df, tz)
    finally:
        spark.conf.set("spark.sql.session.timeZone", previous)


def test_spark_applies_the_documented_dst_rule(spark):
    # Hard-coded: the rule itself, not only agreement with the model.
    utc = lambda *f: int(dt.datetime(*f, tzinfo=dt.timezone.utc).timestamp() * 1000)  # noqa: E731
    cases = [
        ("Europe/Berlin", "2024-03-31 02:30:00", utc(2024, 3, 31, 1, 30)),  # gap: offset before (+01:00)
        ("Europe/Berlin", "2024-10-27 02:30:00", utc(2024, 10, 27, 0, 30)),  # overlap: the earlier (+02:00)
        ("America/New_York", "2024-03-10 02:30:00", utc(2024, 3, 10, 7, 30)),
        ("America/New_York", "2024-11-03 01:30:00", utc(2024, 11, 3, 5, 30)),
        ("America/Santiago", "2024-09-08", utc(2024, 9, 8, 4)),
    ]
    for tz, text, expected in cases:
        df = spark.createDataFrame([(0, text)], "i int, s string")
        assert _event_times(df, "s", tz) == {0: (expected, None)}, (tz, text)


def test_string_parsing_plan_stays_small_with_a_zone(spark):
    df = spark.createDataFrame([("1714525200000",), ("2024-05-01 09:00:00",), ("2024-05-01T09:00:00Z",)], "ts string")
    out = df.transform(eventtime.with_event_time("ts", unit="ms", now=0, max_future="100000 days", tz="Asia/Shanghai"))
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("regexp_extract") <= 20, plan.count("regexp_extract")
    assert [r["__et_ms"] for r in out.select("__et_ms").collect()] == [1714525200000, 1714525200000, 1714554000000]


@pytest.mark.parametrize(
    "tz, error, message",
    [("Mars/Olympus", ValueError, "tz must be .*'Mars/Olympus'"), ("UTC+25", ValueError, "tz must be .*'UTC\\+25'"),
     ("CEST", ValueError, "tz must be .*'CEST'"), (8, TypeError, "tz must be a zone name .* 8")],
)
def test_a_bad_zone_is_refused_before_any_query(spark, tz, error, message):
    active = len(spark.streams.active)
    with pytest.raises(error, match=message):
        eventtime.with_event_time("ts", tz=tz)  # at definition, without a DataFrame
    scenario = {"window": {"type": "tumbling", "size_ms": 1000}, "tz": tz, "batches": [[{"ts": "2024-05-01 09:00:00"}]]}
    with pytest.raises(ScenarioError, match="scenario." + message):
        run_scenario(scenario, spark=spark)
    assert len(spark.streams.active) == active
