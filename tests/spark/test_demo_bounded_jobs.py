"""The demo's bounded session and calendar-day jobs (``eventtime demo`` after the streaming
query) give the reference model's sessions and days on the demo's own events."""

from __future__ import annotations

import dataclasses
import os
import time

import pytest

from eventtime import Record, ReferenceEngine
from eventtime.cli.demo import BOUNDED_JOBS, _config, bounded_job
from eventtime.cli.demo_data import DemoStream, write_stream
from eventtime.sinks import latest_panes

pytestmark = [pytest.mark.spark, pytest.mark.slow]


def _ms(ts) -> int:
    return int(ts.timestamp() * 1000)


@pytest.mark.parametrize("name, window", [(name, window) for name, window, _ in BOUNDED_JOBS], ids=[j[0] for j in BOUNDED_JOBS])
def test_demo_bounded_job_equals_the_reference_model(spark, tmp_path, name, window):
    stream = DemoStream(rows=3000, batches=4)
    write_stream(stream, str(tmp_path / "input"))
    stats = bounded_job(spark, stream, str(tmp_path), name, window)
    panes = latest_panes(str(tmp_path / name / "results"))
    engine = ReferenceEngine(dataclasses.replace(_config(stream), window=window), unit="ms")
    records = [Record(r["user_id"], r["ts"], {"amount": r["amount"]}, r["heartbeat"], r["partition"])
               for batch in stream.micro_batches() for r in batch]
    first = engine.process_batch(records, int(time.time() * 1000))
    model = first.panes + engine.end_of_input().panes
    expected = sorted((p.key, p.window.start_ms, p.window.end_ms, p.values["count"], round(p.values["amount"], 6)) for p in model)
    got = sorted((r.user_id, _ms(r.window_start), _ms(r.window_end), r.count, round(r.amount, 6)) for r in panes.itertuples())
    assert got == expected
    assert stats.invalid == len(first.invalid) > 0 and stats.late == 0
    if name == "sessions":
        assert len(got) > len({g[0] for g in got}), "some user has more than one session"


def test_the_demo_ends_with_reconcile_and_its_results_then_equal_the_batch_truth(spark, tmp_path):
    import io
    import re

    from deltalake import DeltaTable

    from eventtime.cli.demo import run_demo
    from eventtime.cli.demo_reconcile import compare_with_truth

    out = io.StringIO()
    report = run_demo(str(tmp_path), rows=4000, batches=8, out=out)
    text = out.getvalue()
    assert report.holds and report.late > 0, text
    # a line for every micro-batch, the no-data batch that fires the last windows included
    shown = [int(m[1]) for m in re.finditer(r"^  batch +(\d+) ", text, re.M)]
    assert shown == sorted(int(name) for name in os.listdir(tmp_path / "checkpoint" / "commits") if name.isdigit()), text
    before = re.search(r"before reconcile: (\d+) of (\d+) windows differ", text)
    after = re.search(r"after reconcile: (\d+) of (\d+) windows differ", text)
    assert before and after, text
    assert int(before.group(1)) > 0 and after.group(1) == "0" and before.group(2) == after.group(2)
    assert f"{report.late} too-late record(s) read, {report.late} reconciled now" in text
    # held here too, not only by the demo's own words: every window, every aggregation
    results, truth = latest_panes(str(tmp_path / "results")), latest_panes(str(tmp_path / "truth" / "results"))
    compared = compare_with_truth(results, truth, ["user_id"], ["count", "amount", "max_amount", "mean_amount", "mean_amount__n"])
    assert compared["different"] == 0 and compared["windows"] == len(truth) > 0
    version = DeltaTable(str(tmp_path / "results")).version()
    again = io.StringIO()
    run_demo(str(tmp_path), rows=4000, batches=8, out=again)  # a finished demo: reconcile finds nothing new
    assert f"{report.late} reconciled before, 0 reconciled now" in again.getvalue()
    assert DeltaTable(str(tmp_path / "results")).version() == version
