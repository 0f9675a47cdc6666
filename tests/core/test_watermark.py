"""The per-partition watermark rules (docs/semantics.md, "Per-partition watermarks"), at equality."""

import pytest

from eventtime import EngineConfig, Tumbling
from eventtime.core.watermark import PartitionClocks, WatermarkPolicy

B = 1000


def clocks(idle_timeout_ms=None) -> PartitionClocks:
    return PartitionClocks(WatermarkPolicy("per_partition", idle_timeout_ms=idle_timeout_ms), B)


def test_the_watermark_is_the_minimum_over_partitions_of_their_maximum_minus_b():
    c = clocks()
    step = c.advance(None, {"0": 50_000, "1": 10_000}, now_ms=0)
    assert step.watermark_ms == 9_000
    assert step.holdback_ms == 50_000 - 9_000  # the largest event time minus W
    assert c.advance(9_000, {"1": 12_000}, now_ms=1).watermark_ms == 11_000
    # only the largest event time of a partition counts, not its latest
    assert c.advance(11_000, {"1": 11_500}, now_ms=2).watermark_ms == 11_000


def test_the_watermark_never_decreases_and_is_floored_at_zero():
    c = clocks()
    assert c.advance(None, {"0": 400}, now_ms=0).watermark_ms == 0
    assert c.advance(None, {"0": 1_000}, now_ms=0).watermark_ms == 0
    c = clocks()
    c.advance(None, {"0": 30_000}, now_ms=0)
    # a new partition far behind does not move W back
    assert c.advance(29_000, {"1": 5_000}, now_ms=1).watermark_ms == 29_000


def test_invalid_records_never_count():
    c = clocks()
    step = c.advance(None, {"0": None}, now_ms=0)
    assert step.watermark_ms is None and c.max_ms == {} and c.seen_ms == {}
    assert c.advance(None, {"0": None, "1": 5_000}, now_ms=0).watermark_ms == 4_000


@pytest.mark.parametrize("elapsed, idle", [(1_999, False), (2_000, True)])
def test_a_partition_is_idle_once_idle_timeout_has_passed_since_its_last_batch(elapsed, idle):
    c = clocks(idle_timeout_ms=2_000)
    c.advance(None, {"lead": 30_000, "lag": 5_000}, now_ms=0)
    step = c.advance(4_000, {"lead": 31_000}, now_ms=elapsed)
    assert step.became_idle == (("lag",) if idle else ())
    assert step.watermark_ms == (30_000 if idle else 4_000)


def test_with_no_active_partition_the_watermark_does_not_move_and_a_returning_partition_is_active_again():
    c = clocks(idle_timeout_ms=1_000)
    c.advance(None, {"a": 10_000, "b": 20_000}, now_ms=0)
    step = c.advance(9_000, {}, now_ms=1_000)
    assert step.watermark_ms == 9_000 and step.became_idle == ("a", "b")
    step = c.advance(9_000, {"a": 12_000}, now_ms=1_500)
    assert step.became_active == ("a",) and step.became_idle == ()
    assert step.watermark_ms == 11_000  # "b" is still idle
    assert c.idle == {"b"}


def test_without_an_idle_timeout_a_silent_partition_holds_the_watermark():
    c = clocks()
    c.advance(None, {"a": 10_000, "b": 20_000}, now_ms=0)
    assert c.advance(9_000, {"b": 90_000}, now_ms=10**9).watermark_ms == 9_000


def test_the_state_survives_json_with_null_and_numeric_partitions():
    c = clocks(idle_timeout_ms=5)
    c.advance(None, {None: 7_000, 3: 9_000}, now_ms=0)
    c.advance(6_000, {3: 9_500}, now_ms=10)
    back = PartitionClocks.from_json(c.policy, B, c.to_json())
    assert back.to_json() == c.to_json() == {"partitions": {"null": [7_000, 0], "3": [9_500, 10]}, "idle": ["null"]}


def test_policy_errors_name_the_parameter_and_value():
    with pytest.raises(ValueError, match=r"watermark must be one of .*'per_key'"):
        WatermarkPolicy("per_key")
    with pytest.raises(TypeError, match="watermark must be one of"):
        WatermarkPolicy(3)
    with pytest.raises(ValueError, match="idle_timeout is only meaningful with watermark='per_partition'"):
        WatermarkPolicy("global", idle_timeout_ms=1000)
    with pytest.raises(ValueError, match="idle_timeout must be > 0, got 0 ms"):
        WatermarkPolicy("per_partition", idle_timeout_ms=0)
    with pytest.raises(TypeError, match="idle_timeout must be int milliseconds"):
        WatermarkPolicy("per_partition", idle_timeout_ms=1.5)
    assert WatermarkPolicy("per_partition", idle_timeout_ms="1 minute").idle_timeout_ms == 60_000
    assert EngineConfig(Tumbling(1000), watermark="per_partition").watermark == WatermarkPolicy("per_partition")
    with pytest.raises(TypeError, match="watermark must be a WatermarkPolicy or a mode string, got int"):
        EngineConfig(Tumbling(1000), watermark=1)
