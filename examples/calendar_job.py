"""Daily and monthly totals in a time zone with daylight saving time.

    python examples/calendar_job.py

Builds a small batch of meter readings, one every 30 minutes (UTC instants) from 2024-03-29
to 2024-04-02 and from 2024-10-25 to 2024-10-29, and sums them per meter and per local day
in Europe/Berlin with ``Calendar("day", ...)``. 31 March
2024 has 23 hours there (46 readings) and 27 October 25 hours (50 readings); a fixed
24-hour window could not follow either. Run to the end of its input as a backfill; panes go
to a callable sink (any ``(pyarrow.Table, batch_id, query_id)`` callable is one).
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import eventtime

ZONE = "Europe/Berlin"


def readings() -> list[tuple[str, str, float]]:
    rows = []
    for first in (datetime(2024, 3, 28, 23, tzinfo=timezone.utc), datetime(2024, 10, 24, 22, tzinfo=timezone.utc)):
        t = first  # local midnight in Berlin
        while t < first + timedelta(days=4):
            rows.append(("meter-1", t.strftime("%Y-%m-%dT%H:%M:%SZ"), 1.0))
            t += timedelta(minutes=30)
    return rows


def daily_totals(spark, unit: str = "day") -> list[dict]:
    """The final pane of every local ``unit`` (day, week or month) in Berlin, by window start."""
    events = spark.createDataFrame(readings(), "meter STRING, ts STRING, kwh DOUBLE").transform(
        eventtime.with_event_time("ts", min_valid="2000-01-01", max_future="36500 days")
    )
    out = events.transform(eventtime.window_aggregate(
        keys=["meter"], window=eventtime.Calendar(unit, tz=ZONE),
        aggregations=[eventtime.count(), eventtime.sum("kwh", name="kwh")],
    ))
    panes: list = []
    eventtime.route(out, panes=lambda table, batch_id, query_id: panes.extend(table.to_pylist())).start(end_of_input=True)
    return sorted(panes, key=lambda p: p["window_start"])


def main() -> None:
    spark = eventtime.local_session(app_name="eventtime-calendar")
    for pane in daily_totals(spark):
        hours = (pane["window_end"] - pane["window_start"]) / timedelta(hours=1)
        print(f"{pane['meter']}  {pane['window_start']:%Y-%m-%d %H:%M}Z  {hours:>4.0f} h  "
              f"readings {pane['count']:>3}  kWh {pane['kwh']:>5.1f}  {pane['pane_timing']}")
    spark.stop()


if __name__ == "__main__":
    main()
