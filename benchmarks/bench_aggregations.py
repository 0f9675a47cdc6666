"""Benchmark: Spark SQL aggregate functions in eventtime's windows against Spark's native
streaming aggregation of the same functions, same input.

On the throughput suite's rows (bench_windowing.py: 10k keys, 20 micro-batches, 5 % of the
records late within the allowed lateness, 1 % beyond it), 1-minute tumbling windows per key,
in one process, engines alternating:

* ``SKETCH``: ``approx_count_distinct(amount)``, ``percentile_approx(amount, 0.95)``,
  ``stddev(amount)``: native ``withWatermark`` + ``groupBy(window, key).agg(...)`` (append
  mode, at 2 and 4 shuffle partitions, the better one is the peer) against eventtime's
  ``eventtime.agg(...)`` of the same expressions (with ``route``, its late side output and
  everything the windowing benchmark's eventtime run does). Prints min and median wall time
  and their ratio.
* ``DISTINCT``: exact ``count(DISTINCT amount)``, which Spark's streaming aggregation refuses,
  beside eventtime's ``approx_count_distinct(amount)``: wall time and checkpoint bytes.
* ``PYTHON``: the same distinct count as a Python aggregation (``eventtime.aggregate``: the
  window's values kept in state, Python run over each fired pane) beside the Spark SQL one:
  what running Python on Spark costs (beside the DISTINCT section's exact runs, not run again).

Every run's panes are also checked: both engines emit the same windows, and the exact
distinct counts are within the sketch's bound of the approximate ones.

    .venv/bin/python benchmarks/bench_aggregations.py                 # ~10 min
    .venv/bin/python benchmarks/bench_aggregations.py --rows 500000 --repeat 1 --warmup 0
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

import pyarrow.compute as pc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from bench_windowing import B_MS, L_MS, SCHEMA, _classes_compiled, _drain, _dir_bytes, bench_session, generate  # noqa: E402

SKETCH = ("approx_count_distinct(amount)", "percentile_approx(amount, 0.95)", "stddev(amount)")
NAMES = ("distinct_amounts", "p95_amount", "sd_amount")


def _native(spark, data: str, checkpoint: str, files: int, expressions) -> dict:
    from pyspark.sql import functions as F

    src = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(data)
    agg = (src.withColumn("et", F.timestamp_millis("ts")).withWatermark("et", f"{B_MS + L_MS} milliseconds")
           .groupBy(F.window("et", "1 minute"), "key")
           .agg(*[F.expr(e).alias(n) for e, n in zip(expressions, NAMES)])
           .select(F.unix_millis(F.col("window.end")).alias("window_end"), "key", *NAMES[:len(expressions)]))
    seen = {"panes": 0, "windows": set()}

    def sink(df, batch_id):
        table = df.toArrow()
        seen["panes"] += table.num_rows
        seen["windows"].update(zip(table.column("key").to_pylist(), table.column("window_end").to_pylist()))

    t0 = time.perf_counter()
    query = agg.writeStream.foreachBatch(sink).outputMode("append").option("checkpointLocation", checkpoint).start()
    _drain(query, files - 1)
    wall = time.perf_counter() - t0
    query.stop()
    return {"wall_s": round(wall, 2), "panes": seen["panes"], "windows": seen["windows"]}


def _eventtime(spark, data: str, checkpoint: str, files: int, expressions) -> dict:
    import eventtime

    def aggregation(e, n):
        if e == "python distinct":
            return eventtime.aggregate(n, "amount", create=frozenset, add=lambda acc, v: acc | {v}, merge=lambda a, b: a | b,
                                       result=lambda acc: len(acc - {None}))
        return eventtime.agg(e, n)

    src = spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).parquet(data)
    events = src.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=B_MS, min_valid="2020-01-01",
                                                     max_future="3650 days"))
    out = events.transform(eventtime.window_aggregate(
        keys=["key"], window=eventtime.Tumbling("1 minute"), allowed_lateness=L_MS,
        aggregations=[aggregation(e, n) for e, n in zip(expressions, NAMES)], partition_col="part", heartbeat_col="hb"))
    seen = {"panes": 0, "late": 0, "windows": set(), "values": {}}

    def panes(table, batch_id, query_id):
        seen["panes"] += table.num_rows
        ends = pc.divide(table.column("window_end").cast("int64"), 1000).to_pylist()
        keys = table.column("key").to_pylist()
        seen["windows"].update(zip(keys, ends))
        if NAMES[0] in table.column_names:  # the latest value per window, for the accuracy check
            seen["values"].update(zip(zip(keys, ends), table.column(NAMES[0]).to_pylist()))

    def records(table, batch_id, query_id):
        seen["late"] += table.num_rows

    t0 = time.perf_counter()
    query = eventtime.route(out, panes=panes, late=records, pipeline="bench-agg", progress=False).start(checkpoint=checkpoint)
    _drain(query, files - 1)
    wall = time.perf_counter() - t0
    query.stop()
    return {"wall_s": round(wall, 2), **seen}


def _run(spark, engine: str, partitions: int, data: str, work: str, files: int, expressions) -> dict:
    checkpoint = os.path.join(work, f"chk-{engine}-{partitions}-{time.monotonic_ns()}")
    spark.conf.set("spark.sql.shuffle.partitions", str(partitions))
    compiled = _classes_compiled(spark)
    res = (_native if engine == "native" else _eventtime)(spark, data, checkpoint, files, expressions)
    res.update(engine=engine, shuffle_partitions=partitions, checkpoint_bytes=_dir_bytes(checkpoint),
               classes_compiled=_classes_compiled(spark) - compiled)
    shutil.rmtree(checkpoint, ignore_errors=True)
    print(json.dumps({k: v for k, v in res.items() if k not in ("windows", "values")}), flush=True)
    return res


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds (each engine and setting once) first")
    parser.add_argument("--sections", default="sketch,distinct,python")
    parser.add_argument("--workdir", default=None)
    args = parser.parse_args(argv)
    sections = args.sections.split(",")

    work = args.workdir or tempfile.mkdtemp(prefix="eventtime-bench-agg-")
    spark = bench_session()  # the windowing benchmark's session settings
    data = os.path.join(work, "rows")
    generate(data, args.rows, args.batches, args.keys)
    files = args.batches + 1
    rounds = (("native", 2), ("eventtime", 2), ("native", 4))
    lines, exact = [], []
    if "sketch" in sections:
        lines.append(_sketch(spark, args, data, work, files, rounds))
    if "distinct" in sections:
        line, exact = _distinct(spark, args, data, work, files)
        lines.append(line)
    if "python" in sections:
        lines.append(_python(spark, args, data, work, files, exact))
    print()
    print(f"rows={args.rows} keys={args.keys} batches={args.batches} repeat={args.repeat}")
    for line in lines:
        print(line)
    spark.stop()
    if args.workdir is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


def _sketch(spark, args, data, work, files, rounds) -> str:
    for _ in range(args.warmup):
        for engine, partitions in rounds:
            _run(spark, engine, partitions, data, work, files, SKETCH)
    walls: dict[str, list] = {"native-2": [], "native-4": [], "eventtime": []}
    runs = []
    for _ in range(args.repeat):
        for engine, partitions in rounds:
            res = _run(spark, engine, partitions, data, work, files, SKETCH)
            walls["eventtime" if engine == "eventtime" else f"native-{partitions}"].append(res["wall_s"])
            runs.append(res)
    same = {e: len({frozenset(r["windows"]) for r in runs if r["engine"] == e}) == 1 for e in ("native", "eventtime")}
    first = {r["engine"]: r["windows"] for r in runs}
    best = min(("native-2", "native-4"), key=lambda k: min(walls[k]))
    native, et = walls[best], walls["eventtime"]
    return (
        f"[SKETCH] {', '.join(SKETCH)} per key, 1-minute tumbling: native ({best}) min {min(native):.1f}s median "
        f"{statistics.median(native):.1f}s (runs {native}; other setting {walls['native-4' if best == 'native-2' else 'native-2']})  "
        f"eventtime min {min(et):.1f}s median {statistics.median(et):.1f}s (runs {et})  ratio eventtime/native: min "
        f"{min(et) / min(native):.2f}, median {statistics.median(et) / statistics.median(native):.2f}  "
        f"windows: eventtime {len(first['eventtime'])}, native {len(first['native'])} "
        f"({'each engine the same in every run' if all(same.values()) else f'DIFFERENT between runs of one engine: {same}'}; "
        f"only native's: {len(first['native'] - first['eventtime'])}, only eventtime's: "
        f"{len(first['eventtime'] - first['native'])}; eventtime's late table: {runs[1]['late']} records)")


def _distinct(spark, args, data, work, files) -> tuple:
    exact, approx = [], []
    for _ in range(args.repeat):
        approx.append(_run(spark, "eventtime", 2, data, work, files, ("approx_count_distinct(amount)",)))
        exact.append(_run(spark, "eventtime", 2, data, work, files, ("count(DISTINCT amount)",)))
    errors = [abs(approx[0]["values"][w] - n) / n for w, n in exact[0]["values"].items() if n]
    return (
        f"[DISTINCT] per key, 1-minute tumbling, eventtime only (Spark's streaming aggregation refuses count(DISTINCT)): "
        f"exact count(DISTINCT amount) median {statistics.median(r['wall_s'] for r in exact):.1f}s, checkpoint "
        f"{statistics.median(r['checkpoint_bytes'] for r in exact) / 1e6:.1f} MB; approx_count_distinct(amount) median "
        f"{statistics.median(r['wall_s'] for r in approx):.1f}s, checkpoint "
        f"{statistics.median(r['checkpoint_bytes'] for r in approx) / 1e6:.1f} MB; over {len(errors)} windows the sketch's "
        f"relative error: median {statistics.median(errors):.4f}, max {max(errors):.4f} (its documented rsd 0.05)"), exact


def _python(spark, args, data, work, files, sql: list) -> str:
    """``sql``: the DISTINCT section's exact runs, if it ran (else they alternate with these)."""
    python, sql = [], list(sql)
    for _ in range(args.repeat):
        if len(sql) < args.repeat:
            sql.append(_run(spark, "eventtime", 2, data, work, files, ("count(DISTINCT amount)",)))
        python.append(_run(spark, "eventtime", 2, data, work, files, ("python distinct",)))
    same = sql[0]["values"] == python[0]["values"]
    t_sql, t_py = statistics.median(r["wall_s"] for r in sql), statistics.median(r["wall_s"] for r in python)
    return (f"[PYTHON] distinct amounts per key, 1-minute tumbling: Spark SQL count(DISTINCT amount) median {t_sql:.1f}s, "
            f"checkpoint {statistics.median(r['checkpoint_bytes'] for r in sql) / 1e6:.1f} MB; the same as a Python "
            f"aggregation median {t_py:.1f}s ({t_py / t_sql:.2f}x), checkpoint "
            f"{statistics.median(r['checkpoint_bytes'] for r in python) / 1e6:.1f} MB; values "
            f"{'equal in every window' if same else 'DIFFERENT'}")


if __name__ == "__main__":
    sys.exit(main())
