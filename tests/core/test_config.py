"""EngineConfig, durations and aggregations validate at the edge and name the parameter."""

from datetime import timedelta

import pytest

import eventtime
from eventtime import EngineConfig, Tumbling
from eventtime.core._duration import to_instant_ms, to_ms


def test_durations_in_every_form():
    assert to_ms("10 minutes", "x") == 600_000
    assert to_ms("1 day 2 hours", "x") == 93_600_000
    assert to_ms("interval 30 seconds", "x") == 30_000
    assert to_ms(timedelta(milliseconds=1500), "x") == 1500
    assert to_ms(250, "x") == 250


def test_duration_errors_name_the_parameter():
    with pytest.raises(ValueError, match="allowed_lateness must look like"):
        to_ms("ten minutes", "allowed_lateness")
    with pytest.raises(TypeError, match="allowed_lateness must be int milliseconds"):
        to_ms(1.5, "allowed_lateness")
    with pytest.raises(ValueError, match="whole number of milliseconds"):
        to_ms(timedelta(microseconds=5), "size")


def test_instants():
    assert to_instant_ms("2000-01-01", "min_valid") == 946_684_800_000
    assert to_instant_ms("2000-01-01T08:00:00+08:00", "min_valid") == 946_684_800_000
    with pytest.raises(ValueError, match="min_valid must be an ISO-8601"):
        to_instant_ms("soon", "min_valid")


def test_config_normalises_durations_to_ms():
    cfg = EngineConfig(Tumbling("1 minute"), max_out_of_orderness_ms="30 seconds", allowed_lateness_ms=timedelta(minutes=10))
    assert (cfg.max_out_of_orderness_ms, cfg.allowed_lateness_ms) == (30_000, 600_000)
    assert cfg.min_valid_ms == 946_684_800_000


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"window": "1 minute"}, TypeError, "window must be Tumbling"),
        ({"allowed_lateness_ms": -1}, ValueError, "allowed_lateness_ms must be >= 0"),
        ({"max_out_of_orderness_ms": "soon"}, ValueError, "max_out_of_orderness_ms must look like"),
        ({"accumulation": "retracting"}, ValueError, "accumulation must be one of"),
        ({"emit": "always"}, ValueError, "emit must be one of"),
        ({"min_valid_ms": 0}, ValueError, "min_valid_ms must be >= 1"),
        ({"aggregations": ()}, ValueError, "aggregations must not be empty"),
        ({"aggregations": ("count",)}, TypeError, "aggregations must contain"),
        ({"aggregations": (eventtime.count(), eventtime.count())}, ValueError, "distinct names"),
    ],
)
def test_config_errors(kwargs, error, message):
    args = {"window": Tumbling(1000), **kwargs}
    with pytest.raises(error, match=message):
        EngineConfig(**args)


def test_builtin_aggregations():
    rows = [(5, 3000), (None, 1000), (2, 1000), (float("nan"), 500), (9, 3000)]

    def run(agg):
        acc = agg.create()
        for value, ts in rows:
            acc = agg.add(acc, value, ts)
        return agg.result(acc)

    assert run(eventtime.count()) == 5
    assert run(eventtime.sum("v")) == 16
    assert run(eventtime.min("v")) == 2
    assert run(eventtime.max("v")) == 9
    assert run(eventtime.mean("v")) == pytest.approx(16 / 3)
    assert run(eventtime.first("v")) == 2  # earliest non-null at ts 1000
    assert run(eventtime.last("v")) == 9  # latest ts 3000, tie broken by the larger value


def test_aggregation_merge_equals_sequential_add():
    for agg in (eventtime.count(), eventtime.sum("v"), eventtime.mean("v"), eventtime.first("v"), eventtime.last("v")):
        left = agg.add(agg.add(agg.create(), 1, 10), 7, 5)
        right = agg.add(agg.create(), 3, 1)
        seq = agg.add(agg.add(agg.add(agg.create(), 1, 10), 7, 5), 3, 1)
        assert agg.result(agg.merge(left, right)) == agg.result(seq)


def test_empty_aggregations_give_null():
    for agg in (eventtime.sum("v"), eventtime.min("v"), eventtime.mean("v"), eventtime.first("v")):
        assert agg.result(agg.create()) is None


def test_user_defined_aggregate_validates_its_functions():
    with pytest.raises(TypeError, match="merge must be callable"):
        eventtime.aggregate("x", "v", create=list, add=lambda a, v: a, merge=None, result=len)


_WINDOWS = [
    eventtime.Tumbling("10 minutes", offset="1 minute"),
    eventtime.Sliding("1 hour", "10 minutes"),
    eventtime.Tumbling("1 day", tz="UTC+8"),
    eventtime.Calendar("day", tz="Europe/Berlin"),
    eventtime.Calendar("week", tz="UTC+8", week_start="sunday"),
    eventtime.Calendar("month", tz="America/New_York"),
    eventtime.Session("30 minutes"),
]


@pytest.mark.parametrize("window", _WINDOWS, ids=lambda w: w.TYPE)
def test_a_config_is_written_one_way_and_read_back(window):
    """to_spec is the engine's spec, the query's metadata and the fingerprint's source;
    from_spec gives back an equal config (through JSON, as it travels)."""
    import json

    from eventtime.core.watermark import WatermarkPolicy

    config = EngineConfig(window, (eventtime.count(), eventtime.sum("amount"), eventtime.first("item", name="f")),
                          max_out_of_orderness_ms="10 seconds", allowed_lateness_ms="5 minutes",
                          accumulation="discarding", emit="final_only", min_valid_ms="2001-01-01",
                          max_future_ms="2 days", watermark=WatermarkPolicy("per_partition", idle_timeout_ms=60_000))
    spec = json.loads(json.dumps(config.to_spec()))
    assert EngineConfig.from_spec(spec) == config
    assert eventtime.WindowAssigner.from_dict(window.to_dict()) == window
    assert EngineConfig.from_spec({"window": window.to_dict()}) == EngineConfig(window)


@pytest.mark.parametrize("spec, error, message", [
    ({"window": {"type": "hopping", "size_ms": 1}}, ValueError, r"window.type must be one of \['calendar', 'session', 'sliding', 'tumbling'\], got 'hopping'"),
    ({"window": {"type": "session"}}, ValueError, "window.gap_ms is required"),
    ({"window": {"type": "tumbling", "size_ms": "1 minute"}}, TypeError, "window.size_ms must be an integer number of milliseconds"),
    ({"window": {"type": "tumbling", "size_ms": 1000, "slide_ms": 10}}, ValueError, r"window has unknown field\(s\) \['slide_ms'\]"),
    ({"window": {"type": "sliding", "size_ms": 1000, "slide_ms": 2000}}, ValueError, "slide must satisfy"),
    ({"window": {"type": "calendar", "unit": "year", "tz": "UTC"}}, ValueError, "unit must be one of"),
    ({"window": [60000]}, TypeError, "window must be a dict"),
    ({"window": {"type": "session", "gap_ms": 10}, "lateness": 5}, ValueError, r"spec has unknown field\(s\) \['lateness'\]"),
    ({"window": {"type": "session", "gap_ms": 10}, "allowed_lateness_ms": True}, TypeError, "spec.allowed_lateness_ms must be an integer"),
    ({"window": {"type": "session", "gap_ms": 10}, "aggregations": [{"kind": "median", "name": "m", "column": "x"}]}, ValueError, "kind must be one of"),
    ({"window": {"type": "session", "gap_ms": 10}, "aggregations": {"kind": "count"}}, TypeError, "spec.aggregations must be a list"),
    ({"window": {"type": "session", "gap_ms": 10}, "watermark": {"mode": "per_key"}}, ValueError, "watermark must be one of"),
    ({"window": {"type": "session", "gap_ms": 10}, "watermark": {"mode": "global", "idle_timeout_ms": 5}}, ValueError, "idle_timeout is only meaningful"),
])
def test_a_spec_that_does_not_describe_a_config_is_refused_naming_the_field(spec, error, message):
    with pytest.raises(error, match=message):
        EngineConfig.from_spec(spec)


def test_a_user_defined_aggregation_has_no_spec():
    udaf = eventtime.aggregate("top", "x", create=list, add=lambda a, v: a + [v], merge=lambda a, b: a + b, result=len)
    with pytest.raises(ValueError, match="'top' is user-defined"):
        EngineConfig(eventtime.Session(10), (udaf,)).to_spec()


def test_a_mergeable_spark_sql_aggregation_carries_its_buffer_column_and_round_trips_the_spec():
    from eventtime.core.aggregations import NOT_IN_PANE

    p95 = eventtime.agg("percentile_approx(ms, 0.95)", "p95", mergeable=True)
    assert p95.accumulator_columns() == ("p95__buffer",)
    assert eventtime.pane_columns([eventtime.count(), p95]) == ["count", "p95", "p95__buffer"]
    assert p95.from_pane({"p95": 3.0, "p95__buffer": memoryview(b"\x01\x02")}) == b"\x01\x02"
    assert p95.from_pane({"p95": 3.0}) is NOT_IN_PANE
    config = EngineConfig(Tumbling(1000), (eventtime.count(), p95, eventtime.agg("stddev(ms)", "sd")))
    spec = config.to_spec()
    assert [a.get("mergeable") for a in spec["aggregations"]] == [None, True, None]
    assert EngineConfig.from_spec(spec).aggregations == config.aggregations
    assert eventtime.agg("stddev(ms)", "sd").accumulator_columns() == ()


@pytest.mark.parametrize("make, error, message", [
    (lambda: eventtime.agg("stddev(ms)", mergeable="yes"), TypeError, "mergeable must be a bool"),
    (lambda: eventtime.Aggregation("count", "n", mergeable=True), ValueError,
     "mergeable is for Spark SQL aggregations"),
])
def test_mergeable_is_checked(make, error, message):
    with pytest.raises(error, match=message):
        make()
