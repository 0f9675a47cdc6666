"""Hypothesis strategies for micro-batch sequences, shared by the model and engine properties.

Timestamps are small integers (ms) so that windows, lateness and out-of-orderness interact
often; ``min_valid_ms`` is 1 and ``now_ms`` fixed so that 0 / negative and far-future values
are invalid.
"""

from __future__ import annotations

from hypothesis import strategies as st

NOW_MS = 100_000
MAX_FUTURE_MS = 10_000  # valid up to 110_000 inclusive
INVALID_TS = [None, "garbage", 0, -5, NOW_MS + MAX_FUTURE_MS + 1, "1970-01-01T00:00:00Z"]


@st.composite
def windows(draw):
    if draw(st.booleans()):
        return {"type": "tumbling", "size_ms": draw(st.sampled_from([1000, 2000, 3000])), "offset_ms": draw(st.sampled_from([0, 500, -700]))}
    size = draw(st.sampled_from([2000, 3000, 5000]))
    slide = draw(st.sampled_from([s for s in (500, 1000, 2000, 3000) if s <= size]))
    return {"type": "sliding", "size_ms": size, "slide_ms": slide, "offset_ms": draw(st.sampled_from([0, 300]))}


@st.composite
def records(draw, clock_ms: int, next_id):
    kind = draw(st.sampled_from(["data"] * 8 + ["heartbeat", "invalid"]))
    if kind == "invalid":
        ts = draw(st.sampled_from(INVALID_TS))
    else:
        # Mostly around the clock, sometimes far behind it (late) or a little ahead.
        ts = max(1, clock_ms + draw(st.integers(min_value=-6000, max_value=1500)))
    if kind == "heartbeat":
        return {"ts": ts, "heartbeat": True}
    return {"key": draw(st.sampled_from(["a", "b", "c"])), "ts": ts, "value": next_id()}


@st.composite
def scenarios(draw, max_batches: int = 6, max_records: int = 8):
    """A replay scenario dict; every data record's ``value`` is a unique id."""
    counter = iter(range(1, 10**9))
    batches = []
    clock = draw(st.integers(min_value=1000, max_value=5000))
    for _ in range(draw(st.integers(min_value=1, max_value=max_batches))):
        batch = [draw(records(clock, lambda: next(counter))) for _ in range(draw(st.integers(0, max_records)))]
        batches.append(batch)
        clock += draw(st.integers(min_value=0, max_value=2500))
    return _scenario(draw, draw(windows()), [0, 500, 1000], [0, 1000, 2500], MAX_FUTURE_MS, NOW_MS, batches)


@st.composite
def sliding_scenarios(draw, max_batches: int = 6, max_records: int = 8):
    """:func:`scenarios` with sliding windows several slides wide, so that records come after
    some of their windows expired and in time for others (partly late)."""
    base = draw(scenarios(max_batches, max_records))
    size = draw(st.sampled_from([3000, 5000]))
    window = {"type": "sliding", "size_ms": size, "slide_ms": draw(st.sampled_from([500, 1000])),
              "offset_ms": draw(st.sampled_from([0, 300]))}
    return {**base, "window": window}


def _scenario(draw, window: dict, out_of_orderness: list, lateness: list, max_future_ms: int, now_ms: int, batches: list) -> dict:
    return {
        "window": window,
        "max_out_of_orderness_ms": draw(st.sampled_from(out_of_orderness)),
        "allowed_lateness_ms": draw(st.sampled_from(lateness)),
        "accumulation": draw(st.sampled_from(["accumulating", "discarding"])),
        "emit": draw(st.sampled_from(["on_time_and_late", "final_only"])),
        "min_valid_ms": 1,
        "max_future_ms": max_future_ms,
        "now_ms": now_ms,
        "batches": batches,
    }


def flushed(scenario: dict) -> dict:
    """The scenario plus a last batch whose heartbeat (one per source partition) purges every window."""
    partitions = {r.get("partition") for batch in scenario["batches"] for r in batch} or {None}
    flush = [{"ts": scenario["now_ms"] + scenario["max_future_ms"], "heartbeat": True, "partition": p}
             for p in sorted(partitions, key=str)]
    return {**scenario, "batches": [*scenario["batches"], flush]}


# ----------------------------------------------------------------------------------------
# Calendar windows: hours around the DST changes of 2024 and a leap-year month end, so that
# 23- and 25-hour days, 169-hour weeks and month ends meet lateness and out-of-orderness.
# ----------------------------------------------------------------------------------------

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
CALENDAR_BASES_MS = (
    1_711_800_000_000,  # 2024-03-30T12:00Z: Berlin springs forward the next night
    1_729_944_000_000,  # 2024-10-26T12:00Z: Berlin falls back the next night
    1_730_548_800_000,  # 2024-11-02T12:00Z: New York falls back the next night
    1_709_121_600_000,  # 2024-02-28T12:00Z: the end of February 2024
)


@st.composite
def calendar_windows(draw):
    window = {
        "type": "calendar",
        "unit": draw(st.sampled_from(["day", "day", "week", "month"])),
        "tz": draw(st.sampled_from(["Europe/Berlin", "America/New_York", "America/Havana", "UTC+8"])),
    }
    if window["unit"] == "week":
        window["week_start"] = draw(st.sampled_from(["monday", "sunday"]))
    return window


@st.composite
def calendar_scenarios(draw, max_batches: int = 6, max_records: int = 8):
    """A replay scenario with calendar windows; every data record's ``value`` is a unique id."""
    counter = iter(range(1, 10**9))
    base = draw(st.sampled_from(CALENDAR_BASES_MS))
    now_ms, max_future_ms = base + 30 * DAY_MS, 30 * DAY_MS
    invalid = [None, "garbage", 0, -5, now_ms + max_future_ms + 1]
    clock = base
    batches = []
    for _ in range(draw(st.integers(min_value=1, max_value=max_batches))):
        batch = []
        for _ in range(draw(st.integers(0, max_records))):
            kind = draw(st.sampled_from(["data"] * 8 + ["heartbeat", "invalid"]))
            if kind == "invalid":
                batch.append({"key": "a", "ts": draw(st.sampled_from(invalid)), "value": next(counter)})
                continue
            # whole hours (local midnights are whole UTC hours in these zones) and a millisecond either side
            ts = clock + draw(st.integers(-36, 6)) * HOUR_MS + draw(st.sampled_from([0, 0, -1, 1, 1_800_000]))
            if kind == "heartbeat":
                batch.append({"ts": ts, "heartbeat": True})
            else:
                batch.append({"key": draw(st.sampled_from(["a", "b"])), "ts": ts, "value": next(counter)})
        batches.append(batch)
        clock += draw(st.integers(min_value=0, max_value=30)) * HOUR_MS
    return _scenario(draw, draw(calendar_windows()), [0, HOUR_MS, 6 * HOUR_MS], [0, HOUR_MS, DAY_MS], max_future_ms, now_ms, batches)


def any_scenarios(max_batches: int = 6, max_records: int = 8):
    """Fixed-grid or calendar scenarios."""
    return st.one_of(scenarios(max_batches, max_records), calendar_scenarios(max_batches, max_records))


# ----------------------------------------------------------------------------------------
# Typed rows: what users' tables hold (integers of every width, values above 2**53, decimals,
# booleans, dates, timestamps, strings; nulls in every column, keys and partitions included).
# ----------------------------------------------------------------------------------------

import datetime as _dt
from decimal import Decimal

TYPED_COLUMNS = (
    # name, Spark DDL type
    ("rid", "bigint"),
    ("k_int", "int"),
    ("k_big", "bigint"),
    ("k_str", "string"),
    ("k_dec", "decimal(18,3)"),
    ("k_bool", "boolean"),
    ("k_date", "date"),
    ("k_ts", "timestamp"),
    ("ts", "bigint"),
    ("hb", "boolean"),
    ("part", "int"),
    ("off", "bigint"),
    ("v_big", "bigint"),
    ("v_small", "smallint"),
    ("v_dec", "decimal(20,4)"),
    ("v_dbl", "double"),
    ("v_date", "date"),
    ("v_ts", "timestamp"),
    ("v_str", "string"),
    ("v_bool", "boolean"),
)
TYPED_KEY_SETS = (("k_big",), ("k_int", "k_str"), ("k_dec", "k_bool"), ("k_date",), ("k_ts", "k_big"))
_UTC = _dt.timezone.utc
_BIG = [2**53, 2**53 + 1, -(2**53) - 3, 2**63 - 1, -(2**63), 0, 7]
_SUMMABLE_BIG = [2**53 + 1, 2**53, -(2**53) - 3, 2**58 + 7, -(2**58), 0, 5]  # sums of <= 32 stay in int64
_TYPED_VALUES = {
    "k_int": [1, 2, -(2**31), 2**31 - 1],
    "k_big": _BIG,
    "k_str": ["a", "", "ü"],
    "k_dec": [Decimal("0.000"), Decimal("123456789012345.678"), Decimal("-0.001")],
    "k_bool": [True, False],
    "k_date": [_dt.date(1970, 1, 1), _dt.date(2024, 2, 29), _dt.date(9999, 12, 31)],
    "k_ts": [_dt.datetime(2024, 5, 1, 1, 0, tzinfo=_UTC), _dt.datetime(1900, 1, 1, 0, 0, 0, 1, tzinfo=_UTC)],
    "part": [0, 1, 2, 2**31 - 1],
    "off": [0, 2**53 + 1, 2**63 - 1],
    "v_big": _SUMMABLE_BIG,
    "v_small": [-(2**15), 2**15 - 1, 3],
    "v_dec": [Decimal("1.5000"), Decimal("9999999999999999.9999"), Decimal("-0.0001")],
    "v_dbl": [0.1, -2.5, 1e300],
    "v_date": [_dt.date(2000, 1, 1), _dt.date(2024, 5, 1)],
    "v_ts": [_dt.datetime(2024, 5, 1, 9, 0, 0, 123456, tzinfo=_UTC), _dt.datetime(2262, 4, 12, tzinfo=_UTC)],
    "v_str": ["x", "y", '"quoted"'],
    "v_bool": [True, False],
}


@st.composite
def typed_rows(draw, clock_ms: int, rid: int, keys: tuple):
    kind = draw(st.sampled_from(["data"] * 8 + ["heartbeat", "invalid"]))
    row = {name: None for name, _ in TYPED_COLUMNS}
    row["rid"] = rid
    row["hb"] = kind == "heartbeat"
    if kind == "invalid":
        row["ts"] = draw(st.sampled_from([None, 0, -5, NOW_MS + MAX_FUTURE_MS + 1]))
    else:
        row["ts"] = max(1, clock_ms + draw(st.integers(min_value=-6000, max_value=1500)))
    row["part"] = draw(st.sampled_from([None, *_TYPED_VALUES["part"]]))
    if kind == "heartbeat":
        return row
    row["off"] = draw(st.sampled_from([None, *_TYPED_VALUES["off"]]))
    for name in keys:
        row[name] = draw(st.sampled_from([None, *_TYPED_VALUES[name][:2]]))  # few keys: panes collide
    for name, values in _TYPED_VALUES.items():
        if name.startswith("v_"):
            row[name] = draw(st.sampled_from([None, *values]))
    return row


@st.composite
def typed_scenarios(draw, max_batches: int = 4, max_records: int = 6):
    """Typed micro-batches: ``{"keys", "window", ..., "batches": [[row, ...], ...]}`` (rows: TYPED_COLUMNS)."""
    keys = draw(st.sampled_from(TYPED_KEY_SETS))
    rid = iter(range(10**9))
    batches = []
    clock = draw(st.integers(min_value=1000, max_value=5000))
    for _ in range(draw(st.integers(min_value=1, max_value=max_batches))):
        batches.append([draw(typed_rows(clock, next(rid), keys)) for _ in range(draw(st.integers(0, max_records)))])
        clock += draw(st.integers(min_value=0, max_value=2500))
    return {
        "keys": keys,
        "window": draw(windows()),
        "max_out_of_orderness_ms": draw(st.sampled_from([0, 500, 1000])),
        "allowed_lateness_ms": draw(st.sampled_from([0, 1000, 2500])),
        "accumulation": draw(st.sampled_from(["accumulating", "discarding"])),
        "emit": draw(st.sampled_from(["on_time_and_late", "final_only"])),
        "batches": batches,
    }


@st.composite
def session_scenarios(draw, max_batches: int = 6, max_records: int = 8):
    """A replay scenario with session windows (gaps about the records' spacing, so that
    sessions form, grow, bridge and merge often)."""
    scenario = draw(scenarios(max_batches, max_records))
    # on a 100 ms grid, records exactly `gap` apart (sessions that only touch) are frequent
    grid = draw(st.sampled_from([1, 100]))

    def snap(record: dict) -> dict:
        ts = record["ts"]
        if grid == 1 or not isinstance(ts, int) or isinstance(ts, bool) or not 1 <= ts <= NOW_MS:
            return record
        return {**record, "ts": max(grid, ts - ts % grid)}

    batches = [[snap(r) for r in batch] for batch in scenario["batches"]]
    return {**scenario, "batches": batches, "window": {"type": "session", "gap_ms": draw(st.sampled_from([300, 1000, 2500]))}}


def every_kind_scenarios(max_batches: int = 6, max_records: int = 8):
    """Fixed-grid, calendar or session scenarios."""
    return st.one_of(any_scenarios(max_batches, max_records), session_scenarios(max_batches, max_records))


@st.composite
def partition_scenarios(draw, max_batches: int = 6, max_records: int = 8):
    """A fixed-window or session scenario whose records and heartbeats come from up to three
    source partitions (ints and null), each lagging by its own amount, some going silent
    from a batch on; with ``watermark="per_partition"`` and an idle timeout or none."""
    base = draw(st.one_of(scenarios(max_batches, max_records), session_scenarios(max_batches, max_records)))
    parts = draw(st.lists(st.sampled_from([0, 1, 2, None]), min_size=1, max_size=3, unique=True))
    lag = {p: draw(st.sampled_from([0, 2000, 6000])) for p in parts}
    n = len(base["batches"])
    silent_from = {p: draw(st.integers(min_value=1, max_value=n + 1)) for p in parts}
    batches = []
    for i, batch in enumerate(base["batches"]):
        sending = [p for p in parts if i < silent_from[p]] or parts[:1]
        out = []
        for record in batch:
            p = draw(st.sampled_from(sending))
            ts = record["ts"]
            if isinstance(ts, int) and not isinstance(ts, bool) and 1 <= ts <= NOW_MS:
                ts = max(1, ts - lag[p])
            out.append({**record, "ts": ts, "partition": p})
        batches.append(out)
    watermark = {"mode": "per_partition", "idle_timeout_ms": draw(st.sampled_from([None, 1000, 2500]))}
    return {**base, "batches": batches, "watermark": watermark,
            "batch_interval_ms": draw(st.sampled_from([500, 1000]))}
