"""Properties of the reference model (docs/semantics.md), over generated micro-batch sequences.

Seeded (``derandomize=True``): the same examples run on every machine.
"""

from __future__ import annotations

import random
from collections import Counter, defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from eventtime import EngineConfig, ReferenceEngine, aggregate, count
from eventtime.core.trigger import DISCARDING, FINAL, ON_TIME, is_expired
from eventtime.harness.scenario import normalise_output, parse_scenario, run_reference

from .strategies import any_scenarios, every_kind_scenarios, flushed, partition_scenarios

SETTINGS = settings(max_examples=300, derandomize=True, deadline=None)

IDS = aggregate(
    "ids", "value", create=tuple, add=lambda acc, v: acc + (v,), merge=lambda a, b: a + b, result=lambda acc: tuple(sorted(acc))
)


def run_with_ids(scenario: dict):
    """Run the scenario keeping, per pane, the ids of the records it holds."""
    parsed = parse_scenario(scenario)
    cfg = parsed.config
    config = EngineConfig(
        cfg.window, (count(), IDS), cfg.max_out_of_orderness_ms, cfg.allowed_lateness_ms,
        cfg.accumulation, cfg.emit, cfg.min_valid_ms, cfg.max_future_ms, cfg.watermark,
    )
    engine = ReferenceEngine(config)
    results = []
    for i, batch in enumerate(parsed.batches):
        results.append(engine.process_batch(batch, parsed.now_ms, parsed.processing_time_ms(i)))
        watermark = engine.watermark_ms
        for _key, window in engine.state_windows():
            assert not is_expired(window, watermark, config.allowed_lateness_ms), "state survived its expiry"
    return parsed, config, results


@SETTINGS
@given(st.one_of(every_kind_scenarios(), partition_scenarios()))
def test_conservation_every_row_is_counted_late_or_invalid_exactly_once(scenario):
    parsed, _config, results = run_with_ids(flushed(scenario))
    data_ids = {r.fields["value"] for batch in parsed.batches for r in batch if not r.heartbeat}
    counted = {i for res in results for pane in res.panes for i in pane.values["ids"]}
    late = [r.record.fields["value"] for res in results for r in res.late]
    invalid = [r.record.fields["value"] for res in results for r in res.invalid if not r.record.heartbeat]
    assert len(late) == len(set(late)) and len(invalid) == len(set(invalid))
    assert not counted & set(late), "a record is both in a pane and late"
    assert not counted & set(invalid) and not set(late) & set(invalid)
    assert counted | set(late) | set(invalid) == data_ids


@SETTINGS
@given(every_kind_scenarios())
def test_discarding_panes_hold_each_record_once_per_window(scenario):
    scenario = {**scenario, "accumulation": "discarding", "emit": "on_time_and_late"}
    _parsed, _config, results = run_with_ids(flushed(scenario))
    per_window = defaultdict(list)
    for res in results:
        for pane in res.panes:
            per_window[(pane.key, pane.window)].extend(pane.values["ids"])
    for ids in per_window.values():
        assert len(ids) == len(set(ids))


@SETTINGS
@given(st.one_of(every_kind_scenarios(), partition_scenarios()))
def test_watermark_never_decreases(scenario):
    _parsed, _config, results = run_with_ids(scenario)
    marks = [r.watermark_ms for r in results if r.watermark_ms is not None]
    assert marks == sorted(marks)
    seen_none = [r.watermark_ms is None for r in results]
    assert seen_none == sorted(seen_none, reverse=True), "watermark went back to none"


@SETTINGS
@given(any_scenarios())
def test_pane_indexes_have_no_gaps_and_on_time_fires_at_most_once(scenario):
    _parsed, config, results = run_with_ids(flushed(scenario))
    indexes, timings, finals = defaultdict(list), defaultdict(Counter), Counter()
    for res in results:
        for pane in res.panes:
            indexes[(pane.key, pane.window)].append(pane.index)
            timings[(pane.key, pane.window)][pane.timing] += 1
            finals[(pane.key, pane.window)] += pane.is_final
    for key, seen in indexes.items():
        assert seen == list(range(len(seen))), f"{key}: indexes {seen}"
        assert timings[key][ON_TIME] <= 1
        assert finals[key] <= 1
        if config.emit == "final_only":
            assert dict(timings[key]) == {FINAL: 1} and finals[key] == 1


@SETTINGS
@given(every_kind_scenarios(), st.integers(min_value=0, max_value=2**32))
def test_order_of_records_inside_a_batch_does_not_matter(scenario, seed):
    rng = random.Random(seed)
    shuffled = {**scenario, "batches": [rng.sample(batch, len(batch)) for batch in scenario["batches"]]}
    assert normalise_output(run_reference(parse_scenario(scenario))) == normalise_output(
        run_reference(parse_scenario(shuffled))
    )


@SETTINGS
@given(any_scenarios())
def test_accumulating_pane_equals_sum_of_discarding_panes(scenario):
    """An accumulating pane is the merge of the discarding panes of the same window up to it."""
    acc = run_reference(parse_scenario({**scenario, "accumulation": "accumulating", "emit": "on_time_and_late"}))
    dis = run_reference(parse_scenario({**scenario, "accumulation": DISCARDING, "emit": "on_time_and_late"}))
    running = Counter()
    for batch_acc, batch_dis in zip(acc["batches"], dis["batches"]):
        assert batch_acc["watermark_ms"] == batch_dis["watermark_ms"]
        assert batch_acc["late"] == batch_dis["late"]
        by_window = {(p["key"], p["window_start"], p["index"]): p for p in batch_acc["panes"]}
        assert len(by_window) == len(batch_dis["panes"])
        for pane in batch_dis["panes"]:
            window = (pane["key"], pane["window_start"])
            running[window] += pane["count"]
            assert by_window[(*window, pane["index"])]["count"] == running[window]


@SETTINGS
@given(partition_scenarios())
def test_the_per_partition_watermark_never_passes_the_global_one_and_equals_it_with_one_partition(scenario):
    per_partition = run_reference(parse_scenario(scenario))
    global_ = run_reference(parse_scenario({**scenario, "watermark": {"mode": "global"}}))
    for p, g in zip(per_partition["batches"], global_["batches"]):
        assert p["watermark_ms"] is None or p["watermark_ms"] <= g["watermark_ms"]
    partitions = {r.get("partition") for batch in scenario["batches"] for r in batch}
    if len(partitions) == 1 and scenario["watermark"]["idle_timeout_ms"] is None:
        assert normalise_output(per_partition) == normalise_output(global_)
