"""``eventtime.reconcile`` over real Delta tables (delta-rs): the stream's results plus the
CORRECTION panes equal one bounded run over every valid record; exactly once, also when the
process is killed; records it cannot use are listed; other tables are refused."""

from __future__ import annotations

import builtins
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest
from deltalake import DeltaTable

import eventtime
from eventtime import (EngineConfig, Record, Session, Sliding, Tumbling, count, first, last, latest_panes, max, mean, min,
                       sum)
from eventtime.core.reconcile import NOT_MERGEABLE, WINDOW_OPEN
from eventtime.core.trigger import END_OF_INPUT_MS, is_expired
from eventtime.core.window import Window
from eventtime.query.reconcile import LATE_RECORD_IDS, reconciled_ids

from reconcile_tables import Stream, ts

AGGS = (count(), sum("amount", name="amount"), min("amount", name="lo"), max("amount", name="hi"))
MINUTE = 60_000


def _config(window, **kwargs) -> EngineConfig:
    return EngineConfig(window, min_valid_ms=1, **kwargs)


def _rows(df, names) -> dict[tuple, dict]:
    return {(r["key"], r["window_start"].to_pydatetime(), r["window_end"].to_pydatetime()): {n: r[n] for n in names}
            for _, r in df.iterrows()}


def _current(path: str, names=tuple(a.name for a in AGGS)) -> dict[tuple, dict]:
    return {k: {n: (None if v != v else int(v)) for n, v in row.items()} for k, row in _rows(latest_panes(path), names).items()}


def _tumbling_stream(tmp_path, lateness_ms: int = 0) -> Stream:
    config = _config(Tumbling("1 minute"), aggregations=AGGS, allowed_lateness_ms=lateness_ms)
    s = Stream(str(tmp_path), config)
    s.batch([Record("a", 10_000, {"amount": 1}), Record("b", 20_000, {"amount": 2}), Record("a", 70_000, {"amount": 4})])
    s.batch([Record("a", 130_000, {"amount": 8})])  # W = 130 s: the first minute is over
    s.batch([Record("a", 30_000, {"amount": 16}), Record("c", 40_000, {"amount": 32}),  # too late; c: a new window
             Record("b", 200_000, {"amount": 64})])
    s.batch([Record("a", 50_000, {"amount": None}), Record("a", 65_000, {"amount": 128})])  # too late again
    s.end()
    return s


def test_tumbling_windows_converge_to_the_bounded_run_and_a_second_run_changes_nothing(tmp_path):
    s = _tumbling_stream(tmp_path)
    truth = s.truth()
    before = _current(s.results_path)
    assert before != truth  # the stream lost the too-late records
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert (report.written, report.late_records, report.reconciled, report.left) == (True, 4, 4, {})
    assert report.corrections == 3  # a's and c's first minute, a's second minute
    assert _current(s.results_path) == truth
    assert report.totals_change == {"count": 4, "amount": 176}  # 16 + 32 + null + 128
    assert builtins.sum(v["count"] for v in before.values()) + 4 == builtins.sum(v["count"] for v in truth.values())
    panes = DeltaTable(s.results_path).to_pandas()
    corrections = panes[panes["pane_timing"] == "CORRECTION"].sort_values(["key", "window_start"])
    assert corrections[["key", "pane_index", "is_final", "batch_id", "query_id"]].values.tolist() == [
        ['{"user":"a"}', 1, True, 0, "reconcile"], ['{"user":"a"}', 1, True, 0, "reconcile"],
        ['{"user":"c"}', 0, True, 0, "reconcile"]]
    ids = DeltaTable(s.late_path).to_pandas()["record_id"].tolist()
    assert reconciled_ids(s.results_path) == set(ids) and len(ids) == 4
    version = DeltaTable(s.results_path).version()
    again = eventtime.reconcile(s.late_path, s.results_path)
    assert (again.written, again.reconciled, again.corrections) == (False, 0, 0)
    assert DeltaTable(s.results_path).version() == version


def test_reconcile_between_batches_then_at_the_end_converges(tmp_path):
    config = _config(Tumbling("1 minute"), aggregations=AGGS)
    s = Stream(str(tmp_path), config)
    s.batch([Record("a", 10_000, {"amount": 1}), Record("a", 130_000, {"amount": 2})])
    s.batch([Record("a", 20_000, {"amount": 4})])
    first = eventtime.reconcile(s.late_path, s.results_path)
    assert (first.run, first.reconciled) == (0, 1)
    s.batch([Record("a", 30_000, {"amount": 8}), Record("a", 300_000, {"amount": 16})])
    s.end()
    second = eventtime.reconcile(s.late_path, s.results_path)
    assert (second.run, second.reconciled) == (1, 1)
    assert _current(s.results_path) == s.truth()
    assert len(reconciled_ids(s.results_path)) == 2


def test_sessions_a_late_record_bridges_two_sessions_into_one_with_merged_from(tmp_path):
    config = _config(Session("30 seconds"), aggregations=AGGS)
    s = Stream(str(tmp_path), config)
    s.batch([Record("a", 1_000, {"amount": 1}), Record("a", 50_000, {"amount": 2}), Record("a", 200_000, {"amount": 4})])
    s.batch([Record("a", 25_000, {"amount": 8})])  # W = 200 s: too late; it bridges [1 s, 31 s) and [50 s, 80 s)
    s.end()
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert (report.reconciled, report.corrections, report.windows_merged) == (1, 1, 1)
    assert _current(s.results_path) == s.truth()
    row = DeltaTable(s.results_path).to_pandas().query("pane_timing == 'CORRECTION'").iloc[0]
    assert (row["window_start"].to_pydatetime(), row["window_end"].to_pydatetime()) == (ts(1_000), ts(80_000))
    assert sorted((m["start"], m["end"]) for m in row["merged_from"]) == [(ts(1_000), ts(31_000)),
                                                                          (ts(50_000), ts(80_000))]
    assert row["pane_index"] == 1 and list(row[LATE_RECORD_IDS]) == sorted(reconciled_ids(s.results_path))


def test_a_session_not_yet_closed_is_left_for_a_later_run(tmp_path):
    config = _config(Session("30 seconds"), aggregations=AGGS, allowed_lateness_ms=10_000)
    s = Stream(str(tmp_path), config)
    s.batch([Record("a", 1_000, {"amount": 1}), Record("a", 200_000, {"amount": 2})])  # W = 200 s: [1 s, 31 s) expired
    s.batch([Record("a", 5_000, {"amount": 4})])  # too late, joins the expired session: closed, reconciled
    report = eventtime.reconcile(s.late_path, s.results_path, watermark_ms=0)
    assert (report.reconciled, report.left) == (1, {})
    from eventtime.core.reconcile import LateInput, plan_corrections  # a group still open is deferred
    plan = plan_corrections(config, [], [LateInput("r", "a", 500_000, 450_000, {"amount": 1})], 450_000)
    assert [(u.record_id, u.reason) for u in plan.left] == [("r", WINDOW_OPEN)]


def test_mean_first_and_last_merge_through_the_pane_s_accumulator_columns(tmp_path):
    aggs = (count(), mean("amount", name="avg"), first("amount", name="f"), last("amount", name="l"))
    names = eventtime.pane_columns(aggs)
    assert names == ["count", "avg", "avg__sum", "avg__n", "f", "f__ms", "l", "l__ms"]
    s = Stream(str(tmp_path), _config(Tumbling("1 minute"), aggregations=aggs))
    s.batch([Record("a", 10_000, {"amount": 1}), Record("a", 20_000, {"amount": 2}), Record("a", 130_000, {"amount": 3})])
    s.batch([Record("a", 5_000, {"amount": 4}), Record("a", 25_000, {"amount": None}),  # too late: a new first
             Record("a", 59_999, {"amount": 8})])  # ... and a new last
    s.end()
    truth = {k: {n: v[n] for n in names} for k, v in s.truth().items()}
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert (report.reconciled, report.left) == (3, {})
    got = {k: {n: (None if v != v else v) for n, v in row.items()}
           for k, row in _rows(latest_panes(s.results_path), names).items()}
    assert got == truth
    assert truth[('{"user":"a"}', ts(0), ts(MINUTE))] == {
        "count": 5, "avg": 15 / 4, "avg__sum": 15, "avg__n": 4, "f": 4, "f__ms": 5_000, "l": 8, "l__ms": 59_999}


def test_sliding_windows_converge_when_partly_late_records_are_reported(tmp_path):
    """A record too late for its first two 3-minute windows and in time for the third is counted
    there and reported partly_late: reconcile corrects the two it missed, and only those."""
    config = _config(Sliding("3 minutes", "1 minute"), aggregations=AGGS, report_partly_late=True)
    s = Stream(str(tmp_path), config)
    s.batch([Record("a", 10_000, {"amount": 1}), Record("a", 270_000, {"amount": 2})])  # W = 270 s
    out = s.batch([Record("a", 150_000, {"amount": 4}), Record("a", 20_000, {"amount": 8})])
    assert sorted(r.reason for r in out.late) == ["partly_late", "too_late"]
    s.end()
    before = _current(s.results_path)
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert (report.reconciled, report.left) == (2, {})
    assert report.corrections == 4  # 150 s: [0, 3 min), [1, 4 min); 20 s: those from -2 and -1 min, and [0, 3 min)
    after = _current(s.results_path)
    assert after == s.truth() and before != after
    assert after[('{"user":"a"}', ts(120_000), ts(300_000))] == before[('{"user":"a"}', ts(120_000), ts(300_000))]


def test_a_pane_written_before_the_accumulator_columns_leaves_its_records_listed(tmp_path, capsys):
    config = _config(Tumbling("1 minute"), aggregations=(count(), mean("amount", name="avg")))
    s = Stream(str(tmp_path), config, accumulators=False)
    s.batch([Record("a", 10_000, {"amount": 1}), Record("a", 130_000, {"amount": 2})])
    s.batch([Record("a", 20_000, {"amount": 4}), Record("b", 30_000, {"amount": 8})])  # b: a window with no pane
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert (report.written, report.corrections, list(report.left)) == (True, 1, [NOT_MERGEABLE])
    assert len(report.left[NOT_MERGEABLE]) == 1 and report.reconciled == 1
    b = latest_panes(s.results_path).query("key == '{\"user\":\"b\"}'").iloc[0]
    assert (b["avg"], b["avg__sum"], b["avg__n"]) == (8.0, 8, 1)  # the new columns, added by the correction
    (why,) = report.why[NOT_MERGEABLE]
    assert report.stuck == 1 and why.startswith("the pane of ") and "does not hold the accumulators" in why
    # the command: the record left named with why, and exit 3 for a scheduled job to see
    from eventtime.cli.late import main
    from eventtime.cli.late_reconcile import STUCK_EXIT

    assert main(["late", "reconcile", "--late", s.late_path, "--results", s.results_path], hard_exit=False) == STUCK_EXIT
    text = capsys.readouterr().out
    assert "left unreconciled, aggregation_not_mergeable: 1" in text and "does not hold the accumulators" in text


def test_a_payload_without_the_aggregated_column_is_listed_and_the_rest_reconciled(tmp_path):
    s = _tumbling_stream(tmp_path)
    import pyarrow as pa

    from eventtime.core.kinds import LATE_RECORD
    bad = pa.table({"kind": [LATE_RECORD], "reason": ["too_late"], "key": ['{"user":"a"}'],
                    "event_time": pa.array([ts(1_000)], pa.timestamp("us", tz="UTC")),
                    "watermark": pa.array([ts(500_000)], pa.timestamp("us", tz="UTC")),
                    "payload": ['{"user":"a","price":3}'], "user": ["a"]})
    s.late(bad, 99, "q1")
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert report.reconciled == 4 and report.left == {"payload_unreadable": ["q1:99:0"]}


def test_refusals_name_the_table_and_the_reason(tmp_path):
    s = _tumbling_stream(tmp_path)
    with pytest.raises(ValueError, match="no Delta table at .*nowhere"):
        eventtime.reconcile(str(tmp_path / "nowhere"), s.results_path)
    with pytest.raises(ValueError, match="late table"):
        eventtime.reconcile(s.results_path, s.results_path)
    other = Stream(str(tmp_path / "other"), _config(Tumbling("2 minutes"), aggregations=AGGS))
    with pytest.raises(ValueError, match="record different pipelines under the name 'p'"):
        eventtime.reconcile(other.late_path, s.results_path)
    old = Stream(str(tmp_path / "old"), _config(Tumbling("1 minute"), aggregations=AGGS), record=False)
    old.batch([Record("a", 10_000, {"amount": 1}), Record("a", 130_000, {"amount": 2})])
    with pytest.raises(ValueError, match="no pipeline .*run the streaming query once with this version"):
        eventtime.reconcile(old.late_path, old.results_path)


@pytest.mark.parametrize("point", ["before_reconcile_commit", "after_reconcile_commit"])
def test_a_run_killed_leaves_the_tables_as_before_or_after_it(tmp_path, point):
    s = _tumbling_stream(tmp_path)
    truth, before = s.truth(), _current(s.results_path)
    code = textwrap.dedent(f"""
        import eventtime
        eventtime.reconcile({s.late_path!r}, {s.results_path!r})
    """)
    env = {**os.environ, "EVENTTIME_FAULT": f"kill:{point}:0"}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _current(s.results_path) == (before if point == "before_reconcile_commit" else truth)
    report = eventtime.reconcile(s.late_path, s.results_path)
    assert report.written == (point == "before_reconcile_commit")
    assert _current(s.results_path) == truth


def test_reconcile_from_end_of_input_watermark_matches_the_default(tmp_path):
    s = _tumbling_stream(tmp_path, lateness_ms=MINUTE)
    report = eventtime.reconcile(s.late_path, s.results_path, watermark_ms=END_OF_INPUT_MS, dry_run=True)
    assert not report.written and report.reconciled == 4
    assert eventtime.reconcile(s.late_path, s.results_path).reconciled == 4
    assert _current(s.results_path) == s.truth()


def test_the_command_reports_what_it_did_and_refuses_with_exit_2(tmp_path, capsys):
    from eventtime.cli.late import main

    s = _tumbling_stream(tmp_path)
    assert main(["late", "reconcile", "--late", s.late_path, "--results", s.results_path, "--dry-run"],
                hard_exit=False) == 0
    assert "4 too-late record(s) read, 4 reconciled now into 3 CORRECTION pane(s)" in capsys.readouterr().out
    assert main(["late", "reconcile", "--late", s.late_path, "--results", s.results_path, "--watermark", "end"],
                hard_exit=False) == 0
    text = capsys.readouterr().out
    assert "the totals moved: count +4, amount +176" in text and "as reconcile run 0" in text
    assert _current(s.results_path) == s.truth()
    assert main(["late", "reconcile", "--late", s.results_path, "--results", s.results_path], hard_exit=False) == 2
    assert "eventtime late reconcile: error: " in capsys.readouterr().err


# ---------------------------------------------------------------------------
# the current-state table: DeltaResultsSink(mode="upsert")


def _session_stream(tmp, mode: str) -> Stream:
    s = Stream(str(tmp), _config(Session("30 seconds"), aggregations=AGGS, allowed_lateness_ms=MINUTE), mode=mode)
    s.batch([Record("a", 1_000, {"amount": 1}), Record("a", 50_000, {"amount": 2}), Record("b", 5_000, {"amount": 3})])
    s.batch([Record("a", 30_000, {"amount": 4})])  # bridges a's two sessions: one pane supersedes both
    s.batch([Record("a", 200_000, {"amount": 8}), Record("b", 7_000, {"amount": 16})])
    s.batch([Record("a", 20_000, {"amount": 32})])  # too late
    s.end()
    return s


def _tumbling_with_late_panes(tmp, mode: str) -> Stream:
    s = Stream(str(tmp), _config(Tumbling("1 minute"), aggregations=AGGS, allowed_lateness_ms=MINUTE), mode=mode)
    s.batch([Record("a", 10_000, {"amount": 1}), Record("b", 20_000, {"amount": 2}), Record("a", 70_000, {"amount": 4})])
    s.batch([Record("a", 30_000, {"amount": 8}), Record("a", 130_000, {"amount": 16})])  # a LATE pane of [0, 1 min)
    s.batch([Record("a", 40_000, {"amount": 32}), Record("c", 40_000, {"amount": 64}),  # too late
             Record("b", 200_000, {"amount": 128})])
    s.batch([Record("a", 50_000, {"amount": None}), Record("a", 65_000, {"amount": 256})])  # too late
    s.end()
    return s


@pytest.mark.parametrize("window", ["tumbling", "session"])
def test_the_upsert_table_holds_one_row_per_window_the_latest_pane_of_the_history(tmp_path, window):
    make = _tumbling_with_late_panes if window == "tumbling" else _session_stream
    streams = {mode: make(tmp_path / mode, mode) for mode in ("append", "upsert")}
    history, current = streams["append"], streams["upsert"]
    rows = DeltaTable(current.results_path).to_pandas()
    assert not rows.duplicated(["key", "window_start", "window_end"]).any()
    assert _current(current.results_path) == _current(history.results_path)
    assert len(rows) == len(latest_panes(history.results_path)) < len(DeltaTable(history.results_path).to_pandas())
    # a batch written again (a restart after the commit) changes nothing
    version = DeltaTable(current.results_path).version()
    out = current.results(DeltaTable(current.results_path).to_pyarrow_table().select(
        ["user", "window_start", "window_end", "pane_timing", "pane_index", "is_final", *(a.name for a in AGGS)]),
        1, current.query_id)
    assert (out.written, out.skipped, DeltaTable(current.results_path).version()) == (False, "already_committed", version)
    # reconciled, twice, in place
    for s in (history, current):
        first = eventtime.reconcile(s.late_path, s.results_path)
        assert first.written and first.reconciled == first.late_records > 0
        assert _current(s.results_path) == s.truth()
        assert not eventtime.reconcile(s.late_path, s.results_path).written
    assert not DeltaTable(current.results_path).to_pandas().duplicated(["key", "window_start", "window_end"]).any()


def test_an_upsert_table_reconciled_between_batches_keeps_every_reconciled_record(tmp_path):
    s = Stream(str(tmp_path), _config(Tumbling("1 minute"), aggregations=AGGS), mode="upsert")
    s.batch([Record("a", 10_000, {"amount": 1}), Record("a", 130_000, {"amount": 2})])
    s.batch([Record("a", 20_000, {"amount": 4})])
    assert eventtime.reconcile(s.late_path, s.results_path).reconciled == 1
    s.batch([Record("a", 30_000, {"amount": 8}), Record("a", 300_000, {"amount": 16})])
    s.end()
    second = eventtime.reconcile(s.late_path, s.results_path)
    assert (second.reconciled, second.already) == (1, 1)  # the first record is not merged twice
    assert _current(s.results_path) == s.truth()
    row = DeltaTable(s.results_path).to_pandas().query("pane_timing == 'CORRECTION'")
    assert len(row) == 1 and len(row.iloc[0][LATE_RECORD_IDS]) == 2 and row.iloc[0]["pane_index"] == 2


def test_mode_is_checked(tmp_path):
    from eventtime import DeltaResultsSink

    with pytest.raises(ValueError, match="mode must be 'append'.*got 'merge'"):
        DeltaResultsSink(str(tmp_path / "r"), "p", mode="merge")
    with pytest.raises(TypeError, match="mode must be a str"):
        DeltaResultsSink(str(tmp_path / "r"), "p", mode=1)


# ---------------------------------------------------------------------------
# the property, through the tables: random streams, reconcile runs between their batches


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from property_tests.strategies import every_kind_scenarios  # noqa: E402


@pytest.mark.slow
@settings(max_examples=150, derandomize=True, deadline=None)
@given(every_kind_scenarios(), st.sets(st.integers(0, 5)), st.sampled_from(["append", "upsert"]))
def test_through_the_tables_random_streams_converge_to_the_bounded_run(tmp_path_factory, scenario, between, mode):
    from eventtime.harness.scenario import parse_scenario

    parsed = parse_scenario(scenario)
    c = parsed.config
    config = EngineConfig(c.window, (count(), sum("value", name="s"), min("value", name="lo"), max("value", name="hi")),
                          c.max_out_of_orderness_ms, c.allowed_lateness_ms, c.accumulation, c.emit, c.min_valid_ms,
                          c.max_future_ms)
    discarding = config.accumulation == "discarding" and config.emit != "final_only"
    s = Stream(str(tmp_path_factory.mktemp("prop")), config, mode="append" if discarding else mode)
    dropped = set()  # sliding windows that expired before an accepted record of theirs came (not late: not reconcilable)
    for i, batch in enumerate(parsed.batches):
        before = s.engine.watermark_ms
        out = s.batch(batch, parsed.now_ms)
        rejected = {id(r.record) for r in (*out.late, *out.invalid)}
        if not config.window.merging:
            for r in batch:
                if not r.heartbeat and id(r) not in rejected:
                    dropped |= {(r.key, w) for w in config.window.assign(int(r.ts))
                                if is_expired(w, before, config.allowed_lateness_ms)}
        if i in between:
            eventtime.reconcile(s.late_path, s.results_path)
    s.end()
    report = eventtime.reconcile(s.late_path, s.results_path, watermark_ms=END_OF_INPUT_MS)
    assert report.left == {}
    truth = {(json.loads(k[0])["user"], Window(_ms(k[1]), _ms(k[2]))): v for k, v in s.truth(parsed.now_ms).items()}
    written = DeltaTable.is_deltatable(s.results_path)  # a stream of no valid record wrote no pane, reconcile none
    rows = DeltaTable(s.results_path).to_pyarrow_table().to_pylist() if written else []
    got = {}
    for (key, start, end), values in (_current(s.results_path, ("count", "s", "lo", "hi")) if written else {}).items():
        window = Window(_ms(start), _ms(end))
        if discarding:  # each record is in one pane of its window (a session: of the sessions inside it)
            inside = [r for r in rows if r["key"] == key and start <= r["window_start"] and r["window_end"] <= end]
            values = {"count": builtins.sum(r["count"] for r in inside),
                      "s": _none_sum([r["s"] for r in inside]), "lo": _none_min([r["lo"] for r in inside]),
                      "hi": _none_max([r["hi"] for r in inside])}
        got[(json.loads(key)["user"], window)] = values
    differing = {k for k in truth.keys() | got.keys() if truth.get(k) != got.get(k)}
    assert differing <= dropped, (differing - dropped, truth, got)


def _ms(t) -> int:
    return int((t - ts(0)).total_seconds() * 1000)


def _none_sum(values):
    present = [v for v in values if v is not None]
    return builtins.sum(present) if present else None


def _none_min(values):
    present = [v for v in values if v is not None]
    return builtins.min(present) if present else None


def _none_max(values):
    present = [v for v in values if v is not None]
    return builtins.max(present) if present else None


def test_an_upsert_table_refuses_discarding_panes_before_the_query_starts(tmp_path):
    config = _config(Tumbling("1 minute"), aggregations=AGGS, accumulation="discarding")
    with pytest.raises(ValueError, match="mode='upsert'.*discarding panes.*accumulation='accumulating'"):
        Stream(str(tmp_path), config, mode="upsert")
    Stream(str(tmp_path / "final"), _config(Tumbling("1 minute"), aggregations=AGGS, accumulation="discarding",
                                            emit="final_only"), mode="upsert")  # a FINAL pane holds everything


def test_late_summary_with_results_says_how_many_records_reconcile_merged_and_how_the_totals_moved(tmp_path, capsys):
    from eventtime.cli.late import main

    s = _tumbling_stream(tmp_path)
    assert main(["late", "summary", "--table", s.late_path, "--results", s.results_path], hard_exit=False) == 0
    assert "reconciled (" + s.results_path + "): 0 of 4 too-late records of pipeline p, in 0 run(s); the totals " \
           "moved: nothing" in capsys.readouterr().out
    eventtime.reconcile(s.late_path, s.results_path)
    assert main(["late", "summary", "--table", s.late_path, "--results", s.results_path], hard_exit=False) == 0
    assert "4 of 4 too-late records of pipeline p, in 1 run(s); the totals moved: count +4, amount +176" \
        in capsys.readouterr().out
    assert main(["late", "summary", "--table", s.late_path, "--results", s.results_path, "--format", "json"],
                hard_exit=False) == 0
    assert json.loads(capsys.readouterr().out)["reconciled"] == {
        "pipeline": "p", "too_late": 4, "reconciled": 4, "runs": 1, "totals_change": {"count": 4, "amount": 176}}


# ---------------------------------------------------------------------------
# concurrency


def test_concurrent_runs_commit_once(tmp_path):
    s = _tumbling_stream(tmp_path)
    code = f"import eventtime; print(eventtime.reconcile({s.late_path!r}, {s.results_path!r}).written)"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120)[0].strip().splitlines()[-1] for p in procs]
    assert sorted(outs) == ["False", "False", "True"]  # one ran; the others waited, then found it done
    rows = DeltaTable(s.results_path).to_pandas()
    assert (rows["pane_timing"] == "CORRECTION").sum() == 3
    assert _current(s.results_path) == s.truth()


@pytest.mark.parametrize("mode", ["append", "upsert"])
def test_reconcile_while_the_stream_writes_loses_nothing_and_counts_nothing_twice(tmp_path, mode):
    import random
    import threading

    config = _config(Tumbling("1 minute"), aggregations=AGGS)
    s = Stream(str(tmp_path), config, mode=mode)
    rng = random.Random(5)
    batches = []
    for i in range(12):  # each batch moves time on 1 minute, with records up to 5 minutes behind (some too late)
        now = (i + 3) * MINUTE
        batches.append([Record(rng.choice("abc"), now - rng.randrange(0, 5 * MINUTE), {"amount": rng.randrange(100)})
                        for _ in range(20)])
    errors: list = []

    def stream() -> None:
        try:
            for batch in batches:
                s.batch(batch)
                time.sleep(0.2)  # a micro-batch interval: reconcile runs meet the stream's commits
            s.end()
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    writer = threading.Thread(target=stream)
    writer.start()
    runs = 0
    while writer.is_alive():
        if DeltaTable.is_deltatable(s.late_path) and DeltaTable(s.late_path).version() > 1:
            eventtime.reconcile(s.late_path, s.results_path)
            runs += 1
    writer.join()
    assert not errors, errors
    final = eventtime.reconcile(s.late_path, s.results_path)
    assert final.left == {} and runs > 1
    assert final.already + final.reconciled == final.late_records > 20
    assert _current(s.results_path) == s.truth()


def test_an_unwritable_results_path_is_refused_naming_it_and_nothing_is_written(tmp_path):
    s = _tumbling_stream(tmp_path)
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    late_version = DeltaTable(s.late_path).version()
    with pytest.raises(ValueError, match=f"the table path '{blocker}/results' cannot be written"):
        eventtime.reconcile(s.late_path, str(blocker / "results"))
    assert DeltaTable(s.late_path).version() == late_version


def test_a_mergeable_spark_sql_aggregation_is_planned_as_a_merge_of_the_panes_buffers_and_the_records():
    """The pure plan (Spark computes the values: tests/spark/test_reconcile_sql.py): accumulating,
    the pane's buffer and the records; discarding, the records alone; a pane without the buffer,
    or a Spark SQL aggregation that is not mergeable, leaves the records listed."""
    from eventtime.core.reconcile import CurrentPane, LateInput, SparkMerge, plan_corrections

    hll = eventtime.agg("approx_count_distinct(v)", "hll", mergeable=True)
    pane = CurrentPane("k", Window(0, 1000), 2, {"count": 2, "hll": 2, "hll__buffer": b"buf"})
    late = [LateInput("r1", "k", 100, 5000, {}), LateInput("r2", "k", 200, 5000, {})]
    plan = plan_corrections(EngineConfig(Tumbling(1000), (count(), hll)), [pane], late)
    assert [(c.index, c.values) for c in plan.corrections] == [(3, {"count": 4, "hll": SparkMerge((b"buf",), ("r1", "r2"))})]
    discarding = EngineConfig(Tumbling(1000), (count(), hll), accumulation="discarding")
    assert plan_corrections(discarding, [pane], late).corrections[0].values["hll"] == SparkMerge((), ("r1", "r2"))
    old = CurrentPane("k", Window(0, 1000), 2, {"count": 2, "hll": 2})
    assert {u.reason for u in plan_corrections(EngineConfig(Tumbling(1000), (count(), hll)), [old], late).left} == {NOT_MERGEABLE}
    plain = EngineConfig(Tumbling(1000), (count(), eventtime.agg("approx_count_distinct(v)", "hll")))
    left = plan_corrections(plain, [pane], late).left
    assert len(left) == 2 and "mergeable=True" in left[0].detail and not plan_corrections(plain, [pane], late).corrections
