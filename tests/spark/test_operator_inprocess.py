"""The JVM operator, run in-process by Spark's TwsTester (``eventtime.jvm.operator.InProcess``), against
the reference model.

No query, so this is where the many property examples run (a few seconds per hundred). The
Spark SQL around the operator (classification, watermark, routing) is covered by the real
queries in test_spark_engine.py. ``combine`` switches the map-side combine on and off: the
results must not depend on it.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jvm_harness import JvmReplay, run_jvm
from transcripts import lists_merged_from, load_transcript, transcript_paths

from eventtime import ReferenceEngine, count, first, last, max, mean, min, pane_columns, sum
from eventtime.harness.scenario import diff_outputs, parse_scenario, render_batch, run_reference
from property_tests.strategies import every_kind_scenarios, flushed, partition_scenarios, scenarios, sliding_scenarios

pytestmark = pytest.mark.spark
SETTINGS = settings(max_examples=250, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@pytest.mark.parametrize("path", transcript_paths(), ids=lambda p: p.stem)
@pytest.mark.parametrize("combine", [False, True], ids=["rows", "combined"])
def test_operator_matches_transcript(spark, path, combine):
    scenario, expected = load_transcript(path)
    difference = diff_outputs(expected, run_jvm(scenario, spark, combine, merged_from=lists_merged_from(expected)))
    assert difference is None, f"{path.name}: {difference}"


@SETTINGS
@given(st.one_of(every_kind_scenarios(), partition_scenarios()), st.booleans())
def test_operator_equals_reference(spark, scenario, combine):
    # merged_from compared too (the contract's output leaves it out)
    difference = diff_outputs(run_reference(parse_scenario(scenario), merged_from=True), run_jvm(scenario, spark, combine, merged_from=True))
    assert difference is None, difference


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(sliding_scenarios(), st.booleans())
def test_partly_late_records_are_the_reference_s_when_reported(spark, scenario, combine):
    """report_partly_late: the map side passes a partly late record through whole (not folded),
    the operator counts it in its live windows and reports it with the reference's reason."""
    scenario = {**scenario, "report_partly_late": True}
    expected = run_reference(parse_scenario(scenario))
    assert diff_outputs(expected, run_jvm(scenario, spark, combine)) is None


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.one_of(every_kind_scenarios(), partition_scenarios()))
def test_state_is_empty_after_every_window_expired(spark, scenario):
    parsed = parse_scenario(flushed(scenario))
    runner = JvmReplay(parsed, spark)
    for batch in parsed.batches:
        runner.run_batch(batch)
    assert runner.state_entries() == 0


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(every_kind_scenarios(), st.booleans())
def test_end_of_input_equals_reference_and_leaves_no_state(spark, scenario, combine):
    """After any sequence, the end of input fires what the model fires, then no state is left."""
    parsed = parse_scenario(scenario)
    ref = ReferenceEngine(parsed.config)
    runner = JvmReplay(parsed, spark, combine, merged_from=True)
    for batch in parsed.batches:
        ref.process_batch(batch, parsed.now_ms)
        runner.run_batch(batch)
    expected = {"batches": [render_batch(ref.end_of_input(), parsed.config.window.merging)]}
    assert diff_outputs(expected, {"batches": [runner.end_of_input()]}) is None
    assert runner.state_entries() == 0


ALL_AGGS = (count(), sum("value", "s"), min("value", "mn"), max("value", "mx"), mean("value", "avg"),
            first("value", "f"), last("value", "l"))


def _pane_rows(panes):
    names = set(pane_columns(ALL_AGGS))  # values and accumulator columns
    return sorted(
        (repr(p["key"]), p["window_start"], p["timing"], p["index"], p["is_final"],
         tuple((name, p[name]) for name in sorted(p) if name in names))
        for p in panes
    )


@settings(max_examples=120, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(every_kind_scenarios(), st.data())
def test_every_aggregation_equals_reference(spark, scenario, data):
    """min/max/mean/first/last, with null and tied values, pane by pane, combined or not."""
    parsed = parse_scenario(scenario)
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
    runner = JvmReplay(parsed, spark, combine=data.draw(st.booleans()))
    for batch in parsed.batches:
        expected = ref.process_batch(batch, parsed.now_ms)
        got = runner.run_batch(batch, raw_panes=True)
        exp_rows = sorted(
            (repr(p.key), p.window.start_ms, p.timing, p.index, p.is_final, tuple(sorted((k, v) for k, v in p.values.items())))
            for p in expected.panes
        )
        assert _pane_rows(got) == exp_rows


class _Calls:
    """Calls of the JVM's Spec and the values the Python rules give for them, answered by the
    JVM in one round trip (InProcess.arithmetic) and compared one by one."""

    def __init__(self, spark, spec) -> None:
        self.spark, self.spec, self.calls, self.expected, self.notes = spark, spec, [], [], []

    def expect(self, method: str, args: tuple, value, note=None) -> None:
        self.calls.append([method, *args])
        self.expected.append(value)
        self.notes.append(note)

    def check(self) -> None:
        import json

        got = json.loads(self.spark._jvm.eventtime.jvm.operator.InProcess.arithmetic(self.spec, json.dumps(self.calls)))
        assert len(got) == len(self.calls) > 0
        for call, want, answer, note in zip(self.calls, self.expected, got, self.notes):
            assert answer == want, f"Spec.{call[0]}{tuple(call[1:])} = {answer}, the Python rules give {want} {note or ''}"


_window_params = st.integers(1, 50).flatmap(lambda size: st.tuples(
    st.just(size), st.integers(1, size), st.integers(-100, 100), st.integers(0, 60)))


@settings(max_examples=80, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_window_params, st.lists(st.integers(-10_000, 10_000), min_size=1, max_size=4), st.integers(-10_000, 10_000))
def test_jvm_window_arithmetic_is_the_python_rules(spark, params, timestamps, watermark):
    """The JVM operator's one copy of the window rules (Spec.java) against the pure core:
    slices, the windows of a slice, the first window of a record, and whether a record is
    still live (some window not expired) at a watermark -- at and around every boundary."""
    import json

    from pyspark.sql import types as T

    from eventtime import Sliding, Tumbling
    from eventtime.core.config import EngineConfig
    from eventtime.core.trigger import is_expired
    from eventtime.spark.aggregate import output_schema
    from eventtime.spark.plan import operator_plan

    size, slide, offset, lateness = params
    window = Tumbling(size, offset=offset) if slide == size else Sliding(size, slide, offset=offset)
    config = EngineConfig(window, allowed_lateness_ms=lateness)
    record = T.StructType([T.StructField("key", T.StringType())])
    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(
        operator_plan(config, record, output_schema([record["key"]], [T.StructField("count", T.LongType())]), ["key"],
                    bounded=False)))
    calls = _Calls(spark, spec)
    for ts in timestamps:
        for t in (ts, ts - 1, ts + 1, window.slice_start(ts), window.slice_start(ts) - 1):
            windows = window.assign(t)
            calls.expect("sliceOf", (t,), window.slice_start(t))
            calls.expect("firstWindowOf", (t,), sorted(w.start_ms for w in windows)[0])
            calls.expect("maxTs", (windows[0].start_ms,), windows[0].max_timestamp_ms)
            for w in (watermark, *(x.max_timestamp_ms + lateness + d for x in windows for d in (-1, 0))):
                calls.expect("isLive", (t, w), any(not is_expired(x, w, lateness) for x in windows))
        start = window.slice_start(ts)
        calls.expect("windowsOfSlice", (start,), sorted(w.start_ms for w in window.windows_of_slice(start)))
        calls.expect("windowsOfSlice", (start,), sorted(w.start_ms for w in window.assign(start + window.slice_ms - 1)))
    calls.check()


# 2024 in Berlin (DST on 31 March and 27 October), New York (10 March, 3 November), a zone whose
# midnight falls in the DST gap (Havana, 10 March 2024), and a fixed offset.
_CAL_BASE_MS = 1_704_067_200_000  # 2024-01-01T00:00Z
_calendar_params = st.tuples(
    st.sampled_from(["day", "week", "month"]),
    st.sampled_from(["Europe/Berlin", "America/New_York", "America/Havana", "UTC+8"]),
    st.sampled_from(["monday", "sunday"]),
    st.sampled_from([0, 1, 3_600_000, 86_400_000]),
)


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(_calendar_params, st.lists(st.integers(0, 366 * 86_400_000), min_size=1, max_size=4), st.integers(0, 366 * 86_400_000))
def test_jvm_calendar_arithmetic_is_the_python_rules(spark, params, offsets, watermark_offset):
    """The JVM's calendar windows (java.time) against core/window.py's Calendar (zoneinfo):
    window starts, ends (23- and 25-hour days, real month lengths) and liveness, at and
    around every boundary."""
    import json

    from pyspark.sql import types as T

    from eventtime import Calendar
    from eventtime.core.config import EngineConfig
    from eventtime.core.trigger import is_expired
    from eventtime.spark.aggregate import output_schema
    from eventtime.spark.plan import operator_plan

    unit, tz, week_start, lateness = params
    window = Calendar(unit, tz=tz, week_start=week_start)
    config = EngineConfig(window, allowed_lateness_ms=lateness)
    record = T.StructType([T.StructField("key", T.StringType())])
    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(
        operator_plan(config, record, output_schema([record["key"]], [T.StructField("count", T.LongType())]), ["key"],
                    bounded=False)))
    calls = _Calls(spark, spec)
    for offset in offsets:
        ts = _CAL_BASE_MS + offset
        (w,) = window.assign(ts)
        for t in (ts, w.start_ms, w.start_ms - 1, w.end_ms - 1, w.end_ms):
            (x,) = window.assign(t)
            assert x.start_ms <= t < x.end_ms
            assert window.slice_start(t) == x.start_ms, (tz, unit, t)
            calls.expect("sliceOf", (t,), x.start_ms, (tz, unit))
            calls.expect("firstWindowOf", (t,), x.start_ms)
            calls.expect("windowEnd", (x.start_ms,), x.end_ms)
            calls.expect("lastWindowEnd", (t,), x.end_ms)
            calls.expect("windowsOfSlice", (x.start_ms,), [x.start_ms])
            for wm in (_CAL_BASE_MS + watermark_offset, x.max_timestamp_ms + lateness - 1, x.max_timestamp_ms + lateness):
                calls.expect("isLive", (t, wm), not is_expired(x, wm, lateness))
    calls.check()


def test_session_timers_read_only_the_keys_that_are_due_not_every_key(spark):
    """2 000 keys hold long-lived sessions (L = 1 000 s); then one key gets a record per batch
    and its earlier session fires each time. Per batch the operator reads the state of the
    keys with rows or with a session due or expiring, not of every key of the bucket (a bucket
    holds about 2 000 / 32 keys), and nothing is left after the drain."""
    from eventtime.harness.scenario import Scenario
    from eventtime.core.config import EngineConfig
    from eventtime import Record, Session

    idle = [Record(f"user-{i}", 1000, {"value": 1}) for i in range(2000)]
    hot = [[Record("hot", 1000 + b * 2000, {"value": b})] for b in range(1, 21)]
    config = EngineConfig(Session(1000), (count(), sum("value", name="sum")), allowed_lateness_ms=1_000_000, min_valid_ms=1)
    scenario = Scenario(config, (tuple(idle), *[tuple(b) for b in hot], (Record(None, 2_000_000, heartbeat=True),)), now_ms=10**9)
    ref = ReferenceEngine(config)
    runner = JvmReplay(scenario, spark, merged_from=True)
    reads = []
    for batch in scenario.batches:
        before = runner.keys_read()
        got = runner.run_batch(batch)
        reads.append(runner.keys_read() - before)
        assert diff_outputs({"batches": [render_batch(ref.process_batch(batch, scenario.now_ms), True)]}, {"batches": [got]}) is None
    assert reads[0] == 2000  # every key is new
    assert reads[1] == 2001  # the idle sessions' ON_TIME (all due at once) and the hot key
    assert all(n <= 2 for n in reads[2:-1]), reads  # the hot key, read once for its rows (its due entry is skipped)
    assert reads[-1] == 2001  # the drain: every session expires
    assert runner.state_entries() == 0


def test_a_batch_that_moves_w_reads_each_key_with_rows_once(spark):
    """Data in every batch, so no no-data batch: the operator's catch-up sweep of a bucket reads
    every key of it (some windows are due), and the keys that also have rows are then processed
    from those same bytes, not read from the store a second time. 60 keys, one record each per
    batch, W published one window further each batch (per-partition mode, so no timers)."""
    import json

    from eventtime import Record, Tumbling
    from eventtime.core.config import EngineConfig
    from eventtime.harness.scenario import Scenario
    from eventtime.core.watermark import WatermarkPolicy

    config = EngineConfig(Tumbling(1000), (count(),), allowed_lateness_ms=10_000, min_valid_ms=1,
                          watermark=WatermarkPolicy("per_partition"))
    runner = JvmReplay(Scenario(config, ((Record("k", 1000),),), now_ms=10**9), spark)
    keys = [f"user-{i}" for i in range(60)]
    reads, on_time = [], []
    for b in range(6):
        rows = [{"rec": [json.dumps(k), None, i, False], "ms": 1000 * b + 500, "cls": 0, "reason": None, "raw": None,
                 "part": "0", "off": None} for i, k in enumerate(keys)]
        before = runner.keys_read()
        out = json.loads(runner.engine.batch(json.dumps(rows), 1000 * b, False))
        reads.append(runner.keys_read() - before)
        on_time.append(sorted((json.loads(r["key"]), r["window_start"], r["count"]) for r in out
                              if r["kind"] == "pane" and r["pane_timing"] == "ON_TIME"))
    assert reads == [60] * 6, reads  # 120 per batch when the key loop read them again
    assert on_time[0] == []
    for b in range(1, 6):  # the window of the batch before fires once per key, with its one record
        assert on_time[b] == sorted((k, 1000 * (b - 1), 1) for k in keys), b


def test_jvm_delay_bins_are_the_advisors(spark):
    from eventtime.query.advise import delay_bin

    values = [-5, 0, 1, 7, 8, 9, 15, 16, 17, 1000, 1023, 1024, 59_999, 60_000, 2**40 + 12345, 2**62]
    assert [spark._jvm.eventtime.jvm.plan.Spec.delayBin(v) for v in values] == [delay_bin(v) for v in values]


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(scenarios())
def test_delay_histograms_count_each_valid_record_behind_the_running_maximum(spark, scenario):
    """Per batch and partition: every valid data record once, in the bin of (largest valid event
    time of the earlier batches - its time); none before there is a running maximum."""
    import json
    from collections import Counter

    from eventtime.core.timestamps import extract
    from eventtime.query.advise import delay_bin

    parsed = parse_scenario(scenario)
    cfg = parsed.config
    runner = JvmReplay(parsed, spark)
    running_max = None
    for batch in parsed.batches:
        runner.run_batch(batch)
        got = {row["partition"]: {int(b): n for b, n in json.loads(row["stat_delays"]).items()}
               for row in runner.last_stats if row["stat_delays"] is not None}
        expected: dict = {}
        classified = [(rec, *extract(rec.ts, parsed.now_ms, cfg.min_valid_ms, cfg.max_future_ms)) for rec in batch]
        valid = [(rec, ts) for rec, ts, reason in classified if reason is None]
        if running_max is not None and running_max - cfg.max_out_of_orderness_ms > 0:
            for rec, ts in valid:
                if not rec.heartbeat:
                    part = None if rec.partition is None else str(rec.partition)
                    expected.setdefault(part, Counter())[delay_bin(running_max - ts)] += 1
        assert got == {p: dict(c) for p, c in expected.items()}
        if valid:
            # (this module imports eventtime's max aggregation)
            running_max = sorted([ts for _, ts in valid] + ([] if running_max is None else [running_max]))[-1]



@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 10_000), st.one_of(st.integers(0, 100_000), st.sampled_from([2**62, 2**63 - 2, 2**63 - 1])),
       st.integers(-10**6, 10**6))
def test_jvm_firing_rules_are_named_once_and_are_the_python_ones(spark, size, lateness, start):
    """Spec.isDue / isExpired / cleanupTime against core/trigger.py's is_due / is_expired /
    cleanup_time, at equality on both sides of every boundary, and with an allowed lateness
    so large that m + L leaves the range of a long (the window is then never purged)."""
    import json

    from pyspark.sql import types as T

    from eventtime import Tumbling
    from eventtime.core.config import EngineConfig
    from eventtime.core.trigger import END_OF_INPUT_MS, MAX_INSTANT_MS, cleanup_time, is_due, is_expired
    from eventtime.core.window import Window
    from eventtime.spark.aggregate import output_schema
    from eventtime.spark.plan import operator_plan

    window = Tumbling(size)
    config = EngineConfig(window, allowed_lateness_ms=lateness)
    record = T.StructType([T.StructField("key", T.StringType())])
    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(
        operator_plan(config, record, output_schema([record["key"]], [T.StructField("count", T.LongType())]), ["key"],
                    bounded=False)))
    calls = _Calls(spark, spec)
    w = Window(start * size, start * size + size)
    calls.expect("cleanupTime", (w.end_ms,), cleanup_time(w, lateness))
    m, cleanup = w.max_timestamp_ms, cleanup_time(w, lateness)
    for watermark in {m - 1, m, m + 1, cleanup - 1, cleanup, cleanup + (cleanup < MAX_INSTANT_MS), END_OF_INPUT_MS}:
        calls.expect("isDue", (w.end_ms, watermark), is_due(w, watermark))
        calls.expect("isExpired", (w.end_ms, watermark), is_expired(w, watermark, lateness))
    calls.check()


def _with_aggregations(scenario, aggregations):
    return dataclasses.replace(scenario, config=dataclasses.replace(scenario.config, aggregations=aggregations))


@settings(max_examples=100, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(every_kind_scenarios(), st.booleans())
def test_a_spark_sql_aggregation_s_buffers_are_kept_per_slice_and_purged(spark, scenario, combine):
    """State layout 6: a fixed window's SQL buffers are state entries per key and slice, read when
    the slice gets records or a window over it fires, written when it changed, removed with it.
    Through that path Spark's count(1) and sum equal the model's in every pane, and no entry is left."""
    from eventtime import agg

    parsed = parse_scenario(flushed(scenario))
    expected = run_reference(_with_aggregations(parsed, (count(), sum("value", name="sum"))), merged_from=True)
    sql = (agg("count(1)", "count"), agg("sum(value)", "sum"))
    runner = JvmReplay(_with_aggregations(parsed, sql), spark, combine, merged_from=True)
    got = {"batches": [runner.run_batch(b) for b in parsed.batches]}
    assert diff_outputs(expected, got) is None, diff_outputs(expected, got)
    assert runner.state_entries() == 0


def test_a_spark_sql_aggregation_s_buffers_are_one_entry_per_key_and_live_slice(spark):
    """Two keys, a record each in minute 0, then one in minute 1 for key a: one entry per (key,
    slice); the ON_TIME panes read them, the expiry removes them."""
    from eventtime import Record, Tumbling, agg
    from eventtime.core.config import EngineConfig
    from eventtime.harness.scenario import Scenario

    config = EngineConfig(Tumbling(60_000), (agg("count(1)", "n"),), allowed_lateness_ms=60_000, min_valid_ms=1)
    batches = ((Record("a", 1_000, {"value": 1}), Record("b", 2_000, {"value": 2})),
               (Record("a", 61_000, {"value": 3}), Record("a", 3_000, {"value": 4})),  # W 0: a's minute 0 again
               (Record(None, 125_000, heartbeat=True),),  # W 125 s: minute 0 expired (end 60 s + L), minute 1 due
               (Record(None, 200_000, heartbeat=True),))  # minute 1 expired
    runner = JvmReplay(Scenario(config, batches, now_ms=10**9), spark, combine=False)
    panes = []
    entries = []
    for batch in batches:
        panes += [(p["key"], p["window_start"], p["timing"], p["n"]) for p in runner.run_batch(batch, raw_panes=True)]
        entries.append((runner.state_entries("keys"), runner.state_entries("buffers")))
    assert entries == [(2, 2), (2, 3), (1, 1), (0, 0)], entries
    assert sorted(panes) == [("a", 0, "ON_TIME", 2), ("a", 60_000, "ON_TIME", 1), ("b", 0, "ON_TIME", 1)], panes


@settings(max_examples=60, derandomize=True, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.integers(1, 10_000), st.integers(0, 100_000), st.integers(-10**6, 10**6))
def test_a_session_row_folds_on_the_map_side_only_while_its_own_session_is_live(spark, gap, lateness, ts):
    """Spec.foldable for sessions: a row at ts is folded into the map side's partial sessions
    exactly while its own session [ts, ts + gap) has not expired (core/trigger.py's
    is_expired), checked at equality on both sides of its expiry."""
    import json

    from pyspark.sql import types as T

    from eventtime import Session
    from eventtime.core.config import EngineConfig
    from eventtime.core.trigger import cleanup_time, is_expired
    from eventtime.core.window import Window
    from eventtime.spark.aggregate import output_schema
    from eventtime.spark.plan import operator_plan

    config = EngineConfig(Session(gap), allowed_lateness_ms=lateness)
    record = T.StructType([T.StructField("key", T.StringType())])
    spec = spark._jvm.eventtime.jvm.plan.Spec(json.dumps(
        operator_plan(config, record, output_schema([record["key"]], [T.StructField("count", T.LongType())]), ["key"],
                    bounded=False)))
    calls = _Calls(spark, spec)
    own = Window(ts, ts + gap)
    expiry = cleanup_time(own, lateness)
    for watermark in (expiry - 1, expiry, expiry + 1, ts - 1, ts + gap - 1):
        calls.expect("foldable", (ts, watermark), not is_expired(own, watermark, lateness), f"W={watermark}")
    calls.check()


@pytest.mark.parametrize("combine", [False, True], ids=["rows", "combined"])
def test_a_session_row_whose_own_session_expired_still_joins_a_live_session(spark, combine):
    """Gap 10, L 0, no out-of-orderness. After the first batch W = 125: key a's session [100, 110)
    fired and expired, [120, 130) is live (it expires at 129). In the second batch a record at 112
    has its own session [112, 122) expired (121 <= 125), so the map side does not fold it, yet it
    bridges into the live session and is not late; the rows at 126 and 128 are folded and merge
    too: one session [112, 138) with 2 + 4 + 8 + 16. A record at 50 of key c, alone, is late. The
    output equals the reference model's, with the combine on and off."""
    from eventtime import Record, Session
    from eventtime.core.config import EngineConfig
    from eventtime.harness.scenario import Scenario

    config = EngineConfig(Session(10), (count(), sum("value", name="sum")), allowed_lateness_ms=0,
                          max_out_of_orderness_ms=0, min_valid_ms=1)
    batches = (
        (Record("a", 100, {"value": 1}), Record("a", 120, {"value": 2}), Record("b", 125, {"value": 0})),
        (Record("a", 112, {"value": 4}), Record("a", 126, {"value": 8}), Record("a", 128, {"value": 16}),
         Record("c", 50, {"value": 32})),
        (Record(None, 1_000, heartbeat=True),),
    )
    scenario = Scenario(config, batches, now_ms=10**9)
    ref = ReferenceEngine(config)
    runner = JvmReplay(scenario, spark, combine=combine, merged_from=True)
    outputs = []
    for batch in scenario.batches:
        expected = render_batch(ref.process_batch(batch, scenario.now_ms), True)
        got = runner.run_batch(batch)
        assert diff_outputs({"batches": [expected]}, {"batches": [got]}) is None
        outputs.append(got)
    assert [(r["key"], r["ts"], r["reason"]) for r in outputs[1]["late"]] == [("c", 50, "too_late")]
    merged = [(p["window_start"], p["window_end"], p["count"], p["sum"]) for p in outputs[2]["panes"] if p["key"] == "a"]
    assert merged == [(112, 138, 4, 30)]
