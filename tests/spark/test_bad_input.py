"""Hostile input through ONE real streaming query: nothing crashes it, nothing disappears.

The cases are data (tests/spark/bad_input_catalogue.py). Every row carries a unique ``id``;
each case's rows must land exactly where the catalogue says: in a final pane of the case's
own key (count and sum checked), or in the late-data output with the expected kind and
reason. Then the books must balance: rows in = rows counted in final panes + late + invalid.
"""

from __future__ import annotations

import json
import math
import os
import re
import time

import pytest
from bad_input_catalogue import (
    BASE,
    CASES,
    HEARTBEAT_LINE,
    LATENESS_MS,
    MAX_FUTURE,
    NOW,
    OUT_OF_ORDERNESS_MS,
    SCHEMA,
    WATERMARK_IN_BATCH,
    lines_by_batch,
)
from streams import drain

import eventtime

pytestmark = pytest.mark.spark

_ID_IN_TEXT = re.compile(r'id["]?\s*[=:]\s*"?#?(\d+)')


def _write_lines(dirname: str, name: str, lines: list[str]) -> None:
    tmp = os.path.join(os.path.dirname(dirname), name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        for line in lines:
            fh.write(line + "\n")
    os.rename(tmp, os.path.join(dirname, name))  # atomic: the file source never sees half a file


def _record_id(record: dict) -> int:
    payload = json.loads(record["payload"])
    if payload.get("id") is not None:
        return int(payload["id"])
    match = _ID_IN_TEXT.search(payload.get("_corrupt_record") or "")
    assert match, f"record without an id: {record}"
    return int(match.group(1))


def _same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return a == b or (math.isnan(a) and math.isnan(b))
    return a == b


def test_bad_input_catalogue_in_one_streaming_query(spark, tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    events = (
        spark.readStream.schema(SCHEMA).option("maxFilesPerTrigger", 1).json(str(src))
        .transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness=OUT_OF_ORDERNESS_MS,
                                             max_future=MAX_FUTURE, now=NOW))
    )
    out = events.transform(eventtime.window_aggregate(
        keys=["user_id"], window=eventtime.Tumbling("1 minute"), allowed_lateness=LATENESS_MS,
        aggregations=[eventtime.count(), eventtime.sum("amount")], partition_col="partition", heartbeat_col="hb"))

    panes, records, stats = [], [], []

    class Alerter:
        def on_batch(self, batch_id, recs, batch_stats):
            stats.append(batch_stats)

    router = eventtime.route(out, panes=lambda t, b, q: panes.append(t), late=lambda t, b, q: records.append(t),
                             alerter=Alerter(), pipeline="bad_input")
    query = router.start(checkpoint=str(tmp_path / "chk"))
    batches = lines_by_batch()
    n_data_rows = sum(len(c.ids) for c in CASES)
    try:
        for i in sorted(batches):
            _write_lines(str(src), f"{i:02d}.json", batches[i])
            drain(query, i)
        # The heartbeat's no-data batch purges every window; wait until all rows are accounted.
        deadline = time.monotonic() + 60
        while True:
            counted = _final_panes(panes)
            n_records = sum(t.num_rows for t in records)
            if sum(n for n, _ in counted.values()) + n_records >= n_data_rows or time.monotonic() > deadline:
                break
            query.processAllAvailable()
            time.sleep(0.1)
        assert query.isActive and query.exception() is None
    finally:
        query.stop()
    assert query.exception() is None

    # --- every row where the catalogue says ------------------------------------------------
    final = _final_panes(panes)
    recs = [r for t in records for r in t.to_pylist()]
    by_id: dict[int, list[dict]] = {}
    for r in recs:
        by_id.setdefault(_record_id(r), []).append(r)
    expected_panes = {}
    for case in CASES:
        if case.kind == "pane":
            for key_window, value in case.panes:
                assert key_window not in expected_panes, key_window
                expected_panes[key_window] = (case.name, value)
            for i in case.ids:
                assert i not in by_id, f"{case.name}: id {i} must be counted, not {by_id[i]}"
        elif case.kind in ("late", "invalid"):
            for i in case.ids:
                got = by_id.get(i, [])
                assert len(got) == 1, f"{case.name}: id {i} expected once in the late/invalid output, got {got}"
                assert (got[0]["kind"], got[0]["reason"]) == (case.kind, case.reason), f"{case.name}: {got[0]}"
    for key_window, (name, (n, s)) in expected_panes.items():
        assert key_window in final, f"{name}: no pane for {key_window}; panes: {sorted(final, key=str)}"
        got_n, got_s = final[key_window]
        assert got_n == n and _same(got_s, s), f"{name}: pane {key_window} = {(got_n, got_s)}, expected {(n, s)}"
    assert set(final) == set(expected_panes), set(final) ^ set(expected_panes)
    expected_record_ids = {i for c in CASES if c.kind in ("late", "invalid") for i in c.ids}
    assert set(by_id) == expected_record_ids

    # --- details of the records ------------------------------------------------------------
    cases = {c.name: c for c in CASES}
    for c in CASES:
        if c.reason == "malformed_record":
            (rec,) = by_id[c.ids[0]]
            payload = json.loads(rec["payload"])
            assert payload["_corrupt_record"] == c.lines[0][1], "the raw line is kept in the payload"
            assert rec["event_time"] is None and rec["lateness_ms"] is None
    wrong = by_id[cases['wrong type (amount "abc")'].ids[0]][0]
    assert wrong["raw_timestamp"] == "1700000043000" and wrong["user_id"] == "wrong-type"
    assert json.loads(wrong["payload"])["amount"] is None  # quarantined, not aggregated with a null
    assert by_id[cases["truncated JSON"].ids[0]][0]["raw_timestamp"] is None
    # batch 0 runs before any watermark exists: the records say so with a null, not 1970
    assert by_id[cases["ts 0"].ids[0]][0]["watermark"] is None
    assert by_id[cases["ts year 9999 (ISO)"].ids[0]][0]["raw_timestamp"] == "9999-12-31T23:59:59Z"
    assert by_id[cases["ts blank string"].ids[0]][0]["raw_timestamp"] == "   "
    for name, batch in (("a partition days behind the others", 1), ("late burst", 2)):
        for i in cases[name].ids:
            (rec,) = by_id[i]
            wm = WATERMARK_IN_BATCH[batch]
            event_ms = int(rec["event_time"].timestamp() * 1000)
            assert int(rec["watermark"].timestamp() * 1000) == wm, "far-future rows must not have moved the watermark"
            assert rec["lateness_ms"] == wm - event_ms
    assert all(by_id[i][0]["partition"] == "p-lag" and by_id[i][0]["lateness_ms"] > 3 * 86_400_000 - 60_000
               for i in cases["a partition days behind the others"].ids)
    null_key = [r for t in panes for r in t.to_pylist() if r["user_id"] is None]
    assert {r["window_start"].timestamp() * 1000 for r in null_key} == {BASE, BASE + 60_000}
    late_ok = sorted((r["pane_timing"], r["pane_index"], r["count"]) for t in panes for r in t.to_pylist()
                     if r["user_id"] == "late-ok")
    assert late_ok == [("LATE", 1, 2), ("ON_TIME", 0, 1)]

    # --- the books balance -----------------------------------------------------------------
    rows_in = sum(s.rows_in for s in stats)
    heartbeats = 1
    assert rows_in == n_data_rows + heartbeats, (rows_in, n_data_rows)
    counted = sum(n for n, _ in final.values())
    late = sum(1 for r in recs if r["kind"] == "late")
    invalid = sum(1 for r in recs if r["kind"] == "invalid")
    assert rows_in - heartbeats == counted + late + invalid, (rows_in, counted, late, invalid)
    assert (sum(s.late for s in stats), sum(s.invalid for s in stats)) == (late, invalid)
    assert HEARTBEAT_LINE[0] == max(batches)


def _final_panes(tables) -> dict:
    """(user_id, window_start ms) -> (count, sum) of the last pane (accumulating: it holds everything)."""
    last: dict = {}
    for t in tables:
        for r in t.to_pylist():
            key = (r["user_id"], int(r["window_start"].timestamp() * 1000))
            if key not in last or r["pane_index"] > last[key][0]:
                last[key] = (r["pane_index"], r["count"], r["sum_amount"])
    return {k: (n, s) for k, (_, n, s) in last.items()}


def test_corrupt_record_column_options(spark, tmp_path):
    """``corrupt_record_col``: a custom name, ``None`` (off), validation; the parse plan stays small."""
    path = tmp_path / "in.json"
    path.write_text('{"id": 1, "ts": 1700000040000, "amount": "abc"}\n{"id": 2, "ts": \n{"id": 3, "ts": 1700000040000}\n')
    df = (spark.read.schema("id long, ts string, amount double, bad string")
          .option("columnNameOfCorruptRecord", "bad").json(str(path)))

    def reasons(**kw):
        # Every column is collected: Spark's reader only type-checks the columns a query reads
        # (a wrong-typed ``amount`` is not a corrupt record when ``amount`` is pruned away).
        out = df.transform(eventtime.with_event_time("ts", unit="ms", now=NOW, **kw)).collect()
        assert all(r["__et_valid"] is (r["__et_reason"] is None) for r in out), out
        return {r["id"] or 2: r["__et_reason"] for r in out}

    assert reasons(corrupt_record_col="bad") == {1: "malformed_record", 2: "malformed_record", 3: None}
    assert reasons() == {1: None, 2: "null_timestamp", 3: None}  # no _corrupt_record column: nothing changes
    assert reasons(corrupt_record_col=None) == {1: None, 2: "null_timestamp", 3: None}
    with pytest.raises(TypeError, match="corrupt_record_col"):
        eventtime.with_event_time("ts", corrupt_record_col=1)
    out = df.transform(eventtime.with_event_time("ts", unit="ms", now=NOW, corrupt_record_col="bad"))
    plan = out._jdf.queryExecution().optimizedPlan().toString()
    assert plan.count("regexp_extract") <= 20, plan.count("regexp_extract")


@pytest.mark.parametrize("ddl", ["bigint", "double", "timestamp"])
def test_markers_and_bounds_in_order_on_plain_columns(spark, ddl):
    """The quarantine of a plain (not text) event time is written as checks in order
    (spark/extract.py): a malformed record first, then a record not enriched, then the value,
    then the bounds; ``__et_valid`` is exactly "no reason"."""
    from datetime import datetime, timezone

    from eventtime.spark.extract import ENRICHMENT_FAILED_COL

    def value(ms):
        if ms is None or ddl == "bigint":
            return ms
        return float(ms) if ddl == "double" else datetime.fromtimestamp(ms / 1000, tz=timezone.utc)

    good, early, late = NOW - 60_000, 5_000, NOW + 400 * 86_400_000
    rows = [  # id, ts, corrupt, not enriched, expected reason
        (1, good, "x", 1, "malformed_record"),
        (2, None, None, 1, "enrichment_failed"),
        (3, None, None, None, "null_timestamp"),
        (4, early, None, None, "before_min_valid"),
        (5, late, None, None, "too_far_in_future"),
        (6, good, None, None, None),
        (7, early, "x", None, "malformed_record"),
    ]
    df = spark.createDataFrame([(i, value(ts), bad, enr) for i, ts, bad, enr, _ in rows],
                               f"id int, ts {ddl}, bad string, {ENRICHMENT_FAILED_COL} int")
    out = df.transform(eventtime.with_event_time("ts", unit="ms", now=NOW, corrupt_record_col="bad")).collect()
    assert {r["id"]: r["__et_reason"] for r in out} == {i: why for i, *_, why in rows}
    for r in out:
        assert r["__et_valid"] is (r["__et_reason"] is None), r
        assert (r["__et_ms"] is None) is (r["__et_reason"] is not None), r
    assert ENRICHMENT_FAILED_COL not in out[0].asDict()
