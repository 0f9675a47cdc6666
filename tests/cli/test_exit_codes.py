"""Every `eventtime` command exits 0 after doing its work, on every run: reading Delta tables
with delta-rs can abort the interpreter at exit ("terminate called without an active
exception", exit 134, intermittent under load, upstream), after the output was printed."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pytest

from eventtime.query.advise import delay_bin
from eventtime.sinks import DeltaDelaySink, DeltaLateSink

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EVENTTIME = os.path.join(os.path.dirname(sys.executable), "eventtime")
UTC = dt.timezone.utc
RUNS = 8
# 40 processes, four at a time: the load under which the upstream abort showed (make check)
pytestmark = pytest.mark.component


@pytest.fixture(scope="module")
def tables(tmp_path_factory):
    root = tmp_path_factory.mktemp("exit")
    late = str(root / "late")
    sink = DeltaLateSink(late, pipeline="orders", delays=False)
    t0 = dt.datetime(2024, 5, 1, 8, tzinfo=UTC)
    sink(pa.table({"kind": ["late", "late", "invalid"], "reason": ["too_late", "too_late", "null_timestamp"],
                   "key": ['{"user_id":"a"}'] * 3,
                   "event_time": pa.array([t0, t0, None], pa.timestamp("us", tz="UTC")),
                   "lateness_ms": pa.array([5_000, 90_000, None], pa.int64()), "partition": ["0", "2", "1"]}), 0, "q")
    DeltaDelaySink(late + "_delays", pipeline="orders")(pa.table({
        "partition": ["0", "2"], "delay_bin": pa.array([delay_bin(1_000), delay_bin(3_600_000)], pa.int32()),
        "records": pa.array([990, 10], pa.int64()), "max_out_of_orderness_ms": pa.array([10_000] * 2, pa.int64()),
        "allowed_lateness_ms": pa.array([60_000] * 2, pa.int64())}), 0, "q")
    return root, late


def _run(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run([EVENTTIME, *argv], capture_output=True, text=True, timeout=300, cwd=ROOT)


def test_every_command_exits_0_after_its_work_on_every_run(tables):
    root, late = tables
    commands = {
        "late summary": (["late", "summary", "--table", late, "--format", "json"],
                         lambda out: json.loads(out)["total"] == 3),
        "late show": (["late", "show", "--table", late, "--reason", "too_late", "--format", "json"],
                      lambda out: [r["lateness_ms"] for r in json.loads(out)] == [5_000, 90_000]),
        "late advise": (["late", "advise", "--table", late, "--stats", late + "_delays", "--format", "json"],
                        lambda out: json.loads(out)["records"] == 1000),
        "late plot": (["late", "plot", "--table", late, "--output", str(root / "late.png")],
                      lambda out: os.path.exists(root / "late.png")),
        "replay": (["replay", os.path.join(ROOT, "examples", "scenarios", "allowed_lateness.json")],
                   lambda out: len(json.loads(out)["batches"]) == 7),
    }
    jobs = [(name, argv, check) for _ in range(RUNS) for name, (argv, check) in commands.items()]
    with ThreadPoolExecutor(max_workers=4) as pool:  # the load under which the abort showed
        done = list(pool.map(lambda job: (job[0], job[2], _run(job[1])), jobs))
    failed = [(name, proc.returncode, proc.stderr[-500:]) for name, _, proc in done if proc.returncode != 0]
    assert not failed, failed
    wrong = [(name, proc.stdout[-500:]) for name, check, proc in done if not check(proc.stdout)]
    assert not wrong, wrong
    assert len(done) == RUNS * len(commands)
