"""A backfill: the same transforms on a static DataFrame, run to the end of its input.

    python examples/backfill_job.py [INPUT_DIR] [OUTPUT_DIR]

Reads every JSON file in INPUT_DIR (default ``./demo-output/input``, written by
``eventtime demo``) as ONE batch, counts and sums ``amount`` per user in 1-day windows
aligned to local midnight in UTC+8, and ends the input: every window fires once
(ON_TIME with ``is_final``) and nothing is left pending, as at the end of a bounded Flink
job. Panes and invalid records go to Delta tables under OUTPUT_DIR (default
``./backfill-output``). For a bounded *stream* (a daily re-run of a streaming job) use
``router.start(checkpoint, trigger={"availableNow": True}, end_of_input=True)`` instead.
"""

from __future__ import annotations

import os
import sys

import eventtime
from eventtime.sinks import DeltaLateSink, DeltaResultsSink

SCHEMA = "user_id STRING, amount DOUBLE, ts STRING, partition INT, offset BIGINT, _corrupt_record STRING"


def main(input_dir: str, output_dir: str) -> None:
    spark = eventtime.local_session(app_name="eventtime-backfill")
    events = spark.read.schema(SCHEMA).json(input_dir).transform(
        eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds", min_valid="2000-01-01", max_future="1 day")
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
        panes=DeltaResultsSink(os.path.join(output_dir, "results"), pipeline="backfill"),
        late=DeltaLateSink(os.path.join(output_dir, "late"), pipeline="backfill"),
        pipeline="backfill",
    )
    stats = router.start(end_of_input=True)  # a static DataFrame: one batch, then the end of input
    print(f"rows in: {stats.rows_in}, panes: {stats.panes}, late: {stats.late}, invalid: {stats.invalid}")
    print(f"results: {output_dir}/results  invalid records: {output_dir}/late")
    spark.stop()


if __name__ == "__main__":
    main(
        sys.argv[1] if len(sys.argv) > 1 else os.path.join("demo-output", "input"),
        sys.argv[2] if len(sys.argv) > 2 else "backfill-output",
    )
