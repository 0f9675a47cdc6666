"""Where the map side's time goes: eventtime's map stage against Spark's own aggregation.

    python benchmarks/bench_map_side.py [--rows 2000000] [--repeat 3]

A static DataFrame of the throughput benchmark's tumbling (T) rows (bench_windowing.py's
generator: 10 k keys, late and invalid rows), read once per case, in one process, cases
alternating; each written to Spark's ``noop`` sink:

* ``projection``: the operator input eventtime builds (event time, class, the record struct,
  key and aggregated columns), nothing else: the floor of any map side on this input;
* ``row conversion``: the same input converted to Java ``Row`` objects (a ``mapPartitions``
  that only counts, compiled here with javac against pyspark's jars), with the record
  struct as it is and nulled (as the engine does for the rows it combines);
* ``eventtime map side``: ``Engine.mapSide``: statistics, pass-through and the map-side
  combine per (key, slice), all rows live (a static run);
* ``native aggregation``: Spark's ``groupBy(key, window).agg(count, sum)``, map-side partial
  aggregation, shuffle and final aggregation together.

Prints min and median per case and the map side's ratio to native.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

COUNT_ONLY = """
import java.util.Collections;
import java.util.Iterator;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
public class CountOnly implements MapPartitionsFunction<Row, Row> {
  public Iterator<Row> call(Iterator<Row> rows) {
    long n = 0;
    while (rows.hasNext()) { rows.next(); n++; }
    return Collections.singletonList(RowFactory.create(n)).iterator();
  }
}
"""


def _count_only_jar(workdir: str) -> str:
    from eventtime.spark.engine import _pyspark_jars

    src, classes = os.path.join(workdir, "CountOnly.java"), os.path.join(workdir, "classes")
    with open(src, "w") as out:
        out.write(COUNT_ONLY)
    subprocess.run(["javac", "-nowarn", "-d", classes, "-cp", str(_pyspark_jars() / "*"), src], check=True)
    jar = os.path.join(workdir, "count-only.jar")
    subprocess.run(["jar", "cf", jar, "-C", classes, "."], check=True)
    return jar


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)

    import bench_windowing as bw
    from pyspark.sql import DataFrame
    from pyspark.sql import functions as F

    import eventtime
    from eventtime.spark import local_session
    from eventtime.spark.engine import engine_jar

    work = tempfile.mkdtemp(prefix="eventtime-map-side-")
    data = os.path.join(work, "data")
    bw.generate(data, rows=args.rows, batches=8, keys=args.keys)
    spark = local_session(master="local[2]", shuffle_partitions=2,
                          extra_conf={"spark.jars": f"{engine_jar()},{_count_only_jar(work)}"})
    jvm = spark._jvm
    src = spark.read.schema(bw.SCHEMA).parquet(data)
    events = src.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=bw.B_MS,
                                                     min_valid="2020-01-01", max_future="3650 days"))
    step = eventtime.window_aggregate(keys=["key"], window=eventtime.Tumbling("1 minute"), allowed_lateness=bw.L_MS,
                                      aggregations=[eventtime.count(), eventtime.sum("amount")],
                                      partition_col="part", heartbeat_col="hb")

    # The operator input and the engine spec, as window_aggregate hands them to the JVM engine.
    captured = {}

    class _Engine:
        @staticmethod
        def apply(jdf, spec):
            captured.update(jdf=jdf, spec=spec)
            return jvm.eventtime.jvm.Engine.apply(jdf, spec)

    class _Jvm:
        def __getattr__(self, name):
            if name == "eventtime":
                return type("P", (), {"jvm": type("J", (), {"Engine": _Engine})})
            return getattr(jvm, name)

    spark._jvm = _Jvm()
    try:
        events.transform(step)
    finally:
        spark._jvm = jvm
    operator_input = DataFrame(captured["jdf"], spark)
    without_records = operator_input.withColumn("et__rec", F.lit(None).cast(operator_input.schema["et__rec"].dataType))
    counts = jvm.org.apache.spark.sql.Encoders.row(jvm.org.apache.spark.sql.types.StructType.fromDDL("n long"))
    native = (src.withColumn("w", F.window((F.col("ts") / 1000).cast("timestamp"), "1 minute"))
              .groupBy("key", "w").agg(F.count("*"), F.sum("amount")))

    def noop(df: DataFrame) -> None:
        df.write.format("noop").mode("overwrite").save()

    cases = {
        "projection (operator input)": lambda: noop(operator_input),
        "row conversion, whole rows": lambda: noop(DataFrame(operator_input._jdf.mapPartitions(jvm.CountOnly(), counts), spark)),
        "row conversion, record nulled": lambda: noop(DataFrame(without_records._jdf.mapPartitions(jvm.CountOnly(), counts), spark)),
        "eventtime map side": lambda: noop(DataFrame(jvm.eventtime.jvm.Engine.mapSide(operator_input._jdf, captured["spec"]), spark)),
        "native aggregation (whole)": lambda: noop(native),
    }
    for run in cases.values():  # warm-up: class loading, code generation
        run()
    times: dict = {name: [] for name in cases}
    for _ in range(args.repeat):
        for name, run in cases.items():
            started = time.perf_counter()
            run()
            times[name].append(time.perf_counter() - started)
    print(f"{args.rows} rows, {args.keys} keys, 2 cores, {args.repeat} alternating runs each")
    for name, values in times.items():
        print(f"  {name:32s} min {min(values):6.2f} s   median {statistics.median(values):6.2f} s")
    ratio = statistics.median(times["eventtime map side"]) / statistics.median(times["native aggregation (whole)"])
    print(f"  eventtime map side / native whole aggregation (medians): {ratio:.2f}")
    print(json.dumps({name: round(statistics.median(v), 3) for name, v in times.items()}))
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
