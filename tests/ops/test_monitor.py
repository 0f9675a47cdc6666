"""BatchStats / PartitionStats validation and the PartitionMonitor's findings and metrics."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from eventtime.ops.monitor import BatchStats, PartitionMonitor, PartitionStats, optional_ms


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def batch(batch_id, parts, watermark_ms=None):
    rows = sum(p.rows for p in parts.values())
    return BatchStats(batch_id, rows, 0, 0, 0, watermark_ms, parts)


def test_dataclass_fields_are_the_router_contract():
    assert [f.name for f in dataclasses.fields(BatchStats)] == [
        "batch_id", "rows_in", "panes", "late", "invalid", "watermark_ms", "partitions",
        # per-partition watermarks (optional, after the positional fields users construct)
        "idle_partitions", "became_idle", "became_active", "holdback_ms",
        # async enrichment counts per output column (optional)
        "enrichment",
        # rows a sink's store refused, per sink (optional)
        "rejected",
        # "global" or "per_partition": what a lagging partition costs (optional)
        "watermark_mode",
        # the batch's counts per kind and reason when Spark's tasks wrote its records (optional)
        "records_by_reason"]
    assert [f.name for f in dataclasses.fields(PartitionStats)] == ["max_event_time_ms", "rows"]
    s = BatchStats(batch_id=1, rows_in=2, panes=0, late=0, invalid=0, watermark_ms=None,
                   partitions={"0": PartitionStats(max_event_time_ms=None, rows=2)})
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.late = 3  # type: ignore[misc]


def test_validation_names_the_parameter():
    with pytest.raises(TypeError, match="rows"):
        PartitionStats(1, "3")
    with pytest.raises(ValueError, match="rows"):
        PartitionStats(1, -1)
    with pytest.raises(ValueError, match="late"):
        BatchStats(0, 1, 0, -1, 0, None, {})
    with pytest.raises(TypeError, match="watermark_ms"):
        BatchStats(0, 1, 0, 0, 0, 1.5, {})
    with pytest.raises(TypeError, match=r"partitions\['0'\]"):
        BatchStats(0, 1, 0, 0, 0, None, {"0": (1, 2)})
    with pytest.raises(TypeError, match="lag_threshold_ms"):
        PartitionMonitor(lag_threshold_ms=1.5)
    with pytest.raises(ValueError, match="lag_threshold_ms"):
        PartitionMonitor(lag_threshold_ms="a while")
    assert PartitionMonitor(lag_threshold_ms="1 minute").lag_threshold_ms == 60_000
    with pytest.raises(ValueError, match="idle_timeout_ms"):
        PartitionMonitor(idle_timeout_ms=-5)
    assert optional_ms(timedelta(minutes=2), "x") == 120_000


def test_lagging_partition_is_reported_with_its_lag():
    mon = PartitionMonitor(lag_threshold_ms=60_000, clock=Clock())
    findings = mon.observe(batch(0, {"a": PartitionStats(1_000_000, 3), "b": PartitionStats(900_000, 3),
                                     "c": PartitionStats(950_000, 3)}))
    assert [(f.partition, f.kind, f.lag_ms, f.threshold_ms) for f in findings] == [("b", "lag", 100_000, 60_000)]
    # b catches up in the next batch; a's max does not go back when it sends older data
    findings = mon.observe(batch(1, {"a": PartitionStats(500_000, 1), "b": PartitionStats(990_000, 2)}))
    assert findings == []
    assert mon.global_max_event_time_ms() == 1_000_000


def test_default_threshold_derives_from_the_watermark():
    mon = PartitionMonitor(clock=Clock())
    assert mon.observe(batch(0, {"a": PartitionStats(1_000_000, 1), "b": PartitionStats(0, 1)})) == []
    findings = mon.observe(batch(1, {}, watermark_ms=1_000_000 - 300_000))
    assert mon.effective_lag_threshold_ms() == 300_000
    assert [(f.partition, f.lag_ms) for f in findings] == [("b", 1_000_000)]


def test_idle_partition_and_metrics():
    clock = Clock()
    mon = PartitionMonitor(lag_threshold_ms=10**9, idle_timeout_ms=30_000, clock=clock)
    mon.observe(batch(0, {"a": PartitionStats(100, 4), "b": PartitionStats(200, 2)}))
    clock.now = 20.0
    assert mon.observe(batch(1, {"a": PartitionStats(300, 1)})) == []
    clock.now = 40.0
    findings = mon.observe(batch(2, {"a": PartitionStats(400, 1)}))
    assert [(f.partition, f.kind, f.idle_s) for f in findings] == [("b", "idle", 40.0)]
    assert "partition b sent no rows for 40.0 s" in findings[0].describe()
    m = mon.metrics()
    assert m["a"] == {"max_event_time_ms": 400, "lag_ms": 0, "idle_s": 0.0, "rows_total": 6,
                      "rows_last_batch": 1, "lagging": False, "idle": False}
    assert m["b"]["lag_ms"] == 200 and m["b"]["idle"] and m["b"]["rows_last_batch"] == 0
    # a partition with rows but no valid event time still counts as alive
    clock.now = 41.0
    assert mon.observe(batch(3, {"a": PartitionStats(500, 1), "b": PartitionStats(None, 3)})) == []
    assert mon.metrics()["b"]["max_event_time_ms"] == 200


def test_a_batch_without_output_rows_shows_the_watermark_it_ran_at():
    """The batch's rows carry the watermark it ran at; a batch with none (a watermark's batch
    that fired nothing) shows the one the driver published for it, not the last rows' one."""
    from eventtime.ops.monitor import progress_line

    earlier = BatchStats(batch_id=5, rows_in=0, panes=0, late=0, invalid=0, watermark_ms=1_714_557_800_000)
    line = progress_line("orders", earlier, 0.2, ran_at_ms=1_714_557_800_000 + 2 * 3_600_000)
    assert "watermark 2024-05-01 12:03:20 UTC" in line, line
    assert "watermark 2024-05-01 10:03:20 UTC" in progress_line("orders", earlier, 0.2, ran_at_ms=1000)
    assert "watermark none" in progress_line("orders", dataclasses.replace(earlier, watermark_ms=None), 0.2, ran_at_ms=0)
