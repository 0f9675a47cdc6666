"""Benchmark: a flood of bogus timestamps, the case the late table exists for.

N rows from ``spark.range`` (a user, an amount, a 100-byte text), of which 99 % carry
``ts = 0`` (1970): a producer bug. Each engine runs as a process of its own on
``local_session()``'s default 1 GB driver, and the process tree's peak resident memory (the
driver's JVM and Python) is read from ``/proc`` every 0.1 s:

* ``eventtime``: ``with_event_time(min_valid="2000-01-01")``, a 1-minute tumbling count per
  user (``split_invalid=True``: the invalid records beside the operator), ``route`` into ``DeltaResultsSink`` and ``DeltaLateSink`` as one bounded run
  (``start(end_of_input=True)``): every bogus row kept in the late table;
* ``spark``: Spark's own job of the same rows: the bogus rows filtered, ``to_json`` of each,
  written as Parquet; the rest grouped by ``window(ts, "1 minute")`` and user, counted, written.

The engines alternate, ``--repeat`` rounds; it prints each run's time and peak memory and the
ratio of the medians, and checks that eventtime's late table holds every bogus row.

``--streaming``: the same rows, written as Parquet files first (not timed), read as a stream
in ONE micro-batch (``trigger={"availableNow": True}``): eventtime's route with
``end_of_input=True``, Spark's the same filter, ``to_json``, write and windowed count in
``foreachBatch``. ``--cluster N``: the driver (still 1 GB) on a standalone cluster of N workers
of one core and 1 GB each (started here on 127.0.0.1 by pyspark's ``spark-class``, stopped at
the end); the peak is then the driver's alone, the executors being the workers' processes.

    .venv/bin/python benchmarks/bench_flood.py --rows 5000000 20000000
    .venv/bin/python benchmarks/bench_flood.py --rows 1000000 --repeat 1
    .venv/bin/python benchmarks/bench_flood.py --rows 20000000 --streaming
    .venv/bin/python benchmarks/bench_flood.py --rows 5000000 --cluster 1 2
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

BOGUS_SHARE = 0.99


def _session(master: str):
    import eventtime

    if master.startswith("spark://"):  # the executors need the engine jar; the driver keeps its 1 GB
        return eventtime.local_session(master=master, extra_conf={"spark.jars": eventtime.engine_jar(),
                                                                  "spark.executor.memory": "768m"})
    return eventtime.local_session(master=master)


def _rows(spark, rows: int):
    from pyspark.sql import functions as F

    ts = F.when(F.col("id") % 100 == 0, F.lit(1_700_000_000_000) + F.col("id") * 10).otherwise(F.lit(0))
    return spark.range(rows).select(F.concat(F.lit("u"), (F.col("id") % 1000).cast("string")).alias("user"),
                                    (F.col("id") % 97).cast("double").alias("amount"),
                                    F.repeat(F.lit("x"), 100).alias("text"), ts.alias("ts"))


def _spark_writes(df, out: str) -> None:
    """Spark's own job of the rows: the bogus ones as JSON, a windowed count of the rest."""
    from pyspark.sql import functions as F

    bogus = F.col("ts") < F.lit(946_684_800_000)
    df.where(bogus).select(F.to_json(F.struct(*df.columns)).alias("payload")).write.mode("append").parquet(
        os.path.join(out, "bogus"))
    good = df.where(~bogus).withColumn("t", F.timestamp_millis("ts"))
    good.groupBy(F.window("t", "1 minute"), "user").count().write.mode("append").parquet(os.path.join(out, "counts"))


class _Totals:
    """The batches' counts (an alerter: route hands it every batch's statistics)."""

    invalid = panes = batches = 0

    def on_batch(self, batch_id, records, stats) -> None:
        self.invalid += stats.invalid
        self.panes += stats.panes
        self.batches += 1


def _job(engine: str, rows: int, out: str, master: str, source: str | None) -> dict:
    """One run, in this process (the child): what it wrote. ``source``: the rows as Parquet
    files, read as a stream in one micro-batch (else ``spark.range`` as a static DataFrame)."""
    import eventtime

    spark = _session(master)
    if source is not None:
        df = spark.readStream.schema(spark.read.parquet(source).schema).parquet(source)
    else:
        df = _rows(spark, rows)
    if engine == "eventtime":
        from eventtime.sinks import DeltaLateSink, DeltaResultsSink

        result = (df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01",
                                                         max_future="36500 days"))
                    .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"),
                                                          aggregations=[eventtime.count()], split_invalid=True)))
        totals = _Totals()
        router = eventtime.route(result, panes=DeltaResultsSink(os.path.join(out, "results"), pipeline="flood"),
                                 late=DeltaLateSink(os.path.join(out, "late"), pipeline="flood"), pipeline="flood",
                                 alerter=totals, progress=False)
        if source is None:
            router.start(end_of_input=True)
        else:  # the rows' batch, then the end of input's
            router.start(os.path.join(out, "checkpoint"), trigger={"availableNow": True}, end_of_input=True)
        from deltalake import DeltaTable

        kept = DeltaTable(os.path.join(out, "late")).to_pyarrow_dataset().count_rows()
        return {"invalid": totals.invalid, "kept": kept, "panes": totals.panes, "batches": totals.batches}
    if source is None:
        _spark_writes(df, out)
    else:
        df.writeStream.foreachBatch(lambda batch, _: _spark_writes(batch, out)).trigger(availableNow=True).option(
            "checkpointLocation", os.path.join(out, "checkpoint")).start().awaitTermination()
    kept = spark.read.parquet(os.path.join(out, "bogus")).count()
    return {"invalid": kept, "kept": kept, "panes": spark.read.parquet(os.path.join(out, "counts")).count()}


def _tree_rss(pid: int) -> int:
    """Resident bytes of ``pid`` and its descendants."""
    children: dict = {}
    total = 0
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as handle:
                fields = handle.read().rsplit(")", 1)[1].split()
            children.setdefault(int(fields[1]), []).append(int(entry))
        except (OSError, IndexError, ValueError):
            continue
    todo = [pid]
    while todo:
        p = todo.pop()
        todo.extend(children.get(p, []))
        try:
            with open(f"/proc/{p}/statm") as handle:
                total += int(handle.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except OSError:
            pass
    return total


def _run(engine: str, rows: int, master: str = "local[2]", source: str | None = None) -> dict:
    out = tempfile.mkdtemp(prefix=f"eventtime-flood-{engine}-")
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, __file__, "--child", engine, "--rows", str(rows), "--out", out,
                              "--master", master, *(["--source", source] if source else [])],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    peak = 0
    while child.poll() is None:
        peak = max(peak, _tree_rss(child.pid))
        time.sleep(0.1)
    stdout, stderr = child.communicate()
    seconds = time.monotonic() - started
    shutil.rmtree(out, ignore_errors=True)
    lines = [ln for ln in stdout.splitlines() if ln.startswith("RESULT ")]
    if child.returncode != 0 or not lines:
        return {"engine": engine, "rows": rows, "failed": True, "seconds": seconds, "peak_gb": peak / 1e9,
                "error": stderr.strip().splitlines()[-1:] }
    return {"engine": engine, "rows": rows, "seconds": seconds, "peak_gb": peak / 1e9, **json.loads(lines[0][7:])}


def _source(rows: int) -> str:
    """The rows as Parquet files (for --streaming), written once by a session of their own."""
    directory = tempfile.mkdtemp(prefix="eventtime-flood-input-")
    subprocess.run([sys.executable, __file__, "--write-source", directory, "--rows", str(rows)], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return directory


def _rounds(rows: int, repeat: int, label: str, master: str = "local[2]", source: str | None = None) -> None:
    runs: dict = {"eventtime": [], "spark": []}
    for _ in range(repeat):
        for engine in ("eventtime", "spark"):
            run = _run(engine, rows, master, source)
            runs[engine].append(run)
            print(json.dumps({"setup": label, **run}), flush=True)
    done = {e: [r for r in rs if not r.get("failed")] for e, rs in runs.items()}
    if not all(done.values()):
        print(f"{label}, {rows:,} rows: a run failed, no ratio")
        return
    expected = rows - rows // 100  # ids not divisible by 100
    assert all(r["kept"] == expected for r in done["eventtime"]), (expected, done["eventtime"])
    med = {e: statistics.median(r["seconds"] for r in rs) for e, rs in done.items()}
    peak = {e: max(r["peak_gb"] for r in rs) for e, rs in done.items()}
    print(f"{label}, {rows:,} rows, {expected:,} bogus: eventtime {med['eventtime']:.1f} s "
          f"(driver peak {peak['eventtime']:.2f} GB), Spark {med['spark']:.1f} s (driver peak {peak['spark']:.2f} GB): "
          f"ratio {med['eventtime'] / med['spark']:.2f}x", flush=True)
    return med


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5_000_000, 20_000_000])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--streaming", action="store_true", help="one micro-batch of a file stream")
    parser.add_argument("--cluster", type=int, nargs="+", help="standalone clusters of these numbers of workers")
    parser.add_argument("--child", choices=["eventtime", "spark"])
    parser.add_argument("--write-source")
    parser.add_argument("--out")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--source")
    args = parser.parse_args()
    if args.write_source:
        import eventtime

        _rows(eventtime.local_session(), args.rows[0]).repartition(8).write.mode("overwrite").parquet(args.write_source)
        return
    if args.child:
        print("RESULT " + json.dumps(_job(args.child, args.rows[0], args.out, args.master, args.source)), flush=True)
        return
    for rows in args.rows:
        source = _source(rows) if args.streaming else None
        try:
            if not args.cluster:
                _rounds(rows, args.repeat, "streaming" if source else "bounded", source=source)
                continue
            sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
            from standalone_cluster import StandaloneCluster

            medians = {}
            for workers in args.cluster:
                work = tempfile.mkdtemp(prefix="eventtime-flood-cluster-")
                try:
                    with StandaloneCluster(work, workers=workers, cores=1, memory="1g") as cluster:
                        medians[workers] = _rounds(rows, args.repeat, f"cluster of {workers}", cluster.master_url,
                                                   source)
                finally:
                    shutil.rmtree(work, ignore_errors=True)
            if len(medians) == 2 and all(medians.values()):
                (a, ma), (b, mb) = sorted(medians.items())
                print(f"{rows:,} rows: {b} workers against {a}: eventtime {mb['eventtime'] / ma['eventtime']:.2f}x the "
                      f"time, Spark {mb['spark'] / ma['spark']:.2f}x", flush=True)
        finally:
            if source:
                shutil.rmtree(source, ignore_errors=True)


if __name__ == "__main__":
    main()
