"""Mistakes in window_aggregate are refused before any query starts, naming the parameter,
the value and what is expected (docs/reliability.md, "Mistakes refused before the query starts")."""

from __future__ import annotations

import pytest

import eventtime

pytestmark = pytest.mark.spark

DDL = "user string, amount double, name string, hb double, part int, off string, ts bigint, tags map<string,int>"


@pytest.fixture(scope="module")
def events(spark):
    return spark.createDataFrame([], DDL).transform(eventtime.with_event_time("ts", unit="ms"))


def _apply(events, **kwargs):
    kwargs.setdefault("keys", ["user"])
    kwargs.setdefault("window", eventtime.Tumbling("1 minute"))
    return events.transform(eventtime.window_aggregate(**kwargs))


def test_aggregations_must_be_aggregation_objects():
    with pytest.raises(TypeError, match=r"aggregations must contain eventtime aggregations.*'count'"):
        eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling(1000), aggregations=["count"])


def test_sum_of_a_string_column_is_refused_at_transform_time(events):
    with pytest.raises(TypeError, match=r"aggregations\[1\]: sum\('name'\) needs a numeric column, but 'name' is string"):
        _apply(events, aggregations=[eventtime.count(), eventtime.sum("name")])


def test_min_of_a_map_column_is_refused(events):
    with pytest.raises(TypeError, match=r"aggregations\[0\]: min\('tags'\) needs an orderable column.*map<string,int>"):
        _apply(events, aggregations=[eventtime.min("tags")])


def test_heartbeat_column_must_be_boolean(events):
    """A DOUBLE heartbeat column was accepted and its rows were then lost (no count, late or invalid)."""
    with pytest.raises(TypeError, match=r"heartbeat_col 'hb' must be a boolean column.*got double"):
        _apply(events, heartbeat_col="hb")


def test_offset_column_must_be_an_integer(events):
    with pytest.raises(TypeError, match=r"offset_col 'off' must be an integer column.*got string"):
        _apply(events, offset_col="off")


def test_partition_column_must_be_plain(events):
    with pytest.raises(TypeError, match=r"partition_col 'tags' must be a plain column"):
        _apply(events, partition_col="tags")


def test_missing_columns_name_the_parameter(events):
    with pytest.raises(ValueError, match=r"keys\[1\] names column 'nope', which is not in the input"):
        _apply(events, keys=["user", "nope"])
    with pytest.raises(ValueError, match=r"aggregations\[0\] \(sum 'sum_nope'\) names column 'nope'"):
        _apply(events, aggregations=[eventtime.sum("nope")])


def test_a_key_named_partition_is_refused_with_what_to_do():
    with pytest.raises(ValueError, match=r"keys: column name 'partition' is reserved.*withColumnRenamed\('partition', 'source_partition'\)"):
        eventtime.window_aggregate(keys=["partition"], window=eventtime.Tumbling(1000))


@pytest.mark.parametrize(
    "kwargs, error, pattern",
    [
        ({"keys": 5}, TypeError, r"keys must be a column name or a list of column names, got int 5"),
        ({"keys": ["a", "a"]}, ValueError, r"keys must be distinct"),
        (
            {"aggregations": [eventtime.aggregate("n", "v", create=list, add=lambda a, v: a + [v], merge=lambda a, b: a + b,
                                                  result=lambda a: a or None)]},
            ValueError,
            r"aggregations\[0\] \('n'\) is a Python aggregation: the Spark engine needs the Spark type of its result, "
            r"and result\(create\(\)\) gives None; pass it to eventtime.aggregate\(..., result_type='bigint'\)",
        ),
        ({"heartbeat_col": 1}, TypeError, r"heartbeat_col must be a column name \(str\) or None, got int 1"),
        ({"window": "1 minute"}, TypeError, r"window must be Tumbling\(...\), Sliding\(...\), Calendar\(...\) or Session\(...\)"),
        ({"emit": "always"}, ValueError, r"emit must be one of"),
        ({"allowed_lateness": "soon"}, ValueError, r"allowed_lateness"),
    ],
)
def test_parameters_are_checked_when_window_aggregate_is_called(kwargs, error, pattern):
    kwargs = {"keys": ["user"], "window": eventtime.Tumbling(1000), **kwargs}
    with pytest.raises(error, match=pattern):
        eventtime.window_aggregate(**kwargs)


def test_an_aggregation_named_like_a_key_column_is_refused_naming_it():
    with pytest.raises(ValueError, match=r"aggregations\[1\] \(max\) is named 'user', which is a key column.*"
                                         r"name='user_max'"):
        eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"),
                                   aggregations=[eventtime.count(), eventtime.max("amount", name="user")])
