"""Benchmark: a flood of bogus timestamps, the case the late table exists for.

N rows from ``spark.range`` (a user, an amount, a 100-byte text), of which 99 % carry
``ts = 0`` (1970): a producer bug. Each engine runs as a process of its own on
``local_session()``'s default 1 GB driver, and the process tree's peak resident memory (the
driver's JVM and Python) is read from ``/proc`` every 0.1 s:

* ``eventtime``: ``with_event_time(min_valid="2000-01-01")``, a 1-minute tumbling count per
  user, ``route`` into ``DeltaResultsSink`` and ``DeltaLateSink`` as one bounded run
  (``start(end_of_input=True)``): every bogus row kept in the late table;
* ``spark``: Spark's own job of the same rows: the bogus rows filtered, ``to_json`` of each,
  written as Parquet; the rest grouped by ``window(ts, "1 minute")`` and user, counted, written.

The engines alternate, ``--repeat`` rounds; it prints each run's time and peak memory and the
ratio of the medians, and checks that eventtime's late table holds every bogus row.

    .venv/bin/python benchmarks/bench_flood.py --rows 5000000 20000000
    .venv/bin/python benchmarks/bench_flood.py --rows 1000000 --repeat 1
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


def _job(engine: str, rows: int, out: str) -> dict:
    """One run, in this process (the child): what it wrote."""
    import eventtime
    from pyspark.sql import functions as F

    spark = eventtime.local_session()
    ts = F.when(F.col("id") % 100 == 0, F.lit(1_700_000_000_000) + F.col("id") * 10).otherwise(F.lit(0))
    df = spark.range(rows).select(F.concat(F.lit("u"), (F.col("id") % 1000).cast("string")).alias("user"),
                                  (F.col("id") % 97).cast("double").alias("amount"),
                                  F.repeat(F.lit("x"), 100).alias("text"), ts.alias("ts"))
    if engine == "eventtime":
        from eventtime.sinks import DeltaLateSink, DeltaResultsSink

        result = (df.transform(eventtime.with_event_time("ts", unit="ms", min_valid="2000-01-01",
                                                         max_future="36500 days"))
                    .transform(eventtime.window_aggregate(keys=["user"], window=eventtime.Tumbling("1 minute"),
                                                          aggregations=[eventtime.count()])))
        stats = eventtime.route(result, panes=DeltaResultsSink(os.path.join(out, "results"), pipeline="flood"),
                                late=DeltaLateSink(os.path.join(out, "late"), pipeline="flood"), pipeline="flood",
                                progress=False).start(end_of_input=True)
        from deltalake import DeltaTable

        kept = DeltaTable(os.path.join(out, "late")).to_pyarrow_dataset().count_rows()
        return {"invalid": stats.invalid, "kept": kept, "panes": stats.panes}
    bogus = F.col("ts") < F.lit(946_684_800_000)
    df.where(bogus).select(F.to_json(F.struct(*df.columns)).alias("payload")).write.parquet(os.path.join(out, "bogus"))
    good = df.where(~bogus).withColumn("t", F.timestamp_millis("ts"))
    good.groupBy(F.window("t", "1 minute"), "user").count().write.parquet(os.path.join(out, "counts"))
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


def _run(engine: str, rows: int) -> dict:
    out = tempfile.mkdtemp(prefix=f"eventtime-flood-{engine}-")
    started = time.monotonic()
    child = subprocess.Popen([sys.executable, __file__, "--child", engine, "--rows", str(rows), "--out", out],
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[5_000_000, 20_000_000])
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--child", choices=["eventtime", "spark"])
    parser.add_argument("--out")
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(_job(args.child, args.rows[0], args.out)), flush=True)
        return
    for rows in args.rows:
        runs: dict = {"eventtime": [], "spark": []}
        for _ in range(args.repeat):
            for engine in ("eventtime", "spark"):
                run = _run(engine, rows)
                runs[engine].append(run)
                print(json.dumps(run), flush=True)
        done = {e: [r for r in rs if not r.get("failed")] for e, rs in runs.items()}
        if not all(done.values()):
            print(f"{rows:,} rows: a run failed, no ratio")
            continue
        expected = rows - rows // 100  # ids not divisible by 100
        assert all(r["kept"] == expected for r in done["eventtime"]), (expected, done["eventtime"])
        med = {e: statistics.median(r["seconds"] for r in rs) for e, rs in done.items()}
        peak = {e: max(r["peak_gb"] for r in rs) for e, rs in done.items()}
        print(f"{rows:,} rows, {expected:,} bogus: eventtime {med['eventtime']:.1f} s (peak {peak['eventtime']:.2f} GB), "
              f"Spark {med['spark']:.1f} s (peak {peak['spark']:.2f} GB): ratio {med['eventtime'] / med['spark']:.2f}x")


if __name__ == "__main__":
    main()
