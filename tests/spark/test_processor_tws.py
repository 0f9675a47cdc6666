"""The stateful processor, run in-process by pyspark's TwsTester, against the reference model.

Fast (no JVM): this is where the many property examples run. The Spark SQL around the
processor (classification, watermark, bucketing, routing) is covered by the real queries
in test_spark_engine.py.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from transcripts import load_transcript, transcript_paths
from tws_harness import TwsReplay, run_tws

from eventtime import ReferenceEngine, aggregate, count, first, last, max, mean, min, sum
from eventtime.scenario import diff_outputs, parse_scenario, render_batch, run_reference
from property_tests.strategies import flushed, scenarios

SETTINGS = settings(max_examples=250, derandomize=True, deadline=None)


@pytest.mark.parametrize("path", transcript_paths(), ids=lambda p: p.stem)
@pytest.mark.parametrize("buckets", [1, 3])
def test_processor_matches_transcript(path, buckets):
    scenario, expected = load_transcript(path)
    difference = diff_outputs(expected, run_tws(scenario, num_buckets=buckets))
    assert difference is None, f"{path.name}: {difference}"


@SETTINGS
@given(scenarios(), st.sampled_from([1, 2, 5]))
def test_processor_equals_reference(scenario, buckets):
    difference = diff_outputs(run_reference(parse_scenario(scenario)), run_tws(scenario, num_buckets=buckets))
    assert difference is None, difference


@settings(max_examples=100, derandomize=True, deadline=None)
@given(scenarios())
def test_state_is_empty_after_every_window_expired(scenario):
    parsed = parse_scenario(flushed(scenario))
    runner = TwsReplay(parsed, num_buckets=2)
    for batch in parsed.batches:
        runner.run_batch(batch)
    assert runner.state_rows() == 0


@settings(max_examples=100, derandomize=True, deadline=None)
@given(scenarios(), st.sampled_from([1, 3]))
def test_end_of_input_equals_reference_and_leaves_no_state(scenario, buckets):
    """After any sequence, the end of input fires what the model fires, then no state (timers included) is left."""
    parsed = parse_scenario(scenario)
    ref = ReferenceEngine(parsed.config)
    runner = TwsReplay(parsed, num_buckets=buckets)
    for batch in parsed.batches:
        ref.process_batch(batch, parsed.now_ms)
        runner.run_batch(batch)
    expected = {"batches": [render_batch(ref.end_of_input())]}
    assert diff_outputs(expected, {"batches": [runner.end_of_input()]}) is None
    assert runner.state_rows() == 0
    assert all(not list(runner.tester.handle._timers.listTimers(b)) for b in range(buckets))


IDS = aggregate(
    "ids", "value", create=tuple, add=lambda acc, v: acc + (v,), merge=lambda a, b: a + b,
    result=lambda acc: tuple(sorted(x for x in acc if x is not None)),
)
ALL_AGGS = (count(), sum("value", "s"), min("value", "mn"), max("value", "mx"), mean("value", "avg"),
            first("value", "f"), last("value", "l"), IDS)


def _pane_rows(panes):
    rows = []
    for p in panes:
        rows.append((repr(p["key"]), p["window_start"], p["timing"], p["index"], p["is_final"],
                     tuple((name, p[name]) for name in sorted(p) if name in {a.name for a in ALL_AGGS})))
    return sorted(rows)


@settings(max_examples=120, derandomize=True, deadline=None)
@given(scenarios(), st.data())
def test_every_aggregation_equals_reference(scenario, data):
    """min/max/mean/first/last/udaf, with null and tied values, pane by pane."""
    parsed = parse_scenario(scenario)
    # Nulls and ties: overwrite some values.
    batches = []
    for batch in parsed.batches:
        new = []
        for r in batch:
            v = data.draw(st.sampled_from([r.fields.get("value"), None, 7]))
            new.append(dataclasses.replace(r, fields={"value": v}))
        batches.append(tuple(new))
    cfg = dataclasses.replace(parsed.config, aggregations=ALL_AGGS)
    parsed = dataclasses.replace(parsed, config=cfg, batches=tuple(batches))
    ref = ReferenceEngine(cfg)
    tws = TwsReplay(parsed, num_buckets=2)
    for batch in parsed.batches:
        expected = ref.process_batch(batch, parsed.now_ms)
        got = tws.run_batch(batch, raw_panes=True)
        exp_rows = sorted(
            (repr(p.key), p.window.start_ms, p.timing, p.index, p.is_final,
             tuple(sorted((k, v) for k, v in p.values.items())))
            for p in expected.panes
        )
        assert _pane_rows(got) == exp_rows
