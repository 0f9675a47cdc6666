"""Benchmark: eventtime's operator against Spark's native windowed aggregation, same input.

Each stream is generated once (one parquet file per micro-batch, plus a last "flush" file
whose rows, a heartbeat per partition, are far in the future so that every window is emitted and purged), then in
one process, alternating, both engines read it with ``maxFilesPerTrigger=1``:

* native: ``withWatermark(et, B + L)`` + ``groupBy(window(et, ...), key).agg(count, sum)``,
  append mode: windows are kept until the lateness has passed, like eventtime's, and records
  behind that watermark are dropped silently; run at ``spark.sql.shuffle.partitions`` 2 and
  4, and the better of the two is the peer;
* eventtime: ``with_event_time`` + ``window_aggregate`` (allowed lateness L, ON_TIME and
  LATE panes, late side output with full payloads, invalid quarantine, per-partition
  statistics) + ``route``.

Both write through ``foreachBatch`` + ``toArrow()``. Wall time is from ``start()`` until the
last batch (and the no-data batch after it) is committed.

Suites:

* ``throughput``: (T) 1-minute tumbling, (S) 5-minute windows sliding by 1 minute; 10k keys,
  20 micro-batches, 5 % of the records late within the allowed lateness, 1 % beyond it.
  Reports min and median wall time per engine, their ratios, rows per second per core and
  the pane latency (from the end of the batch whose data moved the watermark past a
  window's end to the pane reaching the sink). Each round also runs the passthrough floor:
  the same streaming read, each micro-batch counted and summed, nothing kept (what reading the
  data costs any engine); both engines' medians are printed as multiples of it. And Apache
  Flink 2.3 SQL (window table-valued functions, parallelism 2, a blackhole sink; flink_sql.py)
  on the same rows as CSV, one JVM per run, its start-up included and its fixed cost (the same
  job over 1,000 rows) printed beside it. ``--workloads SE`` adds sessions per key with
  a 30 s gap (native: ``session_window``); ``--workloads PT`` the T workload with
  per-partition watermarks (4 partitions, 1-minute idle timeout) beside eventtime's global
  watermark and native; neither is in the default run.
* ``scale``: 1M keys, daily windows in UTC+8, 60 batches of 50k rows (all in one local
  day, so the state only grows): time and checkpoint bytes written per batch, first 10
  batches against the last 10. Both engines run with a 128 MB RocksDB block cache per state
  store (Spark's default of 8 MB is smaller than this state; see ``main``).
* ``tiny``: 1k rows per batch, 40 batches: median batch time, ``--repeat`` runs per engine, alternating.

    .venv/bin/python benchmarks/bench_windowing.py                      # everything (~25 min)
    .venv/bin/python benchmarks/bench_windowing.py --suites throughput --rows 500000 --repeat 1
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

MINUTE = 60_000
DAY = 24 * 60 * MINUTE
B_MS = 10_000  # max out-of-orderness
L_MS = 5 * MINUTE  # allowed lateness
T0 = 1_700_000_000_000 - 1_700_000_000_000 % MINUTE
SCHEMA = "key string, ts long, amount double, part int, hb boolean"
CORES = os.cpu_count() or 1
# What the suites measured, by workload or suite (written by --json for bench_targets.py)
RESULTS: dict[str, dict] = {}


def generate(path: str, rows: int, batches: int, keys: int, step_ms: int = MINUTE, late: bool = True, seed: int = 7,
             files_per_batch: int = 1) -> None:
    """``files_per_batch`` parquet files per micro-batch (its rows split by ``part`` modulo that
    number, as a source's partitions would be); batch i covers event time [T0 + i step, T0 + (i+1) step)."""
    rng = np.random.default_rng(seed)
    per_batch = rows // batches
    os.makedirs(path, exist_ok=True)
    key_names = np.array([f"user{k:07d}" for k in range(keys)], dtype=object)
    for i in range(batches):
        clock = T0 + i * step_ms
        u = rng.random(per_batch)
        ts = clock + rng.integers(0, step_ms, per_batch)
        if late:
            behind = u < 0.05  # behind the watermark, window due, within the lateness
            ts[behind] = clock - rng.integers(70_000, 4 * MINUTE, behind.sum())
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
        if files_per_batch == 1:
            pq.write_table(table, os.path.join(path, f"batch-{i:05d}.parquet"))
            continue
        group = pa.array(table.column("part").to_numpy() % files_per_batch)
        for j in range(files_per_batch):
            name = os.path.join(path, f"batch-{i:05d}-{j}.parquet")
            pq.write_table(table.filter(pc.equal(group, j)), name)
            # the file source takes files in modification-time order
            stamp = 1_000_000_000 * (1_700_000_000 + i * files_per_batch + j)
            os.utime(name, ns=(stamp, stamp))
    # a heartbeat on each of the 4 partitions (per-partition watermarks move with the slowest one)
    flush = pa.table(
        {
            "key": pa.array(["__flush__"] * 4, pa.string()),
            "ts": pa.array([T0 + batches * step_ms + 3 * DAY] * 4, pa.int64()),
            "amount": pa.array([0.0] * 4),
            "part": pa.array(range(4), pa.int32()),
            "hb": pa.array([True] * 4),
        }
    )
    pq.write_table(flush, os.path.join(path, f"batch-{batches:05d}.parquet"))
    if files_per_batch > 1:
        stamp = 1_000_000_000 * (1_700_000_000 + batches * files_per_batch)
        os.utime(os.path.join(path, f"batch-{batches:05d}.parquet"), ns=(stamp, stamp))


def _dir_bytes(path: str) -> int:
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


class _Probe:
    """What the sinks see: per batch, the wall clock, the checkpoint size and the panes."""

    def __init__(self, checkpoint: str, measure_bytes: bool) -> None:
        self.checkpoint, self.measure_bytes = checkpoint, measure_bytes
        self.bytes: dict[int, int] = {}
        self.pane_ends: dict[int, tuple[float, list]] = {}  # batch -> (time, window_end ms list)

    def batch(self, batch_id: int, window_ends) -> None:
        now = time.time()
        if self.measure_bytes:
            self.bytes[batch_id] = _dir_bytes(self.checkpoint)
        if len(window_ends):
            self.pane_ends[batch_id] = (now, window_ends)


def _read(spark, data: str, files_per_batch: int, source=None):
    """The stream both engines read: the parquet files one (or ``files_per_batch``) per
    micro-batch, or ``source(spark)`` (bench_kafka.py: a Kafka topic)."""
    return source(spark) if source else spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", files_per_batch).parquet(data)


def run_native(spark, data: str, work: str, window: tuple, files: int, measure_bytes: bool = False, files_per_batch: int = 1,
               source=None) -> dict:
    from pyspark.sql import functions as F

    checkpoint = os.path.join(work, "chk")
    probe = _Probe(checkpoint, measure_bytes)
    src = _read(spark, data, files_per_batch, source)
    agg = (
        src.withColumn("et", F.timestamp_millis("ts"))
        .withWatermark("et", f"{B_MS + L_MS} milliseconds")
        .groupBy(F.session_window("et", window[1]) if window[0] == "session" else F.window("et", *window), "key")
        .agg(F.count(F.lit(1)).alias("count"), F.sum("amount").alias("sum_amount"))
        .select(F.unix_millis(F.col("session_window.end" if window[0] == "session" else "window.end")).alias("window_end"),
                "key", "count", "sum_amount")
    )
    counts = {"rows_out": 0}

    def sink(df, batch_id):
        table = df.toArrow()
        counts["rows_out"] += table.num_rows
        probe.batch(batch_id, pc.unique(table.column("window_end")).to_pylist())

    return _timed(lambda: agg.writeStream.foreachBatch(sink).outputMode("append").option("checkpointLocation", checkpoint)
                  .start(), files, probe, counts)


def run_eventtime(spark, data: str, work: str, window, files: int, measure_bytes: bool = False, files_per_batch: int = 1,
                  source=None) -> dict:
    """``window``: a window, or ``(window, watermark_options)`` (e.g. per-partition watermarks)."""
    import eventtime

    window, watermark = window if isinstance(window, tuple) else (window, {})

    checkpoint = os.path.join(work, "chk")
    probe = _Probe(checkpoint, measure_bytes)
    src = _read(spark, data, files_per_batch, source)
    events = src.transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=B_MS, min_valid="2020-01-01", max_future="3650 days")
    )
    out = events.transform(
        eventtime.window_aggregate(
            keys=["key"], window=window, allowed_lateness=L_MS,
            aggregations=[eventtime.count(), eventtime.sum("amount")],
            partition_col="part", heartbeat_col="hb", **watermark,
        )
    )
    counts = {"panes": 0, "late": 0, "invalid": 0, "payload_bytes": 0}

    # Both engines' sinks do the same vectorised work (no Python loop over rows): the
    # benchmark times the engines, not a per-row Python callback.
    def panes(table, batch_id, query_id):
        counts["panes"] += table.num_rows
        on_time = table.filter(pc.equal(table.column("pane_timing"), "ON_TIME")).column("window_end")
        probe.batch(batch_id, pc.divide(pc.unique(on_time).cast(pa.int64()), 1000).to_pylist())

    def records(table, batch_id, query_id):
        kind = table.column("kind")
        counts["late"] += pc.sum(pc.equal(kind, "late")).as_py() or 0
        counts["invalid"] += pc.sum(pc.equal(kind, "invalid")).as_py() or 0
        counts["payload_bytes"] += pc.sum(pc.binary_length(table.column("payload"))).as_py() or 0

    return _timed(lambda: eventtime.route(out, panes=panes, late=records, pipeline="bench").start(checkpoint=checkpoint),
                  files, probe, counts)


def run_floor(spark, data: str, work: str, window, files: int, measure_bytes: bool = False, files_per_batch: int = 1,
              source=None) -> dict:
    """The passthrough floor: the same streaming read of the same files, each micro-batch counted
    and summed (one row to the driver), nothing kept. What any engine spends reading the data."""
    from pyspark.sql import functions as F

    checkpoint = os.path.join(work, "chk")
    probe = _Probe(checkpoint, measure_bytes)
    src = _read(spark, data, files_per_batch, source)
    seen = {"rows_out": 0, "rows_seen": 0}

    def sink(df, batch_id):
        row = df.agg(F.count(F.lit(1)).alias("n"), F.sum("amount").alias("s")).collect()[0]
        seen["rows_out"] += 1
        seen["rows_seen"] += row["n"]
        probe.batch(batch_id, [])

    return _timed(lambda: src.writeStream.foreachBatch(sink).option("checkpointLocation", checkpoint).start(), files, probe, seen)


def _timed(start, files: int, probe: _Probe, counts: dict) -> dict:
    """Starts a query (``start()``), runs it until its last file is committed, and returns its
    wall time and summary with ``counts``."""
    t0 = time.perf_counter()
    query = start()
    _drain(query, files - 1)
    result = _summary(query, time.perf_counter() - t0, probe)
    result.update(counts)
    query.stop()
    return result


def _drain(query, last_offset: int) -> None:
    """Until the source's end offset reaches ``last_offset``: the file source's log offset, or a
    Kafka topic's offsets summed over its partitions."""
    while True:
        query.processAllAvailable()
        if query.exception() is not None:
            raise RuntimeError(query.exception())
        progress = query.lastProgress or {}
        sources = progress.get("sources") or [{}]
        end = sources[0].get("endOffset")
        if isinstance(end, str):
            end = json.loads(end)
        if end and int(end["logOffset"] if "logOffset" in end else sum(sum(p.values()) for p in end.values())) >= last_offset:
            break
        time.sleep(0.1)
    query.processAllAvailable()  # the no-data batch after the flush file


def _epoch_ms(text: str) -> int:
    """A progress timestamp ("2026-11-22T16:40:01.123Z") as epoch ms."""
    import calendar
    from datetime import datetime

    dt = datetime.strptime(text.rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f")
    return calendar.timegm(dt.timetuple()) * 1000 + dt.microsecond // 1000


def _summary(query, wall: float, probe: _Probe) -> dict:
    progress = query.recentProgress
    last = query.lastProgress or {}
    state_rows = sum(op.get("numRowsTotal", 0) for op in last.get("stateOperators", []))
    data_batches = [p for p in progress if p["numInputRows"] > 0]

    def end_of(p) -> float:  # epoch seconds when the batch's trigger finished
        return (_epoch_ms(p["timestamp"]) + p["durationMs"]["triggerExecution"]) / 1000

    # Pane latency: the batch whose data first moved the watermark to >= the window's max
    # timestamp ended at T; the pane reached the sink at S; latency = S - T.
    by_id = {p["batchId"]: p for p in progress}
    watermark_of = {b: _epoch_ms(p["eventTime"]["watermark"]) if p.get("eventTime", {}).get("watermark") else 0 for b, p in by_id.items()}
    latencies = []
    for batch_id, (seen_at, ends) in probe.pane_ends.items():
        for end in set(ends):
            m = end - 1
            movers = [b for b in sorted(by_id) if b + 1 in watermark_of and watermark_of[b + 1] >= m and watermark_of.get(b, 0) < m]
            if movers and movers[0] < batch_id + 1 and movers[0] in by_id:
                latencies.append(seen_at - end_of(by_id[movers[0]]))
    sizes = [probe.bytes[b] for b in sorted(probe.bytes)]
    growth = [b - a for a, b in zip(sizes, sizes[1:])]
    return {
        "wall_s": round(wall, 2),
        "batches": len(progress),
        "rows_in": sum(p["numInputRows"] for p in progress),
        "batch_ms": [p["durationMs"]["triggerExecution"] for p in data_batches],
        "planning_ms": [p["durationMs"].get("queryPlanning", 0) for p in data_batches],
        "state_rows_after_drain": state_rows,
        "dropped_by_watermark": sum(op.get("numRowsDroppedByWatermark", 0) for p in progress for op in p.get("stateOperators", [])),
        "pane_latency_ms_p50": round(statistics.median(latencies) * 1000) if latencies else None,
        "checkpoint_bytes": _dir_bytes(probe.checkpoint),
        "checkpoint_growth_per_batch": growth,
    }


def _last_job_id(spark) -> int:
    """The newest job id in Spark's status store (-1 when none): a run's jobs are the ones after it."""
    jobs = spark.sparkContext._jsc.sc().statusStore().jobsList(None)
    return max((jobs.apply(i).jobId() for i in range(jobs.size())), default=-1)


def _stage_ms(spark, after_job: int, skip: int = 0) -> dict:
    """Median wall time (submission to completion, ms) of the shuffle-map and of the result
    stages of the jobs after ``after_job`` that have both, leaving out the first ``skip`` such
    jobs (as the batch times leave out the warm-up batches): in both engines, a data batch's job
    reads and combines its rows in the first and runs the state operator in the second (its
    tasks' fixed cost included). Read from Spark's status store (a listener's copy, so the run's
    last stages may be missing)."""
    store = spark.sparkContext._jsc.sc().statusStore()
    jobs = store.jobsList(None)
    by_job: list[tuple[int, list]] = []
    for i in range(jobs.size()):
        job = jobs.apply(i)
        ids = [job.stageIds().apply(k) for k in range(job.stageIds().size())]
        if job.jobId() <= after_job or len(ids) != 2:
            continue
        times = []
        for stage_id in sorted(ids):
            try:
                data = store.lastStageAttempt(stage_id)
            except Exception:  # noqa: BLE001 - evicted from the store, or never run (skipped)
                break
            if data.submissionTime().isEmpty() or data.completionTime().isEmpty():
                break
            times.append(data.completionTime().get().getTime() - data.submissionTime().get().getTime())
        if len(times) == 2:
            by_job.append((job.jobId(), times))
    kept = [times for _, times in sorted(by_job)[skip:]]
    return {"map_stage_ms": statistics.median(t[0] for t in kept) if kept else None,
            "state_stage_ms": statistics.median(t[1] for t in kept) if kept else None}


def _set_partitions(spark, n: int) -> None:
    spark.conf.set("spark.sql.shuffle.partitions", str(n))


def _run(engine: str, spark, data: str, work: str, window, files: int, partitions: int, measure_bytes: bool = False,
         files_per_batch: int = 1, source=None) -> dict:
    run_dir = os.path.join(work, f"{engine}-{partitions}-{time.monotonic_ns()}")
    os.makedirs(run_dir)
    _set_partitions(spark, partitions)
    runner = {"native": run_native, "floor": run_floor}.get(engine, run_eventtime)
    compiled = _classes_compiled(spark)
    result = runner(spark, data, run_dir, window, files, measure_bytes, files_per_batch, source)
    result.update(engine=engine, shuffle_partitions=partitions, classes_compiled=_classes_compiled(spark) - compiled)
    shutil.rmtree(run_dir, ignore_errors=True)
    return result


def _classes_compiled(spark) -> int:
    """How many classes Spark's code generator has compiled in this JVM so far (a query whose
    generated code changes every batch compiles in every batch, and loses its JIT profile)."""
    return spark._jvm.org.apache.spark.metrics.source.CodegenMetrics.METRIC_COMPILATION_TIME().getCount()


def _brief(res: dict) -> dict:
    return {k: v for k, v in res.items() if k not in ("batch_ms", "planning_ms", "checkpoint_growth_per_batch")}


def suite_throughput(spark, work: str, args) -> list[str]:
    import eventtime

    data = os.path.join(work, "throughput")
    generate(data, args.rows, args.batches, args.keys, files_per_batch=args.files_per_batch)
    files = args.batches + 1
    flink = None
    if args.flink == "auto":
        from flink_sql import setup

        flink = setup(work, data)
    workloads = {
        "T": (("1 minute",), eventtime.Tumbling("1 minute")),
        "S": (("5 minutes", "1 minute"), eventtime.Sliding("5 minutes", "1 minute")),
        # sessions per key with a 30 s gap (native: session_window); not part of the default run
        "SE": (("session", "30 seconds"), eventtime.Session("30 seconds")),
        # T with per-partition watermarks over the rows' 4 partitions (`part`), a silent one left
        # out after 1 minute; also run with the global watermark in each round (its ratio printed)
        "PT": (("1 minute",), (eventtime.Tumbling("1 minute"), {"watermark": "per_partition", "idle_timeout": "1 minute"})),
    }
    lines = []
    for name in args.workloads.split(","):
        native_window, et_window = workloads[name]
        walls: dict[str, list[float]] = {"native-2": [], "native-4": [], "eventtime": [], "global": [], "floor": [], "flink": []}
        latency: dict[str, list] = {"native": [], "eventtime": [], "global": [], "floor": []}
        rounds = (("native", 2), ("eventtime", args.eventtime_partitions), ("native", 4), ("floor", 2))
        if flink is not None:
            rounds = (*rounds, ("flink", 2))
        if name == "PT":  # eventtime with the global watermark beside it, in every round
            rounds = (*rounds, ("global", args.eventtime_partitions))
        if name == args.workloads.split(",")[0]:  # warm the JVM up (not counted): rounds as the measured ones
            for _ in range(args.warmup):
                for engine, partitions in rounds:
                    if engine != "flink":  # a new JVM each run: nothing to warm
                        _run(engine, spark, data, work, _window_of(engine, native_window, et_window), files, partitions,
                             files_per_batch=args.files_per_batch)
        for rep in range(args.repeat):
            for engine, partitions in rounds:
                if engine == "flink":
                    res = flink.run(FLINK_WORKLOAD[name])
                else:
                    res = _run(engine, spark, data, work, _window_of(engine, native_window, et_window), files, partitions,
                               files_per_batch=args.files_per_batch)
                    latency[engine].append(res["pane_latency_ms_p50"])
                res.update(workload=name, rep=rep)
                print(json.dumps(_brief(res)), flush=True)
                walls[f"native-{partitions}" if engine == "native" else engine].append(res["wall_s"])
        best = min(("native-2", "native-4"), key=lambda k: min(walls[k]))
        native, et = walls[best], walls["eventtime"]
        floor = statistics.median(walls["floor"])
        RESULTS[name] = {
            "eventtime_s": et, "native_s": native, "floor_s": walls["floor"],
            "ratio_min": min(et) / min(native), "ratio_median": statistics.median(et) / statistics.median(native),
            "floor_x": statistics.median(et) / floor, "native_floor_x": statistics.median(native) / floor,
        }
        if walls["global"]:
            RESULTS[name].update(global_s=walls["global"], global_ratio_min=min(et) / min(walls["global"]),
                                 global_ratio_median=statistics.median(et) / statistics.median(walls["global"]))
        lines.append(
            f"[{name}] native ({best}: shuffle partitions {best[-1]}) min {min(native):.1f}s median {statistics.median(native):.1f}s "
            f"(runs {native}; other setting {walls['native-4' if best == 'native-2' else 'native-2']})  "
            f"eventtime min {min(et):.1f}s median {statistics.median(et):.1f}s (runs {et})  "
            f"ratio eventtime/native: min {min(et) / min(native):.2f}, median {statistics.median(et) / statistics.median(native):.2f}  "
            f"rows/s/core: eventtime {args.rows / statistics.median(et) / CORES:,.0f}, native {args.rows / statistics.median(native) / CORES:,.0f}  "
            f"pane latency p50 ms: eventtime {latency['eventtime']}, native {latency['native']}  "
            f"passthrough floor min {min(walls['floor']):.1f}s median {statistics.median(walls['floor']):.1f}s "
            f"(runs {walls['floor']}): eventtime {statistics.median(et) / statistics.median(walls['floor']):.2f}x it, "
            f"native {statistics.median(native) / statistics.median(walls['floor']):.2f}x (medians)"
            + (f"  per-partition / global watermark: min {min(et) / min(walls['global']):.2f}, median "
               f"{statistics.median(et) / statistics.median(walls['global']):.2f} (global runs {walls['global']})"
               if walls["global"] else "")
            + (_flink_line(flink, FLINK_WORKLOAD[name], walls["flink"], et, RESULTS[name]) if walls["flink"] else "")
        )
    return lines


# the Flink SQL job of each workload (per-partition watermarks: Flink's own are per source split)
FLINK_WORKLOAD = {"T": "T", "S": "S", "SE": "SE", "PT": "T"}


def _flink_line(flink, workload: str, walls: list, et: list, result: dict) -> str:
    fixed = min(flink.run(workload, tiny=True)["wall_s"] for _ in range(2))
    median = statistics.median(walls)
    result.update(flink_s=walls, flink_fixed_s=fixed, flink_ratio=statistics.median(et) / median,
                  flink_net_ratio=statistics.median(et) / max(median - fixed, 0.01))
    return (f"  Flink SQL (its JVM start-up included) min {min(walls):.1f}s median {median:.1f}s (runs {walls}); its "
            f"fixed cost (the job over 1,000 rows) {fixed:.1f}s; eventtime / Flink SQL: median "
            f"{statistics.median(et) / median:.2f}, net of Flink's fixed cost {statistics.median(et) / max(median - fixed, 0.01):.2f}")


def _window_of(engine: str, native_window, et_window):
    """The window a run of ``engine`` takes ("global": eventtime's, with the global watermark)."""
    if engine == "native":
        return native_window
    return et_window[0] if engine == "global" and isinstance(et_window, tuple) else et_window


def suite_scale(spark, work: str, args) -> list[str]:
    import eventtime

    data = os.path.join(work, "scale")
    rows = args.scale_batches * args.scale_batch_rows
    # All batches inside one local (UTC+8) day: no window fires, the state only grows.
    generate(data, rows, args.scale_batches, args.scale_keys, step_ms=MINUTE, late=False, seed=11)
    files = args.scale_batches + 1
    lines = []
    results = {}
    for engine, window in (("native", ("1 day", "1 day", "16 hours")), ("eventtime", eventtime.Tumbling("1 day", tz="UTC+8"))):
        res = _run(engine, spark, data, work, window, files, args.eventtime_partitions if engine == "eventtime" else 2, measure_bytes=True)
        print(json.dumps(_brief(res)), flush=True)
        results[engine] = res
    for engine, res in results.items():
        times = res["batch_ms"][: args.scale_batches]
        growth = res["checkpoint_growth_per_batch"][: args.scale_batches - 1]
        first, last = statistics.median(times[:10]), statistics.median(times[-10:])
        lines.append(
            f"[scale] {engine}: block cache {spark.conf.get('spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB', '8 (Spark default)')} MB, {args.scale_keys:,} keys, {args.scale_batches} batches of {args.scale_batch_rows:,} rows, wall {res['wall_s']:.1f}s; "
            f"batch ms median first 10 {first:.0f}, last 10 {last:.0f} (last/first {last / first:.2f}; "
            f"by tens {[round(statistics.median(times[i:i + 10])) for i in range(0, len(times), 10)]}); "
            f"checkpoint bytes per batch median {statistics.median(growth):,.0f} (first 10 {statistics.median(growth[:10]):,.0f}, "
            f"last 10 {statistics.median(growth[-10:]):,.0f}); checkpoint total {res['checkpoint_bytes']:,}; "
            f"state rows after drain {res['state_rows_after_drain']}"
        )
    n, e = results["native"], results["eventtime"]
    RESULTS["scale"] = {
        "keys": args.scale_keys, "batches": args.scale_batches, "batch_rows": args.scale_batch_rows,
        "block_cache_mb": spark.conf.get("spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB", "8 (Spark default)"),
        **{f"{engine}_{k}": v for engine, res in results.items() for k, v in (
            ("wall_s", res["wall_s"]),
            ("last_first", statistics.median(res["batch_ms"][: args.scale_batches][-10:])
             / statistics.median(res["batch_ms"][: args.scale_batches][:10])),
            ("checkpoint_per_batch", statistics.median(res["checkpoint_growth_per_batch"])))},
    }
    RESULTS["scale"]["checkpoint_ratio"] = RESULTS["scale"]["eventtime_checkpoint_per_batch"] / max(
        1, RESULTS["scale"]["native_checkpoint_per_batch"])
    lines.append(
        f"[scale] ratio eventtime/native: wall {e['wall_s'] / n['wall_s']:.2f}, checkpoint bytes per batch "
        f"{statistics.median(e['checkpoint_growth_per_batch']) / max(1, statistics.median(n['checkpoint_growth_per_batch'])):.2f}"
    )
    return lines


TINY_WARMUP_BATCHES = 5  # a tiny run's first batches, left out of its medians


def suite_tiny(spark, work: str, args) -> list[str]:
    """1 k-row batches: each run's median batch time after its first 5 batches, ``--repeat`` runs
    per engine in one session, engines alternating and taking turns to go first (one run each
    left the ratio to the machine's drift: 1.00, 1.06 and 1.09 in three rounds of nearly the same code)."""
    import eventtime

    data = os.path.join(work, "tiny")
    generate(data, 1_000 * args.tiny_batches, args.tiny_batches, 1_000, seed=13)
    files = args.tiny_batches + 1
    engines = (("native", ("1 minute",)), ("eventtime", eventtime.Tumbling("1 minute")))
    medians: dict[str, list[float]] = {"native": [], "eventtime": []}
    # where a batch's time goes, per run: query planning on the driver, the map stage, the state stage
    parts: dict[str, dict[str, list]] = {e: {"planning_ms": [], "map_stage_ms": [], "state_stage_ms": []} for e in medians}
    compiled = {"native": 0, "eventtime": 0}
    for rnd in range(max(1, args.repeat)):
        for engine, window in (engines if rnd % 2 == 0 else engines[::-1]):
            last_job = _last_job_id(spark)
            res = _run(engine, spark, data, work, window, files, args.eventtime_partitions if engine == "eventtime" else 2)
            res.update(_stage_ms(spark, last_job, skip=TINY_WARMUP_BATCHES))
            print(json.dumps({**_brief(res), "tiny_round": rnd}), flush=True)
            medians[engine].append(statistics.median(res["batch_ms"][TINY_WARMUP_BATCHES:]))
            parts[engine]["planning_ms"].append(statistics.median(res["planning_ms"][TINY_WARMUP_BATCHES:]))
            for stage in ("map_stage_ms", "state_stage_ms"):
                if res[stage] is not None:
                    parts[engine][stage].append(res[stage])
            compiled[engine] += res["classes_compiled"]
    e, n = medians["eventtime"], medians["native"]
    breakdown = {engine: {k: statistics.median(v) if v else None for k, v in p.items()} for engine, p in parts.items()}
    RESULTS["tiny"] = {"eventtime_ms": statistics.median(e), "native_ms": statistics.median(n),
                       "eventtime_runs_ms": e, "native_runs_ms": n,
                       "ratio_min": min(e) / min(n), "ratio_median": statistics.median(e) / statistics.median(n),
                       "breakdown_ms": breakdown}
    shown = lambda engine: ", ".join(f"{k[:-3].replace('_', ' ')} {v:.0f}" for k, v in breakdown[engine].items()  # noqa: E731
                                     if v is not None)
    return [
        f"[tiny] 1k rows per batch, {args.tiny_batches} batches, {len(e)} runs each: median batch ms per run native "
        f"{n}, eventtime {e}; ratio min {min(e) / min(n):.2f}, median {statistics.median(e) / statistics.median(n):.2f}; "
        f"classes compiled: native {compiled['native']}, eventtime {compiled['eventtime']}",
        f"[tiny] median ms per batch: native {shown('native')}; eventtime {shown('eventtime')}",
    ]


def bench_session(extra: dict | None = None, kafka: bool = False):
    """The benchmarks' local session (both engines alike), with ``extra`` Spark conf (and Spark's
    Kafka source)."""
    from eventtime.spark import local_session

    return local_session(
        kafka=kafka,
        extra_conf={
            "spark.driver.memory": "6g",
            "spark.sql.streaming.stateStore.rocksdb.changelogCheckpointing.enabled": "true",
            # One process runs three queries in turn (native at 2 and at 4 partitions, eventtime).
            # With Spark's default of 100 cached generated classes they evict each other's, so a
            # query compiles part of its code again in every run (and runs it cold), which a
            # long-running query never does; `--conf spark.sql.codegen.cache.maxEntries=100`
            # measures that default.
            "spark.sql.codegen.cache.maxEntries": "1000",
            # Both engines keep their state in RocksDB, whose reads go through a block cache of
            # 8 MB per state store by default. The scale suite's state outgrows it (eventtime's
            # SST files reach about 36 MB, native's 23 MB); from then on most reads miss and
            # both engines' batch times grow with the state held, which a job sized for its state
            # would not see (docs/limitations.md, "State size"). 128 MB holds the suite's state; a
            # lookup in a larger store still costs more (more files and levels), in both engines.
            # `--conf spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB=8` measures the default.
            "spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB": "128",
            **(extra or {}),
        },
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suites", default="throughput,scale,tiny")
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--workloads", default="T,S", help="comma-separated: T (tumbling), S (sliding), SE (sessions)")
    parser.add_argument("--repeat", type=int, default=5,
                        help="alternating runs per engine and workload (5: on a shared machine whose speed drifts "
                             "by 20-40 %% over minutes, 3 runs left min and median to one lucky or unlucky run)")
    parser.add_argument("--warmup", type=int, default=2,
                        help="throughput suite: uncounted rounds (each engine and setting once, as a measured round) "
                             "before the first workload; both engines' second run in a fresh JVM is still 1-2 s slower "
                             "than their later ones")
    parser.add_argument("--eventtime-partitions", type=int, default=2, help="eventtime's spark.sql.shuffle.partitions")
    parser.add_argument("--scale-keys", type=int, default=1_000_000)
    parser.add_argument("--scale-batches", type=int, default=60)
    parser.add_argument("--scale-batch-rows", type=int, default=50_000)
    parser.add_argument("--tiny-batches", type=int, default=40)
    parser.add_argument("--files-per-batch", type=int, default=1,
                        help="throughput suite: input files per micro-batch (split by `part`), so map tasks per batch")
    parser.add_argument("--flink", choices=("auto", "off"), default="auto",
                        help="throughput suite: Apache Flink 2.3 SQL on the same rows in every round (auto: when Java "
                             "and its jars from PyPI are there, else said and left out)")
    parser.add_argument("--workdir", default=None)
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value (both engines)")
    parser.add_argument("--scale-block-cache-mb", default=None,
                        help="scale suite: RocksDB's block cache in MB for both engines, or 'default' for Spark's own "
                             "(without it: the benchmark session's 128 MB)")
    parser.add_argument("--json", default=None, help="also write what was measured to this file (bench_targets.py)")
    args = parser.parse_args(argv)

    work = args.workdir or tempfile.mkdtemp(prefix="eventtime-bench-")
    spark = bench_session(dict(kv.split("=", 1) for kv in args.conf))
    suites = {"throughput": suite_throughput, "scale": suite_scale, "tiny": suite_tiny}
    lines = []
    for name in args.suites.split(","):
        if name == "scale" and args.scale_block_cache_mb == "default":  # Spark's own (8 MB), as a user starts
            spark.conf.unset("spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB")
        elif name == "scale" and args.scale_block_cache_mb:
            spark.conf.set("spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB", args.scale_block_cache_mb)
        lines += suites[name](spark, work, args)
        if name == "scale" and args.scale_block_cache_mb:
            spark.conf.set("spark.sql.streaming.stateStore.rocksdb.blockCacheSizeMB", "128")
    print()
    print(f"cores={CORES} rows={args.rows} keys={args.keys} batches={args.batches} repeat={args.repeat}")
    for line in lines:
        print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(RESULTS, f, indent=1)
    spark.stop()
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
