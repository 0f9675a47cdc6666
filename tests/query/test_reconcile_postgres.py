"""``eventtime.reconcile`` into a PostgreSQL results table (``PostgresSink``'s, one row per key
and window): the same convergence as for Delta, exactly once by the sink's ledger (also when
the process is killed), the pipeline read from the late table."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import psycopg
import pytest
from psycopg.rows import dict_row

import eventtime
from eventtime import EngineConfig, Record, Session, Tumbling, count, first, last, max, mean, min, pane_columns, sum
from eventtime.ops.json_text import keys_json
from eventtime.sinks import PostgresSink
from eventtime.sinks.local_postgres import LocalPostgres, find_pg_bin

from reconcile_tables import KEYS, Stream

pytestmark = pytest.mark.skipif(find_pg_bin() is None, reason="PostgreSQL is not installed (make install installs it)")
AGGS = (count(), sum("amount", name="amount"), min("amount", name="lo"), max("amount", name="hi"),
        mean("amount", name="avg"), first("amount", name="f"), last("amount", name="l"))
_tables = iter(range(10**6))


@pytest.fixture(scope="module")
def pg():
    server = LocalPostgres().start()
    yield server
    server.cleanup()


def _sink(pg) -> PostgresSink:
    return PostgresSink(pg.conninfo, f"panes_{next(_tables)}", "p", key_columns=KEYS)


def _rows(sink: PostgresSink) -> dict[tuple, dict]:
    """The table's current rows: a session listed in a later row's merged_from is superseded."""
    with psycopg.connect(sink.conninfo) as conn, conn.cursor(row_factory=dict_row) as cur:
        rows = cur.execute(f"SELECT * FROM {sink.table}").fetchall()
    gone = {(r["user"], b["start"], b["end"], r["written_at"]) for r in rows for b in (r.get("merged_from") or ())}
    out = {}
    for r in rows:
        start, end = r["window_start"].isoformat(), r["window_end"].isoformat()
        if any((u, s, e) == (r["user"], start, end) and at > r["written_at"] for u, s, e, at in gone):
            continue
        out[(keys_json(KEYS, [[r["user"]]])[0], r["window_start"], r["window_end"])] = {
            name: r[name] for name in pane_columns(AGGS)}
    return out


def _stream(tmp_path, sink, window, lateness_ms=0) -> Stream:
    s = Stream(str(tmp_path), EngineConfig(window, AGGS, allowed_lateness_ms=lateness_ms, min_valid_ms=1), results=sink)
    s.batch([Record("a", 1_000, {"amount": 1}), Record("b", 20_000, {"amount": 2}), Record("a", 50_000, {"amount": 4})])
    s.batch([Record("a", 130_000, {"amount": 8})])
    s.batch([Record("a", 25_000, {"amount": 16}), Record("c", 40_000, {"amount": 32})])  # too late
    s.batch([Record("a", 30_000, {"amount": None}), Record("b", 300_000, {"amount": 64})])  # too late
    s.end()
    return s


@pytest.mark.parametrize("window", [Tumbling("1 minute"), Session("30 seconds")], ids=["tumbling", "session"])
def test_a_postgres_results_table_converges_to_the_bounded_run_exactly_once(pg, tmp_path, window):
    sink = _sink(pg)
    s = _stream(tmp_path, sink, window)
    truth = s.truth()
    assert _rows(sink) != truth
    report = eventtime.reconcile(s.late_path, sink)
    assert (report.written, report.reconciled, report.left) == (True, 3, {})
    if window.merging:
        assert report.windows_merged == 1  # a@25 s and a@30 s join [1 s, 31 s) and [50 s, 80 s)
    assert _rows(sink) == truth
    again = eventtime.reconcile(s.late_path, _sink_like(sink))
    assert (again.written, again.reconciled, again.already) == (False, 0, 3)
    with psycopg.connect(sink.conninfo) as conn:
        ledger = conn.execute("SELECT query_id, batch_id FROM eventtime_ledger WHERE target = %s AND query_id = "
                              "'reconcile'", (sink.table,)).fetchall()
    assert ledger == [("reconcile", 0)]


def _sink_like(sink: PostgresSink) -> PostgresSink:
    return PostgresSink(sink.conninfo, sink.table, sink.pipeline, key_columns=KEYS)


@pytest.mark.parametrize("point", ["before_reconcile_commit", "after_reconcile_commit"])
def test_a_killed_run_leaves_the_postgres_table_before_or_after_it(pg, tmp_path, point):
    sink = _sink(pg)
    s = _stream(tmp_path, sink, Tumbling("1 minute"))
    truth, before = s.truth(), _rows(sink)
    code = textwrap.dedent(f"""
        import eventtime
        from eventtime.sinks import PostgresSink
        eventtime.reconcile({s.late_path!r}, PostgresSink({sink.conninfo!r}, {sink.table!r}, "p", key_columns=["user"]))
    """)
    proc = subprocess.run([sys.executable, "-c", code], env={**os.environ, "EVENTTIME_FAULT": f"kill:{point}:0"},
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    assert _rows(sink) == (before if point == "before_reconcile_commit" else truth)
    report = eventtime.reconcile(s.late_path, _sink_like(sink))
    assert report.written == (point == "before_reconcile_commit")
    assert _rows(sink) == truth


def test_a_postgres_table_of_other_columns_is_refused(pg, tmp_path):
    sink = _sink(pg)
    s = _stream(tmp_path, sink, Tumbling("1 minute"))
    with psycopg.connect(sink.conninfo, autocommit=True) as conn:
        conn.execute(f"ALTER TABLE {sink.table} RENAME COLUMN hi TO highest")
    with pytest.raises(ValueError, match=f"PostgreSQL table '{sink.table}' has no column.*hi"):
        eventtime.reconcile(s.late_path, _sink_like(sink))


def test_the_command_reconciles_into_postgres(pg, tmp_path, capsys):
    from eventtime.cli.late import main

    sink = _sink(pg)
    s = _stream(tmp_path, sink, Tumbling("1 minute"))
    assert main(["late", "reconcile", "--late", s.late_path, "--results", sink.table, "--postgres", sink.conninfo],
                hard_exit=False) == 0
    text = capsys.readouterr().out
    assert "3 reconciled now into 2 CORRECTION pane(s)" in text and f"PostgreSQL table {sink.table}" in text
    assert _rows(sink) == s.truth()
