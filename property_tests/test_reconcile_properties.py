"""Reconciliation converges to the truth (docs/semantics.md, "Reconciliation"): a stream's
panes plus the CORRECTION panes that reconcile writes equal, per key and window, one bounded
run of the same configuration over every valid record -- with reconcile run after the stream
and also between its batches. With ``report_partly_late`` off (the default, as in Flink) the one
exception is stated and held: a sliding window misses a record that arrived after the window
expired but in time for another of its windows (that record is then not in the late table)."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from eventtime import EngineConfig, ReferenceEngine, Tumbling, count, first, last, max, mean, min, sum
from eventtime.core.reconcile import CORRECTION, CurrentPane, LateInput, plan_corrections
from eventtime.core.timestamps import PARTLY_LATE
from eventtime.core.trigger import DISCARDING, END_OF_INPUT_MS, FINAL_ONLY, is_expired
from eventtime.core.window import Window
from eventtime.harness.scenario import parse_scenario

from .strategies import every_kind_scenarios, sliding_scenarios

SETTINGS = settings(max_examples=300, derandomize=True, deadline=None)
AGGS = (count(), sum("value", name="s"), min("value", name="lo"), max("value", name="hi"), mean("value", name="avg"),
        first("value", name="f"), last("value", name="l"))


def _config(parsed, report_partly_late: bool) -> EngineConfig:
    c = parsed.config
    return EngineConfig(c.window, AGGS, c.max_out_of_orderness_ms, c.allowed_lateness_ms, c.accumulation, c.emit,
                        c.min_valid_ms, c.max_future_ms, report_partly_late=report_partly_late)


class Results:
    """An append-only results table: every pane, with the order it was written in."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def append(self, key, window, index, values, merged_from=(), timing="pane") -> None:
        self.rows.append({"key": key, "window": window, "index": index, "values": dict(values),
                          "merged_from": tuple(merged_from), "timing": timing, "order": len(self.rows)})

    def current(self) -> list[CurrentPane]:
        """The latest pane per key and window, sessions superseded by a later pane left out."""
        latest: dict[tuple, dict] = {}
        for row in self.rows:
            k = (row["key"], row["window"])
            if k not in latest or (row["index"], row["order"]) > (latest[k]["index"], latest[k]["order"]):
                latest[k] = row
        replaced: dict[tuple, int] = {}
        for row in self.rows:
            for w in row["merged_from"]:
                replaced[(row["key"], w)] = row["order"]
        return [CurrentPane(k[0], k[1], r["index"], r["values"]) for k, r in latest.items()
                if k not in replaced or replaced[k] < r["order"]]


def _late_inputs(result) -> list[LateInput]:
    return [LateInput(str(r.record.fields["value"]), r.record.key, r.ts_ms, r.watermark_ms,
                      {"value": r.record.fields["value"]},
                      r.windows[-1].end_ms if r.reason == PARTLY_LATE else None) for r in result.late]


def _reconcile(config, results: Results, pending: list[LateInput], watermark_ms) -> list[LateInput]:
    plan = plan_corrections(config, results.current(), pending, watermark_ms)
    for c in plan.corrections:
        results.append(c.key, c.window, c.index, c.values, c.merged_from, CORRECTION)
    used = {i for c in plan.corrections for i in c.record_ids}
    return [r for r in pending if r.record_id not in used]


def _combined(config, panes: list[dict]) -> dict:
    out = {}
    for agg in AGGS:
        acc = agg.create()
        for p in panes:
            acc = agg.merge(acc, agg.from_pane(p["values"]))
        out.update(agg.pane_values(acc))
    return out


def _stream(scenario: dict, reconcile_between: set, report_partly_late: bool = False):
    parsed = parse_scenario(scenario)
    config = _config(parsed, report_partly_late)
    engine, results, pending, valid = ReferenceEngine(config), Results(), [], []
    dropped: set[tuple] = set()  # (key, window) that missed an accepted record: it came after the window expired
    for i, batch in enumerate(parsed.batches):
        before = engine.watermark_ms
        out = engine.process_batch(batch, parsed.now_ms)
        for p in out.panes:
            results.append(p.key, p.window, p.index, p.values, p.merged_from)
        late_ids = {r.record.fields["value"] for r in out.late if r.reason != PARTLY_LATE}
        invalid_ids = {r.record.fields["value"] for r in out.invalid}
        for record in batch:
            if record.heartbeat or record.fields["value"] in invalid_ids:
                continue
            valid.append(record)
            if record.fields["value"] in late_ids:
                continue
            if not config.window.merging:
                ts = int(record.ts)
                dropped |= {(record.key, w) for w in config.window.assign(ts)
                            if is_expired(w, before, config.allowed_lateness_ms)}
        pending += _late_inputs(out)
        if i in reconcile_between:
            pending = _reconcile(config, results, pending, engine.watermark_ms)
    for p in engine.end_of_input().panes:
        results.append(p.key, p.window, p.index, p.values, p.merged_from)
    return parsed, config, results, pending, valid, dropped


def _truth(parsed, config, records) -> dict[tuple, dict]:
    engine = ReferenceEngine(config)
    panes = [*engine.process_batch(records, parsed.now_ms).panes, *engine.end_of_input().panes]
    latest: dict[tuple, Any] = {}
    for p in panes:
        latest[(p.key, p.window)] = p.values  # one bounded run: the last pane of a window holds everything
    return latest


@SETTINGS
@given(st.one_of(every_kind_scenarios(), sliding_scenarios()), st.sets(st.integers(0, 6)), st.booleans())
def test_reconcile_converges_to_one_bounded_run_over_every_valid_record(scenario, between, report_partly_late):
    """With ``report_partly_late`` exactly; without it, but for the sliding windows that missed a
    record that came after they expired and in time for its other windows."""
    parsed, config, results, pending, valid, dropped = _stream(scenario, between, report_partly_late)
    if report_partly_late:
        dropped = set()
    truth = _truth(parsed, config, valid)
    assert _reconcile(config, results, pending, END_OF_INPUT_MS) == []
    current = results.current()
    accumulating = config.accumulation != DISCARDING or config.emit == FINAL_ONLY
    got: dict[tuple, dict] = {}
    if accumulating:
        got = {(p.key, p.window): dict(p.values) for p in current}
    else:  # discarding: each record is in exactly one pane of its window (a session: of the sessions inside it)
        for p in current:
            inside = [r for r in results.rows if r["key"] == p.key
                      and p.window.start_ms <= r["window"].start_ms and r["window"].end_ms <= p.window.end_ms]
            got[(p.key, p.window)] = _combined(config, inside)
    differing = {k for k in truth.keys() | got.keys() if truth.get(k) != got.get(k)}
    assert differing <= dropped, (differing - dropped, truth, got)


def test_a_record_in_a_window_the_results_never_had_makes_its_first_pane():
    config = EngineConfig(Tumbling(1000), aggregations=AGGS)
    plan = plan_corrections(config, [], [LateInput("r", "k", 1500, 5000, {"value": 4})])
    [c] = plan.corrections
    assert (c.window, c.index, dict(c.values), c.record_ids) == (
        Window(1000, 2000), 0, {"count": 1, "s": 4, "lo": 4, "hi": 4, "avg": 4.0, "avg__sum": 4, "avg__n": 1,
                                "f": 4, "f__ms": 1500, "l": 4, "l__ms": 1500}, ("r",))


def test_a_session_is_corrected_once_expired_at_equality_and_left_open_one_ms_before():
    from eventtime import Session
    from eventtime.core.reconcile import WINDOW_OPEN

    config = EngineConfig(Session(1000), aggregations=AGGS, allowed_lateness_ms=500)
    current = [CurrentPane("k", Window(0, 1000), 0, {"count": 1, "s": 1, "lo": 1, "hi": 1, "avg": 1.0, "avg__sum": 1,
                                                     "avg__n": 1, "f": 1, "f__ms": 10, "l": 1, "l__ms": 10})]
    late = [LateInput("r", "k", 900, None, {"value": 2})]  # joins [0, 1000) into [0, 1900): expired once W >= 1899 + 500
    closed = plan_corrections(config, current, late, watermark_ms=2399)
    assert [(c.window, c.index, c.merged_from) for c in closed.corrections] == [(Window(0, 1900), 1, (Window(0, 1000),))]
    still_open = plan_corrections(config, current, late, watermark_ms=2398)
    assert still_open.corrections == [] and [(u.record_id, u.reason) for u in still_open.left] == [("r", WINDOW_OPEN)]


def test_a_pane_without_the_accumulator_columns_leaves_its_records_unreconciled_with_the_reason():
    from eventtime.core.reconcile import NOT_MERGEABLE

    config = EngineConfig(Tumbling(1000), aggregations=AGGS)
    old = {"count": 1, "s": 1, "lo": 1, "hi": 1, "avg": 1.0, "f": 1, "l": 1}  # written before eventtime carried them
    plan = plan_corrections(config, [CurrentPane("k", Window(0, 1000), 0, old)], [LateInput("r", "k", 500, 5000, {"value": 2})])
    assert plan.corrections == [] and [(u.record_id, u.reason) for u in plan.left] == [("r", NOT_MERGEABLE)]
    assert "does not hold the accumulators" in plan.left[0].detail
