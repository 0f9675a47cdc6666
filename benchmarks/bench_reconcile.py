"""Benchmark: ``eventtime late reconcile`` of N too-late records against its peer, the nightly
batch job teams run instead: the same transforms over all the data as one bounded run.

The input: ``--rows`` records of ``--keys`` users over one day, of which ``--late`` arrive too
late. The results table holds the bounded run of the on-time records (what the stream wrote);
the late table holds the too-late records as ``DeltaLateSink`` stores them (payload, record id,
the pipeline recorded). Then, in one process:

* ``reconcile``: the late records merged into the results table (one Delta commit);
* ``batch``: the same transforms over every record as one bounded run into a table of its own
  (``route(...).start(end_of_input=True)``), what a nightly job recomputes.

It checks that the reconciled results equal the batch job's, window by window, and prints both
times and their ratio (min and median over ``--repeat`` runs, alternating, each on fresh copies).

    .venv/bin/python benchmarks/bench_reconcile.py                   # 5 M rows, 1 M late: ~10 min
    .venv/bin/python benchmarks/bench_reconcile.py --rows 200000 --late 50000 --repeat 1
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import statistics
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

DAY0_MS = 1_714_521_600_000  # 2024-05-01T00:00Z
DAY_MS = 86_400_000
PIPELINE = "bench"


def _records(n: int, keys: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"user_id": pa.array([f"u{k:05d}" for k in rng.integers(0, keys, n)]),
                     "ts": pa.array(DAY0_MS + rng.integers(0, DAY_MS, n), pa.int64()),
                     "amount": pa.array(np.round(rng.random(n) * 100, 2))})


def _pipeline(source, out: str):
    import eventtime

    events = source.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01", max_future="3650 days"))
    result = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"),
        aggregations=[eventtime.count(), eventtime.sum("amount", name="amount"), eventtime.max("amount", name="hi"),
                      eventtime.mean("amount", name="avg"), eventtime.last("amount", name="last")]))
    return eventtime.route(result, panes=eventtime.DeltaResultsSink(os.path.join(out, "results"), pipeline=PIPELINE),
                           late=eventtime.DeltaLateSink(os.path.join(out, "late"), pipeline=PIPELINE, delays=False),
                           pipeline=PIPELINE, progress=False)


def _late_rows(late: pa.Table) -> pa.Table:
    """The too-late records as the router hands them to DeltaLateSink."""
    n = late.num_rows
    users, ts, amounts = late.column("user_id").to_pylist(), late.column("ts").to_pylist(), late.column("amount").to_pylist()
    utc = dt.timezone.utc
    return pa.table({
        "kind": ["late"] * n, "reason": ["too_late"] * n,
        "key": [json.dumps({"user_id": u}, separators=(",", ":")) for u in users],
        "event_time": pa.array([dt.datetime.fromtimestamp(t / 1000, utc) for t in ts], pa.timestamp("us", tz="UTC")),
        "watermark": pa.array([dt.datetime.fromtimestamp((DAY0_MS + DAY_MS) / 1000, utc)] * n, pa.timestamp("us", tz="UTC")),
        "payload": [json.dumps({"user_id": u, "ts": t, "amount": a}) for u, t, a in zip(users, ts, amounts)],
        "user_id": users,
    })


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--late", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    import eventtime
    from eventtime.cli.demo_reconcile import compare_with_truth
    from eventtime.sinks import DeltaLateSink, latest_panes
    from eventtime.sinks.tables import record_pipeline, recorded_pipelines

    work = tempfile.mkdtemp(prefix="eventtime-bench-reconcile-")
    spark = eventtime.local_session(app_name="bench-reconcile", shuffle_partitions=4,
                                    extra_conf={"spark.driver.memory": "8g"})  # a bounded run's panes reach the driver
    try:
        data = _records(args.rows, args.keys, args.seed)
        on_time, late = data.slice(0, args.rows - args.late), data.slice(args.rows - args.late)
        pq.write_table(on_time, os.path.join(work, "on_time.parquet"))
        pq.write_table(data, os.path.join(work, "all.parquet"))
        started = time.perf_counter()
        base = os.path.join(work, "base")
        _pipeline(spark.read.parquet(os.path.join(work, "on_time.parquet")), base).start(end_of_input=True)
        sink = DeltaLateSink(os.path.join(base, "late"), pipeline=PIPELINE, delays=False, engine="rust")
        sink(_late_rows(late), 0, "stream")
        record_pipeline(sink.path, PIPELINE, recorded_pipelines(os.path.join(base, "results"))[PIPELINE])
        print(f"setup: {args.rows:,} records ({args.late:,} too late), {args.keys:,} keys, 1-minute windows over a "
              f"day: {time.perf_counter() - started:.1f} s")
        times: dict[str, list[float]] = {"reconcile": [], "batch": []}
        for i in range(args.repeat):
            run = os.path.join(work, f"run{i}")
            shutil.copytree(base, run)
            started = time.perf_counter()
            report = eventtime.reconcile(os.path.join(run, "late"), os.path.join(run, "results"))
            times["reconcile"].append(time.perf_counter() - started)
            assert report.written and report.reconciled == args.late, report
            started = time.perf_counter()
            _pipeline(spark.read.parquet(os.path.join(work, "all.parquet")), os.path.join(run, "batch")).start(
                end_of_input=True)
            times["batch"].append(time.perf_counter() - started)
            compared = compare_with_truth(latest_panes(os.path.join(run, "results")),
                                          latest_panes(os.path.join(run, "batch", "results")),
                                          ["user_id"], ["count", "amount", "hi", "avg", "avg__n", "last", "last__ms"])
            assert compared["different"] == 0, compared
            print(f"  run {i}: reconcile {times['reconcile'][-1]:.1f} s ({report.corrections:,} CORRECTION panes), "
                  f"batch job {times['batch'][-1]:.1f} s; {compared['windows']:,} windows compared, 0 different")
        r, b = times["reconcile"], times["batch"]
        print(f"reconcile {args.late:,} late records: min {min(r):.1f} s, median {statistics.median(r):.1f} s "
              f"({args.late / statistics.median(r):,.0f} records/s)")
        print(f"the batch job over all {args.rows:,} records: min {min(b):.1f} s, median {statistics.median(b):.1f} s")
        print(f"ratio reconcile / batch job: min {min(r) / min(b):.2f}, median {statistics.median(r) / statistics.median(b):.2f}")
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
