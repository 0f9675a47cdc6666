"""The windowed streaming job, submitted to a Spark cluster with spark-submit.

    spark-submit --master spark://HOST:PORT \\
        --jars "$(python -c 'import eventtime; print(eventtime.engine_jar())')" \\
        --conf spark.executor.cores=1 --conf spark.cores.max=2 \\
        examples/cluster_job.py INPUT_DIR OUTPUT_DIR [--sessions GAP]

(``--master 'local[2]'``, or no spark-submit at all -- ``python examples/cluster_job.py
INPUT_DIR OUTPUT_DIR`` -- runs it locally.) Reads JSON lines (``user_id``, ``amount``,
``ts`` in epoch ms, ``partition``, ``offset``, ``heartbeat``; ``eventtime demo`` writes such
files to ``demo-output/input``) from INPUT_DIR one file per micro-batch, counts, sums and
maxes ``amount`` per user in 1-minute windows with 10 s of out-of-orderness and 3 minutes
of allowed lateness (with two Spark SQL aggregations run by the engine and a Python one run
on the executors' Python workers), and writes the panes and the late / invalid records to the Delta
tables ``OUTPUT_DIR/results`` and ``OUTPUT_DIR/late``, with the query's checkpoint in
``OUTPUT_DIR/checkpoint``. It runs until every file present is processed (``availableNow``);
run again, it resumes from the checkpoint. With ``--sessions GAP`` (e.g. ``"30 seconds"``) it
counts, sums and maxes per user in session windows of that gap instead.

On a cluster, every path must be the same directory for the driver and every executor
(a shared or mounted file system, or one machine): the executors write the state store
under the checkpoint, the driver the Delta tables. The Spark session takes what the
engine needs (``eventtime.ENGINE_CONF``: the RocksDB state store provider) and the engine
jar; the executors' Python is the driver's interpreter path (``PYSPARK_PYTHON``), which
must exist, with eventtime installed, on every worker machine. The engine jar must be the
one built for the cluster's Spark minor version: the driver refuses another one at start.

A ``spark://`` master that does not accept connections is refused before the session is
built, naming the URL (:func:`eventtime.spark.cluster.check_master`), instead of Spark's
own minute of registration retries.
"""

from __future__ import annotations

import os
import sys

SCHEMA = "user_id STRING, amount DOUBLE, ts STRING, partition INT, offset BIGINT, heartbeat BOOLEAN"
PIPELINE = "cluster-example"


def session(app_name: str = "eventtime-cluster-example"):
    """The session for the master spark-submit was given (``local[2]`` without spark-submit)."""
    import eventtime
    master = "local[2]"
    if os.environ.get("PYSPARK_GATEWAY_PORT"):
        # run by spark-submit: its JVM is up and holds --master (a SparkConf made before the
        # gateway is connected would be empty)
        from pyspark import SparkConf, SparkContext

        SparkContext._ensure_initialized()
        master = SparkConf().get("spark.master", master)
    return eventtime.local_session(  # refuses a spark:// master that does not answer
        master=master, app_name=app_name)


def main(input_dir: str, output_dir: str, session_gap: str | None = None) -> int:
    import eventtime
    from eventtime.sinks import DeltaLateSink, DeltaResultsSink

    input_dir, output_dir = os.path.abspath(input_dir), os.path.abspath(output_dir)
    spark = session()
    events = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(input_dir)
        .transform(eventtime.with_event_time(
            "ts", unit="ms", max_out_of_orderness="10 seconds", min_valid="2000-01-01", max_future="1 day"))
    )
    aggregations = [eventtime.count(), eventtime.sum("amount", name="amount"), eventtime.max("amount", name="max_amount")]
    if session_gap is None:
        aggregations += [eventtime.agg("count(DISTINCT amount)", "distinct_amounts"),
                         eventtime.agg("approx_count_distinct(amount)", "approx_amounts"),
                         eventtime.aggregate("big_orders", "amount", create=int, add=lambda n, v: n + (v is not None and v >= 50),
                                             merge=lambda a, b: a + b, result=lambda n: n)]
    out = events.transform(
        eventtime.window_aggregate(
            keys=["user_id"],
            window=eventtime.Tumbling("1 minute") if session_gap is None else eventtime.Session(session_gap),
            allowed_lateness="3 minutes",
            aggregations=aggregations,
            partition_col="partition",
            offset_col="offset",
            heartbeat_col="heartbeat",
        )
    )
    router = eventtime.route(
        out,
        panes=DeltaResultsSink(os.path.join(output_dir, "results"), pipeline=PIPELINE),
        late=DeltaLateSink(os.path.join(output_dir, "late"), pipeline=PIPELINE),
        alerter=eventtime.Alerter(pipeline=PIPELINE),  # SENTRY_DSN from the environment, else the log
        pipeline=PIPELINE,
    )
    query = router.start(checkpoint=os.path.join(output_dir, "checkpoint"), trigger={"availableNow": True})
    query.awaitTermination()
    progress = query.lastProgress or {}
    print(f"master: {spark.sparkContext.master}  last batch: {progress.get('batchId')}", flush=True)
    print(f"results: {output_dir}/results  late data: {output_dir}/late", flush=True)
    spark.stop()
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (2, 4) or (len(args) == 4 and args[2] != "--sessions"):
        sys.exit(__doc__)
    from eventtime.spark.cluster import MasterUnreachableError

    try:
        sys.exit(main(args[0], args[1], args[3] if len(args) == 4 else None))
    except MasterUnreachableError as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
