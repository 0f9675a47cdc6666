"""Benchmark: eventtime's operator against Spark's native windowed aggregation, same input.

The stream is generated once (one parquet file per micro-batch, plus a last "flush" file
whose single row is far in the future so that every window is emitted and purged), then in
one process, alternating, both engines read it with ``maxFilesPerTrigger=1``:

* native: ``withWatermark(et, B + L)`` + ``groupBy(window(et, ...), key).agg(count, sum)``,
  append mode: windows are kept until the lateness has passed, like eventtime's, and records
  behind that watermark are dropped silently;
* eventtime: ``with_event_time`` + ``window_aggregate`` (allowed lateness L, ON_TIME and
  LATE panes, late side output, invalid quarantine, per-partition stats) + ``route``.

Both write through ``foreachBatch`` + ``toArrow()`` into no-op sinks. Wall time is from
``start()`` until the last batch (and the no-data batch after it) is committed.

Workloads: (T) 1-minute tumbling, (S) 5-minute windows sliding by 1 minute; 10k keys, 20
micro-batches, 5 % of the records late within the allowed lateness, 1 % beyond it.

    .venv/bin/python benchmarks/bench_windowing.py               # 5M rows, both workloads
    .venv/bin/python benchmarks/bench_windowing.py --rows 200000 # quick
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

MINUTE = 60_000
B_MS = 10_000  # max out-of-orderness
L_MS = 5 * MINUTE  # allowed lateness
T0 = 1_700_000_000_000 - 1_700_000_000_000 % MINUTE


def generate(path: str, rows: int, batches: int, keys: int, seed: int = 7) -> None:
    """One parquet file per micro-batch; batch i covers event time [T0 + i min, T0 + (i+1) min)."""
    rng = np.random.default_rng(seed)
    per_batch = rows // batches
    os.makedirs(path, exist_ok=True)
    key_names = np.array([f"user{k:05d}" for k in range(keys)], dtype=object)
    for i in range(batches):
        clock = T0 + i * MINUTE
        u = rng.random(per_batch)
        ts = clock + rng.integers(0, MINUTE, per_batch)
        late = u < 0.05  # behind the watermark, window due, within the lateness
        ts[late] = clock - rng.integers(70_000, 4 * MINUTE, late.sum())
        too_late = (u >= 0.05) & (u < 0.06)  # every window expired
        ts[too_late] = clock - rng.integers(11 * MINUTE, 16 * MINUTE, too_late.sum())
        table = pa.table(
            {
                "key": pa.array(key_names[rng.integers(0, keys, per_batch)], pa.string()),
                "ts": pa.array(ts, pa.int64()),
                "amount": pa.array(np.round(rng.random(per_batch) * 100, 2), pa.float64()),
                "part": pa.array(rng.integers(0, 4, per_batch).astype(np.int32), pa.int32()),
                "hb": pa.array(np.zeros(per_batch, dtype=bool), pa.bool_()),
            }
        )
        pq.write_table(table, os.path.join(path, f"batch-{i:05d}.parquet"))
    flush = pa.table(
        {
            "key": pa.array(["__flush__"], pa.string()),
            "ts": pa.array([T0 + (batches + 60) * MINUTE], pa.int64()),
            "amount": pa.array([0.0]),
            "part": pa.array([0], pa.int32()),
            "hb": pa.array([True]),
        }
    )
    pq.write_table(flush, os.path.join(path, f"batch-{batches:05d}.parquet"))


def run_native(spark, data: str, work: str, window: tuple, files: int) -> dict:
    from pyspark.sql import functions as F

    src = spark.readStream.schema("key string, ts long, amount double, part int, hb boolean").option("maxFilesPerTrigger", 1).parquet(data)
    agg = (
        src.withColumn("et", F.timestamp_millis("ts"))
        .withWatermark("et", f"{B_MS + L_MS} milliseconds")
        .groupBy(F.window("et", *window), "key")
        .agg(F.count(F.lit(1)).alias("count"), F.sum("amount").alias("sum_amount"))
    )
    counts = {"rows_out": 0}

    def sink(df, batch_id):
        counts["rows_out"] += df.toArrow().num_rows

    t0 = time.perf_counter()
    query = agg.writeStream.foreachBatch(sink).outputMode("append").option("checkpointLocation", os.path.join(work, "chk-native")).start()
    _drain(query, files - 1)
    wall = time.perf_counter() - t0
    result = _summary(query, wall)
    result.update(counts)
    query.stop()
    return result


def run_eventtime(spark, data: str, work: str, window, files: int, num_buckets: int) -> dict:
    import eventtime

    src = spark.readStream.schema("key string, ts long, amount double, part int, hb boolean").option("maxFilesPerTrigger", 1).parquet(data)
    events = src.transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=B_MS, min_valid="2020-01-01", max_future="3650 days")
    )
    out = events.transform(
        eventtime.window_aggregate(
            keys=["key"], window=window, allowed_lateness=L_MS,
            aggregations=[eventtime.count(), eventtime.sum("amount")],
            partition_col="part", heartbeat_col="hb", num_buckets=num_buckets,
        )
    )
    counts = {"panes": 0, "late": 0, "invalid": 0}

    def panes(table, batch_id, query_id):
        counts["panes"] += table.num_rows

    def records(table, batch_id, query_id):
        kinds = table.column("kind").to_pylist()
        counts["late"] += kinds.count("late")
        counts["invalid"] += kinds.count("invalid")

    t0 = time.perf_counter()
    query = eventtime.route(out, panes=panes, late=records, pipeline="bench").start(checkpoint=os.path.join(work, "chk-eventtime"))
    _drain(query, files - 1)
    wall = time.perf_counter() - t0
    result = _summary(query, wall)
    result.update(counts)
    if os.environ.get("BENCH_VERBOSE"):
        for p in query.recentProgress:
            ops = p.get("stateOperators") or [{}]
            print(p["batchId"], p["numInputRows"], p["durationMs"].get("addBatch"), json.dumps({k: v for k, v in ops[0].items() if k not in ("operatorName",)}))
    query.stop()
    return result


def _drain(query, last_offset: int) -> None:
    while True:
        query.processAllAvailable()
        if query.exception() is not None:
            raise RuntimeError(query.exception())
        progress = query.lastProgress or {}
        sources = progress.get("sources") or [{}]
        end = sources[0].get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if end and int(end["logOffset"]) >= last_offset:
            break
        time.sleep(0.1)
    query.processAllAvailable()  # the no-data batch after the flush file


def _summary(query, wall: float) -> dict:
    progress = query.recentProgress
    last = query.lastProgress or {}
    state_rows = sum(op.get("numRowsTotal", 0) for op in last.get("stateOperators", []))
    add_batch = sum(p["durationMs"].get("addBatch", 0) for p in progress) / 1000
    return {
        "wall_s": round(wall, 2),
        "batches": len(progress),
        "rows_in": sum(p["numInputRows"] for p in progress),
        "add_batch_s": round(add_batch, 2),
        "state_rows_after_drain": state_rows,
        "dropped_by_watermark": sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", [])),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--workloads", default="T,S", help="comma-separated: T (tumbling), S (sliding)")
    parser.add_argument("--repeat", type=int, default=1, help="alternating runs per engine and workload")
    parser.add_argument("--num-buckets", type=int, default=None, help="eventtime hash buckets (default: the engine's)")
    parser.add_argument("--shuffle-partitions", type=int, default=4)
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--engines", default="native,eventtime")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value (both engines)")
    args = parser.parse_args(argv)

    import eventtime
    from eventtime.spark import local_session
    from eventtime.spark.transforms import DEFAULT_NUM_BUCKETS

    buckets = args.num_buckets or DEFAULT_NUM_BUCKETS
    work = args.workdir or tempfile.mkdtemp(prefix="eventtime-bench-")
    data = os.path.join(work, "data")
    t = time.perf_counter()
    generate(data, args.rows, args.batches, args.keys)
    print(f"generated {args.rows} rows in {args.batches} files (+1 flush file) in {time.perf_counter() - t:.1f}s: {data}", flush=True)
    spark = local_session(
        shuffle_partitions=args.shuffle_partitions,
        extra_conf={
            "spark.driver.memory": "6g",
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            **dict(kv.split("=", 1) for kv in args.conf),
        },
    )
    files = args.batches + 1
    workloads = {
        "T": (("1 minute",), eventtime.Tumbling("1 minute")),
        "S": (("5 minutes", "1 minute"), eventtime.Sliding("5 minutes", "1 minute")),
    }
    results = []
    for name in args.workloads.split(","):
        native_window, et_window = workloads[name]
        for rep in range(args.repeat):
            for engine in args.engines.split(","):
                run_dir = os.path.join(work, f"{name}-{engine}-{rep}")
                shutil.rmtree(run_dir, ignore_errors=True)
                os.makedirs(run_dir)
                if engine == "native":
                    res = run_native(spark, data, run_dir, native_window, files)
                else:
                    res = run_eventtime(spark, data, run_dir, et_window, files, buckets)
                res.update(workload=name, engine=engine, rep=rep)
                results.append(res)
                print(json.dumps(res), flush=True)
    print()
    print(f"rows={args.rows} keys={args.keys} batches={args.batches} buckets={buckets} shuffle_partitions={args.shuffle_partitions}")
    for name in args.workloads.split(","):
        walls = {e: [r["wall_s"] for r in results if r["workload"] == name and r["engine"] == e] for e in args.engines.split(",")}
        line = "  ".join(f"{e}={min(v):.1f}s (runs {v})" for e, v in walls.items() if v)
        ratio = ""
        if walls.get("native") and walls.get("eventtime"):
            ratio = f"  ratio eventtime/native = {min(walls['eventtime']) / min(walls['native']):.2f}"
        print(f"[{name}] {line}{ratio}")
    spark.stop()
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
