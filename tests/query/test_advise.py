"""The lateness advisor: delay bins, the advice from the histograms and the late records, its
properties (monotone, distinct, exact against the reference model), and reading real tables."""

from __future__ import annotations

import json
import math
import re

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from eventtime import EngineConfig, Sliding, Tumbling
from eventtime.core._duration import human_ms, to_ms
from eventtime.core.reference import Record, ReferenceEngine
from eventtime.query.advise import (
    DOMINANT_SHARE, advise, advise_counts, bin_bounds, delay_bin, needed_ms, round_up_ms,
)
from eventtime.query.advise_text import describe, plot_delays

SETTINGS = settings(max_examples=200, derandomize=True, deadline=None)
T0 = 1_714_550_400_000  # 2024-05-01T08:00Z
TS = pa.timestamp("ms", tz="UTC")


def test_every_delay_falls_in_its_bin_and_the_bins_tile_the_line():
    for d in [*range(-3, 5000), *(2**k + j for k in range(12, 62) for j in (-1, 0, 1))]:
        low, high = bin_bounds(delay_bin(d))
        assert low <= max(d, 0) < high, d
    for b in range(0, 480):
        assert bin_bounds(b)[1] == bin_bounds(b + 1)[0]
        low, high = bin_bounds(b)
        if b >= 8:
            assert high - low <= low / 8


def test_an_advised_duration_is_printed_as_it_is():
    for ms in [*range(0, 3000, 7), *range(3000, 10_000_000, 9_973), 11_474_336, 86_399_999, 3 * 86_400_000 + 1]:
        up = round_up_ms(ms)
        assert up >= ms and to_ms(human_ms(up), "L") == up, ms
    assert human_ms(round_up_ms(11_474_336)) == "3 h 12 min"


def test_needed_ms_is_the_edge_of_the_rule_m_plus_l_above_w():
    """A 1-minute window [60 s, 120 s) missed at W = 200 s with B = 10 s (M = 210 s): L' =
    needed - B keeps it, one ms less does not (m + L' > M - B')."""
    need = needed_ms(200_000, 120_000, 10_000)
    m, big_m = 119_999, 210_000
    for b2 in (0, 10_000, 50_000):
        assert m + (need - b2) > big_m - b2 and not m + (need - 1 - b2) > big_m - b2


def test_advice_from_a_histogram_at_its_bin_edges():
    # 990 records 1 s behind, 9 records 100 s behind, 1 record 1000 s behind; B = 10 s, L = 60 s
    hist = {delay_bin(1_000): 990, delay_bin(100_000): 9, delay_bin(1_000_000): 1}
    advice = advise_counts(hist, 10_000, 60_000, targets=(0.99, 0.999, 1.0), windows=10)
    assert advice.records == 1000 and advice.late_records is None
    t99, t999, t100 = advice.choices
    assert (t99.targets, t99.b_ms, t99.l_ms, t99.still_late) == ((0.99,), 10_000, 0, 10)  # 1 s < B: L = 0
    assert t999.b_ms + t999.l_ms >= bin_bounds(delay_bin(100_000))[1] and t999.still_late == 1
    assert (t999.l_ms, t999.extra_hold_ms) == (97_000, 37_000) and t999.extra_window_ms == 370_000
    assert t100.still_late == 0 and t100.b_ms + t100.l_ms >= bin_bounds(delay_bin(1_000_000))[1]
    assert describe(advice).splitlines()[3:] == [
        "  99 %    B = 10 s, L = 0 ms: at least 99 % on time (at most 10 of 1,000 records late); "
        "each window held 1 min less than today (10 windows: 10 min of window-time less in all)",
        "  99.9 %  B = 10 s, L = 1 min 37 s: at least 99.9 % on time (at most 1 of 1,000 records late); "
        "each window held 37 s longer than today (10 windows: 6 min 10 s of window-time more in all)",
        "  100 %   B = 10 s, L = 17 min 19 s: 100 % on time; each window held 16 min 19 s longer than today "
        "(10 windows: 2 h 43 min of window-time more in all)",
    ]
    with pytest.raises(ValueError, match="targets must be shares in \\(0, 1\\], got 1.5"):
        advise_counts(hist, targets=(1.5,))


def test_targets_that_need_the_same_l_are_one_choice_naming_them_all():
    """The whole tail in one bin: 99 %, 99.9 % and 99.99 % need the same L (the trial's three
    identical lines)."""
    advice = advise_counts({0: 9_000, delay_bin(3_600_000): 1_000}, 10_000, 60_000)
    assert [c.targets for c in advice.choices] == [(0.99, 0.999, 0.9999)]
    assert describe(advice).splitlines()[-1] == (
        "  99 %, 99.9 %, 99.99 %  B = 10 s, L = 1 h 2 min: 100 % on time; each window held 1 h 1 min longer than today")


def test_the_late_records_decide_exactly_when_they_need_less_than_the_delays():
    """A daily window: records 5 h behind are on time unless their day has closed. The
    histogram alone asks for 5 h; the late records say which L keeps them."""
    hist = {0: 9_000, delay_bin(5 * 3_600_000): 1_000}
    late = {"0": [needed_ms(T0, T0 - 600_000, 60_000)] * 20}  # 20 records whose day closed 10 min before W
    advice = advise_counts(None, 60_000, 0, targets=(0.99, 0.999), by_partition={"0": hist}, late=late)
    assert advice.late_records == 20
    today, c = advice.choices  # 99 % allows 100 late records: today's 20 are fine
    assert (today.targets, today.l_ms, today.late_kept, today.still_late, today.share_exact) == ((0.99,), 0, 0, 20, True)
    assert (c.targets, c.b_ms, c.l_ms, c.late_kept, c.late_still, c.on_time_share, c.share_exact) == (
        (0.999,), 60_000, 601_000, 20, 0, 1.0, True)  # 10 min 1 s, not the 5 h of the delays
    assert describe(advice).splitlines()[3:] == [  # one partition: none to name
        "  99 %    B = 1 min, L = 0 ms (as today): 99.8 % on time; the 20 late records stay late; windows held as long as today",
        "  99.9 %  B = 1 min, L = 10 min 1 s: 100 % on time; keeps all 20 late records on time; each window held 10 min 1 s "
        "longer than today",
    ]


def histograms():
    bins = st.integers(0, 200)
    hist = st.dictionaries(bins, st.integers(1, 500), min_size=1, max_size=6)
    return st.dictionaries(st.sampled_from(["0", "1", "2", "3"]), hist, min_size=1, max_size=4)


@SETTINGS
@given(histograms(), st.lists(st.sampled_from([0.5, 0.9, 0.95, 0.99, 0.999, 0.9999, 1.0]), min_size=1, max_size=7),
       st.integers(0, 100_000), st.integers(0, 10_000_000),
       st.dictionaries(st.sampled_from(["0", "1", "2", "3"]),
                       st.lists(st.one_of(st.none(), st.integers(1, 2**40)), max_size=30), max_size=4),
       st.booleans(), st.none() | st.integers(0, 1000))
def test_choices_are_distinct_monotone_and_reach_their_targets(by_partition, targets, b, lateness, late, with_late,
                                                               windows):
    advice = advise_counts(None, b, lateness, targets, windows, by_partition=by_partition,
                           late=late if with_late else None)
    total = advice.records
    assert total == sum(sum(h.values()) for h in by_partition.values())
    choices = advice.choices
    # one choice per distinct (B, L), naming every target once, in order
    assert [t for c in choices for t in c.targets] == sorted(set(targets))
    assert len({(c.b_ms, c.l_ms) for c in choices}) == len(choices)
    for before, after in zip(choices, choices[1:]):
        assert before.b_ms == after.b_ms == b and before.l_ms < after.l_ms
        assert before.still_late >= after.still_late and before.on_time_share <= after.on_time_share
        if with_late:
            assert before.late_kept <= after.late_kept
    for c in choices:
        kept = total - c.still_late
        assert all(kept >= math.ceil(round(q * total, 9)) for q in c.targets), (c, total)
        assert c.extra_hold_ms == c.b_ms + c.l_ms - b - lateness
        assert c.extra_window_ms == (None if windows is None else windows * c.extra_hold_ms)
        assert c.l_ms == lateness or to_ms(human_ms(c.l_ms), "L") == c.l_ms  # what is printed is the advice
    text = describe(advice)
    assert not re.search(r"held [-+]|[-+]\d", text)
    lines = text.splitlines()
    assert len(lines) == len(set(lines))
    json.dumps(advice.to_json())


def _run(batches, window, b_ms, l_ms):
    """The reference model over ``batches`` of (partition, ts): per batch the delays behind the
    running maximum of the earlier batches, and the late records."""
    engine = ReferenceEngine(EngineConfig(window, max_out_of_orderness_ms=b_ms, allowed_lateness_ms=l_ms))
    running_max, delays, late = None, {}, []
    for i, batch in enumerate(batches):
        if running_max is not None:
            for p, ts in batch:
                row = delays.setdefault(p, {})
                row[delay_bin(running_max - ts)] = row.get(delay_bin(running_max - ts), 0) + 1
        result = engine.process_batch([Record("k", ts, partition=p, fields={"id": (i, j)})
                                       for j, (p, ts) in enumerate(batch)], now_ms=T0 + 864_000_000)
        late += result.late
        top = max(ts for _, ts in batch)
        running_max = top if running_max is None else max(running_max, top)
    return delays, late


scenarios = st.tuples(
    st.lists(st.lists(st.tuples(st.sampled_from(["0", "1", "2"]), st.integers(-400_000, 60_000)), min_size=1,
                      max_size=25), min_size=2, max_size=6),
    st.sampled_from([Tumbling(10_000), Tumbling(60_000), Tumbling(3_600_000), Sliding(60_000, 20_000)]),
    st.sampled_from([0, 5_000, 30_000]), st.sampled_from([0, 10_000, 120_000]),
    st.lists(st.sampled_from([0.5, 0.8, 0.9, 0.95, 0.99, 1.0]), min_size=1, max_size=4),
)


@settings(max_examples=120, derandomize=True, deadline=None)
@given(scenarios)
def test_each_choice_keeps_exactly_the_late_records_it_says_on_the_reference_model(scenario):
    """Run the model, advise from its delays and late records, run it again with the advised
    L: the records late then are the ones the advice said (exactly, for B + L at least today's;
    at most ``still_late`` otherwise), and the share reached is at least the target."""
    offsets, window, b_ms, l_ms, targets = scenario
    batches = [[(p, T0 + i * 60_000 + off) for p, off in batch] for i, batch in enumerate(offsets)]
    delays, late = _run(batches, window, b_ms, l_ms)
    needs: dict = {}
    for r in late:
        needs.setdefault(r.record.partition, []).append(needed_ms(r.watermark_ms, max(w.end_ms for w in r.windows), b_ms))
    advice = advise_counts(None, b_ms, l_ms, targets, by_partition=delays, late=needs)
    assert advice.late_records == len(late)
    today_late = {r.record.fields["id"] for r in late}
    for c in advice.choices:
        _, again = _run(batches, window, c.b_ms, c.l_ms)
        assert len(again) <= c.still_late
        assert advice.records - len(again) >= min(c.targets) * advice.records - 1e-6
        assert c.late_kept == len(today_late - {r.record.fields["id"] for r in again})
        if c.b_ms + c.l_ms >= b_ms + l_ms:
            assert len(again) == c.late_still == c.still_late and c.share_exact


def test_a_dominant_partition_is_named_with_the_advice_without_it():
    by_partition = {"0": {0: 3_000}, "1": {0: 2_990, delay_bin(150_000): 10}, "3": {delay_bin(11_000_000): 900}}
    late = {"1": [120_000] * 2, "3": [11_000_000] * 900}
    advice = advise_counts(None, 10_000, 60_000, by_partition=by_partition, late=late)
    assert [(p.partition, p.records) for p in advice.drivers] == [("3", 900), ("1", 2)]
    lag = advice.lagging
    assert lag.partition == "3" and lag.share >= DOMINANT_SHARE and lag.other_partitions == 2
    assert lag.other_records == 6_000 and lag.other_late == 2
    assert [(c.targets, c.l_ms) for c in lag.others] == [((0.99,), 0), ((0.999,), 60_000), ((0.9999,), 110_000)]
    # below the threshold, no partition is said to lag
    even = advise_counts(None, 10_000, 60_000, by_partition=by_partition, late={"1": [120_000] * 300, "3": [11_000_000] * 900})
    assert even.lagging is None and even.drivers[0].partition == "3"


def write_delays(path, batches, pipeline="p", b_ms=1_000, l_ms=60_000):
    from eventtime.sinks import DeltaDelaySink

    sink = DeltaDelaySink(str(path), pipeline=pipeline)
    for batch, rows in enumerate(batches):
        keys = sorted(rows)
        sink(pa.table({"partition": [p for p, _ in keys], "delay_bin": pa.array([b for _, b in keys], pa.int32()),
                       "records": pa.array([rows[k] for k in keys], pa.int64()),
                       "max_out_of_orderness_ms": pa.array([b_ms] * len(keys), pa.int64()),
                       "allowed_lateness_ms": pa.array([l_ms] * len(keys), pa.int64())}), batch, "q")


def test_advise_reads_the_delay_and_late_tables_and_the_cli_prints_json_and_a_plot(tmp_path):
    from eventtime.cli.late import main
    from eventtime.sinks import DeltaLateSink

    write_delays(tmp_path / "late_delays", [{("0", 0): 50, ("0", delay_bin(5_000)): 10},
                                            {("0", 0): 30, ("1", delay_bin(190_000)): 2}])
    # two records of the window [0, 60 s) late in batch 1: W = 200 s, so M = 201 s (B = 1 s)
    DeltaLateSink(str(tmp_path / "late"), pipeline="p")(pa.table({
        "kind": ["late", "late", "invalid"], "reason": ["too_late", "too_late", "null_timestamp"],
        "event_time": pa.array([10_000, 20_000, None], TS), "watermark": pa.array([200_000, 200_000, None], TS),
        "lateness_ms": pa.array([190_000, 180_000, None], pa.int64()),
        "window_end": pa.array([60_000, 60_000, None], TS), "partition": ["1", "1", None]}), 1, "q")
    advice = advise(str(tmp_path / "late_delays"), targets=(0.95,), late=str(tmp_path / "late"))
    assert advice.records == 92 and advice.histogram == {0: 80, delay_bin(5_000): 10, delay_bin(190_000): 2}
    assert (advice.current_b_ms, advice.current_l_ms, advice.late_records, advice.late_exact) == (1_000, 60_000, 2, True)
    [c] = advice.choices  # 95 % allows 4 late: every delay below 5 s is enough
    assert (c.l_ms, c.late_kept, c.late_still, c.still_late, c.share_exact) == (5_000, 0, 2, 2, False)
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["late", "advise", "--table", str(tmp_path / "late"), "--format", "json", "--target", "1",
                     "--plot", str(tmp_path / "d.png")], hard_exit=False)
    assert code == 0
    data = json.loads(out.getvalue())
    assert data["records"] == 92 and data["late_records"] == data["late_records_in_table"] == 2
    assert data["delays_table"] == str(tmp_path / "late") + "_delays"
    [choice] = data["choices"]
    # 100 %: the two late records need B + L = 200 + 1 - 60 s + 2 ms (below their delays' bin, 196.6 s)
    assert needed_ms(200_000, 60_000, 1_000) == 141_002
    assert (choice["targets"], choice["target"], choice["b_ms"], choice["l_ms"]) == ([1.0], 1.0, 1_000, 141_000)
    assert (choice["late_kept"], choice["still_late"], choice["share_exact"]) == (2, 0, True)
    assert {"bin": 0, "low_ms": 0, "high_ms": 1, "records": 80} in data["histogram"]
    assert (tmp_path / "d.png").stat().st_size > 1000
    plot_delays(advice, str(tmp_path / "e.png"))


def test_advise_names_a_missing_delay_table(tmp_path, capsys):
    from eventtime.cli.late import main

    assert main(["late", "advise", "--table", str(tmp_path / "late"), "--stats", str(tmp_path / "nope")],
                hard_exit=False) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"--stats {str(tmp_path / 'nope')!r} is not a delay table" in err
