"""``eventtime demo --watermark per_partition``: the lagging partition's records stay on time,
the summary's count of the records saved is the reference model's, and the delays of every
valid record reach the delay table that ``eventtime late advise`` reads. One demo run."""

from __future__ import annotations

import io
import json
import logging
import os
import re

import pytest

from eventtime.cli.demo import _config, run_demo
from eventtime.cli.demo_data import DemoStream, late_by_partition
from eventtime.core.reference import Record, ReferenceEngine
from eventtime.query.advise import advise
from eventtime.query.advise_text import describe

pytestmark = [pytest.mark.spark, pytest.mark.slow]
ROWS, BATCHES = 4000, 8


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("demo")
    out = io.StringIO()
    alerts = _Capture()
    logger = logging.getLogger("eventtime.alerts")
    logger.addHandler(alerts)
    try:
        report = run_demo(str(path), rows=ROWS, batches=BATCHES, out=out, bounded_jobs=False, watermark="per_partition")
    finally:
        logger.removeHandler(alerts)
    return path, report, out.getvalue(), alerts.messages


class _Capture(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_lagging_partitions_alert_says_what_the_lag_costs_with_per_partition_watermarks(demo):
    """It said "its records will be classified late" while none of them were."""
    lag = [m for m in demo[3] if "partition 3 lags" in m]
    assert lag, demo[3]
    for message in lag:
        assert re.fullmatch(r"eventtime alert: \[demo\] partition 3 lags the global max event time by [\w ]+ "
                            r"\(threshold 10 s\) \(batch \d+\); per-partition watermarks: its records are not late for "
                            r"it, the watermark waits for it, so every window fires about [\w ]+ later \(unless it goes "
                            r"idle\)", message), message
        assert "classified late" not in message


def test_demo_with_per_partition_watermarks_saves_the_lagging_partitions_records(demo):
    path, report, text, _ = demo
    assert report.holds, text
    assert "per-partition watermark;" in text
    line = re.search(r"per-partition watermark: (\d+) late record\(s\), (\d+) on the lagging partition 3; the global "
                     r"watermark makes (\d+) late on the same batches, (\d+) on partition 3 \(reference model\): "
                     r"(\d+) saved on the lagging partition", text)
    assert line, text
    late, here, global_late, global_here, saved = map(int, line.groups())
    model = late_by_partition(_config(DemoStream(rows=ROWS, batches=BATCHES)), str(path / "input"), "per_partition")
    # the Spark run's late records are the model's, partition by partition
    assert (late, here) == (sum(model.values()), model.get(3, 0))
    assert global_here > here and saved == global_here - here > 0 and global_late > late


def test_the_demo_records_delays_of_every_valid_record_after_its_first_batch_and_advises(demo):
    path, _, _, _ = demo
    assert (path / "delays.png").exists()
    engine = ReferenceEngine(_config(DemoStream(rows=ROWS, batches=BATCHES)), unit="ms")
    expected = 0
    for i, name in enumerate(sorted(f for f in os.listdir(path / "input") if f.endswith(".json"))):
        rows = [json.loads(line) for line in open(path / "input" / name)]
        result = engine.process_batch([Record(r["user_id"], r["ts"], r, r["heartbeat"], r["partition"]) for r in rows])
        if i > 0:  # the first batch has no running maximum to be behind
            expected += sum(1 for r in rows if not r["heartbeat"]) - sum(1 for r in result.invalid if not r.record.heartbeat)
    advice = advise(str(path / "late_delays"))
    assert advice.records == expected > 0
    assert (advice.current_b_ms, advice.current_l_ms) == (10_000, 180_000)
    text = describe(advice)
    assert text.splitlines()[:3] == [
        "lateness advice for the global watermark (W = max event time - B)",
        f"  delays: {expected:,} valid records in 4 partitions behind the running maximum event time "
        f"({path / 'late_delays'})",
        "  today: B = 10 s, L = 3 min",
    ], text
    assert advice.choices and all(c.b_ms == 10_000 for c in advice.choices)
    ls = [c.l_ms for c in advice.choices]
    assert ls == sorted(ls) and len(set(ls)) == len(ls)  # one line per distinct L, never decreasing


def test_the_watermarks_tick_batches_are_not_counted_as_input(demo):
    """The extra batches the per-partition watermark's tick starts reported numInputRows=1."""
    path, report, text, _ = demo
    rows = [(int(m[1]), int(m[2])) for m in re.finditer(r"^  batch +(\d+) .* rows +(\d+) ", text, re.M)]
    assert rows, text
    sent = sum(len(open(path / "input" / name).readlines()) for name in os.listdir(path / "input") if name.endswith(".json"))
    assert sum(n for _, n in rows) == sent
    assert any(n == 0 for _, n in rows[1:])  # the tick batches: no input


def test_every_micro_batch_the_query_ran_has_its_line(demo):
    """The batches that ran in the demo's last processAllAvailable (Spark's no-data batch, the
    watermark's tick batch) were left out of its output when that call ended before their lines
    were read: then no tick batch was shown."""
    path, _, text, _ = demo
    shown = [int(m[1]) for m in re.finditer(r"^  batch +(\d+) ", text, re.M)]
    committed = sorted(int(name) for name in os.listdir(path / "checkpoint" / "commits") if name.isdigit())
    assert shown == committed, text
