"""The catalogue of hostile inputs (issue "Reliability", section "Bad input").

Each case is data: the raw JSON lines it injects (per micro-batch) and where its rows must
end up. ``tests/spark/test_bad_input.py`` feeds every case through ONE real streaming query
and checks each row by its unique ``id``; :func:`markdown_table` renders the catalogue for
docs/reliability.md (``python tests/spark/bad_input_catalogue.py``).

Time line (tumbling 1-minute windows, out-of-orderness B = 10 s, allowed lateness L = 1 min,
``now`` pinned to BASE + 2 h, ``max_future`` 1 day, ``min_valid`` 2000-01-01):

* batch 0 - the catalogue proper, at BASE .. BASE + 70 s: the watermark after it is
  BASE + 60 s (the far-future rows in it must not move it);
* batch 1 - partition ``p0`` moves on (BASE + 150 s) while partition ``p-lag`` sends events
  3 days old: W after it is BASE + 140 s;
* batch 2 - a late burst: 8 of 10 rows are for the expired window [BASE, BASE + 60 s);
* batch 3 - a heartbeat at BASE + 1 h fires and purges every window (not a data row).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

BASE = 1_700_000_040_000  # 2023-11-14T22:14:00Z, a minute boundary
MINUTE = 60_000
DAY = 86_400_000
W0, W1, W2 = BASE, BASE + MINUTE, BASE + 2 * MINUTE
DATE_ONLY_WINDOW = 1_699_920_000_000  # 2023-11-14T00:00:00Z
NOW = BASE + 2 * 3_600_000
MAX_FUTURE = DAY
OUT_OF_ORDERNESS_MS = 10_000
LATENESS_MS = MINUTE
HEARTBEAT_TS = BASE + 3_600_000
# Watermark seen by each data batch (computed from the batches before it).
WATERMARK_IN_BATCH = {0: None, 1: BASE + 60_000, 2: BASE + 140_000}

SCHEMA = "id long, user_id string, ts string, amount double, partition string, hb boolean, _corrupt_record string"


def j(**fields) -> str:
    """A JSON line (NaN / Infinity as the bare tokens Spark's reader accepts by default)."""
    return json.dumps(fields, ensure_ascii=False)


@dataclass(frozen=True)
class Case:
    name: str
    how: str  # how the input is hostile, for the docs table
    lines: tuple  # ((batch, raw line), ...)
    ids: tuple  # ids of the rows the reader makes of the lines
    kind: str  # "pane", "late", "invalid" or "skipped"
    reason: Optional[str] = None  # for late / invalid
    # for "pane": the final pane of each (user_id, window_start) the case makes: (count, sum)
    panes: tuple = ()
    note: str = ""


def _pane(name, how, i, user, ts, amount=1.0, window=W0, note="", **extra):
    line = j(id=i, user_id=user, ts=ts, amount=amount, **extra)
    s = None if amount is None or amount != amount else float(amount)
    return Case(name, how, ((0, line),), (i,), "pane", panes=(((user, window), (1, s)),), note=note)


def _invalid(name, how, i, ts, reason, user=None, note="", line=None, batch=0):
    line = line if line is not None else j(id=i, user_id=user or f"bad-{i}", ts=ts, amount=1.0)
    return Case(name, how, ((batch, line),), (i,), "invalid", reason, note=note)


INF = float("inf")
NAN = float("nan")

CASES: list[Case] = [
    # --- rows that land in the results -------------------------------------------------
    _pane("epoch ms (baseline)", 'ts `1700000041000` (JSON number)', 1, "ok-number", 1_700_000_041_000, 1.5),
    _pane("epoch ms as a string", 'ts `"1700000042000"`', 2, "ok-numstr", "1700000042000", 2.0),
    Case("epoch ms in exponent notation", "ts `1.700000043E12` (JSON number)",
         ((0, '{"id": 3, "user_id": "ok-exp", "ts": 1.700000043E12, "amount": 3.0}'),), (3,), "pane",
         panes=((("ok-exp", W0), (1, 3.0)),)),
    Case("extra unknown columns", 'fields `color`, `nested` not in the schema',
         ((0, j(id=4, user_id="extra-cols", ts=1_700_000_044_000, amount=4.0, color="red", nested={"a": [1, 2]})),),
         (4,), "pane", panes=((("extra-cols", W0), (1, 4.0)),), note="the reader drops them: the schema is fixed"),
    _pane("ISO-8601 with Z", 'ts `"2023-11-14T22:14:05Z"`', 5, "iso-z", "2023-11-14T22:14:05Z"),
    _pane("ISO-8601 with lowercase z", 'ts `"2023-11-14T22:14:06z"`', 6, "iso-lower-z", "2023-11-14T22:14:06z"),
    _pane("ISO-8601, space separator, no offset", 'ts `"2023-11-14 22:14:07"`', 7, "iso-space", "2023-11-14 22:14:07",
          note="no offset means UTC"),
    _pane("ISO-8601 with +08:00", 'ts `"2023-11-15T06:14:08+08:00"`', 8, "iso-plus0800", "2023-11-15T06:14:08+08:00"),
    _pane("ISO-8601 with -0530", 'ts `"2023-11-14T16:44:09-0530"`', 9, "iso-minus0530", "2023-11-14T16:44:09-0530"),
    _pane("ISO-8601 with +05 (hours only)", 'ts `"2023-11-15T03:14:10+05"`', 10, "iso-plus05", "2023-11-15T03:14:10+05"),
    _pane("ISO-8601 with a 9-digit fraction", 'ts `"2023-11-14T22:14:11.987654321Z"`', 11, "iso-frac",
          "2023-11-14T22:14:11.987654321Z", note="floored to the ms"),
    _pane("ISO-8601 with a comma fraction", 'ts `"2023-11-14T22:14:12,5Z"`', 12, "iso-comma", "2023-11-14T22:14:12,5Z"),
    _pane("ISO-8601 without seconds", 'ts `"2023-11-14T22:14Z"`', 13, "iso-minutes", "2023-11-14T22:14Z"),
    _pane("ISO-8601 with surrounding blanks", 'ts `" 2023-11-14T22:14:13Z "`', 14, "iso-blanks", " 2023-11-14T22:14:13Z "),
    _pane("ISO-8601 date only", 'ts `"2023-11-14"`', 15, "iso-date", "2023-11-14", window=DATE_ONLY_WINDOW,
          note="midnight UTC; counted because the watermark had not passed it yet"),
    _pane("amount NaN", "amount `NaN` (bare JSON token)", 16, "amount-nan", 1_700_000_046_000, NAN,
          note="counted; sum ignores NaN, so it is null"),
    Case("amount \"NaN\" as a string", 'amount `"NaN"`',
        ((0, '{"id": 17, "user_id": "amount-nan-str", "ts": 1700000047000, "amount": "NaN"}'),), (17,), "pane",
        panes=((("amount-nan-str", W0), (1, None)),), note="the reader turns it into NaN; sum null"),
    _pane("amount Infinity", "amount `Infinity`", 18, "amount-inf", 1_700_000_048_000, INF, note="sum is +inf"),
    _pane("amount -Infinity", "amount `-Infinity`", 19, "amount-minus-inf", 1_700_000_049_000, -INF, note="sum is -inf"),
    Case("amount overflowing a double", "amount `1e999`",
         ((0, '{"id": 20, "user_id": "amount-overflow", "ts": 1700000050000, "amount": 1e999}'),), (20,), "pane",
         panes=((("amount-overflow", W0), (1, INF)),), note="the reader gives +inf"),
    Case("amount missing", "no `amount` field",
         ((0, j(id=21, user_id="amount-missing", ts=1_700_000_051_000)),), (21,), "pane",
         panes=((("amount-missing", W0), (1, None)),), note="counted; sum null"),
    Case("key of the wrong type (number)", "user_id `12345`",
         ((0, '{"id": 22, "user_id": 12345, "ts": 1700000052000, "amount": 22.0}'),), (22,), "pane",
         panes=((("12345", W0), (1, 22.0)),), note="a string column keeps the JSON text"),
    Case("key of the wrong type (object)", 'user_id `{"nested":1}`',
         ((0, '{"id": 23, "user_id": {"nested":1}, "ts": 1700000053000, "amount": 23.0}'),), (23,), "pane",
         panes=((('{"nested":1}', W0), (1, 23.0)),), note="a string column keeps the JSON text"),
    _pane("non-ASCII key", 'user_id `"ü-ñ-😀"`', 24, "ü-ñ-😀", 1_700_000_054_000, 24.0),
    Case("duplicate field", 'user_id given twice: `"dup-first"` then `"dup-last"`',
         ((0, '{"id": 25, "user_id": "dup-first", "ts": 1700000055000, "amount": 25.0, "user_id": "dup-last"}'),),
         (25,), "pane", panes=((("dup-last", W0), (1, 25.0)),), note="the last value wins"),
    Case("JSON array of objects on one line", '`[{...id 26...}, {...id 27...}]`',
         ((0, '[{"id": 26, "user_id": "array", "ts": 1700000056000, "amount": 1.0}, '
              '{"id": 27, "user_id": "array", "ts": 1700000057000, "amount": 2.0}]'),),
         (26, 27), "pane", panes=((("array", W0), (2, 3.0)),), note="the reader makes one row per element"),
    Case("null key (user_id missing)", "no `user_id` field",
         ((0, j(id=28, ts=1_700_000_060_000, amount=28.0)),), (28,), "pane",
         panes=(((None, W0), (1, 28.0)),), note="null is a key of its own, like SQL GROUP BY"),
    Case("null key (user_id null)", "user_id `null`",
         ((0, j(id=29, user_id=None, ts=BASE + 70_000, amount=29.0)),), (29,), "pane",
         panes=(((None, W1), (1, 29.0)),), note="null is a key of its own, like SQL GROUP BY"),
    Case("late within the allowed lateness", "a second row for a fired, unexpired window (batch 2)",
         ((0, j(id=30, user_id="late-ok", ts=BASE + 61_000, amount=1.0)),
          (2, j(id=78, user_id="late-ok", ts=BASE + 62_000, amount=2.0))),
         (30, 78), "pane", panes=((("late-ok", W1), (2, 3.0)),), note="re-fires the window as a LATE pane"),
    # --- malformed records (Spark's corrupt-record column) -------------------------------
    _invalid("truncated JSON", '`{"id": 31, "user_id": "trunc", "ts": `', 31, None, "malformed_record",
             line='{"id": 31, "user_id": "trunc", "ts": ', note="every field null; raw line in payload._corrupt_record"),
    _invalid("not JSON", "`this is not json id=32`", 32, None, "malformed_record", line="this is not json id=32"),
    _invalid("wrong type (amount \"abc\")", 'amount `"abc"` for a double', 33, None, "malformed_record",
             line='{"id": 33, "user_id": "wrong-type", "ts": 1700000043000, "amount": "abc"}',
             note="quarantined whole, not aggregated with a null amount"),
    _invalid("wrong type (number in quotes)", 'amount `"12.5"` for a double', 34, None, "malformed_record",
             line='{"id": 34, "user_id": "quoted-number", "ts": 1700000044000, "amount": "12.5"}'),
    _invalid("wrong type (id)", 'id `"#35"` for a long', 35, None, "malformed_record",
             line='{"id": "#35", "user_id": "wrong-id", "ts": 1700000045000, "amount": 1.0}'),
    _invalid("JSON scalar line", '`"just a string id=36"`', 36, None, "malformed_record", line='"just a string id=36"'),
    _invalid("JSON array of scalars", '`["id=37"]`', 37, None, "malformed_record", line='["id=37"]'),
    # --- timestamps that are quarantined --------------------------------------------------
    Case("ts missing", "no `ts` field", ((0, j(id=38, user_id="bad-38", amount=1.0)),), (38,), "invalid", "null_timestamp"),
    _invalid("ts null", "ts `null`", 39, None, "null_timestamp"),
    _invalid("ts empty string", 'ts `""`', 40, "", "null_timestamp"),
    _invalid("ts blank string", 'ts `"   "`', 41, "   ", "null_timestamp"),
    _invalid("ts 0", "ts `0`", 42, 0, "before_min_valid"),
    _invalid("ts negative", "ts `-1700000000000`", 43, -1_700_000_000_000, "before_min_valid"),
    _invalid("ts 1970-01-01", 'ts `"1970-01-01T00:00:00Z"`', 44, "1970-01-01T00:00:00Z", "before_min_valid"),
    _invalid("seconds where ms are expected", "ts `1700000044` (s)", 45, 1_700_000_044, "before_min_valid",
             note="read as ms it is 1970-01-20"),
    _invalid("microseconds where ms are expected", "ts `1700000045000000` (us)", 46, 1_700_000_045_000_000,
             "too_far_in_future", note="read as ms it is year ~55 800"),
    _invalid("ts year 9999 (ms)", "ts `253402300799999`", 47, 253_402_300_799_999, "too_far_in_future"),
    _invalid("ts year 9999 (ISO)", 'ts `"9999-12-31T23:59:59Z"`', 48, "9999-12-31T23:59:59Z", "too_far_in_future"),
    _invalid("ts 1 ms past now + max_future", "ts `now + 1 day + 1`", 49, NOW + MAX_FUTURE + 1, "too_far_in_future",
             note="does not move the watermark: later rows are still on time"),
    _invalid("ts \"yesterday\"", 'ts `"yesterday"`', 50, "yesterday", "unparseable_timestamp"),
    _invalid("ts impossible date", 'ts `"2023-02-30"`', 51, "2023-02-30", "unparseable_timestamp"),
    _invalid("ts month 13", 'ts `"2023-13-01"`', 52, "2023-13-01", "unparseable_timestamp"),
    _invalid("ts ISO basic format", 'ts `"20231114T221400Z"`', 53, "20231114T221400Z", "unparseable_timestamp",
             note="not supported by the Spark engine (Python 3.11 would take it)"),
    _invalid("ts year 10000", 'ts `"10000-01-01T00:00:00Z"`', 54, "10000-01-01T00:00:00Z", "unparseable_timestamp"),
    _invalid("ts boolean", "ts `true`", 55, True, "unparseable_timestamp"),
    _invalid("ts NaN", "ts `NaN` (bare JSON token)", 56, NAN, "unparseable_timestamp",
             note="a string column receives the text NaN"),
    _invalid("ts Infinity", "ts `Infinity`", 57, INF, "unparseable_timestamp"),
    _invalid("ts object", 'ts `{"$date": 1700000040000}`', 58, {"$date": 1_700_000_040_000}, "unparseable_timestamp"),
    _invalid("ts offset beyond 18 h", 'ts `"2023-11-14T22:14:00+19:00"`', 59, "2023-11-14T22:14:00+19:00",
             "unparseable_timestamp", note="Spark's limit (Python would take it)"),
    # --- lateness -------------------------------------------------------------------------
    Case("other partitions move on", "partition p0, BASE + 150 s (batch 1)",
         ((1, j(id=60, user_id="p0-next", ts=BASE + 150_000, amount=60.0, partition="p0")),), (60,), "pane",
         panes=((("p0-next", W2), (1, 60.0)),)),
    Case("a partition days behind the others", "partition p-lag, 3 rows 3 days old (batch 1)",
         tuple((1, j(id=i, user_id="lag", ts=BASE - 3 * DAY + (i - 60) * 1000, amount=1.0, partition="p-lag"))
               for i in (61, 62, 63)),
         (61, 62, 63), "late", "too_late", note="judged against the global watermark; lateness about 3 days"),
    Case("late burst", "8 of the 10 rows of batch 2 are for an expired window",
         tuple((2, j(id=i, user_id="burst", ts=BASE + (i - 69) * 1000, amount=1.0, partition="p0")) for i in range(70, 78)),
         tuple(range(70, 78)), "late", "too_late", note="all 8 late, the query goes on"),
    Case("on-time row inside the burst", "batch 2, BASE + 170 s",
         ((2, j(id=79, user_id="burst-ontime", ts=BASE + 170_000, amount=79.0, partition="p0")),), (79,), "pane",
         panes=((("burst-ontime", W2), (1, 79.0)),)),
    # --- not records ------------------------------------------------------------------------
    Case("blank lines", "an empty and a whitespace-only line", ((0, ""), (0, "   ")), (), "skipped",
         note="the reader makes no row of them: not a record, not counted"),
]

HEARTBEAT_LINE = (3, j(id=90, ts=HEARTBEAT_TS, hb=True))


def lines_by_batch() -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for case in CASES:
        for batch, line in case.lines:
            out.setdefault(batch, []).append(line)
    out.setdefault(HEARTBEAT_LINE[0], []).append(HEARTBEAT_LINE[1])
    return out


def markdown_table() -> str:
    """The catalogue as a Markdown table (case, how injected, outcome, test)."""
    test = "`tests/spark/test_bad_input.py` (catalogue)"
    rows = ["| case | how it is injected | outcome | test |", "| --- | --- | --- | --- |"]
    for c in CASES:
        if c.kind == "pane":
            out = "results: " + "; ".join(f"count {n}, sum {'null' if s is None else s}" for _, (n, s) in c.panes)
        elif c.kind == "late":
            out = f"late-data table, `{c.reason}`"
        elif c.kind == "invalid":
            out = f"late-data table as invalid, `{c.reason}`"
        else:
            out = "no row"
        if c.note:
            out += f" — {c.note}"
        rows.append(f"| {c.name} | {c.how.replace('|', '&#124;')} | {out} | {test} |")
    return "\n".join(rows)


if __name__ == "__main__":
    print(markdown_table())
