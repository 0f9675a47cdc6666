"""``eventtime demo``: the whole pipeline on a generated stream, with nothing to set up.

It writes a deterministic stream into ``DIR/input`` (one file per micro-batch), runs one
streaming query in local Spark — timestamp quarantine, 1-minute windows per user with
3 minutes of allowed lateness — into ``DIR/results`` and ``DIR/late`` (Delta tables), with
its checkpoint in ``DIR/checkpoint``, shows progress per micro-batch, and ends with a
summary, the conservation check and a plot of the late data. Then two bounded jobs read the
same events: sessions per user (``Session``, 15 s gap) into ``DIR/sessions`` and calendar
days in Europe/Berlin (``Calendar``) into ``DIR/days``; last, the too-late records are
reconciled into the results and held to the batch truth, the streaming query's transforms
run bounded into ``DIR/truth`` (``--streaming-only`` skips these).
Running it again on the same ``DIR`` resumes from the checkpoint; once finished it is a
no-op that prints the summary.

``--source kafka`` (pyspark 4.2 only: Maven Central serves Spark's Kafka source up to 4.2.0)
starts a throwaway local Kafka broker (:class:`eventtime.sources.LocalKafka`), creates the
topic ``eventtime-demo`` with 4 partitions, and produces the same micro-batches to it, each
record to the partition it names (its offset there is the one it carries); after each
produced batch the query runs with ``trigger={"availableNow": True}`` on one checkpoint (plus
one ``once`` run in per-partition mode, which takes the watermark's tick batch), so it reads
the same rows per micro-batch as the file source does and writes the same panes and late
records. The late table carries each record's Kafka partition and offset. The bounded jobs
read the topic too (one bounded read); the broker is stopped at the end, also on failure or
Ctrl-C. The broker and its topic die with the run, so a Kafka run never resumes: it starts
over (discarding its own earlier checkpoint and tables in ``DIR``).
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from dataclasses import asdict
from typing import Any, Callable, Optional, TextIO

from ..core.config import EngineConfig
from ..core.kinds import LATE_RECORD, RECORD_KINDS
from ..core.watermark import GLOBAL, PER_PARTITION
from ..core.window import Calendar, Session, Tumbling
from ..harness.conservation import ConservationReport, conservation
from .demo_data import DEMO_SCHEMA_DDL, DemoStream, late_by_partition, write_stream
from .demo_reconcile import TRUTH, reconcile_step
from .demo_query import (KAFKA_PARTITIONS, KAFKA_PRODUCED, KAFKA_TOPIC, PIPELINE, DemoError, run_kafka_query,
                         run_query, check_kafka_available, kafka_demo_source, produce_batch)

__all__ = ["run_demo", "DemoError", "demo_pipeline", "kafka_demo_source", "produce_batch", "KAFKA_TOPIC",
           "KAFKA_PARTITIONS", "SOURCES"]

log = logging.getLogger(__name__)

KEYS = ["user_id"]
MANIFEST = "demo-input.json"
#: Which source wrote ``DIR/checkpoint`` (``files`` when absent: runs before ``--source``).
SOURCE_MARKER = "demo-source"
SOURCES = ("files", "kafka")


def _aggregations():
    from ..core import aggregations as agg

    return (agg.count(), agg.sum("amount", name="amount"), agg.max("amount", name="max_amount"),
            agg.mean("amount", name="mean_amount"))


def _config(stream: DemoStream) -> EngineConfig:
    return EngineConfig(
        Tumbling(stream.window_ms),
        _aggregations(),
        max_out_of_orderness_ms=stream.max_out_of_orderness_ms,
        allowed_lateness_ms=stream.allowed_lateness_ms,
        min_valid_ms="2000-01-01",
        max_future_ms="1 day",
    )


def _prepare_input(stream: DemoStream, directory: str) -> int:
    """Write the input once; refuse a directory made with other parameters. Returns data rows."""
    input_dir = os.path.join(directory, "input")
    manifest_path = os.path.join(directory, MANIFEST)
    wanted = {"seed": stream.seed, "rows": stream.rows, "batches": stream.batches}
    if os.path.exists(manifest_path):
        with open(manifest_path, encoding="utf-8") as handle:
            manifest = json.load(handle)
        if manifest["stream"] != wanted:
            raise DemoError(
                f"--output {directory!r} holds a demo run with {manifest['stream']}, not {wanted}; "
                "use another --output directory (or the same --seed/--rows)"
            )
        return int(manifest["data_rows"])
    paths = write_stream(stream, input_dir)
    data_rows = 0
    for path in paths:
        with open(path, encoding="utf-8") as handle:
            data_rows += sum(1 for line in handle if not json.loads(line)["heartbeat"])
    tmp = manifest_path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump({"stream": wanted, "files": len(paths), "data_rows": data_rows}, handle)
    os.replace(tmp, manifest_path)
    return data_rows


def _routed(source, config: EngineConfig, window, tables: str, pipeline: str, alerter=None, watermark: str = GLOBAL):
    """source → quarantine → ``window`` per user → router, panes and records into Delta
    tables under ``tables`` (``results`` and ``late``)."""
    from ..sinks import DeltaLateSink, DeltaResultsSink
    from ..spark import route, window_aggregate, with_event_time

    events = source.transform(with_event_time(
        "ts", unit="ms", max_out_of_orderness=config.max_out_of_orderness_ms, min_valid=config.min_valid_ms,
        max_future=config.max_future_ms,
    ))
    out = events.transform(window_aggregate(
        keys=KEYS, window=window, allowed_lateness=config.allowed_lateness_ms, aggregations=config.aggregations,
        accumulation=config.accumulation, emit=config.emit,
        partition_col="partition", offset_col="offset", heartbeat_col="heartbeat", watermark=watermark,
    ))
    return route(
        out,
        panes=DeltaResultsSink(os.path.join(tables, "results"), pipeline=pipeline),
        late=DeltaLateSink(os.path.join(tables, "late"), pipeline=pipeline),
        alerter=alerter,
        pipeline=pipeline,
        progress=False,  # the demo prints its own line per batch (with the input file)
    )


def demo_pipeline(spark, stream: DemoStream, directory: str, alerter=None, watermark: str = GLOBAL,
                  bootstrap_servers: Optional[str] = None):
    """Build the demo's streaming query (not started): source → quarantine → windows → router.
    The source is ``DIR/input`` (one file per micro-batch), or with ``bootstrap_servers`` the
    demo topic on that Kafka broker."""
    config = _config(stream)
    if bootstrap_servers is None:
        source = spark.readStream.schema(DEMO_SCHEMA_DDL).option("maxFilesPerTrigger", 1).json(os.path.join(directory, "input"))
    else:
        source = kafka_demo_source(spark, bootstrap_servers)
    return _routed(source, config, config.window, directory, PIPELINE, alerter, watermark)


def _source_marker(directory: str) -> Optional[str]:
    """The source of the checkpoint in ``directory``: ``files`` for one written before the
    marker existed, None without a checkpoint."""
    path = os.path.join(directory, SOURCE_MARKER)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as handle:
            return handle.read().strip()
    return "files" if os.path.exists(os.path.join(directory, "checkpoint", "metadata")) else None


#: The bounded jobs after the streaming query: (table folder, window, what it shows).
BOUNDED_JOBS = (
    ("sessions", Session("15 seconds"), "sessions per user_id (a new session after 15 s without events)"),
    ("days", Calendar("day", tz="Europe/Berlin"), "calendar days per user_id in Europe/Berlin"),
)


def bounded_job(spark, stream: DemoStream, directory: str, name: str, window, bootstrap_servers: Optional[str] = None) -> Any:
    """One of the demo's bounded jobs: every input file (or with ``bootstrap_servers`` the
    whole demo topic) as one batch, run to the end of input, panes into
    ``DIR/<name>/results``, late and invalid records into ``DIR/<name>/late``."""
    if bootstrap_servers is None:
        source = spark.read.schema(DEMO_SCHEMA_DDL).json(os.path.join(directory, "input"))
    else:
        source = kafka_demo_source(spark, bootstrap_servers, streaming=False)
    router = _routed(source, _config(stream), window, os.path.join(directory, name), f"{PIPELINE}-{name}")
    return router.start(end_of_input=True)


def _run_bounded_jobs(spark, stream: DemoStream, directory: str, say: Callable[[str], None],
                      bootstrap_servers: Optional[str] = None) -> None:
    import pandas as pd

    from ..sinks import latest_panes

    for name, window, description in BOUNDED_JOBS:
        results = os.path.join(directory, name, "results")
        say(f"\n{description}: {results}")
        if os.path.exists(os.path.join(results, "_delta_log")):
            say("  (written by an earlier run)")
        else:
            started = time.monotonic()
            stats = bounded_job(spark, stream, directory, name, window, bootstrap_servers)
            say(f"  one bounded batch in {time.monotonic() - started:.1f} s: {stats.rows_in} rows, "
                f"{stats.panes} panes, {stats.invalid} invalid")
        panes = latest_panes(results)
        length = (panes["window_end"] - panes["window_start"]) / pd.Timedelta(seconds=1)
        if name == "sessions":
            per_user = panes.groupby("user_id").size()
            say(f"  {len(panes)} sessions of {per_user.size} users ({per_user.median():.0f} per user, median); "
                f"length median {length.median():.0f} s, longest {length.max():.0f} s; "
                f"{int(panes['count'].sum())} records")
        else:
            local = panes["window_start"].dt.tz_convert("Europe/Berlin")
            for day, rows in panes.groupby(local.dt.strftime("%Y-%m-%d %H:%M %Z")):
                hours = ((rows["window_end"] - rows["window_start"]) / pd.Timedelta(hours=1)).iloc[0]
                say(f"  {day}  {hours:.0f} h  {len(rows)} users  {int(rows['count'].sum())} records  "
                    f"amount {rows['amount'].sum():.2f}")


def _read_delta(path: str):
    from deltalake import DeltaTable

    from ..sinks import snapshot_dataset

    if not os.path.exists(os.path.join(path, "_delta_log")):
        return None
    return snapshot_dataset(DeltaTable(path)).to_table().to_pandas()


def run_demo(
    output: str = "demo-output",
    seed: int = 7,
    rows: int = 40_000,
    batches: int = 20,
    sentry_dsn: Optional[str] = None,
    out: TextIO = sys.stdout,
    timeout_s: float = 900.0,
    fresh_start: bool = False,
    bounded_jobs: bool = True,
    watermark: str = GLOBAL,
    source: str = "files",
) -> ConservationReport:
    """Run the demo into ``output``; returns the conservation report (it must hold).

    ``fresh_start`` discards the checkpoint and both tables of an earlier run in ``output``
    first (the generated input is kept); without it a run whose checkpoint is gone but whose
    tables remain is refused (:class:`~eventtime.ops.compat.CheckpointMissingError`).
    ``bounded_jobs`` runs the session and calendar jobs after the streaming query.
    ``watermark="per_partition"`` runs the query with per-partition watermarks; the summary
    then says how many records of the lagging partition it kept from being late.
    ``source="kafka"`` reads the stream from a local Kafka broker started for the run (see
    the module's docstring); it always starts over, and is refused at once (:class:`DemoError`)
    where Spark's Kafka source or the broker is not available (pyspark 4.3).
    """
    import shutil

    import pandas as pd

    from ..ops.alerts import Alerter
    from ..ops.compat import CheckpointMissingError
    from ..spark import local_session
    from .late import main as late_main

    if source not in SOURCES:
        raise ValueError(f"source must be one of {list(SOURCES)}, got {source!r}")
    from_kafka = source == "kafka"
    if from_kafka:
        check_kafka_available()  # before anything is written or started

    def say(line: str) -> None:
        out.write(line + "\n")
        out.flush()

    stream = DemoStream(seed=seed, rows=rows, batches=batches)
    output = os.path.abspath(output)
    os.makedirs(output, exist_ok=True)
    say(f"eventtime demo: {stream.rows} rows in {stream.batches} micro-batches, seed {seed}, output {output}"
        + (", from Kafka" if from_kafka else ""))
    data_rows = _prepare_input(stream, output)
    checkpoint = os.path.join(output, "checkpoint")
    previous = _source_marker(output)
    if from_kafka and previous == "kafka" and not fresh_start:
        # its topic died with its broker: a Kafka run cannot resume, it starts over
        fresh_start = True
        say("  an earlier Kafka run's broker is gone, so this one starts over")
    elif previous is not None and previous != source and not fresh_start:
        raise DemoError(f"--output {output!r} holds the checkpoint of a --source {previous} run, which a --source "
                        f"{source} run cannot resume; add --fresh-start to discard it (and its tables), or use "
                        "another --output directory")
    if fresh_start:
        for name in ("checkpoint", "results", "late", "late_delays", "delays", "late.png", "delays.png", SOURCE_MARKER,
                     KAFKA_PRODUCED, TRUTH, *(job[0] for job in BOUNDED_JOBS)):
            path = os.path.join(output, name)
            if os.path.isdir(path):
                shutil.rmtree(path)
            elif os.path.exists(path):
                os.remove(path)
        say("  fresh start: discarded the checkpoint and tables of the previous run")
    resumed = os.path.exists(os.path.join(checkpoint, "metadata"))
    alerter = Alerter(dsn=sentry_dsn, pipeline=PIPELINE, environment="demo", late_threshold_share=0.01,
                      partition_lag_ms=stream.max_out_of_orderness_ms)
    say(
        "  window 1 minute per user_id, allowed lateness 3 minutes, max out-of-orderness 10 s, "
        f"{watermark.replace('_', '-')} watermark; alerts to {'Sentry' if alerter.enabled else 'the log'}"
    )
    say(f"  {'resuming from' if resumed else 'checkpoint'} {checkpoint}")
    kafka = None
    bootstrap = None
    try:
        if from_kafka:
            from ..sources import KafkaUnavailableError, LocalKafka

            kafka = LocalKafka()
            try:
                kafka.start()
                kafka.create_topic(KAFKA_TOPIC, KAFKA_PARTITIONS)
            except KafkaUnavailableError as exc:
                raise DemoError(f"the local Kafka broker did not start: {exc}") from exc
            bootstrap = kafka.bootstrap_servers
            say(f"  local Kafka broker at {bootstrap}: topic {KAFKA_TOPIC} with {KAFKA_PARTITIONS} partitions; each "
                "micro-batch is produced, then read by an availableNow run of the query")
        spark = local_session(app_name="eventtime-demo", kafka=from_kafka)
        with open(os.path.join(output, SOURCE_MARKER), "w", encoding="utf-8") as handle:
            handle.write(source + "\n")
        started = time.monotonic()
        router = None  # the file source's one router (the Kafka runs build one per run)
        try:
            if from_kafka:
                ran, produced = run_kafka_query(
                    lambda: demo_pipeline(spark, stream, output, alerter=alerter, watermark=watermark,
                                          bootstrap_servers=bootstrap),
                    kafka, stream, checkpoint, watermark, say, timeout_s, os.path.join(output, KAFKA_PRODUCED))
                say(f"  {produced} records produced to {KAFKA_TOPIC} (data, bogus timestamps, heartbeats)")
            else:
                router = demo_pipeline(spark, stream, output, alerter=alerter, watermark=watermark)
                files = len([f for f in os.listdir(os.path.join(output, "input")) if f.endswith(".json")])
                ran = run_query(router, checkpoint, files, say, timeout_s)
        except CheckpointMissingError as exc:
            raise DemoError(f"{exc} (demo: add --fresh-start to discard the old tables and start over)") from exc
        except Exception as exc:
            from ..ops.failures import QueryFailedError

            failure = exc.__cause__ if isinstance(exc, DemoError) and exc.__cause__ else exc
            # route sends pipeline_failed itself when its query fails: one event per failure
            reported = (isinstance(failure, QueryFailedError) and router is not None
                        and router.wait_failure_reported(alerter.send_timeout_s + 10))
            if not reported:
                alerter.on_failure(failure, checkpoint=checkpoint)
            raise
        finally:
            alerter.close()
        say(f"  {ran} micro-batch(es) run in {time.monotonic() - started:.1f} s" + ("" if ran else " (already complete)"))
        report = _summary(stream, output, data_rows, watermark, say, late_main, pd)
        if bounded_jobs:
            _run_bounded_jobs(spark, stream, output, say, bootstrap)
            reconcile_step(output, KEYS, ("count", "amount", "max_amount", "mean_amount"), PIPELINE, lambda: bounded_job(
                spark, stream, output, TRUTH, _config(stream).window, bootstrap), say)
    finally:
        if kafka is not None:
            kafka.stop()
    if from_kafka:
        say(f"\nread from Kafka topic {KAFKA_TOPIC} ({KAFKA_PARTITIONS} partitions) at {bootstrap}; the broker is stopped")
    log.debug("demo report %s", asdict(report))
    return report


def _summary(stream: DemoStream, output: str, data_rows: int, watermark: str, say: Callable[[str], None],
             late_main: Callable, pd: Any) -> ConservationReport:
    """The summary of the streaming query's tables: panes, late and invalid records by reason,
    the conservation check, the late-data summary, plot and advice."""
    panes = _read_delta(os.path.join(output, "results"))
    late = _read_delta(os.path.join(output, "late"))
    panes = panes if panes is not None else pd.DataFrame(columns=["user_id", "window_start", "pane_index", "pane_timing", "count"])
    late = late if late is not None else pd.DataFrame(columns=["kind", "reason", "payload"])
    say("\nsummary")
    say(f"  panes by timing: {dict(sorted(panes['pane_timing'].value_counts().items()))}")
    for kind in RECORD_KINDS:
        reasons = late.loc[late["kind"] == kind, "reason"].value_counts()
        say(f"  {kind} records by reason: {dict(sorted(reasons.items()))}")
    config = _config(stream)
    report = conservation(data_rows, panes, late, KEYS, config.window, config.accumulation, config.emit)
    say(f"  {report.describe()}")
    if watermark == PER_PARTITION:
        lagging = stream.lagging_partition
        is_late = late["kind"] == LATE_RECORD
        here = int((is_late & (late["partition"].astype(str) == str(lagging))).sum())
        before = late_by_partition(_config(stream), os.path.join(output, "input"), GLOBAL)
        say(f"  per-partition watermark: {int(is_late.sum())} late record(s), {here} on the lagging partition "
            f"{lagging}; the global watermark makes {sum(before.values())} late on the same batches, "
            f"{before.get(lagging, 0)} on partition {lagging} (reference model): {before.get(lagging, 0) - here} "
            f"saved on the lagging partition")
    late_path = os.path.join(output, "late")
    if os.path.exists(os.path.join(late_path, "_delta_log")):
        say("")
        late_main(["late", "summary", "--table", late_path], hard_exit=False)
        plot = os.path.join(output, "late.png")
        late_main(["late", "plot", "--table", late_path, "--output", plot], hard_exit=False)
        if os.path.exists(os.path.join(late_path + "_delays", "_delta_log")):
            say("")
            late_main(["late", "advise", "--table", late_path, "--stats", late_path + "_delays",
                       "--results", os.path.join(output, "results"),
                       "--plot", os.path.join(output, "delays.png")], hard_exit=False)
    say(f"\nresults table: {os.path.join(output, 'results')}\nlate-data table: {late_path}")
    say(f"query them: eventtime late show --table {late_path} --reason too_late --limit 10")
    return report
