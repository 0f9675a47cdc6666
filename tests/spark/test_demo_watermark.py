"""``eventtime demo --watermark per_partition``: the lagging partition's records stay on time,
the summary's count of the records saved is the reference model's, and the delays of every
valid record reach the delay table that ``eventtime late advise`` reads. One demo run."""

from __future__ import annotations

import io
import json
import os
import re

import pytest

from eventtime.cli.demo import _config, _late_by_partition, run_demo
from eventtime.cli.demo_data import DemoStream
from eventtime.core.reference import Record, ReferenceEngine
from eventtime.query.advise import advise

pytestmark = pytest.mark.spark
ROWS, BATCHES = 4000, 8


@pytest.fixture(scope="module")
def demo(spark, tmp_path_factory):
    path = tmp_path_factory.mktemp("demo")
    out = io.StringIO()
    report = run_demo(str(path), rows=ROWS, batches=BATCHES, out=out, bounded_jobs=False, watermark="per_partition")
    return path, report, out.getvalue()


def test_demo_with_per_partition_watermarks_saves_the_lagging_partitions_records(demo):
    path, report, text = demo
    assert report.holds, text
    assert "per-partition watermark;" in text
    line = re.search(r"per-partition watermark: (\d+) late record\(s\), (\d+) on the lagging partition 3; the global "
                     r"watermark makes (\d+) late on the same batches, (\d+) on partition 3 \(reference model\): "
                     r"(\d+) saved on the lagging partition", text)
    assert line, text
    late, here, global_late, global_here, saved = map(int, line.groups())
    model = _late_by_partition(DemoStream(rows=ROWS, batches=BATCHES), str(path), "per_partition")
    # the Spark run's late records are the model's, partition by partition
    assert (late, here) == (sum(model.values()), model.get(3, 0))
    assert global_here > here and saved == global_here - here > 0 and global_late > late


def test_the_demo_records_delays_of_every_valid_record_after_its_first_batch_and_advises(demo):
    path, _, _ = demo
    assert (path / "delays.png").exists()
    engine = ReferenceEngine(_config(DemoStream(rows=ROWS, batches=BATCHES)), unit="ms")
    expected = 0
    for i, name in enumerate(sorted(f for f in os.listdir(path / "input") if f.endswith(".json"))):
        rows = [json.loads(line) for line in open(path / "input" / name)]
        result = engine.process_batch([Record(r["user_id"], r["ts"], r, r["heartbeat"], r["partition"]) for r in rows])
        if i > 0:  # the first batch has no running maximum to be behind
            expected += sum(1 for r in rows if not r["heartbeat"]) - sum(1 for r in result.invalid if not r.record.heartbeat)
    advice = advise(str(path / "delays"))
    assert advice.records == expected > 0
    assert (advice.current_b_ms, advice.current_l_ms) == (10_000, 180_000)
    assert "99.90% on time: B = 10000 ms" in advice.describe()
