"""Enrich, window, and write: late data to Delta, results to PostgreSQL.

    python examples/enrich_postgres_job.py [--input DIR] [--output DIR] [--conninfo DSN] [--table NAME]

A streaming job as Flink teams build them around their windows:

1. **enrich** each click with its user's tier from a profile service (``enrich_async``: one
   multi-get per chunk of distinct users, at most 4 calls in flight and 200 calls a second
   per worker, a 2 s timeout, 2 retries, a 10-minute cache). The service here is an
   in-process ``async`` function that answers after 5 ms (in a real job, an HTTP multi-get);
   it does not know user ``u5``, whose clicks go on with a null tier and the reason
   ``missing``;
2. **window** per (user, tier) in 1-minute tumbling windows with 30 s out-of-orderness and 5
   minutes of allowed lateness;
3. **write** the panes to PostgreSQL (``PostgresSink``: upserts, the latest pane wins, one
   transaction per micro-batch with a ledger row) and late / invalid records to a Delta
   table.

Without ``--conninfo`` it starts a throwaway PostgreSQL server in a temporary directory
(``LocalPostgres``; needs PostgreSQL installed, as ``make install`` does) and prints what
the table holds before stopping it. The input (5 files of JSON lines, one micro-batch each,
with out-of-order, late and timestamp-less clicks) is written to ``--input`` when that
directory is empty. It runs to the end of its input (``availableNow`` and the end of input),
and resumes from its checkpoint when run again on the same ``--output``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys

SCHEMA = "user STRING, amount BIGINT, ts BIGINT, partition INT, offset BIGINT"
MINUTE = 60_000
TIERS = {"u0": "gold", "u1": "silver", "u2": "silver", "u3": "bronze", "u4": "bronze"}  # no u5


async def user_tiers(users: list) -> dict:
    """The profile service's multi-get: ``{user: tier}`` for the users it knows."""
    await asyncio.sleep(0.005)
    return {u: TIERS[u] for u in users if u in TIERS}


def write_input(directory: str, files: int = 5, rows: int = 80, seed: int = 3) -> None:
    """JSON-lines files, one micro-batch each: event time moves forward 3 minutes per file,
    with late records (some within the allowed lateness, some beyond) and null timestamps."""
    rng = random.Random(seed)
    os.makedirs(directory, exist_ok=True)
    base = 1_714_521_600_000  # 2024-05-01T00:00Z
    for f in range(files):
        lines = []
        for i in range(rows):
            ts = base + f * 3 * MINUTE + rng.randrange(0, 3 * MINUTE)
            if i % 13 == 0:
                ts -= rng.randrange(2, 9) * MINUTE
            lines.append({"user": f"u{rng.randrange(6)}", "amount": rng.randrange(1, 50), "ts": ts if i % 37 else None,
                          "partition": i % 2, "offset": f * rows + i})
        with open(os.path.join(directory, f"part-{f:03d}.json"), "w") as out:
            out.write("\n".join(json.dumps(line) for line in lines) + "\n")


def router(spark, input_dir: str, output_dir: str, conninfo: str, table: str):
    import eventtime
    from eventtime.sinks import DeltaLateSink, PostgresSink

    clicks = (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(input_dir)
        .transform(eventtime.enrich_async(
            user_tiers, key="user", output="tier", value_type="string", chunk_size=50, max_in_flight=4,
            rate_limit=200, timeout="2 seconds", retries=2, cache_ttl="10 minutes"))
        .transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds",
                                             min_valid="2000-01-01", now="2024-05-02T00:00:00Z"))
    )
    out = clicks.transform(eventtime.window_aggregate(
        keys=["user", "tier"], window=eventtime.Tumbling("1 minute"), allowed_lateness="5 minutes",
        aggregations=[eventtime.count(), eventtime.sum("amount")], partition_col="partition", offset_col="offset",
    ))
    return eventtime.route(
        out,
        panes=PostgresSink(conninfo, table, pipeline="clicks", key_columns=["user", "tier"], max_rows=200),
        late=DeltaLateSink(os.path.join(output_dir, "late"), pipeline="clicks"),
        pipeline="clicks",
    )


def run(spark, input_dir: str, output_dir: str, conninfo: str, table: str = "clicks_per_minute") -> None:
    """Run the job on every input file present, to the end of its input."""
    if not os.path.isdir(input_dir) or not os.listdir(input_dir):
        write_input(input_dir)
    router(spark, input_dir, output_dir, conninfo, table).start(
        os.path.join(output_dir, "checkpoint"), trigger={"availableNow": True}, end_of_input=True)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="example-output/enrich")
    parser.add_argument("--input", default=None, help="default: OUTPUT/input")
    parser.add_argument("--conninfo", default=None, help="libpq DSN; default: a throwaway local server")
    parser.add_argument("--table", default="clicks_per_minute")
    args = parser.parse_args(argv)
    input_dir = args.input or os.path.join(args.output, "input")

    import eventtime
    from eventtime.sinks.local_postgres import LocalPostgres

    spark = eventtime.local_session(app_name="eventtime-enrich-example")
    server = None if args.conninfo else LocalPostgres().start()
    conninfo = args.conninfo or server.conninfo
    try:
        run(spark, input_dir, args.output, conninfo, args.table)
        import psycopg

        with psycopg.connect(conninfo) as conn:
            rows = conn.execute(
                f'SELECT tier, count(*), sum(count), sum(sum_amount) FROM {args.table} GROUP BY tier ORDER BY tier NULLS LAST'
            ).fetchall()
            batches = conn.execute("SELECT count(*) FROM eventtime_ledger WHERE pipeline = 'clicks'").fetchone()[0]
        print(f"{args.table}: windows, clicks and amount per tier (the latest pane of each window; {batches} batches in the ledger)")
        for tier, windows, clicks, amount in rows:
            print(f"  {tier or '(unknown user)':<15} {windows:>4} windows {clicks:>5} clicks  amount {amount}")
        print(f"late and invalid records: {os.path.join(args.output, 'late')} "
              f"(eventtime late summary --table {os.path.join(args.output, 'late')})")
    finally:
        spark.stop()
        if server is not None:
            server.cleanup()


if __name__ == "__main__":
    sys.exit(main())
