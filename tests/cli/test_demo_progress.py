"""The demo's line per micro-batch, as a person reads it."""

from eventtime.cli.demo_query import _progress_line


class _Row:
    def __init__(self, **values):
        self.values = values

    def asDict(self):
        return self.values


def _progress(batch_id, watermark):
    return {
        "batchId": batch_id,
        "numInputRows": 2000,
        "observedMetrics": {"eventtime_demo": _Row(panes=3, late=1, invalid=2)},
        "eventTime": {} if watermark is None else {"watermark": watermark},
        "batchDuration": 1500,
    }


def test_batch_0_has_no_watermark_yet_not_1970():
    line = _progress_line(_progress(0, "1970-01-01T00:00:00.000Z"), "file   1/20")
    assert "watermark none" in line and "1970" not in line, line
    assert "watermark none" in _progress_line(_progress(0, None), "file   1/20")


def test_a_batch_with_a_watermark_prints_it_and_its_counts():
    line = _progress_line(_progress(4, "2026-11-01T00:01:19.512Z"), "file   5/20")
    assert line == ("  batch   4  file   5/20  rows   2000  panes     3  late    1  invalid   2  "
                    "watermark 2026-11-01T00:01:19.512Z  (1.5 s)")
