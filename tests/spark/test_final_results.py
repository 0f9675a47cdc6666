"""Picking final results: the latest pane of each window (``eventtime.latest_panes``) is its
result, also for windows whose last pane was LATE (``is_final`` false there), and it equals
Spark's batch ``groupBy`` over the records that were not late."""

from __future__ import annotations

import json
import os

import pytest
from pyspark.sql import functions as F
from streams import write_json_lines

import eventtime
from eventtime.query.late import read_late
from eventtime.sinks import DeltaLateSink, DeltaResultsSink

pytestmark = pytest.mark.spark
MIN = 60_000
T0 = 1_700_000_040_000 - 1_700_000_040_000 % MIN


@pytest.mark.slow
def test_latest_panes_are_the_final_results_even_where_the_last_pane_was_late(spark, tmp_path):
    source = tmp_path / "in"
    source.mkdir()
    batches = [
        [("a", T0 + 1_000, 1), ("a", T0 + 2_000, 2), ("b", T0 + 3_000, 4)],
        [("a", T0 + 2 * MIN + 5_000, 8)],                        # W passes the first window's end
        [("a", T0 + 4_000, 16), ("b", T0 + 10_000, 32)],          # late, within L: LATE panes
        [("a", T0 + 20 * MIN, 64)],                               # W passes end + L
        [("a", T0 + 5_000, 128)],                                 # too late: to the late table
    ]
    for i, rows in enumerate(batches):
        write_json_lines(str(source), f"b{i}.json", [{"user_id": k, "ts": str(t), "amount": v} for k, t, v in rows])
        os.utime(source / f"b{i}.json", (1_700_000_000 + i, 1_700_000_000 + i))  # the file source's order
    events = spark.readStream.schema("user_id STRING, ts STRING, amount BIGINT").option("maxFilesPerTrigger", 1) \
        .json(str(source)).transform(eventtime.with_event_time("ts", unit="ms", max_future="3650 days"))
    out = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"), allowed_lateness="5 minutes",
        aggregations=[eventtime.count(), eventtime.sum("amount")]))
    results, late = str(tmp_path / "results"), str(tmp_path / "late")
    eventtime.route(out, panes=DeltaResultsSink(results, pipeline="p"), late=DeltaLateSink(late, pipeline="p"),
                    pipeline="p", progress=False).start(
        str(tmp_path / "chk"), trigger={"availableNow": True}, end_of_input=True)

    final = eventtime.latest_panes(results, pipeline="p")
    got = {(json.loads(row.key)["user_id"], int(row.window_start.timestamp() * 1000)):
           (row["count"], row["sum_amount"], row.pane_timing, bool(row.is_final)) for _, row in final.iterrows()}
    # the oracle: Spark's batch groupBy over every record that did not go to the late table
    late_rows = read_late(late).to_pylist()
    assert [(json.loads(r["key"])["user_id"], r["reason"]) for r in late_rows] == [("a", "too_late")]
    kept = [(k, t, v) for rows in batches[:-1] for k, t, v in rows]
    oracle = spark.createDataFrame(kept, "k string, t long, v long").groupBy(
        "k", F.expr(f"t - pmod(t, {MIN})").alias("w")).agg(F.count("*").alias("n"), F.sum("v").alias("s")).collect()
    assert {k: v[:2] for k, v in got.items()} == {(r.k, r.w): (r.n, r.s) for r in oracle}
    # the trap: windows whose last pane was LATE have is_final false, and are final all the same
    assert got[("a", T0)][2:] == ("LATE", False)
    assert got[("b", T0)][2:] == ("LATE", False)
    # which is what ``closed`` says: the end of input expired every window, whatever its last pane
    assert final["closed"].all() and not final["is_final"].all()
