"""A streaming pipeline whose panes go to PostgreSQL and late records to Delta (the PostgreSQL
crash test runs it in a process it kills, then resumes it in the test's own session).

    python tests/spark/pg_pipeline.py INPUT_DIR OUT_DIR CONNINFO TABLE
"""

from __future__ import annotations

import json
import os
import random
import sys

SCHEMA = "user STRING, amount BIGINT, ts BIGINT, partition INT, offset BIGINT"
MINUTE = 60_000


def write_input(directory: str, files: int = 5, rows: int = 80, seed: int = 3) -> None:
    """JSON-lines files, one micro-batch each: event time moves forward a few minutes per file,
    with out-of-order, late (within and beyond the allowed lateness) and invalid records."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    base = 1_714_521_600_000  # 2024-05-01T00:00Z
    for f in range(files):
        lines = []
        for i in range(rows):
            ts = base + f * 3 * MINUTE + rng.randrange(0, 3 * MINUTE)
            if i % 13 == 0:
                ts -= rng.randrange(2, 9) * MINUTE  # late: some within the 5 minutes, some beyond
            lines.append({"user": f"u{rng.randrange(6)}", "amount": rng.randrange(1, 50), "ts": ts if i % 37 else None,
                          "partition": i % 2, "offset": f * rows + i})
        with open(os.path.join(directory, f"part-{f:03d}.json"), "w") as out:
            out.write("\n".join(json.dumps(line) for line in lines) + "\n")


def router(spark, input_dir: str, out_dir: str, conninfo: str, table: str):
    import eventtime
    from eventtime.sinks import DeltaLateSink, PostgresSink

    events = (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
        .transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds", min_valid="2000-01-01",
                                             now="2024-05-02T00:00:00Z"))
    )
    out = events.transform(eventtime.window_aggregate(
        keys=["user"], window=eventtime.Tumbling("1 minute"), allowed_lateness="5 minutes",
        aggregations=[eventtime.count(), eventtime.sum("amount")], partition_col="partition", offset_col="offset",
    ))
    return eventtime.route(
        out,
        panes=PostgresSink(conninfo, table, pipeline="pg-test", max_rows=7),
        late=DeltaLateSink(os.path.join(out_dir, "late"), pipeline="pg-test"),
        pipeline="pg-test",
    )


def run(spark, input_dir: str, out_dir: str, conninfo: str, table: str) -> None:
    router(spark, input_dir, out_dir, conninfo, table).start(
        os.path.join(out_dir, "checkpoint"), trigger={"availableNow": True}, end_of_input=True)


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(__file__))
    from eventtime.spark import local_session

    session = local_session(master="local[2]", app_name="eventtime-pg-test", shuffle_partitions=2)
    run(session, *sys.argv[1:5])
    session.stop()
