"""Spark's watermark node after the map side (eventtime/spark/engine/.../MapSideWatermark.java).

``with_event_time`` defines the watermark on every input row; ``window_aggregate`` moves
Spark's node after its map side, which hands it each task's largest valid event time, when
only projections lie between the two (they keep every row). The watermark per batch and the
whole output must be what they were: the reference model's, with heartbeats moving it,
invalid records (a time beyond ``max_future``, before ``min_valid``, null) not moving it,
late and too-late records, with the map-side combine by ``FoldExpression`` (plain column
types) and by the mapper itself (dates and timestamps among the aggregated columns). A filter
in between that Spark pushes below its node anyway moves with it (the rows it drops never
moved the watermark); with one that Spark keeps above the node, the node stays where it was,
and a row the filter drops still moves the watermark, as before.
"""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F
from typed_harness import AGGREGATIONS, SparkTypedRunner, diff_typed, run_reference_typed

import eventtime
from property_tests.strategies import MAX_FUTURE_MS, NOW_MS, TYPED_COLUMNS

pytestmark = pytest.mark.spark

# only numbers: the map-side combine runs in the input's generated code (FoldExpression)
PLAIN = (eventtime.count(), eventtime.sum("v_big", "s_big"), eventtime.max("v_dbl", "mx_dbl"))
TOO_FAR = NOW_MS + MAX_FUTURE_MS + 1


def _row(rid, ts, key, hb=False, part=0):
    row = {name: None for name, _ in TYPED_COLUMNS}
    row.update(rid=rid, ts=ts, hb=hb, part=part, off=rid, k_big=key, v_big=rid + 2**53, v_dbl=rid / 4)
    return row


def _scenario(aggregations, batches=None):
    batches = batches or [
        # invalid: too far in the future, before min_valid, null; none of them moves the watermark
        [_row(0, 1000, 1), _row(1, 2500, 2, part=1), _row(2, TOO_FAR, 1), _row(3, 0, 2), _row(4, None, 1),
         # a null key and partition, a key above 2**53
         _row(16, 1500, None, part=None), _row(17, 2000, 2**53 + 1)],
        # a heartbeat moves it past [0, 3000), whose pane fires
        [_row(5, 6200, 0, hb=True), _row(6, 500, 1, part=1), _row(7, 4000, 2), _row(8, TOO_FAR + 5, 2)],
        # 1200: behind the watermark, within the lateness (a LATE pane)
        [_row(9, 9000, 1), _row(10, 1200, 2, part=1), _row(11, 6500, 1)],
        [],
        # 2000: [0, 3000) has expired (too late, with its payload)
        [_row(12, 9100, 2), _row(13, 2000, 1), _row(14, 30000, 0, hb=True, part=1)],
    ]
    return {
        "keys": ("k_big",),
        "window": {"type": "tumbling", "size_ms": 3000, "offset_ms": 0},
        "max_out_of_orderness_ms": 1000,
        "allowed_lateness_ms": 3000,
        "accumulation": "accumulating",
        "emit": "on_time_and_late",
        "aggregations": aggregations,
        "batches": batches,
    }


def _plan(runner: SparkTypedRunner) -> list[str]:
    """The node names of the last batch's physical plan, top down."""
    text = runner.query._jsq.streamingQuery().lastExecution().executedPlan().treeString()
    return [line.lstrip(" :+-*()0123456789").split(" ")[0] for line in text.splitlines()]


def _run_with_plan(sc, spark, between=None):
    runner = SparkTypedRunner(sc, spark, between)
    try:
        out = [runner.run_batch(batch) for batch in sc["batches"]]
        assert not _invalid_records_beside(runner)  # unless split_invalid=True: the input is read once
        return out, _plan(runner)
    finally:
        runner.close()


def _with_row_at_20000(dropped):
    batches = _scenario(PLAIN)["batches"]
    batches[2] = [*batches[2], _row(dropped, 20000, 1)]
    return batches


@pytest.mark.slow
def test_a_filter_spark_pushes_below_the_node_moves_with_it(spark):
    """Spark pushes a deterministic filter that does not read the event time below its watermark
    node: the rows it drops never moved the watermark, and still do not."""
    dropped = 15
    sc = _scenario(PLAIN, _with_row_at_20000(dropped))
    got, plan = _run_with_plan(sc, spark, between=lambda df: df.filter(F.col("rid") != dropped))
    assert plan.index("EventTimeWatermark") < plan.index("MapPartitions"), plan
    expected = run_reference_typed(_scenario(PLAIN))  # without the row
    assert diff_typed(expected, got) is None, diff_typed(expected, got)
    assert got[2]["watermark_ms"] == 8000


@pytest.mark.slow
def test_a_filter_spark_keeps_above_the_node_keeps_the_node_before_the_map_side(spark):
    """A filter that reads the event time stays above Spark's node: a row it drops moves the
    watermark, so the node stays before the map side."""
    dropped = 15
    batches = _with_row_at_20000(dropped)
    sc = _scenario(PLAIN, batches)
    got, plan = _run_with_plan(sc, spark, between=lambda df: df.filter(F.col("__et_wm").isNull() | (F.col("rid") != dropped)))
    assert plan.index("MapPartitions") < plan.index("EventTimeWatermark"), plan  # below it: before the map side
    # the model's view of a row that moves the watermark but is no record: a heartbeat
    as_heartbeat = [[{**r, "hb": r["rid"] == dropped or r["hb"]} for r in b] for b in batches]
    expected = run_reference_typed(_scenario(PLAIN, as_heartbeat))
    assert diff_typed(expected, got) is None, diff_typed(expected, got)
    assert got[2]["watermark_ms"] == 19000


def _invalid_records_beside(runner: SparkTypedRunner) -> bool:
    """Whether the query's plan has the branch that writes invalid records beside the operator
    (InvalidRecords.java: the batch's watermark as its column ``et__w``)."""
    plan = runner.query._jsq.streamingQuery().lastExecution().analyzed().treeString()
    return " AS et__w#" in plan


def _operator_input(runner: SparkTypedRunner) -> tuple[list[str], list[str]]:
    """The columns the last batch shuffles to the operator (the child of its one exchange), and
    the keys it sorts them by before the operator."""
    node = runner.query._jsq.streamingQuery().lastExecution().executedPlan()
    sort_keys = None
    while node.nodeName() != "Exchange":
        if node.nodeName() == "Sort":
            order = node.sortOrder()
            sort_keys = [order.apply(i).child().toString() for i in range(order.size())]
        children = node.children()
        node = children.apply(0)  # the operator's input comes first, its initial state second
    output = node.child().output()
    return [output.apply(i).name() for i in range(output.size())], sort_keys


@pytest.mark.slow
@pytest.mark.parametrize("aggregations", [PLAIN, AGGREGATIONS], ids=["fold-expression", "mapper"])
def test_the_operator_input_is_shuffled_packed(spark, aggregations):
    """The watermark after the map side is the model's (invalid records do not move it,
    heartbeats do), the mapper's rows reach the operator as the grouping key and one binary
    column (Packed.java), not a serializer and deserializer expression per column, and the
    output is the model's, the same with Spark's watermark node after the map side and before it. The grouping key is
    one int, so Spark sorts the operator's input by it alone (a radix sort of its prefix)."""
    sc = {**_scenario(aggregations), "split_invalid": True}
    expected = run_reference_typed(sc)
    outputs, beside = [], []
    # a projection between the steps keeps Spark's node after the map side; this filter keeps it before
    for between in (lambda df: df.select(*df.columns), lambda df: df.filter(F.col("__et_wm").isNull() | (F.col("rid") >= 0))):
        runner = SparkTypedRunner(sc, spark, between)
        try:
            got = [runner.run_batch(batch) for batch in sc["batches"]]
            columns, sort_keys = _operator_input(runner)
            assert columns == ["et__gb", "et__v"]
            assert [k.split("#")[0] for k in sort_keys] == ["et__gb"]
            outputs.append((got, _plan(runner)))
            beside.append(_invalid_records_beside(runner))
        finally:
            runner.close()
        assert diff_typed(expected, got) is None, diff_typed(expected, got)
    (moved, moved_plan), (kept, kept_plan) = outputs
    assert moved_plan.count("EventTimeWatermark") == 1
    # after each batch: its largest valid event time (the heartbeats included) - 1000
    assert [b["watermark_ms"] for b in moved] == [1500, 5200, 8000, 8000, 29000]
    assert any(p["timing"] == "LATE" for b in moved for p in b["panes"])
    assert {r["reason"] for b in moved for r in b["records"]} == {
        "too_far_in_future", "before_min_valid", "null_timestamp", "too_late"}
    # the node after the map side (moved) and before it (kept, under a filter Spark keeps above
    # the node) give the same output
    assert moved_plan.index("EventTimeWatermark") < moved_plan.index("MapPartitions"), moved_plan
    assert kept_plan.index("MapPartitions") < kept_plan.index("EventTimeWatermark"), kept_plan
    # split_invalid=True: without Spark's node before the map side, invalid records are written beside
    # the operator (a second branch of the plan, InvalidRecords.java), with the watermark the operator
    # would give them
    assert beside == [True, False]
    assert diff_typed(moved, kept) is None, diff_typed(moved, kept)
