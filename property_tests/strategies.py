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
    return {
        "window": draw(windows()),
        "max_out_of_orderness_ms": draw(st.sampled_from([0, 500, 1000])),
        "allowed_lateness_ms": draw(st.sampled_from([0, 1000, 2500])),
        "accumulation": draw(st.sampled_from(["accumulating", "discarding"])),
        "emit": draw(st.sampled_from(["on_time_and_late", "final_only"])),
        "min_valid_ms": 1,
        "max_future_ms": MAX_FUTURE_MS,
        "now_ms": NOW_MS,
        "batches": batches,
    }


def flushed(scenario: dict) -> dict:
    """The scenario plus a last batch whose heartbeat purges every window."""
    flush = {"ts": NOW_MS + MAX_FUTURE_MS, "heartbeat": True}
    return {**scenario, "batches": [*scenario["batches"], [flush]]}
