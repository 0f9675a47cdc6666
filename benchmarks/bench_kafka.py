"""Benchmark: the T workload fed by Kafka. eventtime against Spark's native aggregation, both reading
the same 4-partition topic on a local broker (127.0.0.1), alternating in one Spark session.

The rows are those of ``bench_windowing.py``'s throughput suite (5 M rows, 10 k keys, 1-minute
tumbling windows, 5 % late within the allowed lateness, 1 % beyond it, a closing heartbeat per
partition). They are produced once, micro-batch by micro-batch, as JSON values, each to the
partition its ``part`` column names (Spark's Kafka sink). Every engine then reads the topic from
the earliest offset with ``maxOffsetsPerTrigger`` = one micro-batch's rows and parses the value
with ``from_json``:

* native: ``withWatermark`` + ``groupBy(window, key).agg(count, sum)``, append mode, at
  ``spark.sql.shuffle.partitions`` 2 and 4 (the better is the peer);
* eventtime: ``with_event_time`` + ``window_aggregate`` + ``route`` (late side output,
  quarantine, per-partition statistics), Kafka's partition as the source partition;
* the passthrough floor: the same read and parse, each micro-batch counted and summed.

Prints min and median wall time per engine and the ratio eventtime / native. Spark's Kafka source
is served on Maven Central up to Spark 4.2, so this runs on pyspark 4.2 (``make install`` makes
``.venv-spark4.2`` with the connector and Kafka's broker jars):

    .venv-spark4.2/bin/python benchmarks/bench_kafka.py            # ~15 min
    .venv-spark4.2/bin/python benchmarks/bench_kafka.py --rows 500000 --repeat 1 --warmup 0
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import statistics
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from bench_windowing import SCHEMA, _brief, _run, bench_session, generate  # noqa: E402

TOPIC = "bench"


def produce(spark, data: str, bootstrap: str) -> int:
    """Each parquet file of ``data`` in order (a micro-batch's rows, then the heartbeats) into the
    topic, every row to the partition its ``part`` names; returns how many rows."""
    from pyspark.sql import functions as F

    total = 0
    for path in sorted(glob.glob(os.path.join(data, "*.parquet"))):
        rows = spark.read.parquet(path).coalesce(1)  # one writer: the file's order is the log's
        total += rows.count()
        (rows.select(F.col("key"), F.to_json(F.struct(*[c.split()[0] for c in SCHEMA.split(", ")])).alias("value"),
                     F.col("part").alias("partition"))
         .write.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("topic", TOPIC).save())
    return total


def kafka_source(bootstrap: str, per_trigger: int):
    """The topic as the benchmark's rows (``key, ts, amount, part, hb``), one micro-batch's rows per trigger."""
    def read(spark):
        from pyspark.sql import functions as F

        raw = (spark.readStream.format("kafka").option("kafka.bootstrap.servers", bootstrap).option("subscribe", TOPIC)
               .option("startingOffsets", "earliest").option("maxOffsetsPerTrigger", per_trigger).load())
        return raw.select(F.from_json(F.col("value").cast("string"), SCHEMA).alias("r")).select("r.*")

    return read


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=5_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--warmup", type=int, default=1, help="uncounted rounds (each engine once) before the measured ones")
    parser.add_argument("--conf", action="append", default=[], help="extra Spark conf key=value (both engines)")
    parser.add_argument("--eventtime-partitions", type=int, default=2, help="eventtime's spark.sql.shuffle.partitions")
    parser.add_argument("--json", default=None, help="also write what was measured to this file (bench_targets.py)")
    args = parser.parse_args(argv)

    import eventtime
    from eventtime.sources.local_kafka import LocalKafka

    work = tempfile.mkdtemp(prefix="eventtime-bench-kafka-")
    data = os.path.join(work, "rows")
    generate(data, args.rows, args.batches, args.keys)
    spark = bench_session(dict(kv.split("=", 1) for kv in args.conf), kafka=True)
    walls: dict[str, list[float]] = {"native-2": [], "native-4": [], "eventtime": [], "floor": []}
    try:
        with LocalKafka(heap="1g") as kafka:
            kafka.create_topic(TOPIC, partitions=4)
            total = produce(spark, data, kafka.bootstrap_servers)
            source = kafka_source(kafka.bootstrap_servers, args.rows // args.batches)
            rounds = (("native", 2), ("eventtime", args.eventtime_partitions), ("native", 4), ("floor", 2))
            windows = {"native": ("1 minute",), "eventtime": eventtime.Tumbling("1 minute"), "floor": None}
            for rep in range(-args.warmup, args.repeat):
                for engine, partitions in rounds:
                    # the source's end offsets summed over the partitions reach `total` at the last batch
                    res = _run(engine, spark, data, work, windows[engine], total + 1, partitions, source=source)
                    res.update(workload="T-kafka", rep=rep)
                    print(json.dumps(_brief(res)), flush=True)
                    if rep >= 0:
                        walls[f"native-{partitions}" if engine == "native" else engine].append(res["wall_s"])
    finally:
        spark.stop()
        shutil.rmtree(work, ignore_errors=True)
    best = min(("native-2", "native-4"), key=lambda k: min(walls[k]))
    native, et, floor = walls[best], walls["eventtime"], walls["floor"]
    print()
    print(f"[T-kafka] rows={args.rows} keys={args.keys} batches={args.batches} repeat={args.repeat}: native ({best}) "
          f"min {min(native):.1f}s median {statistics.median(native):.1f}s (runs {native}; other setting "
          f"{walls['native-4' if best == 'native-2' else 'native-2']})  eventtime min {min(et):.1f}s median "
          f"{statistics.median(et):.1f}s (runs {et})  ratio eventtime/native: min {min(et) / min(native):.2f}, median "
          f"{statistics.median(et) / statistics.median(native):.2f}  passthrough floor median {statistics.median(floor):.1f}s "
          f"(runs {floor}): eventtime {statistics.median(et) / statistics.median(floor):.2f}x it, native "
          f"{statistics.median(native) / statistics.median(floor):.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"kafka": {"eventtime_s": et, "native_s": native, "floor_s": floor,
                                 "ratio_min": min(et) / min(native),
                                 "ratio_median": statistics.median(et) / statistics.median(native)}}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
