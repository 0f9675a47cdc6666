"""Crash and restart: the demo pipeline killed with SIGKILL mid-stream ends equal to an uninterrupted run.

Each run is ``python -m eventtime demo`` in its own process group (the Spark JVM included),
on a small deterministic stream. A run is killed either by the test (SIGKILL to the group at
a seeded random moment after a seeded random batch started) or by the process itself at one
of the fault points of :mod:`eventtime.faults`; then the same command resumes from the
checkpoint. The results and late-data tables must equal the uninterrupted run's, row for
row (pane indexes included), apart from when and by which batch a row was written.
"""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventtime.faults import FAULT_ENV

pytestmark = pytest.mark.spark

ROWS, BATCHES, SEED = 2400, 6, 11
# When and by which batch a row was written differ between runs by design.
RUN_COLUMNS = {"query_id", "batch_id", "detected_at", "detected_date", "written_at"}
BATCH_LINE = re.compile(r"^\s+batch\s+(\d+)\s")


def _demo_cmd(out: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "eventtime", "demo", "--output", str(out), "--rows", str(ROWS),
            "--batches", str(BATCHES), "--seed", str(SEED), *extra]


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, "SENTRY_DSN")}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra)
    return env


def run_demo(out: Path, env: dict | None = None, kill_at_batch: int | None = None, kill_delay_s: float = 0.0,
             extra: tuple = (), timeout_s: float = 600, on_batch=None) -> tuple[int, str]:
    """Run the demo to its end (or kill its process group once batch ``kill_at_batch`` shows);
    ``on_batch(batch_id)`` is called as each batch's progress line shows."""
    proc = subprocess.Popen(
        _demo_cmd(out, *extra), env=env or _env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True, start_new_session=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        for line in proc.stdout:
            lines.append(line)
            match = BATCH_LINE.match(line)
            if on_batch is not None and match:
                on_batch(int(match.group(1)))
            if kill_at_batch is not None and match and int(match.group(1)) >= kill_at_batch:
                time.sleep(kill_delay_s)
                os.killpg(proc.pid, signal.SIGKILL)
            if time.monotonic() > deadline:
                os.killpg(proc.pid, signal.SIGKILL)
                pytest.fail("the demo did not finish in time:\n" + "".join(lines[-40:]))
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _reap_group(proc.pid)
    return code, "".join(lines)


def _reap_group(pgid: int) -> None:
    """Make sure no process of the killed run (e.g. its JVM) outlives it."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    time.sleep(0.5)


def read_table(path: Path) -> list[tuple]:
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    table = snapshot_dataset(DeltaTable(str(path))).to_table()
    columns = sorted(c for c in table.column_names if c not in RUN_COLUMNS)
    rows = table.select(columns).to_pylist()
    return sorted((tuple((c, repr(r[c])) for c in columns) for r in rows))


def tables(out: Path) -> dict:
    return {name: read_table(out / name) for name in ("results", "late")}


def _input_only_copy(baseline: Path, target: Path) -> Path:
    """A new output directory with the baseline's generated input (not its checkpoint or tables)."""
    target.mkdir()
    shutil.copytree(baseline / "input", target / "input")
    shutil.copy(baseline / "demo-input.json", target / "demo-input.json")
    return target


@pytest.fixture(scope="module")
def baseline(tmp_path_factory):
    out = tmp_path_factory.mktemp("crash") / "baseline"
    code, text = run_demo(out)
    assert code == 0, text[-3000:]
    assert "conservation holds" in text
    result = tables(out)
    assert result["results"] and result["late"], "the baseline must have panes and late records"
    return out, result


def assert_resumes_equal(out: Path, baseline_tables: dict) -> str:
    code, text = run_demo(out)
    assert code == 0, text[-3000:]
    assert "conservation holds" in text, text[-2000:]
    got = tables(out)
    for name in ("results", "late"):
        missing = set(baseline_tables[name]) - set(got[name])
        extra = len(got[name]) - len(set(got[name]))
        assert not missing, f"{name}: {len(missing)} row(s) missing after the restart, e.g. {sorted(missing)[:2]}"
        assert extra == 0, f"{name}: {extra} duplicated row(s) after the restart"
        assert got[name] == baseline_tables[name], f"{name}: rows differ from the uninterrupted run"
    return text


@pytest.mark.parametrize("point", ["before_write", "between_writes", "after_write", "after_commit"])
def test_kill_at_a_fault_point_then_restart_equals_uninterrupted_run(baseline, tmp_path, point):
    base_dir, base_tables = baseline
    out = _input_only_copy(base_dir, tmp_path / point)
    code, text = run_demo(out, env=_env(**{FAULT_ENV: f"kill:{point}:2"}))
    assert code == -signal.SIGKILL, f"the fault point {point} was not reached:\n{text[-2000:]}"
    assert (out / "checkpoint" / "metadata").exists()
    assert_resumes_equal(out, base_tables)


@pytest.mark.parametrize("seed", [1, 2])
def test_kill_at_a_random_moment_then_restart_equals_uninterrupted_run(baseline, tmp_path, seed):
    base_dir, base_tables = baseline
    rng = random.Random(seed)
    batch, delay = rng.randint(1, BATCHES - 1), rng.uniform(0.0, 1.5)
    out = _input_only_copy(base_dir, tmp_path / f"random{seed}")
    code, text = run_demo(out, kill_at_batch=batch, kill_delay_s=delay)
    assert code == -signal.SIGKILL, f"the run ended before the kill (batch {batch}, +{delay:.2f} s):\n{text[-2000:]}"
    assert_resumes_equal(out, base_tables)


def test_deleted_checkpoint_with_existing_tables_is_refused_unless_fresh_start(baseline, tmp_path):
    base_dir, base_tables = baseline
    out = tmp_path / "deleted"
    shutil.copytree(base_dir, out)
    shutil.rmtree(out / "checkpoint")
    code, text = run_demo(out)
    assert code == 2, text[-3000:]
    assert "already holds rows of pipeline 'demo'" in text and "--fresh-start" in text, text[-3000:]
    assert tables(out) == base_tables, "a refused start must not write anything"
    code, text = run_demo(out, extra=("--fresh-start",))
    assert code == 0, text[-3000:]
    assert "fresh start" in text
    assert tables(out) == base_tables


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_damaged_state_fails_the_restart_loudly_with_an_alert(baseline, tmp_path, damage):
    from sentry_receiver import SentryReceiver

    base_dir, _ = baseline
    out = _input_only_copy(base_dir, tmp_path / damage)
    code, text = run_demo(out, env=_env(**{FAULT_ENV: "kill:after_commit:3"}))
    assert code == -signal.SIGKILL, text[-2000:]
    state_files = [p for p in (out / "checkpoint" / "state").rglob("*") if p.is_file() and p.suffix in (".zip", ".sst")]
    assert state_files
    for path in state_files:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else bytes(b ^ 0x5A for b in data))
    before = tables(out)
    with SentryReceiver() as receiver:
        code, text = run_demo(out, env=_env(SENTRY_DSN=receiver.dsn, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
                                            http_proxy="", HTTP_PROXY=""))
        events = receiver.wait_for(1, timeout=10)
    assert code == 2, text[-3000:]
    assert "CANNOT_LOAD_STATE_STORE" in text, text[-3000:]
    failures = [e for e in events if e.get("fingerprint", [None])[:3] == ["eventtime", "demo", "pipeline_failed"]]
    assert len(failures) == 1, events
    assert failures[0]["fingerprint"][3].startswith("CANNOT_LOAD_STATE_STORE")
    assert failures[0]["contexts"]["eventtime"]["error"].startswith("[CANNOT_LOAD_STATE_STORE")
    assert failures[0]["level"] == "error"
    assert tables(out) == before, "nothing may be written from empty state"


def test_unwritable_late_table_fails_clearly_after_retries_then_restart_loses_nothing(baseline, tmp_path):
    # Tests run as root, so chmod does not stop a write: the table directory is moved away
    # and a plain file put at its path, which no storage layer can write a table into.
    base_dir, base_tables = baseline
    out = _input_only_copy(base_dir, tmp_path / "unwritable")
    late, moved = out / "late", out / "late.moved"
    broken: list[int] = []

    def break_table(batch_id: int) -> None:
        if batch_id >= 2 and not broken and late.is_dir():
            late.rename(moved)
            late.write_text("not a Delta table")
            broken.append(batch_id)

    code, text = run_demo(out, on_batch=break_table)
    assert broken, "the table was never broken (the run ended first)"
    assert code == 2, text[-3000:]
    assert "DeltaSinkError: could not write batch" in text and str(late) in text, text[-3000:]
    assert "after 4 attempt(s)" in text  # retries=3 with backoff, then the query fails
    assert text.count("retrying in") >= 3
    late.unlink()
    moved.rename(late)
    assert_resumes_equal(out, base_tables)


def test_second_run_of_a_finished_demo_is_a_no_op(baseline, tmp_path):
    # In place: the file source's checkpoint names its input files by absolute path, so a
    # copied output directory would be read again from the start (a copy is a new stream).
    # Last in this module because it runs on the baseline's own directory.
    base_dir, base_tables = baseline
    text = assert_resumes_equal(base_dir, base_tables)
    assert "resuming from" in text
