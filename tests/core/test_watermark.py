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
    assert back.to_json() == c.to_json() == {"partitions": {"null": [7_000, 0], "3": [9_500, 10]}, "idle": ["null"],
                                             "started_ms": 0}


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


def test_a_listed_partition_holds_the_watermark_until_it_delivers_or_idle_timeout_passes():
    policy = WatermarkPolicy("per_partition", idle_timeout_ms=3_000, source_partitions=range(3))
    c = PartitionClocks(policy, B)
    assert c.advance(None, {0: 20_000}, now_ms=100).watermark_ms is None  # 1 and 2 have delivered nothing
    assert c.waiting(100) == ("1", "2")
    assert c.advance(None, {1: 5_000}, now_ms=2_000).watermark_ms is None  # 2 still listed and silent
    # at equality (3 s after the first batch) the wait is over, as idleness is (now - seen >= timeout)
    assert c.waiting(3_099) == ("2",) and c.waiting(3_100) == ()
    assert c.advance(None, {}, now_ms=3_100).watermark_ms == 5_000 - B
    back = PartitionClocks.from_json(policy, B, c.to_json())
    assert back.started_ms == 100 and back.waiting(3_099) == ("2",)


def test_a_state_written_before_the_list_existed_waits_from_its_next_batch():
    policy = WatermarkPolicy("per_partition", idle_timeout_ms=1_000, source_partitions=["0", "1"])
    c = PartitionClocks.from_json(policy, B, {"partitions": {"0": [9_000, 0]}, "idle": []})
    assert c.advance(None, {"0": 9_200}, now_ms=50_000).watermark_ms is None and c.waiting(50_999) == ("1",)
    assert c.advance(None, {"0": 9_500}, now_ms=51_000).watermark_ms == 9_500 - B


def test_source_partitions_errors_name_the_parameter_and_value():
    with pytest.raises(ValueError, match=r"source_partitions=\[0, 1\] needs watermark='per_partition' and an idle_timeout"):
        WatermarkPolicy("per_partition", source_partitions=[0, 1])
    with pytest.raises(ValueError, match="source_partitions=.*got watermark='global'"):
        WatermarkPolicy("global", source_partitions=[0])
    with pytest.raises(TypeError, match="source_partitions must be a list of partition names, got str '0,1'"):
        WatermarkPolicy("per_partition", idle_timeout_ms=1, source_partitions="0,1")
    assert WatermarkPolicy("per_partition", idle_timeout_ms=1, source_partitions=[1, 0, "1"]).source_partitions == ("0", "1")
    assert "source_partitions" not in WatermarkPolicy("per_partition", idle_timeout_ms=1).to_dict()  # fingerprints as before
