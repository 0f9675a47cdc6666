"""``eventtime demo --watermark per_partition``: the lagging partition's records stay on time,
and the summary's count of the records saved is the reference model's."""

from __future__ import annotations

import io
import re

import pytest

from eventtime.cli.demo import _late_by_partition, run_demo
from eventtime.cli.demo_data import DemoStream

pytestmark = pytest.mark.spark


def test_demo_with_per_partition_watermarks_saves_the_lagging_partitions_records(spark, tmp_path):
    out = io.StringIO()
    report = run_demo(str(tmp_path), rows=4000, batches=8, out=out, bounded_jobs=False, watermark="per_partition")
    text = out.getvalue()
    assert report.holds, text
    assert "per-partition watermark;" in text
    line = re.search(r"per-partition watermark: (\d+) late record\(s\), (\d+) on the lagging partition 3; the global "
                     r"watermark makes (\d+) late on the same batches, (\d+) on partition 3 \(reference model\): "
                     r"(\d+) saved on the lagging partition", text)
    assert line, text
    late, here, global_late, global_here, saved = map(int, line.groups())
    stream = DemoStream(rows=4000, batches=8)
    model = _late_by_partition(stream, str(tmp_path), "per_partition")
    # the Spark run's late records are the model's, partition by partition
    assert (late, here) == (sum(model.values()), model.get(3, 0))
    assert global_here > here and saved == global_here - here > 0 and global_late > late
