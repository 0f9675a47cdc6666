"""The Flink harness runs real Flink 2.3 session windows and reports what we expect by hand.

Expectations follow Flink's WindowOperator + EventTimeTrigger rules on the harness's batches
(watermark W_i = max(W_{i-1}, max(0, max ts so far - B)) after batch i; a session fires when the
watermark reaches its last millisecond end - 1; it is kept until end - 1 + L <= watermark).
"""

import random
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))

from flink_harness import flink_available, run_flink, run_flink_many

pytestmark = [pytest.mark.spark, pytest.mark.component]

END_WATERMARK = 2**63 - 1


@pytest.fixture(scope="module", autouse=True)
def _needs_flink():
    reason = flink_available()
    if reason:
        pytest.skip(reason)


def rec(key, ts, value):
    return {"key": key, "ts": ts, "value": value}


def hb(ts):
    return {"ts": ts, "heartbeat": True}


def scenario(batches, gap=10, bound=0, lateness=0):
    return {
        "window": {"type": "session", "gap_ms": gap},
        "max_out_of_orderness_ms": bound,
        "allowed_lateness_ms": lateness,
        "now_ms": 10**6,  # ignored by the harness, like every other extra field
        "batches": batches,
    }


def fire(batch, key, start, end, count, total, watermark, cause="timer"):
    return {
        "batch": batch,
        "key": key,
        "window_start": start,
        "window_end": end,
        "count": count,
        "sum": total,
        "watermark_ms": watermark,
        "cause": cause,
    }


def late(batch, key, ts, value):
    return {"batch": batch, "key": key, "ts": ts, "value": value}


# Records 100 and 105 form [100, 115); 115 only touches it (115 - 105 == gap) and starts its own
# session, which Flink would merge without the harness's doubled time. W0 = 115 fires [100, 115)
# (last ms 114); W1 = 200 fires [115, 125) and b's [120, 130).
SIMPLE = scenario(
    [
        [rec("a", 100, 1), rec("a", 105, 2), rec("a", 115, 4)],
        [rec("b", 120, 8), hb(200)],
    ]
)
SIMPLE_EXPECTED = {
    "firings": [
        fire(0, "a", 100, 115, 2, 3, 115),
        fire(1, "a", 115, 125, 1, 4, 200),
        fire(1, "b", 120, 130, 1, 8, 200),
    ],
    "late": [],
}

# B = 20 holds the watermark back (W0 = W1 = 98): [100, 110) and [118, 128) wait, then 109 bridges
# them into [100, 128); heartbeat 150 -> W2 = 130 fires the merged session once.
MERGE = scenario(
    [[rec("a", 100, 1), rec("a", 118, 2)], [rec("a", 109, 4)], [hb(150)]], bound=20
)
MERGE_EXPECTED = {"firings": [fire(2, "a", 100, 128, 3, 7, 130)], "late": []}

# L = 0. W0 = 150 fires a's [100, 110) and drops it. In batch 1, a@120 has a late session
# (last ms 129 <= 150) and a late ts: side output. b@145 is behind the watermark too, but its
# session [145, 155) is not late, so Flink keeps it and it fires only at the end of input.
LATE = scenario([[rec("a", 100, 1), hb(150)], [rec("a", 120, 2), rec("b", 145, 4)]])
LATE_EXPECTED = {
    "firings": [
        fire(0, "a", 100, 110, 1, 1, 150),
        fire(2, "b", 145, 155, 1, 4, END_WATERMARK),
    ],
    "late": [late(1, "a", 120, 2)],
}

# L = 20. W0 = 115 fires [100, 110) (kept until 109 + 20 <= W). Batch 1 feeds 105 then 103
# (descending ts); each joins the fired session and re-fires it at once ("element", seeing W0).
# W1 = 125. Batch 2: 112 extends it to [100, 122) and re-fires it (seeing W1); W2 = 140 < 121 + 20
# keeps it; W3 = 150 drops it, so batch 4's 120 (session last ms 129 + 20 <= 150) is late.
LATENESS = scenario(
    [
        [rec("a", 100, 1), hb(115)],
        [rec("a", 103, 4), rec("a", 105, 2), hb(125)],
        [rec("a", 112, 16), hb(140)],
        [hb(150)],
        [rec("a", 120, 32)],
    ],
    lateness=20,
)
LATENESS_EXPECTED = {
    "firings": [
        fire(0, "a", 100, 110, 1, 1, 115),
        fire(1, "a", 100, 115, 2, 3, 115, "element"),
        fire(1, "a", 100, 115, 3, 7, 115, "element"),
        fire(2, "a", 100, 122, 4, 23, 125, "element"),
    ],
    "late": [late(4, "a", 120, 32)],
}

HAND = [
    (SIMPLE, SIMPLE_EXPECTED),
    (MERGE, MERGE_EXPECTED),
    (LATE, LATE_EXPECTED),
    (LATENESS, LATENESS_EXPECTED),
]


def test_single_scenario():
    # one job per scenario; every hand case also runs that way in
    # test_shared_job_equals_one_job_per_scenario (separate=True), so one here is enough
    sc, expected = HAND[1]
    assert run_flink(sc) == expected


def test_many_in_one_job_equals_hand_expectations():
    assert run_flink_many([sc for sc, _ in HAND]) == [expected for _, expected in HAND]


def test_no_watermark_yet_and_end_of_input():
    # Only batch 0, whose W0 = max(0, 5 - 10) = 0: nothing fires until the end of input.
    sc = scenario([[rec("k|x", 5, 7), rec("k|x", 3, 1)]], gap=3, bound=10)
    assert run_flink(sc) == {
        "firings": [fire(1, "k|x", 3, 8, 2, 8, END_WATERMARK)],
        "late": [],
    }


def random_scenario(rng: random.Random) -> dict:
    keys = ["a", "b", "c"][: rng.randint(1, 3)]
    batches = []
    for _ in range(rng.randint(1, 5)):
        batch = [
            rec(rng.choice(keys), rng.randint(0, 80), rng.randint(-5, 9))
            for _ in range(rng.randint(0, 5))
        ]
        if rng.random() < 0.4:
            batch.append(hb(rng.randint(0, 100)))
        batches.append(batch)
    return scenario(
        batches,
        gap=rng.randint(1, 12),
        bound=rng.choice([0, 0, 3, 10]),
        lateness=rng.choice([0, 0, 5, 20]),
    )


def test_shared_job_equals_one_job_per_scenario():
    """The one-job-for-all trick (disjoint keys and time stretches) changes nothing."""
    rng = random.Random(20240601)
    scenarios = [random_scenario(rng) for _ in range(8)] + [sc for sc, _ in HAND]
    shared = run_flink_many(scenarios)
    assert shared == run_flink_many(scenarios, separate=True)
    assert shared[-len(HAND) :] == [expected for _, expected in HAND]
    assert any(r["late"] for r in shared) and any(
        f["cause"] == "element" for r in shared for f in r["firings"]
    )
