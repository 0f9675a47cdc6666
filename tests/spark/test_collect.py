"""route() splits window_aggregate's own output by kind in the tasks (Collect.java) instead of
collecting every column with toArrow and splitting on the driver: the sinks get the same tables,
type for type and value for value, and the query publishes the same metrics."""

from __future__ import annotations

import os
import tempfile

import pyarrow as pa
import pytest
from streams import drain, write_json_lines

import eventtime

pytestmark = pytest.mark.spark

T0 = 1_700_000_000_000
SCHEMA = "user string, shop bigint, amount double, price decimal(10,2), day date, ts bigint, part int, hb boolean"


def _rows(batch: int) -> list[dict]:
    """Each batch: on-time rows of three users (a null one among them), a late row within the
    lateness (a LATE pane), one beyond it (a late record), an invalid one (null time)."""
    base = T0 + batch * 60_000
    rows = []
    for i in range(12):
        rows.append({"user": [None, "a \"q\" ü", "b"][i % 3], "shop": 2**53 + i % 2, "amount": i * 0.5,
                     "price": f"{i}.25", "day": "2024-05-01", "ts": base + i * 4_000, "part": i % 2, "hb": False})
    rows.append({"user": "b", "shop": 1, "amount": -0.0, "price": "1.00", "day": None, "ts": base - 70_000, "part": None,
                 "hb": False})
    rows.append({"user": "a \"q\" ü", "shop": None, "amount": 2.0, "price": None, "day": "2024-05-02",
                 "ts": base - 900_000, "part": 1, "hb": False})
    rows.append({"user": "b", "shop": 3, "amount": 1.0, "price": "3.00", "day": None, "ts": None, "part": 0, "hb": False})
    return rows


def _run(spark, window, through_to_arrow: bool, large_types: bool = False):
    directory = tempfile.mkdtemp(prefix="eventtime-collect-")
    source = os.path.join(directory, "in")
    os.makedirs(source)
    events = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(source).transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="5 seconds", min_valid="2020-01-01",
                                  max_future="3650 days"))
    out = events.transform(eventtime.window_aggregate(
        keys=["user", "shop"], window=window, allowed_lateness="5 minutes",
        aggregations=[eventtime.count(), eventtime.sum("amount"), eventtime.sum("price"), eventtime.max("day")],
        partition_col="part", heartbeat_col="hb"))
    if through_to_arrow:
        out = out.select("*")  # not window_aggregate's own DataFrame: toArrow, split on the driver
    got: dict = {"panes": [], "records": []}
    spark.conf.set("spark.sql.execution.arrow.useLargeVarTypes", str(large_types).lower())
    try:
        router = eventtime.route(out, panes=lambda t, b, q: got["panes"].append(t),
                                 late=lambda t, b, q: got["records"].append(t), pipeline="collect")
        query = router.start(checkpoint=os.path.join(directory, "chk"))
        try:
            for i in range(4):
                write_json_lines(source, f"batch-{i}.json", _rows(i))
                drain(query, i)
            metrics = [p["observedMetrics"]["eventtime_collect"] for p in query.recentProgress if p["numInputRows"]]
        finally:
            query.stop()
    finally:
        spark.conf.unset("spark.sql.execution.arrow.useLargeVarTypes")
    return {k: pa.concat_tables(v) for k, v in got.items()}, metrics


def _sorted(table: pa.Table) -> pa.Table:
    keys = [(c, "ascending") for c in table.column_names if not pa.types.is_nested(table.schema.field(c).type)]
    return table.sort_by(keys)


@pytest.mark.parametrize("window, large_types", [
    (eventtime.Tumbling("1 minute"), False),
    (eventtime.Sliding("2 minutes", "1 minute"), True),
    (eventtime.Session("10 seconds"), False),
])
@pytest.mark.slow
def test_split_in_the_tasks_gives_the_tables_to_arrow_gives(spark, window, large_types):
    split, split_metrics = _run(spark, window, through_to_arrow=False, large_types=large_types)
    whole, whole_metrics = _run(spark, window, through_to_arrow=True, large_types=large_types)
    for name in ("panes", "records"):
        assert split[name].schema == whole[name].schema, name
        assert _sorted(split[name]).equals(_sorted(whole[name])), name
    assert split_metrics == whole_metrics
    assert split["panes"].num_rows > 0
    kinds = split["records"].column("kind").to_pylist()
    assert kinds.count("late") > 0 and kinds.count("invalid") > 0
    # a late record's raw_timestamp is Spark's text of the original value (the operator's cast)
    late = [r for r in split["records"].to_pylist() if r["kind"] == "late"]
    assert all(r["raw_timestamp"] == str(round(r["event_time"].timestamp() * 1000)) for r in late)
    if large_types:
        assert split["panes"].schema.field("user").type == pa.large_string()
    if window.merging:
        assert "merged_from" in split["panes"].column_names

