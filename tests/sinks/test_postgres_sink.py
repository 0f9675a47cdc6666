"""PostgresSink against a real PostgreSQL server started in a temporary directory.

Faults are real: a backend terminated by ``pg_terminate_backend`` between two chunks, the
server stopped with ``pg_ctl -m immediate`` (a crash) in the middle of a flush and started
again, a row lock held by another session, a value the column type refuses. After each the
table must equal the one an uninterrupted write gives, row for row, with the batch in the
ledger once.
"""

from __future__ import annotations

import datetime as dt
import re
import threading
import time

import psycopg
import pyarrow as pa

import pytest

from eventtime.sinks import BatchSinkError, PostgresSink
from eventtime.sinks.local_postgres import LocalPostgres, find_pg_bin

pytestmark = pytest.mark.skipif(find_pg_bin() is None, reason="PostgreSQL is not installed (make install installs it)")

W0 = dt.datetime(2024, 5, 1, tzinfo=dt.timezone.utc)
MINUTE = dt.timedelta(minutes=1)


@pytest.fixture(scope="module")
def pg():
    server = LocalPostgres().start()
    yield server
    server.cleanup()


_tables = iter(range(10**6))


@pytest.fixture
def table_name():
    return f"panes_{next(_tables)}"


def panes(n: int, index: int = 0, timing: str = "ON_TIME", amount_scale: int = 1) -> pa.Table:
    users = [f"u{i % 7}" if i % 11 else None for i in range(n)]  # a null key is a key
    starts = [W0 + MINUTE * (i // 7) for i in range(n)]
    return pa.table({
        "user": users,
        "window_start": starts,
        "window_end": [s + MINUTE for s in starts],
        "pane_timing": [timing] * n,
        "pane_index": pa.array([index] * n, pa.int64()),
        "is_final": [False] * n,
        "count": pa.array([i + 1 for i in range(n)], pa.int64()),
        "amount": [(i * 1.5) * amount_scale for i in range(n)],
    })


def rows(pg, table: str) -> list[tuple]:
    with psycopg.connect(pg.conninfo) as conn:
        return conn.execute(
            f"SELECT \"user\", window_start, window_end, pane_timing, pane_index, is_final, count, amount FROM {table} "
            "ORDER BY \"user\" NULLS FIRST, window_start"
        ).fetchall()


def ledger(pg, table: str) -> list[tuple]:
    with psycopg.connect(pg.conninfo) as conn:
        return conn.execute(
            "SELECT query_id, batch_id, rows, rejected FROM eventtime_ledger WHERE target = %s ORDER BY 1, 2", (table,)
        ).fetchall()


def reference(pg, batches, name: str) -> list[tuple]:
    """The table an uninterrupted sink writes for ``batches``."""
    sink = PostgresSink(pg.conninfo, name, pipeline="ref", max_rows=10)
    for batch_id, table in enumerate(batches):
        sink(table, batch_id, "q-ref")
    return rows(pg, name)


def test_a_batch_is_written_once_and_the_latest_pane_wins(pg, table_name):
    sink = PostgresSink(pg.conninfo, table_name, pipeline="p", max_rows=10)
    first = sink(panes(40), 0, "q1")
    assert first.written and first.rows == 40 and first.chunks == 4
    again = sink(panes(40), 0, "q1")
    assert not again.written and again.skipped == "already_committed"
    # batch 1: a LATE re-firing of the first 7 windows; in one batch two panes of a window: the last wins
    late = pa.concat_tables([panes(7, index=1, timing="LATE", amount_scale=10), panes(7, index=2, timing="LATE", amount_scale=100)])
    assert sink(late, 1, "q1").rows == 7
    # an older pane (a new query id replaying batch 0) does not overwrite a newer one
    assert sink(panes(40), 0, "q2").written
    stored = rows(pg, table_name)
    assert len(stored) == 40
    by_key = {(r[0], r[1]): r for r in stored}
    for i in range(7):
        user = f"u{i % 7}" if i % 11 else None
        assert by_key[(user, W0)][3:5] == ("LATE", 2)
        assert by_key[(user, W0)][7] == pytest.approx(i * 1.5 * 100)
    assert ledger(pg, table_name) == [("q1", 0, 40, 0), ("q1", 1, 7, 0), ("q2", 0, 40, 0)]
    assert sink.pipeline_query_ids() == ["q1", "q2"]


def test_chunks_follow_the_row_and_byte_limits(pg, table_name):
    statements = []

    class Counting(PostgresSink):
        def write_rows(self, conn, columns, rows):
            statements.append(len(rows))
            super().write_rows(conn, columns, rows)

    assert Counting(pg.conninfo, table_name, pipeline="p", max_rows=16)(panes(50), 0, "q").chunks == 4
    assert statements == [16, 16, 16, 2]
    statements.clear()
    # by bytes: each chunk holds as many rows as fit in max_bytes, and the next row would not
    sink = Counting(pg.conninfo, table_name + "_b", pipeline="p", max_rows=16, max_bytes=600)
    sizes = [sink.row_bytes(r) for r in sink.prepare(panes(50), 0, "q")[1]]
    assert 60 < sizes[0] < 300
    result = sink(panes(50), 0, "q")
    assert result.chunks == len(statements) > 4 and sum(statements) == 50
    start = 0
    for n in statements:
        assert sum(sizes[start:start + n]) <= 600
        assert start + n == 50 or sum(sizes[start:start + n + 1]) > 600
        start += n


@pytest.mark.parametrize("replay", [True, False])
def test_a_connection_dropped_in_the_middle_of_a_flush_ends_equal_to_an_uninterrupted_write(pg, table_name, replay):
    batches = [panes(40), panes(14, index=1, timing="LATE", amount_scale=3)]
    expected = reference(pg, batches, table_name + "_ref")
    dropped = []

    def drop_the_connection(point):
        if point.stage == "chunk" and point.batch_id == 0 and point.attempt == 0 and point.chunk == 2:
            with psycopg.connect(pg.conninfo, autocommit=True) as admin:
                dropped.append(admin.execute(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE pid <> pg_backend_pid() "
                    "AND datname = current_database() AND state = 'idle in transaction'").fetchall())

    sink = PostgresSink(pg.conninfo, table_name, pipeline="p", max_rows=10, replay=replay, backoff_s=0.05,
                        fault_injector=drop_the_connection)
    first = sink(batches[0], 0, "q")
    assert dropped == [[(True,)]]
    # the transaction with chunks 0 and 1 went with the connection: the batch was replayed whole
    assert first.written and first.attempts == 2 and first.rows == 40
    sink(batches[1], 1, "q")
    assert rows(pg, table_name) == expected
    assert ledger(pg, table_name) == [("q", 0, 40, 0), ("q", 1, 14, 0)]


def test_the_server_killed_in_the_middle_of_a_flush_and_restarted_loses_and_duplicates_nothing(pg, table_name):
    batches = [panes(30), panes(21, index=1, timing="LATE", amount_scale=2)]
    expected = reference(pg, batches, table_name + "_ref")
    restarted = threading.Event()

    def crash_the_server(point):
        if point.stage == "chunk" and point.batch_id == 1 and point.attempt == 0 and point.chunk == 1:
            pg.stop("immediate")  # a crash: the open transaction is gone with the server

            def start_again():
                time.sleep(1.0)
                pg.start()
                restarted.set()

            threading.Thread(target=start_again, daemon=True).start()

    sink = PostgresSink(pg.conninfo, table_name, pipeline="p", max_rows=10, retries=8, backoff_s=0.2, max_backoff_s=1.0,
                        fault_injector=crash_the_server)
    assert sink(batches[0], 0, "q").attempts == 1
    result = sink(batches[1], 1, "q")
    assert restarted.is_set()
    assert result.written and result.attempts >= 2
    assert rows(pg, table_name) == expected
    assert ledger(pg, table_name) == [("q", 0, 30, 0), ("q", 1, 21, 0)]


@pytest.mark.parametrize("replay", [False, True])
def test_a_lock_timeout_retries_the_statement_alone_or_replays_the_batch(pg, table_name, replay):
    sink = PostgresSink(pg.conninfo, table_name, pipeline="p", max_rows=10, replay=replay, lock_timeout_ms=150,
                        backoff_s=0.2, max_backoff_s=0.4, retries=6)
    sink(panes(30), 0, "q")
    holder = psycopg.connect(pg.conninfo)
    # another session holds a row of the third chunk (rows 20-29 in key order) for 0.5 s
    target_user = rows(pg, table_name)[25][0]
    holder.execute(f"SELECT 1 FROM {table_name} WHERE \"user\" = %s FOR UPDATE", (target_user,))
    release = threading.Timer(0.5, holder.rollback)
    release.start()
    result = sink(panes(30, index=1, timing="LATE", amount_scale=5), 1, "q")
    # The sink's statement goes on as soon as the server has the ROLLBACK, maybe before the
    # timer's thread has its reply: closing the connection under that thread let it read and
    # write the next connection's socket (same descriptor) and broke that connection.
    release.join()
    holder.close()
    if replay:
        assert result.attempts >= 2 and result.statement_retries == 0
    else:
        assert result.attempts == 1 and result.statement_retries >= 1
    assert [r[3:5] for r in rows(pg, table_name)] == [("LATE", 1)] * 30
    assert ledger(pg, table_name) == [("q", 0, 30, 0), ("q", 1, 30, 0)]


def test_a_value_the_column_refuses_is_reported_with_its_batch_and_row_and_the_rest_is_written(pg, table_name):
    with psycopg.connect(pg.conninfo, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {table_name} (\"user\" text, window_start timestamptz, window_end timestamptz, "
            "pane_timing text, pane_index bigint, is_final boolean, count smallint, amount double precision, "
            "query_id text, batch_id bigint, written_at timestamptz, "
            "UNIQUE NULLS NOT DISTINCT (\"user\", window_start, window_end))"
        )
    table = panes(25)
    counts = table.column("count").to_pylist()
    counts[13] = 100_000  # smallint holds up to 32 767
    counts[21] = -50_000
    table = table.set_column(table.schema.get_field_index("count"), "count", pa.array(counts, pa.int64()))
    sink = PostgresSink(pg.conninfo, table_name, pipeline="p", max_rows=10)
    result = sink(table, 3, "q")
    assert result.written and result.rows == 23
    assert sorted((r.batch_id, r.row_index, r.row["count"]) for r in result.rejected) == [(3, 13, 100_000), (3, 21, -50_000)]
    assert all("out of range" in r.error for r in result.rejected)
    assert len(rows(pg, table_name)) == 23
    with psycopg.connect(pg.conninfo) as conn:
        stored = conn.execute(
            f"SELECT batch_id, row_index, key, row->>'count', error FROM {table_name}_rejects ORDER BY row_index").fetchall()
    assert [s[:4] for s in stored] == [(3, 13, '{"user":"u6"}', "100000"), (3, 21, '{"user":"u0"}', "-50000")]
    assert ledger(pg, table_name) == [("q", 3, 23, 2)]
    # route hands the refused rows to the alerter: one error-level event for the batch and table
    from eventtime import Alerter, BatchStats
    from eventtime.spark.sink_checks import rejected_rows

    refused = rejected_rows([(sink, result)])
    assert refused == {f"postgres table {table_name}": (
        (13, {"user": "u6"}, "NumericValueOutOfRange: smallint out of range"),
        (21, {"user": "u0"}, "NumericValueOutOfRange: smallint out of range"))}
    (alert,) = Alerter(dsn=None, pipeline="p").on_batch(3, None, BatchStats(3, 25, 23, 0, 0, None, {}, rejected=refused)).alerts
    assert (alert.kind, alert.count) == ("rows_rejected", 2)
    assert alert.message.startswith(f"[p] postgres table {table_name} refused 2 row(s) of batch 3, e.g. row 13 (key {{'user': 'u6'}})")


def test_an_error_that_is_not_transient_fails_at_once_naming_table_and_batch(pg, table_name):
    with psycopg.connect(pg.conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table_name} (\"user\" text, window_start timestamptz, window_end timestamptz, "
                     "UNIQUE NULLS NOT DISTINCT (\"user\", window_start, window_end))")
    sink = PostgresSink(pg.conninfo, table_name, pipeline="p")
    with pytest.raises(BatchSinkError, match=rf"postgres table {table_name}: batch 4 of query q failed: UndefinedColumn") as info:
        sink(panes(5), 4, "q")
    assert info.value.attempts == 1 and info.value.batch_id == 4
    assert f"the existing table {table_name} lacks a column of the panes; the sink writes ['user', 'window_start'" in str(info.value)
    assert ledger(pg, table_name) == []


def test_an_existing_table_without_the_unique_constraint_is_refused_saying_what_to_add(pg, table_name):
    with psycopg.connect(pg.conninfo, autocommit=True) as conn:
        conn.execute(f"CREATE TABLE {table_name} (\"user\" text, window_start timestamptz, window_end timestamptz, "
                     "pane_timing text, pane_index bigint, is_final boolean, count bigint, amount double precision, "
                     "query_id text, batch_id bigint, written_at timestamptz)")
    with pytest.raises(BatchSinkError, match=r'needs a unique constraint on \("user", "window_start", "window_end"\)') as info:
        PostgresSink(pg.conninfo, table_name, pipeline="p")(panes(5), 0, "q")
    assert ledger(pg, table_name) == []
    # the statement the message suggests runs as printed ("user" is a reserved word), and then the sink writes
    hint = re.search(r'ALTER TABLE \S+ ADD UNIQUE NULLS NOT DISTINCT \((?:"[^"]+"(?:, )?)+\)', str(info.value)).group(0)
    assert hint == f'ALTER TABLE "{table_name}" ADD UNIQUE NULLS NOT DISTINCT ("user", "window_start", "window_end")'
    with psycopg.connect(pg.conninfo, autocommit=True) as conn:
        conn.execute(hint)
    assert PostgresSink(pg.conninfo, table_name, pipeline="p")(panes(5), 0, "q").rows == 5


def test_an_unreachable_server_fails_after_the_retries_and_a_later_call_writes_the_batch(pg, table_name):
    waits = []
    unreachable = PostgresSink(f"host=127.0.0.1 port={pg.port + 1} user=eventtime dbname=postgres", table_name,
                               pipeline="p", retries=2, backoff_s=0.01, sleep=waits.append, connect_timeout_s=1)
    with pytest.raises(BatchSinkError, match="not written after 3 attempts") as info:
        unreachable(panes(5), 0, "q")
    assert info.value.attempts == 3 and waits == [0.01, 0.02]
    assert PostgresSink(pg.conninfo, table_name, pipeline="p")(panes(5), 0, "q").rows == 5


@pytest.mark.parametrize(
    "kwargs, error, message",
    [
        ({"conninfo": 5}, TypeError, "conninfo"),
        ({"table": "a.b.c"}, ValueError, "table must be 'table' or 'schema.table', got 'a.b.c'"),
        ({"pipeline": ""}, ValueError, "pipeline"),
        ({"max_rows": 0}, ValueError, "max_rows must be >= 1, got 0"),
        ({"max_bytes": "1MB"}, TypeError, "max_bytes must be an int"),
        ({"retries": -1}, ValueError, "retries must be >= 0, got -1"),
        ({"replay": "yes"}, TypeError, "replay must be True or False"),
        ({"backoff_s": -0.5}, ValueError, "backoff_s must be >= 0"),
        ({"lock_timeout_ms": 0}, ValueError, "lock_timeout_ms must be >= 1"),
        ({"key_columns": "user"}, TypeError, "key_columns must be a sequence"),
    ],
)
def test_bad_settings_are_refused_naming_the_parameter(kwargs, error, message):
    settings = {"conninfo": "host=127.0.0.1", "table": "t", "pipeline": "p", **kwargs}
    with pytest.raises(error, match=message.replace("(", r"\(").replace(")", r"\)").replace(".", r"\.")):
        PostgresSink(settings.pop("conninfo"), settings.pop("table"), settings.pop("pipeline"), **settings)


def test_a_pane_table_without_the_window_columns_is_refused(pg, table_name):
    with pytest.raises(ValueError, match="has no column 'window_end'"):
        PostgresSink(pg.conninfo, table_name, pipeline="p")(pa.table({"user": ["a"], "window_start": [W0]}), 0, "q")
