"""Benchmark: eventtime's async enrichment against a naive one-request-per-record UDF.

Starts the tests' lookup service (tests/enrich/enrich_service.py: aiohttp on 127.0.0.1,
``--latency-ms`` per request, 20 ms by default) and, in one process, alternating, enriches the
same rows (``--rows`` rows over ``--keys`` distinct keys, ``--partitions`` partitions) with:

* eventtime: ``enrich_async`` (``mapInArrow``, one event loop per Python worker; multi-get
  chunks of ``--chunk-size`` distinct keys, ``--in-flight`` calls at once per worker, no cache);
* naive: a plain Python UDF that POSTs each row's key alone with ``urllib`` and waits for the
  answer (one synchronous request per record).

Both return the same struct and are checked: every row enriched. Each run is one Spark job
(``count`` of the enriched column); the first run of each is included (min shows it).
Prints min and median wall times, rows/s at the median, requests sent, and the speed-up.

    .venv/bin/python benchmarks/bench_enrich.py                    # 20k rows, 2k keys, 3 runs each
    .venv/bin/python benchmarks/bench_enrich.py --rows 5000 --keys 500 --repeat 3
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(HERE, "..", "tests", "enrich"))

PROFILE = "struct<name:string,score:int>"


def naive_udf(url: str):
    """One blocking HTTP request per record, the way a first attempt looks."""
    from pyspark.sql import functions as F

    def lookup_one(key):
        import json
        import urllib.request

        if key is None:
            return None
        request = urllib.request.Request(url, data=json.dumps({"keys": [key]}).encode(),
                                         headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=10) as response:
            return json.loads(response.read())["values"][0]

    return F.udf(lookup_one, PROFILE)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--keys", type=int, default=2_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--chunk-size", type=int, default=100)
    parser.add_argument("--in-flight", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="alternating runs per variant")
    args = parser.parse_args(argv)

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    import enrich_service
    from enrich_service import HttpLookup, LookupService
    from pyspark import cloudpickle
    from pyspark.sql import functions as F

    import eventtime
    from eventtime.spark import local_session

    cloudpickle.register_pickle_by_value(enrich_service)  # the workers cannot import tests/
    spark = local_session(master=f"local[{args.partitions}]", app_name="bench-enrich", shuffle_partitions=args.partitions)
    rows = (spark.range(0, args.rows, numPartitions=args.partitions)
            .select(F.col("id"), F.concat(F.lit("k"), (F.col("id") * 7919 % args.keys).cast("string")).alias("key")))
    rows = rows.cache()
    rows.count()

    def run_eventtime(url):
        step = eventtime.enrich_async(HttpLookup(url), key="key", output="profile", value_type=PROFILE,
                                      chunk_size=args.chunk_size, max_in_flight=args.in_flight)
        return rows.transform(step).agg(F.count("profile"), F.count("profile_error")).first()

    def run_naive(url):
        lookup = naive_udf(url)
        return rows.withColumn("profile", lookup("key")).agg(F.count("profile"), F.lit(0)).first()

    variants = {"eventtime": run_eventtime, "naive": run_naive}
    times: dict = {name: [] for name in variants}
    requests: dict = {name: [] for name in variants}
    with LookupService(latency_ms=args.latency_ms) as service:
        print(f"service 127.0.0.1:{service.port}, {args.latency_ms:g} ms per request; {args.rows} rows, {args.keys} "
              f"distinct keys, {args.partitions} partitions; cores {os.cpu_count()}", flush=True)
        for i in range(args.repeat):
            for name, run in variants.items():
                service.reset()
                started = time.perf_counter()
                enriched, failed = run(service.url)
                elapsed = time.perf_counter() - started
                if enriched != args.rows or failed:
                    raise SystemExit(f"{name}: {enriched} of {args.rows} rows enriched, {failed} failed")
                times[name].append(elapsed)
                requests[name].append(service.requests)
                print(f"run {i + 1} {name:9s} {elapsed:8.2f} s  {service.requests:6d} requests  "
                      f"max in flight {service.max_in_flight}", flush=True)
    spark.stop()
    print()
    print(f"{'variant':10s} {'min s':>9s} {'median s':>9s} {'rows/s':>10s} {'requests':>9s}")
    for name in variants:
        median = statistics.median(times[name])
        print(f"{name:10s} {min(times[name]):9.2f} {median:9.2f} {args.rows / median:10.0f} {requests[name][-1]:9d}")
    speedup = statistics.median(times["naive"]) / statistics.median(times["eventtime"])
    speedup_min = min(times["naive"]) / min(times["eventtime"])
    print(f"speed-up (naive / eventtime): {speedup:.1f}x at the median, {speedup_min:.1f}x at the min")
    return 0


if __name__ == "__main__":
    sys.exit(main())
