"""A streaming job built from the eventtime transforms and sinks.

    python examples/streaming_job.py [INPUT_DIR] [OUTPUT_DIR]

Reads JSON lines (``user_id``, ``amount``, ``ts`` in epoch ms, ``partition``) from
INPUT_DIR (default ``./demo-output/input``, written by ``eventtime demo``), counts and sums
``amount`` per user in 1-day windows aligned to local midnight in UTC+8 with 10 minutes
of allowed lateness, and writes panes and late/invalid records to Delta tables under
OUTPUT_DIR (default ``./example-output``). Alerts go to Sentry when ``SENTRY_DSN`` is set,
else to the log. The query runs until every file present is processed (``availableNow``).
Run it again: it resumes from its checkpoint and processes only new files.
"""

from __future__ import annotations

import os
import sys

import eventtime
from eventtime.sinks import DeltaLateSink, DeltaResultsSink

SCHEMA = "user_id STRING, amount DOUBLE, ts STRING, partition INT, offset BIGINT, _corrupt_record STRING"


def main(input_dir: str, output_dir: str) -> None:
    spark = eventtime.local_session(app_name="eventtime-example")
    events = (
        spark.readStream.schema(SCHEMA)
        .option("maxFilesPerTrigger", 1)
        .json(input_dir)
        .transform(
            eventtime.with_event_time(
                "ts", unit="ms", max_out_of_orderness="30 seconds", min_valid="2000-01-01", max_future="1 day"
            )
        )
    )
    out = events.transform(
        eventtime.window_aggregate(
            keys=["user_id"],
            window=eventtime.Tumbling("1 day", tz="UTC+8"),
            allowed_lateness="10 minutes",
            aggregations=[eventtime.count(), eventtime.sum("amount")],
            partition_col="partition",
            offset_col="offset",
        )
    )
    router = eventtime.route(
        out,
        panes=DeltaResultsSink(os.path.join(output_dir, "results"), pipeline="example"),
        late=DeltaLateSink(os.path.join(output_dir, "late"), pipeline="example"),
        alerter=eventtime.Alerter(pipeline="example"),  # SENTRY_DSN from the environment, else the log
        pipeline="example",
    )
    query = router.start(checkpoint=os.path.join(output_dir, "checkpoint"), trigger={"availableNow": True})
    query.awaitTermination()
    progress = query.lastProgress or {}
    print("last batch:", progress.get("batchId"), "observed:", progress.get("observedMetrics"))
    print(f"results: {output_dir}/results  late data: {output_dir}/late")
    print(f"query them: eventtime late summary --table {output_dir}/late")
    spark.stop()


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join("demo-output", "input"),
        sys.argv[2] if len(sys.argv) > 2 else "example-output",
    )
