"""The one-row-per-window tables (``DeltaResultsSink(mode="upsert")``, ``PostgresSink``) hold
exactly the current sessions: a session pane deletes the rows of the sessions it supersedes
(its ``merged_from``), also when the superseded session fired in the same batch. Held batch by
batch to the reference model's current sessions (transcript 15), and to a batch in which a
session fires and then grows."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pytest

from eventtime.core.reference import ReferenceEngine
from eventtime.harness.scenario import parse_scenario
from eventtime.sinks import DeltaResultsSink, PostgresSink
from eventtime.sinks.local_postgres import LocalPostgres, find_pg_bin

UTC = dt.timezone.utc
TS = pa.timestamp("ms", tz="UTC")
BOUNDS = pa.list_(pa.struct([("start", TS), ("end", TS)]))
_names = iter(range(10**6))


def _ms(v: int) -> dt.datetime:
    return dt.datetime.fromtimestamp(v / 1000, UTC)


def _table(panes: list) -> pa.Table:
    """Panes ``(user, start, end, index, count, merged_from bounds)`` as route gives them."""
    return pa.table({
        "user": [p[0] for p in panes],
        "window_start": pa.array([_ms(p[1]) for p in panes], TS),
        "window_end": pa.array([_ms(p[2]) for p in panes], TS),
        "pane_timing": ["ON_TIME"] * len(panes),
        "pane_index": pa.array([p[3] for p in panes], pa.int64()),
        "is_final": [False] * len(panes),
        "count": pa.array([p[4] for p in panes], pa.int64()),
        "merged_from": pa.array([[{"start": _ms(s), "end": _ms(e)} for s, e in p[5]] for p in panes], BOUNDS),
    })


@pytest.fixture(scope="module")
def pg():
    if find_pg_bin() is None:
        pytest.skip("PostgreSQL is not installed (make install installs it)")
    server = LocalPostgres().start()
    yield server
    server.cleanup()


class _Delta:
    def __init__(self, tmp_path):
        self.path = str(tmp_path / "current")
        self.sink = DeltaResultsSink(self.path, pipeline="s", mode="upsert", sleep=lambda s: None)

    def rows(self) -> dict:
        from deltalake import DeltaTable

        t = DeltaTable(self.path).to_pyarrow_table().to_pylist()
        return {(r["user"], int(r["window_start"].timestamp() * 1000)): (int(r["window_end"].timestamp() * 1000),
                                                                           r["pane_index"], r["count"]) for r in t}


class _Postgres:
    def __init__(self, pg):
        import psycopg

        self.conninfo, self.psycopg = pg.conninfo, psycopg
        self.table = f"sessions_{next(_names)}"
        self.sink = PostgresSink(pg.conninfo, self.table, pipeline="s", sleep=lambda s: None)

    def rows(self) -> dict:
        with self.psycopg.connect(self.conninfo) as conn:
            t = conn.execute(f'SELECT "user", window_start, window_end, pane_index, count FROM {self.table}').fetchall()
        return {(u, int(s.timestamp() * 1000)): (int(e.timestamp() * 1000), i, c) for u, s, e, i, c in t}


@pytest.fixture(params=["delta", "postgres"])
def table(request, tmp_path):
    return _Delta(tmp_path) if request.param == "delta" else _Postgres(request.getfixturevalue("pg"))


def test_the_table_holds_the_model_s_current_sessions_after_every_batch(table):
    path = Path(__file__).parents[1] / "transcripts" / "15_session_merge_of_fired_sessions.json"
    parsed = parse_scenario(json.loads(path.read_text())["scenario"])
    engine = ReferenceEngine(parsed.config)
    current: dict = {}
    for batch_id, batch in enumerate(parsed.batches):
        result = engine.process_batch(batch, parsed.now_ms)
        for p in result.panes:
            for w in p.merged_from:
                current.pop((p.key, w.start_ms), None)
            current[(p.key, p.window.start_ms)] = (p.window.end_ms, p.index, p.values["count"])
        if result.panes:
            table.sink(_table([(p.key, p.window.start_ms, p.window.end_ms, p.index, p.values["count"],
                                [(w.start_ms, w.end_ms) for w in p.merged_from]) for p in result.panes]), batch_id, "q")
        assert table.rows() == current, f"after batch {batch_id}"
    assert set(current) == {("a", 100), ("a", 130)}


def test_a_session_that_fired_and_grew_in_one_batch_leaves_one_row(table):
    """[0, 15) fired, then grew to [0, 20) in the same batch; a later batch merges [0, 20) and
    [30, 45) into [0, 45); a replayed batch changes nothing."""
    table.sink(_table([("a", 0, 15, 0, 1, []), ("a", 0, 20, 1, 2, [(0, 15)]), ("b", 0, 15, 0, 1, [])]), 0, "q")
    assert table.rows() == {("a", 0): (20, 1, 2), ("b", 0): (15, 0, 1)}
    table.sink(_table([("a", 30, 45, 0, 1, [])]), 1, "q")
    table.sink(_table([("a", 0, 45, 2, 4, [(0, 20), (30, 45)])]), 2, "q")
    assert table.rows() == {("a", 0): (45, 2, 4), ("b", 0): (15, 0, 1)}
    assert not table.sink(_table([("a", 0, 45, 2, 4, [(0, 20), (30, 45)])]), 2, "q").written
    assert table.rows() == {("a", 0): (45, 2, 4), ("b", 0): (15, 0, 1)}
