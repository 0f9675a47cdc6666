"""``eventtime late advise`` as a user meets it: real Delta tables written by the project's sinks
from runs of the reference model (the delays the engine records, the late records it writes),
then the command's whole text. The advice is checked by running the model again with it."""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json

import pyarrow as pa
import pytest

from eventtime import EngineConfig, Tumbling
from eventtime.cli import late as cli_late
from eventtime.core.reference import Record, ReferenceEngine
from eventtime.query.advise import delay_bin
from eventtime.sinks import DeltaDelaySink, DeltaLateSink, DeltaResultsSink

TS = pa.timestamp("ms", tz="UTC")
T0 = int(dt.datetime(2024, 5, 1, 8, tzinfo=dt.timezone.utc).timestamp() * 1000)
LAG_MS = 11_460_000  # 3 h 11 min
DAY = 86_400_000


def run_model(batches, config):
    """Per batch: the delays (per partition and bin) behind the running maximum of the earlier
    batches, as the engine's map side counts them, and the model's result."""
    engine = ReferenceEngine(config, unit="ms")
    running_max, out = None, []
    for records in batches:
        delays: dict = {}
        if running_max is not None:
            for r in records:
                key = (r.partition, delay_bin(running_max - r.ts))
                delays[key] = delays.get(key, 0) + 1
        out.append((delays, engine.process_batch(records, now_ms=T0 + 30 * DAY)))
        top = max(r.ts for r in records)
        running_max = top if running_max is None else max(running_max, top)
    return out


def late_count(batches, config, skip_partition=None):
    return sum(1 for _, result in run_model(batches, config) for r in result.late if r.record.partition != skip_partition)


def write_job(root, batches, config, pipeline="sensors", delays=None, query="q"):
    """The tables a job writes: late (DeltaLateSink), its delays (default: ``<late>_delays``)
    and the results; returns the late table's path."""
    late_path = str(root / "late")
    late_sink = DeltaLateSink(late_path, pipeline=pipeline)
    delay_sink = DeltaDelaySink(delays or late_path + "_delays", pipeline=pipeline)
    results = DeltaResultsSink(str(root / "results"), pipeline=pipeline)
    b, lateness = config.max_out_of_orderness_ms, config.allowed_lateness_ms
    for i, (delays_of_batch, result) in enumerate(run_model(batches, config)):
        if delays_of_batch:
            keys = sorted(delays_of_batch)
            delay_sink(pa.table({
                "partition": [p for p, _ in keys], "delay_bin": pa.array([x for _, x in keys], pa.int32()),
                "records": pa.array([delays_of_batch[k] for k in keys], pa.int64()),
                "max_out_of_orderness_ms": pa.array([b] * len(keys), pa.int64()),
                "allowed_lateness_ms": pa.array([lateness] * len(keys), pa.int64())}), i, query)
        if result.late:
            rows = result.late
            late_sink(pa.table({
                "kind": ["late"] * len(rows), "reason": [r.reason for r in rows],
                "key": [json.dumps({"device": r.record.key}) for r in rows],
                "event_time": pa.array([r.ts_ms for r in rows], TS),
                "watermark": pa.array([r.watermark_ms for r in rows], TS),
                "lateness_ms": pa.array([r.watermark_ms - r.ts_ms for r in rows], pa.int64()),
                "window_start": pa.array([min(w.start_ms for w in r.windows) for r in rows], TS),
                "window_end": pa.array([max(w.end_ms for w in r.windows) for r in rows], TS),
                "partition": [r.record.partition for r in rows]}), i, query)
        if result.panes:
            panes = result.panes
            results(pa.table({
                "device": [p.key for p in panes], "window_start": pa.array([p.window.start_ms for p in panes], TS),
                "window_end": pa.array([p.window.end_ms for p in panes], TS), "pane_timing": [p.timing for p in panes],
                "pane_index": pa.array([p.index for p in panes], pa.int64()), "is_final": [p.is_final for p in panes],
                "count": pa.array([p.values["count"] for p in panes], pa.int64())}), i, query)
    return late_path


def advise(*argv):
    out, err = io.StringIO(), io.StringIO()
    parser = argparse.ArgumentParser(prog="eventtime")
    cli_late.register(parser.add_subparsers(dest="command"), hard_exit=False)
    code = cli_late.run(parser.parse_args(["late", "advise", *argv]), out=out, err=err)
    return code, out.getvalue(), err.getvalue()


# -- the trial: partition 3 is 3 h 11 min behind, the others on time ---------------------------

TRIAL = EngineConfig(Tumbling("1 minute"), max_out_of_orderness_ms="10 seconds", allowed_lateness_ms="1 minute")


def trial_batches():
    """20 one-minute batches: partitions 0-2 on time (every fifth record 3 s back), two records
    of partition 1 2.5 min behind, partition 3 3 h 11 min behind throughout."""
    batches = []
    for i in range(20):
        base = T0 + i * 60_000
        records = [Record(f"d{j % 4}", base + j * 2000 - (3000 if j % 5 == 0 else 0), partition=p)
                   for p in "012" for j in range(30)]
        if i in (10, 15):
            records.append(Record("d9", base - 150_000, partition="1"))
        records += [Record(f"d{j % 4}", base - LAG_MS + j * 2000, partition="3") for j in range(30)]
        batches.append(records)
    return batches


@pytest.fixture(scope="module")
def trial(tmp_path_factory):
    root = tmp_path_factory.mktemp("trial")
    return root, write_job(root, trial_batches(), TRIAL)


def test_the_lagging_partition_is_named_with_what_the_others_need(trial):
    root, late = trial
    code, out, err = advise("--table", late, "--results", str(root / "results"))
    assert (code, err) == (0, "")
    assert out.splitlines() == [
        "lateness advice for the global watermark (W = max event time - B)",
        f"  delays: 2,282 valid records in 4 partitions behind the running maximum event time ({late}_delays)",
        f"  today: B = 10 s, L = 1 min; 572 records were late ({late})",
        "  late records by partition: 3: 570 (99.65 %, delays up to 3 h 12 min); 1: 2 (0.34 %, up to 2 min 44 s)",
        "  99 %, 99.9 %, 99.99 %  B = 10 s, L = 3 h 10 min: 100 % on time; keeps all 572 late records on time; "
        "each window held 3 h 9 min longer than today (81 windows: 10 d 15 h of window-time more in all)",
        "  partition 3 lags: it holds 99.65 % of the late records (80 % or more names one partition)",
        "    without it, the 3 other partitions need:",
        "      99 %             B = 10 s, L = 0 ms: at least 99.88 % on time (at most 2 of 1,712 records late); "
        "the 2 late records stay late; each window held 1 min less than today "
        "(81 windows: 1 h 21 min of window-time less in all)",
        "      99.9 %, 99.99 %  B = 10 s, L = 1 min 49 s: 100 % on time; keeps both late records on time; "
        "each window held 49 s longer than today (81 windows: 1 h 6 min of window-time more in all)",
        '    or judge each partition by its own progress: window_aggregate(..., partition_col=..., '
        'watermark="per_partition") (docs/semantics.md, "Per-partition watermarks"); every window then waits for '
        "the slowest active partition",
    ]
    assert len(set(out.splitlines())) == len(out.splitlines()) and "held -" not in out and " ms)" not in out
    # the model agrees: 572 late today, none with L = 3 h 10 min, and with 1 min 49 s none but partition 3's
    assert late_count(trial_batches(), TRIAL) == 572
    assert late_count(trial_batches(), EngineConfig(Tumbling(60_000), max_out_of_orderness_ms=10_000,
                                                     allowed_lateness_ms="3 hours 10 minutes")) == 0
    again = EngineConfig(Tumbling(60_000), max_out_of_orderness_ms=10_000, allowed_lateness_ms="1 minute 49 seconds")
    assert late_count(trial_batches(), again, skip_partition="3") == 0
    assert late_count(trial_batches(), again) == 570


def test_the_json_keeps_milliseconds(trial):
    root, late = trial
    code, out, _ = advise("--table", late, "--format", "json", "--target", "0.999")
    data = json.loads(out)
    assert code == 0 and data["late_records"] == data["late_records_in_table"] == 572
    assert (data["current_b_ms"], data["current_l_ms"], data["late_exact"]) == (10_000, 60_000, True)
    [choice] = data["choices"]
    assert (choice["targets"], choice["b_ms"], choice["l_ms"], choice["late_kept"], choice["late_still"]) == (
        [0.999], 10_000, 11_400_000, 572, 0)
    assert choice["extra_hold_ms"] == 11_340_000 and choice["extra_window_ms"] is None
    assert [(d["partition"], d["records"]) for d in data["drivers"]] == [("3", 570), ("1", 2)]
    assert data["lagging"]["partition"] == "3" and data["lagging"]["others"][0]["l_ms"] == 109_000


# -- a daily job: records hours behind are on time unless their day has closed ------------------

DAILY = EngineConfig(Tumbling("1 day"), max_out_of_orderness_ms="1 minute", allowed_lateness_ms=0)
MIDNIGHT = T0 - 8 * 3_600_000


def daily_batches():
    """Two days in 2-hour batches; partition 1 sends five records 5 h behind in each."""
    batches = []
    for i in range(24):
        base = MIDNIGHT + i * 7_200_000
        records = [Record(f"d{j % 3}", base + j * 240_000 - (60_000 if j % 7 == 0 else 0), partition=p)
                   for p in "01" for j in range(30)]
        records += [Record("d5", base - 5 * 3_600_000 + k * 600_000, partition="1") for k in range(5)]
        batches.append(records)
    return batches


def test_a_daily_job_counts_the_records_that_were_late_and_what_each_choice_keeps(tmp_path):
    late = write_job(tmp_path, daily_batches(), DAILY)
    today = late_count(daily_batches(), DAILY)
    code, out, _ = advise("--table", late, "--format", "json", "--target", "0.99", "--target", "0.999",
                          "--target", "1")
    data = json.loads(out)
    # far fewer were late than the histogram has records at least B + L behind (the trial's 4,423 vs 484)
    behind = sum(h["records"] for h in data["histogram"] if h["low_ms"] >= 60_000)
    assert (data["late_records"], behind) == (today, 115) and 0 < today < behind
    assert [c["targets"] for c in data["choices"]] == [[0.99], [0.999, 1.0]]
    for c in data["choices"]:  # exact: the model with the advised L leaves these late
        config = EngineConfig(Tumbling("1 day"), max_out_of_orderness_ms="1 minute", allowed_lateness_ms=c["l_ms"])
        assert late_count(daily_batches(), config) == c["late_still"] == c["still_late"] == today - c["late_kept"]
    code, out, _ = advise("--table", late, "--results", str(tmp_path / "results"))
    assert out.splitlines()[2:] == [
        f"  today: B = 1 min, L = 0 ms; {today} records were late ({late})",
        "  late records by partition: 1: 20 (100 %, delays up to 5 h 15 min)",
        "  99 %             B = 1 min, L = 1 h 56 min: 99.33 % on time; keeps 10 of the 20 late records on time, "
        "10 still late; each window held 1 h 56 min longer than today (6 windows: 11 h 36 min of window-time more in all)",
        "  99.9 %, 99.99 %  B = 1 min, L = 3 h 56 min: 100 % on time; keeps all 20 late records on time; "
        "each window held 3 h 56 min longer than today (6 windows: 23 h 36 min of window-time more in all)",
        "  partition 1 lags: it holds 100 % of the late records (80 % or more names one partition)",
        "    without it, the 1 other partition needs:",
        "      99 %, 99.9 %, 99.99 %  B = 1 min, L = 0 ms (as today): 100 % on time; windows held as long as today",
        '    or judge each partition by its own progress: window_aggregate(..., partition_col=..., '
        'watermark="per_partition") (docs/semantics.md, "Per-partition watermarks"); every window then waits for '
        "the slowest active partition",
    ]


# -- where the delay table is --------------------------------------------------------------------


def small_job(root, delays=None):
    batches = [[Record("a", T0 + j * 1000, partition="0") for j in range(10)],
               [Record("a", T0 + 10_000 + j * 1000, partition="0") for j in range(10)] + [Record("a", T0 - 600_000, partition="0")]]
    return write_job(root, batches, TRIAL, delays=delays)


def test_the_delay_table_is_found_beside_the_late_table_or_named_when_missing(tmp_path):
    new = small_job(tmp_path / "new")  # DeltaLateSink's default: <late>_delays
    code, out, _ = advise("--table", new)
    assert code == 0 and f"({new}_delays)" in out.splitlines()[1] and "1 record was late" in out
    old = small_job(tmp_path / "old", delays=str(tmp_path / "old" / "delays"))  # route(..., delays=DeltaDelaySink(...))
    code, out, _ = advise("--table", old + "/")
    assert code == 0 and f"({tmp_path / 'old' / 'delays'})" in out.splitlines()[1]
    bare = tmp_path / "bare"
    bare.mkdir()
    DeltaLateSink(str(bare / "late"), pipeline="p")(pa.table({"kind": ["late"], "reason": ["too_late"]}), 0, "q")
    code, out, err = advise("--table", str(bare / "late"))
    assert (code, out) == (2, "")
    assert err == (f"eventtime late advise: error: no delay table at {str(bare / 'late_delays')!r} or "
                   f"{str(bare / 'delays')!r}: DeltaLateSink(path) writes one at <path>_delays by default "
                   "(older jobs: route(..., delays=DeltaDelaySink(path))); or give --stats PATH\n")
    code, _, err = advise("--table", new, "--stats", new)  # the late table given as the delay table
    assert code == 2 and "is not a delay table: it has no column(s) delay_bin, records" in err


def test_without_a_late_table_the_advice_says_what_it_lacks(tmp_path):
    late = small_job(tmp_path)
    code, out, _ = advise("--table", str(tmp_path / "elsewhere"), "--stats", late + "_delays")
    assert code == 0
    assert out.splitlines() == [  # from the delays alone: every delay, the record 10 min behind too
        "lateness advice for the global watermark (W = max event time - B)",
        f"  delays: 11 valid records behind the running maximum event time ({late}_delays)",
        "  today: B = 10 s, L = 1 min",
        "  99 %, 99.9 %, 99.99 %  B = 10 s, L = 10 min 46 s: 100 % on time; each window held 9 min 46 s longer than today",
        f"  no late table at {str(tmp_path / 'elsewhere')!r}: the late records' counts and partitions need it",
    ]
    code, out, _ = advise("--table", late)  # with it: what the late record needed exactly
    assert out.splitlines()[2:] == [
        f"  today: B = 10 s, L = 1 min; 1 record was late ({late})",
        "  99 %, 99.9 %, 99.99 %  B = 10 s, L = 9 min: 100 % on time; keeps the late record on time; "
        "each window held 8 min longer than today",
    ]


def test_late_records_from_before_the_delay_histograms_are_counted_not_shared(tmp_path):
    late = small_job(tmp_path)
    DeltaLateSink(late, pipeline="sensors")(pa.table({
        "kind": ["late"], "reason": ["too_late"], "event_time": pa.array([T0 - DAY], TS),
        "watermark": pa.array([T0], TS), "lateness_ms": pa.array([DAY], pa.int64()),
        "window_end": pa.array([T0 - DAY + 60_000], TS), "partition": ["0"]}), 7, "an older query")
    code, out, _ = advise("--table", late, "--target", "0.5")
    lines = out.splitlines()
    assert code == 0 and lines[2].startswith("  today: B = 10 s, L = 1 min; 2 records were late")
    assert lines[3] == "  (1 of them in batches before the delay histograms began: left out of the shares)"


def test_pipeline_keeps_one_pipelines_rows_and_today_is_the_latest_batch(tmp_path):
    late = small_job(tmp_path)
    DeltaLateSink(late, pipeline="other")(pa.table({
        "kind": ["late"] * 3, "reason": ["too_late"] * 3, "event_time": pa.array([T0] * 3, TS),
        "watermark": pa.array([T0 + DAY] * 3, TS), "window_end": pa.array([T0 + 60_000] * 3, TS),
        "partition": ["0"] * 3}), 0, "q2")
    DeltaDelaySink(late + "_delays", pipeline="other")(pa.table({
        "partition": ["0"], "delay_bin": pa.array([delay_bin(DAY)], pa.int32()), "records": pa.array([3], pa.int64()),
        "max_out_of_orderness_ms": pa.array([0], pa.int64()), "allowed_lateness_ms": pa.array([0], pa.int64())}), 0, "q2")
    code, out, _ = advise("--table", late, "--pipeline", "sensors")
    assert code == 0 and out.splitlines()[1:3] == [
        f"  delays: 11 valid records behind the running maximum event time ({late}_delays)",
        f"  today: B = 10 s, L = 1 min; 1 record was late ({late})"]
    code, out, _ = advise("--table", late)  # both pipelines; B and L of the latest batch written (other's)
    assert code == 0 and out.splitlines()[1:3] == [
        f"  delays: 14 valid records behind the running maximum event time ({late}_delays)",
        f"  today: B = 0 ms, L = 0 ms; 4 records were late ({late})"]
