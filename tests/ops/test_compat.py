"""Restarting with an incompatible configuration fails at start, naming what changed."""

import pytest

import eventtime
from eventtime import EngineConfig, Sliding, Tumbling
from eventtime.ops.compat import IncompatibleRestartError, check_and_store, state_fingerprint


def fp(**overrides):
    args = {"window": Tumbling("1 minute"), "aggregations": (eventtime.count(), eventtime.sum("amount")), "allowed_lateness_ms": 60_000}
    keys = overrides.pop("keys", ["user"])
    args.update(overrides)
    return state_fingerprint(EngineConfig(**args), keys)


def test_fresh_checkpoint_stores_and_same_config_resumes(tmp_path):
    assert check_and_store(str(tmp_path), fp()) is None
    assert check_and_store(str(tmp_path), fp()) == fp()


@pytest.mark.parametrize(
    "change, named",
    [
        ({"window": Tumbling("2 minutes")}, "window"),
        ({"window": Sliding("1 minute", "30 seconds")}, "window"),
        ({"window": Tumbling("1 minute", offset="10 seconds")}, "window"),
        ({"keys": ["user", "country"]}, "keys"),
        ({"aggregations": (eventtime.count(),)}, "aggregations"),
        ({"allowed_lateness_ms": 0}, "allowed_lateness_ms"),
        ({"accumulation": "discarding"}, "accumulation"),
        ({"emit": "final_only"}, "emit"),
    ],
)
def test_incompatible_changes_are_refused_naming_the_field(tmp_path, change, named):
    check_and_store(str(tmp_path), fp())
    with pytest.raises(IncompatibleRestartError, match=rf"Changed: .*{named}: "):
        check_and_store(str(tmp_path), fp(**change))


def test_compatible_changes_are_allowed(tmp_path):
    check_and_store(str(tmp_path), fp())
    assert check_and_store(str(tmp_path), fp(max_out_of_orderness_ms=5000, max_future_ms=60_000, min_valid_ms="2010-01-01")) is not None


def test_a_time_zone_that_does_not_move_the_grid_is_the_same_window():
    # A 1-minute grid is the same in UTC and UTC+8: resuming is safe.
    assert fp(window=Tumbling("1 minute", tz="UTC+8")) == fp()
    assert fp(window=Tumbling("1 day", tz="UTC+8")) != fp(window=Tumbling("1 day"))


@pytest.mark.parametrize("old_layout", [1, 2])
def test_checkpoint_of_the_pandas_engine_is_refused_with_what_to_do(tmp_path, old_layout):
    """Layouts 1 and 2 (pickled frames per hash bucket) cannot be read by the JVM operator."""
    from eventtime.spark.plan import NUM_BUCKETS, STATE_LAYOUT

    old = {**fp(), "num_buckets": 8, "layout": old_layout}
    if old_layout == 1:
        del old["layout"]
    check_and_store(str(tmp_path), old)
    with pytest.raises(IncompatibleRestartError) as err:
        check_and_store(str(tmp_path), {**fp(), "layout": STATE_LAYOUT, "buckets": NUM_BUCKETS})
    text = str(err.value)
    assert f"checkpoint layout {old_layout}, this version writes layout {STATE_LAYOUT}" in text
    assert "kept per key by the JVM operator" in text
    assert "end_of_input=True" in text and "fresh_start=True" in text


@pytest.mark.parametrize(
    "old_layout, says, not_says",
    [
        # layout 3 grouped the operator's state by two ints; layout 4 by one per hash bucket
        (3, "one int per hash bucket", "kept per key by the JVM operator"),
        # layout 4 by the bucket's number; layout 5 by an id per bucket that Spark's hash
        # partitioning spreads evenly (the same state under other grouping keys)
        (4, "partition bucket mod P", "one int per hash bucket"),
    ],
)
def test_checkpoint_of_an_earlier_grouping_key_is_refused_with_what_to_do(tmp_path, old_layout, says, not_says):
    from eventtime.spark.plan import NUM_BUCKETS, STATE_LAYOUT

    check_and_store(str(tmp_path), {**fp(), "layout": old_layout, "buckets": NUM_BUCKETS})
    with pytest.raises(IncompatibleRestartError) as err:
        check_and_store(str(tmp_path), {**fp(), "layout": STATE_LAYOUT, "buckets": NUM_BUCKETS})
    text = str(err.value)
    assert f"checkpoint layout {old_layout}, this version writes layout {STATE_LAYOUT}" in text
    assert says in text and not_says not in text
    assert "end_of_input=True" in text and "fresh_start=True" in text


def test_a_changed_sql_expression_under_the_same_name_is_refused(tmp_path):
    """A Spark SQL aggregation's buffer is laid out by its expression: the same output name
    over another expression cannot resume the kept buffers."""
    p95 = (eventtime.count(), eventtime.agg("percentile_approx(ms, 0.95)", "p"))
    check_and_store(str(tmp_path), fp(aggregations=p95))
    assert check_and_store(str(tmp_path), fp(aggregations=p95)) is not None
    with pytest.raises(IncompatibleRestartError, match=r"Changed: .*aggregations: .*percentile_approx\(ms, 0.95\).*"
                                                       r"approx_count_distinct\(ms\)"):
        check_and_store(str(tmp_path), fp(aggregations=(eventtime.count(), eventtime.agg("approx_count_distinct(ms)", "p"))))
    # the built-ins' stored shape is unchanged: checkpoints written before resume
    assert fp()["aggregations"] == [["count", "count", None], ["sum", "sum_amount", "amount"]]


def test_an_added_aggregation_is_refused_with_what_to_do(tmp_path):
    """Each window's state holds one buffer per aggregation, laid out in order: a pipeline that
    adds one cannot resume the kept windows (docs/usage.md, "Spark SQL aggregations")."""
    check_and_store(str(tmp_path), fp())
    added = (eventtime.count(), eventtime.sum("amount"), eventtime.agg("approx_count_distinct(user_id)", "users"))
    with pytest.raises(IncompatibleRestartError) as refused:
        check_and_store(str(tmp_path), fp(aggregations=added))
    text = str(refused.value)
    assert "Changed: aggregations: " in text and "approx_count_distinct(user_id)" in text, text
    assert "Restore the old configuration, or start from a new checkpoint (and new tables) explicitly." in text


@pytest.mark.parametrize(
    "overrides, resumes",
    [
        ({}, True),  # built-ins only: the key's state is the same bytes in layouts 5 and 6
        ({"aggregations": (eventtime.count(), eventtime.agg("approx_count_distinct(ms)", "users"))}, False),
        # (a Python aggregation is in the fingerprint as the Spark SQL one the engine runs)
        ({"window": Sliding("1 minute", "30 seconds"),
          "aggregations": (eventtime.agg("collect_list(struct(ms AS v))", "values"),)}, False),
        ({"window": eventtime.Session("30 seconds"),
          "aggregations": (eventtime.agg("approx_count_distinct(ms)", "users"),)}, True),  # sessions keep theirs inline
    ],
)
def test_a_layout_5_checkpoint_resumes_unless_it_holds_sql_buffers_of_fixed_windows(tmp_path, overrides, resumes):
    """Layout 6 moved only the SQL (and Python) aggregations' buffers of fixed windows out of the
    key's state: every other layout-5 checkpoint is the same state and resumes."""
    from eventtime.spark.plan import NUM_BUCKETS, STATE_LAYOUT

    assert STATE_LAYOUT == 6
    check_and_store(str(tmp_path), {**fp(**overrides), "layout": 5, "buckets": NUM_BUCKETS})
    new = {**fp(**overrides), "layout": STATE_LAYOUT, "buckets": NUM_BUCKETS}
    if resumes:
        assert check_and_store(str(tmp_path), new)["layout"] == 5
        return
    with pytest.raises(IncompatibleRestartError) as err:
        check_and_store(str(tmp_path), new)
    text = str(err.value)
    assert "checkpoint layout 5, this version writes layout 6" in text and "kept per slice" in text, text
    assert "end_of_input=True" in text and "fresh_start=True" in text
