"""The conservation check finds lost and duplicated rows in the tables."""

import json

import pandas as pd
import pytest

from eventtime import Sliding, Tumbling
from eventtime.harness.conservation import conservation


def panes(rows):
    return pd.DataFrame(rows, columns=["user", "window_start", "pane_index", "pane_timing", "count"])


PANES = panes([("a", 0, 0, "ON_TIME", 2), ("a", 0, 1, "LATE", 3), ("b", 0, 0, "ON_TIME", 1), ("a", 60, 0, "ON_TIME", 4)])
RECORDS = pd.DataFrame(
    {
        "kind": ["late", "invalid", "invalid"],
        "payload": [json.dumps({"user": "a", "o": 1}), json.dumps({"user": "a", "o": 2}), json.dumps({"ts": 0, "heartbeat": True})],
    }
)


def test_accumulating_counts_the_last_pane_of_each_window():
    report = conservation(10, PANES, RECORDS, ["user"], Tumbling(60), "accumulating", "on_time_and_late")
    assert report.holds and (report.counted, report.late, report.invalid) == (8, 1, 1)  # 3 + 1 + 4; the invalid heartbeat is left out


def test_discarding_sums_every_pane():
    report = conservation(12, PANES, RECORDS, ["user"], Tumbling(60), "discarding", "on_time_and_late")
    assert report.counted == 10 and report.holds


def test_a_lost_row_is_named():
    report = conservation(11, PANES, RECORDS, ["user"], Tumbling(60), "accumulating", "on_time_and_late")
    assert not report.holds and "rows in 11 = counted 8 + late 1 + invalid 1" in report.describe()


def test_duplicates_are_found_even_when_totals_match():
    doubled = pd.concat([PANES, PANES.iloc[[3]]])
    report = conservation(10, doubled, pd.concat([RECORDS, RECORDS.iloc[[0]]]), ["user"], Tumbling(60), "accumulating", "on_time_and_late")
    assert (report.duplicated_panes, report.duplicated_records) == (1, 1)
    assert not report.holds


def test_sliding_windows_are_refused():
    with pytest.raises(ValueError, match="tumbling"):
        conservation(1, PANES, RECORDS, ["user"], Sliding(60, 30), "accumulating", "on_time_and_late")
