"""examples/enrich_postgres_job.py (enrich, window, panes to PostgreSQL, late data to Delta)
SIGKILLed between the database commit and Spark's commit of the same micro-batch: the
resumed run's table equals an uninterrupted run's, row for row, and the ledger holds every
batch once."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import psycopg
import pytest

from eventtime.sinks.local_postgres import LocalPostgres, find_pg_bin

pytestmark = [
    pytest.mark.spark,
    pytest.mark.component,  # a PostgreSQL server and a killed job process: make check
    pytest.mark.skipif(find_pg_bin() is None, reason="PostgreSQL is not installed (make install installs it)"),
]

COLUMNS = '"user", tier, window_start, window_end, pane_timing, pane_index, is_final, count, sum_amount'
EXAMPLE = Path(__file__).parents[2] / "examples" / "enrich_postgres_job.py"


def _example():
    import importlib.util

    spec = importlib.util.spec_from_file_location("enrich_postgres_job", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _table(conninfo: str, table: str) -> list[tuple]:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(f"SELECT {COLUMNS} FROM {table} ORDER BY \"user\", window_start").fetchall()


def _ledger(conninfo: str, table: str) -> list[tuple]:
    with psycopg.connect(conninfo) as conn:
        return conn.execute(
            "SELECT batch_id, count(*) FROM eventtime_ledger WHERE target = %s GROUP BY batch_id ORDER BY 1", (table,)
        ).fetchall()


def _late(path: str) -> list[tuple]:
    from deltalake import DeltaTable

    rows = DeltaTable(path).to_pyarrow_table(columns=["kind", "reason", "key", "event_time", "offset"]).to_pylist()
    return sorted(tuple(r.values()) for r in rows)


def test_a_kill_between_the_database_commit_and_sparks_commit_resumes_to_the_uninterrupted_table(spark, tmp_path: Path):
    job = _example()
    input_dir = str(tmp_path / "input")
    job.write_input(input_dir)
    with LocalPostgres() as pg:
        job.run(spark, input_dir, str(tmp_path / "ref"), pg.conninfo, "panes_ref")
        expected = _table(pg.conninfo, "panes_ref")
        assert len(expected) > 20 and {r[4] for r in expected} >= {"ON_TIME", "LATE"}
        # enriched: every known user has its tier, the user the service does not know none
        assert {(r[0], r[1]) for r in expected} == {(u, job.TIERS.get(u)) for u in {r[0] for r in expected}}
        assert "u5" in {r[0] for r in expected}

        killed = str(tmp_path / "killed")
        env = {**os.environ, "EVENTTIME_FAULT": "kill:after_db_commit:1", "PYTHONPATH": str(Path(__file__).parents[2])}
        done = subprocess.run(
            [sys.executable, str(EXAMPLE), "--input", input_dir, "--output", killed, "--conninfo", pg.conninfo,
             "--table", "panes"],
            env=env, capture_output=True, text=True, timeout=600, start_new_session=True,
        )
        assert done.returncode == -9, done.stdout[-2000:] + done.stderr[-3000:]
        # the database has batch 1 (batch 0 fired no pane, so it wrote nothing); Spark's commit log does not
        reference_batches = [b for b, _ in _ledger(pg.conninfo, "panes_ref")]
        assert _ledger(pg.conninfo, "panes") == [(b, 1) for b in reference_batches if b <= 1] and 1 in reference_batches
        assert not os.path.exists(os.path.join(killed, "checkpoint", "commits", "1"))

        job.run(spark, input_dir, killed, pg.conninfo, "panes")  # Spark re-runs batch 1: the sink skips it
        assert _table(pg.conninfo, "panes") == expected
        assert _ledger(pg.conninfo, "panes") == [(b, 1) for b in reference_batches] and len(reference_batches) >= 4
        assert _late(os.path.join(killed, "late")) == _late(str(tmp_path / "ref" / "late"))
