"""A results table that lacks a column the pipeline now writes (an aggregation it gained) is
refused before the query starts, unless the sink was told to add it."""

from __future__ import annotations

import pytest

import eventtime
from eventtime.sinks import DeltaResultsSink

pytestmark = pytest.mark.spark
T0 = 1_700_000_040_000


def _out(spark, aggregations):
    df = spark.createDataFrame([("u", T0, 5), ("u", T0 + 1000, 7)], "user_id string, ts bigint, amount bigint")
    return df.transform(eventtime.with_event_time("ts", unit="ms")).transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"), aggregations=aggregations))


def test_a_column_the_pipeline_gained_is_added_only_when_asked(spark, tmp_path):
    path = str(tmp_path / "results")
    eventtime.route(_out(spark, [eventtime.count()]), panes=DeltaResultsSink(path, pipeline="orders"),
                    pipeline="orders", progress=False).start(end_of_input=True)
    gained = _out(spark, [eventtime.count(), eventtime.sum("amount")])
    with pytest.raises(ValueError, match=(
            rf"^DeltaResultsSink: the table at '{path}' has no column\(s\) sum_amount that pipeline 'orders' writes "
            r"now \(its columns: .*count.*\): did its aggregations change\? Pass add_columns=True to add them")):
        eventtime.route(gained, panes=DeltaResultsSink(path, pipeline="orders"), pipeline="orders")
    assert list(eventtime.latest_panes(path)["count"]) == [2]  # nothing written to the refused table
    assert "sum_amount" not in eventtime.latest_panes(path).columns
    eventtime.route(gained, panes=DeltaResultsSink(path, pipeline="orders2", add_columns=True),
                    pipeline="orders2", progress=False).start(end_of_input=True)
    table = eventtime.latest_panes(path).sort_values("pipeline")
    assert list(table["pipeline"]) == ["orders", "orders2"]
    assert table["sum_amount"].isna().tolist() == [True, False] and table["sum_amount"].iloc[1] == 12
    with pytest.raises(TypeError, match=r"^add_columns must be a bool, got str 'yes'$"):
        DeltaResultsSink(path, pipeline="orders", add_columns="yes")
