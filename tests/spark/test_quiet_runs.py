"""A streaming run in a local session prints its progress and only what cannot be silenced
(eventtime/spark/session.py)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

# Printed by the JVM for a module Spark's launcher always adds (the operator is Java now: no
# transformWithState Python worker announces itself any more).
UNAVOIDABLE = {
    "WARNING: Using incubator modules: jdk.incubator.vector",
}


def test_a_static_and_a_streaming_run_print_their_progress_and_nothing_else(tmp_path):
    """They printed Spark's log4j start-up lines, 'Setting default log level to "WARN"' and its
    setLogLevel hint, PySpark's pandas FutureWarning from the driver and every worker, and the
    transformWithState driver worker's UDF, schema and port (lines of kilobytes). One process
    runs both (a static backfill, then a stream): the noise is per process and per query."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "0.json").write_text('{"k": "a", "ts": 1700000040000}\n{"k": "b", "ts": 1700000041000}\n')
    script = tmp_path / "job.py"
    script.write_text(
        "import sys\n"
        "import eventtime\n"
        "spark = eventtime.local_session()\n"
        "df = spark.createDataFrame([('a', 1700000040000)], 'k string, ts bigint')\n"
        "static = df.transform(eventtime.with_event_time('ts', unit='ms', max_future='3650 days')).transform(\n"
        "    eventtime.window_aggregate(keys=['k'], window=eventtime.Tumbling('1 minute')))\n"
        "print(eventtime.route(static, panes=lambda *a: None, progress=False).start(end_of_input=True).panes)\n"
        f"events = spark.readStream.schema('k string, ts bigint').json({str(source)!r})\n"
        "out = events.transform(eventtime.with_event_time('ts', unit='ms', max_future='3650 days')).transform(\n"
        "    eventtime.window_aggregate(keys=['k'], window=eventtime.Tumbling('1 minute')))\n"
        "panes = []\n"
        "router = eventtime.route(out, panes=lambda table, batch_id, query_id: panes.append(table.num_rows))\n"
        f"router.start({str(tmp_path / 'chk')!r}, trigger={{'availableNow': True}}, end_of_input=True)\n"
        "print(sum(panes))\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split() == ["1", "2"], done.stdout
    printed = [line.strip() for line in done.stderr.splitlines() if line.strip() and line.strip() not in UNAVOIDABLE]
    # the stream's progress, one line per batch (the static run was told progress=False)
    line = re.compile(r"eventtime\[eventtime\] batch (\d+): (\d+) rows, (\d+) panes, 0 late, 0 invalid, "
                      r"watermark (none|2023-11-14 22:14:01 UTC|end of input) \(\d+\.\d s\)")
    matched = [line.fullmatch(text) for text in printed]
    assert all(matched), done.stderr[-3000:]
    batches = [(int(m[1]), int(m[2]), int(m[3]), m[4]) for m in matched]
    assert [b[0] for b in batches] == list(range(len(batches)))
    assert batches[0] == (0, 2, 0, "none")  # no watermark before the first batch's events
    assert sum(b[1] for b in batches) == 2 and sum(b[2] for b in batches) == 2
    assert batches[-1][3] == "end of input" and {b[3] for b in batches[1:-1]} <= {"2023-11-14 22:14:01 UTC"}


def test_a_failed_job_prints_its_cause_in_a_few_lines_and_keeps_the_full_trace(tmp_path):
    """A sink that raises stopped the job with about 150 lines: Spark's ERROR log of the JVM
    stack, PySpark's exception carrying the same stack, and, with an alerter, a Py4J stack of
    the listener called while the interpreter exited. Now: the cause, where the job's code
    raised it, and the file with the full trace."""
    source = tmp_path / "in"
    source.mkdir()
    (source / "0.json").write_text('{"k": "a", "ts": 1700000040000}\n')
    script = tmp_path / "job.py"
    checkpoint = tmp_path / "chk"
    script.write_text(
        "import eventtime\n"
        "spark = eventtime.local_session()\n"
        f"events = spark.readStream.schema('k string, ts bigint').json({str(source)!r})\n"
        "out = events.transform(eventtime.with_event_time('ts', unit='ms', max_future='3650 days')).transform(\n"
        "    eventtime.window_aggregate(keys=['k'], window=eventtime.Tumbling('1 minute')))\n"
        "def results(table, batch_id, query_id):\n"
        "    raise OSError('disk full on /data/results')\n"
        "router = eventtime.route(out, panes=results, alerter=eventtime.Alerter(pipeline='orders'), pipeline='orders')\n"
        f"query = router.start({str(checkpoint)!r}, trigger={{'availableNow': True}})\n"
        "query.awaitTermination()\n"
    )
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, "SENTRY_DSN": ""})
    assert done.returncode == 1
    traces = sorted(checkpoint.glob("eventtime-failure-*.txt"))
    assert len(traces) == 1
    printed = [line for line in (done.stdout + done.stderr).splitlines() if line.strip() and line.strip() not in UNAVOIDABLE]
    assert printed == [
        "eventtime alert: [orders] pipeline stopped: OSError: disk full on /data/results",
        "Traceback (most recent call last):",
        f'  File "{script}", line 10, in <module>',
        "    query.awaitTermination()",
        printed[4],  # the line of RunningQuery that raises
        "    raise self._shorten(exc) from None",
        "eventtime.ops.failures.QueryFailedError: pipeline orders stopped: OSError: disk full on /data/results",
        f"  raised at {script}:7 in results",
        f"  full trace: {traces[0]}",
    ], done.stdout + done.stderr
    assert printed[4].startswith('  File "') and "errors.py" in printed[4]
    full = traces[0].read_text()
    assert "OSError: disk full on /data/results" in full and "JVM stacktrace:" in full
    assert "at org.apache.spark.sql.execution.streaming" in full
