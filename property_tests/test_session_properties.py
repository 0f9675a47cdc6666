"""Properties of session windows in the reference model (docs/semantics.md, "Session windows")."""

from __future__ import annotations

from collections import Counter

from hypothesis import given, settings

from eventtime import EngineConfig, ReferenceEngine, Window, count
from eventtime.core.trigger import FINAL, ON_TIME, is_due
from eventtime.harness.scenario import parse_scenario

from .strategies import flushed, session_scenarios
from .test_model_properties import IDS

SETTINGS = settings(max_examples=300, derandomize=True, deadline=None)


def _run(scenario: dict, accumulation: str = "accumulating", emit: str = "on_time_and_late"):
    """Yields (engine, batch result, data ids of the batch) batch by batch, keeping record ids per session."""
    parsed = parse_scenario({**scenario, "accumulation": accumulation, "emit": emit})
    cfg = parsed.config
    config = EngineConfig(cfg.window, (count(), IDS), cfg.max_out_of_orderness_ms, cfg.allowed_lateness_ms,
                          cfg.accumulation, cfg.emit, cfg.min_valid_ms, cfg.max_future_ms)
    engine = ReferenceEngine(config)
    for batch in parsed.batches:
        yield engine, engine.process_batch(batch, parsed.now_ms), batch


def _accepted(scenario: dict) -> dict[int, tuple]:
    """id -> (key, ts) of every record that is neither invalid nor late."""
    accepted = {}
    for _engine, result, batch in _run(flushed(scenario)):
        rejected = {r.record.fields["value"] for r in result.late} | {r.record.fields["value"] for r in result.invalid}
        for record in batch:
            if not record.heartbeat and record.fields["value"] not in rejected:
                accepted[record.fields["value"]] = record.key
    return accepted


@SETTINGS
@given(session_scenarios())
def test_sessions_of_a_key_never_overlap_and_span_exactly_their_records(scenario):
    gap = scenario["window"]["gap_ms"]
    for engine, _result, _batch in _run(scenario):
        by_key: dict = {}
        for key, window in engine.state_windows():
            by_key.setdefault(key, []).append(window)
        for key, windows in by_key.items():
            windows.sort()
            for a, b in zip(windows, windows[1:]):
                assert a.end_ms <= b.start_ms, f"{key}: {a} overlaps {b}"
        held = Counter()
        for (key, window), st in engine._state.items():
            ids = st.everything[1]
            held.update(ids)
            times = [engine_ts for engine_ts in _times(scenario, ids)]
            assert window.start_ms == min(times) and window.end_ms == max(times) + gap, (key, window, times)
        assert all(n == 1 for n in held.values()), "a record is in two live sessions"


def _times(scenario: dict, ids) -> list[int]:
    ts = {r["value"]: r["ts"] for batch in scenario["batches"] for r in batch if not r.get("heartbeat")}
    return [ts[i] for i in ids]


@SETTINGS
@given(session_scenarios())
def test_every_accepted_record_is_in_exactly_one_live_session_until_it_expires(scenario):
    """After every batch each accepted record is in one live session, or the most recent session it
    was seen in (its own ``[ts, ts + gap)`` if it never was) has expired."""
    gap = scenario["window"]["gap_ms"]
    lateness = scenario["allowed_lateness_ms"]
    last_session: dict = {}
    for engine, result, batch in _run(flushed(scenario)):
        rejected = {r.record.fields["value"] for r in result.late} | {r.record.fields["value"] for r in result.invalid}
        for r in batch:
            if not r.heartbeat and r.fields["value"] not in rejected:
                last_session[r.fields["value"]] = Window(int(r.ts), int(r.ts) + gap)
        live = Counter()
        for (_key, window), st in engine._state.items():
            for i in st.everything[1]:
                live[i] += 1
                last_session[i] = window
        assert all(n == 1 for n in live.values()), "a record is in two live sessions"
        for i, window in last_session.items():
            if i not in live:
                assert window.max_timestamp_ms + lateness <= result.watermark_ms, f"record {i} left {window} before it expired"
    assert not engine._state


@SETTINGS
@given(session_scenarios())
def test_the_results_table_keeps_one_current_pane_per_session(scenario):
    """Applying each pane as an upsert of its bounds and a delete of its ``merged_from`` leaves,
    after the flush, one row per final session: no superseded session shows as current, and
    together they hold every accepted record exactly once. Pane
    indexes continue across merges: 1 + the largest index among the panes a pane replaces."""
    table: dict = {}
    for _engine, result, _batch in _run(flushed(scenario)):
        for pane in result.panes:
            replaced = [table.pop((pane.key, w)) for w in pane.merged_from]
            same = table.get((pane.key, pane.window))
            earlier = [p.index for p in replaced] + ([same.index] if same else [])
            assert pane.index == (max(earlier) + 1 if earlier else 0), pane
            assert pane.window not in pane.merged_from
            table[(pane.key, pane.window)] = pane
    counted = Counter(i for p in table.values() for i in p.values["ids"])
    assert all(n == 1 for n in counted.values())
    assert set(counted) == set(_accepted(scenario))
    # (rows of a key may overlap: an expired session is gone, and a later record near it starts a new one)


@SETTINGS
@given(session_scenarios())
def test_discarding_panes_hold_every_accepted_record_exactly_once(scenario):
    ids = Counter()
    for _engine, result, _batch in _run(flushed(scenario), accumulation="discarding"):
        for pane in result.panes:
            ids.update(pane.values["ids"])
    assert all(n == 1 for n in ids.values())
    assert set(ids) == set(_accepted(scenario))


@SETTINGS
@given(session_scenarios())
def test_on_time_fires_when_the_watermark_passes_the_session_end_and_final_only_once(scenario):
    previous = None
    for engine, result, _batch in _run(flushed(scenario)):
        for pane in result.panes:
            assert is_due(pane.window, result.watermark_ms)
            if pane.timing == ON_TIME:
                assert previous is None or pane.window.max_timestamp_ms > previous
        previous = result.watermark_ms
    finals = Counter()
    for _engine, result, _batch in _run(flushed(scenario), emit="final_only"):
        for pane in result.panes:
            assert pane.timing == FINAL and pane.is_final and pane.index == 0 and pane.merged_from == ()
            finals[(pane.key, pane.window)] += 1
    assert all(n == 1 for n in finals.values())
