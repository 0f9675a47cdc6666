"""A streaming run in a local session prints only what cannot be silenced (eventtime/spark/session.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest

pytestmark = pytest.mark.spark

# Printed by the JVM for a module Spark's launcher always adds (the operator is Java now: no
# transformWithState Python worker announces itself any more).
UNAVOIDABLE = {
    "WARNING: Using incubator modules: jdk.incubator.vector",
}


def test_a_static_and_a_streaming_run_print_nothing_but_the_unavoidable_lines(tmp_path):
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
        "print(eventtime.route(static, panes=lambda *a: None).start(end_of_input=True).panes)\n"
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
    printed = [line.strip() for line in done.stderr.splitlines() if line.strip()]
    assert set(printed) <= UNAVOIDABLE, done.stderr[-3000:]
