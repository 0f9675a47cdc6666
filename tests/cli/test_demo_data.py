"""The demo stream is deterministic for a seed and contains every kind of trouble it promises."""

import hashlib
from collections import Counter
from pathlib import Path

import pytest

import eventtime
from eventtime import EngineConfig, Record, ReferenceEngine, Tumbling
from eventtime.cli.demo_data import DemoStream, write_stream

NOW_MS = 1_795_000_000_000  # 2026-11-18, after the demo's event times


def digest(directory: Path) -> str:
    return hashlib.sha256(b"".join(p.read_bytes() for p in sorted(directory.iterdir()))).hexdigest()


def test_same_seed_same_files_other_seed_other_files(tmp_path):
    small = DemoStream(rows=2000, batches=5)
    write_stream(small, str(tmp_path / "a"))
    write_stream(small, str(tmp_path / "b"))
    write_stream(DemoStream(rows=2000, batches=5, seed=8), str(tmp_path / "c"))
    assert digest(tmp_path / "a") == digest(tmp_path / "b") != digest(tmp_path / "c")
    mtimes = [p.stat().st_mtime for p in sorted((tmp_path / "a").iterdir())]
    assert mtimes == sorted(mtimes) and len(set(mtimes)) == len(mtimes) == 6


def test_stream_has_late_lagging_and_bogus_records_and_drains():
    stream = DemoStream(rows=8000, batches=10)
    cfg = EngineConfig(Tumbling(stream.window_ms), (eventtime.count(), eventtime.sum("amount")), stream.max_out_of_orderness_ms, stream.allowed_lateness_ms)
    engine = ReferenceEngine(cfg, unit="ms")
    seen = Counter()
    rows = 0
    for batch in stream.micro_batches():
        rows += sum(1 for r in batch if not r["heartbeat"])
        result = engine.process_batch([Record(r["user_id"], r["ts"], {"amount": r["amount"]}, r["heartbeat"], r["partition"]) for r in batch], NOW_MS)
        seen.update(p.timing for p in result.panes)
        seen.update("late" for _ in result.late)
        seen.update(i.reason for i in result.invalid)
    assert seen["ON_TIME"] > 0 and seen["LATE"] > 0 and seen["late"] > 0
    for reason in ("before_min_valid", "too_far_in_future"):
        assert seen[reason] > 0, reason
    assert engine.state_windows() == set(), "the closing heartbeat must let every window purge"
    assert rows >= 8000


@pytest.mark.parametrize("field, value", [("rows", 0), ("partitions", 0), ("lagging_partition", 9)])
def test_bad_parameters(field, value):
    with pytest.raises(ValueError, match=field):
        DemoStream(**{field: value})
