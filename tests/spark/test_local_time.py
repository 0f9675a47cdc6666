"""with_event_time(tz=...): naive strings, dates and TIMESTAMP_NTZ in a zone, on Spark as in the model."""

from __future__ import annotations

import datetime as dt

import pytest

import eventtime
from eventtime.core.timestamps import parse_timestamp
from eventtime.harness.scenario import diff_outputs, parse_scenario, run_reference
from eventtime.spark.replay import run_scenario

pytestmark = pytest.mark.spark

STRINGS = [
    "2024-05-01 09:00:00", "2024-05-01T09:00:00.123", "2024-05-01", "2024-05-01T09:00:00Z",
    "2024-05-01T09:00:00+02:00", "2024-03-31 02:30:00", "2024-10-27 02:30:00", "2024-10-27 03:30:00",
    "2024-02-29T23:59:59.999", "garbage",
]


@pytest.mark.parametrize("tz", [None, "UTC+8", "-05:30", "Asia/Shanghai", "Europe/Berlin", "America/New_York"])
def test_spark_reads_strings_in_tz_like_the_model(spark, tz):
    df = spark.createDataFrame([(s,) for s in STRINGS], "ts string")
    rows = df.transform(eventtime.with_event_time("ts", min_valid=1, max_future="100000 days", now=0, tz=tz)).select(
        "ts", "__et_ms", "__et_reason").collect()
    assert len(rows) == len(STRINGS)
    for row in rows:
        assert (row["__et_ms"], row["__et_reason"]) == parse_timestamp(row.ts, tz=tz), f"{row.ts!r} in {tz}"


def test_dates_and_naive_timestamps_are_local_midnight_in_tz(spark):
    df = spark.createDataFrame([(dt.date(2024, 5, 1), dt.datetime(2024, 5, 1, 9, 0))], "d date, n timestamp_ntz")
    for column, value in (("d", dt.date(2024, 5, 1)), ("n", dt.datetime(2024, 5, 1, 9, 0))):
        got = df.transform(eventtime.with_event_time(column, min_valid=1, max_future="100000 days", now=0, tz="UTC+8")).select("__et_ms").first()[0]
        assert got == parse_timestamp(value, tz="UTC+8")[0]


def test_replay_tz_gives_the_same_output_on_both_engines(spark):
    scenario = {
        "window": {"type": "tumbling", "size_ms": 86_400_000, "offset_ms": 57_600_000},  # UTC+8 days
        "max_out_of_orderness_ms": 0,
        "allowed_lateness_ms": 0,
        "min_valid_ms": 1,
        "now_ms": 1_800_000_000_000,
        "tz": "UTC+8",
        "batches": [
            [{"key": "a", "ts": "2024-05-01 07:00:00", "value": 1}, {"key": "a", "ts": "2024-05-01 09:00:00", "value": 2}],
            [{"key": "a", "ts": "2024-05-02T00:30:00+08:00", "value": 3}, {"key": "b", "ts": "2024-05-02 08:30:00", "value": 4}],
        ],
    }
    expected = run_reference(parse_scenario(scenario))
    # 07:00 and 09:00 local are the same UTC+8 day, [2024-04-30T16:00Z, 2024-05-01T16:00Z)
    first = [p for p in expected["batches"][1]["panes"] if p["key"] == "a"]
    assert first and first[0]["count"] == 2 and first[0]["window_start"] == 1714492800000  # 2024-04-30T16:00Z
    assert diff_outputs(expected, run_scenario(scenario, spark=spark)) is None


def _load_example(name: str):
    import importlib.util
    from pathlib import Path

    path = Path(__file__).parents[2] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_calendar_example_sums_the_real_length_of_berlin_days_and_months(spark):
    """examples/calendar_job.py: readings every 30 min; the 23-hour day holds 46, the 25-hour one 50,
    as the reference model counts them."""
    job = _load_example("calendar_job")
    hour = dt.timedelta(hours=1)
    days = job.daily_totals(spark)
    by_length = {}
    for pane in days:
        assert pane["pane_timing"] == "ON_TIME" and pane["is_final"]
        by_length.setdefault((pane["window_end"] - pane["window_start"]) / hour, []).append(pane["count"])
    assert by_length[23] == [46] and by_length[25] == [50]
    assert sum(p["count"] for p in days) == len(job.readings())
    model = eventtime.ReferenceEngine(eventtime.EngineConfig(eventtime.Calendar("day", tz=job.ZONE)))
    batch = model.process_batch([eventtime.Record(m, ts) for m, ts, _ in job.readings()], now_ms=2_000_000_000_000)
    expected = sorted((p.window.start_ms, p.values["count"]) for p in batch.panes + model.end_of_input().panes)
    got = [(int(p["window_start"].timestamp() * 1000), p["count"]) for p in days]
    assert got == expected
    months = job.daily_totals(spark, unit="month")
    # March (local) ends at 2024-03-31T22:00Z: 71 hours of readings in it, 25 in April; October holds all 96 hours
    assert [(p["window_start"].isoformat(), p["count"]) for p in months] == [
        ("2024-02-29T23:00:00+00:00", 142), ("2024-03-31T22:00:00+00:00", 50), ("2024-09-30T22:00:00+00:00", 192)]
