"""Crash and restart: the demo pipeline killed with SIGKILL mid-stream ends equal to an uninterrupted run.

A killed run is ``python -m eventtime demo`` in its own process group (the Spark JVM
included), on a small deterministic stream, killed either by the test (SIGKILL to the group
at a seeded random moment after a seeded random batch started) or by the process itself at
one of the fault points of :mod:`eventtime.ops.faults` (the fault points in turn on one stream,
each kill a new process that resumes the previous one's state). The same command then resumes
from the checkpoint. The runs that need no process of their own (the uninterrupted baseline, every
resume, the refused starts) run in one warm worker process (``demo_worker.py``): the same
command on its own directory, without paying a JVM start each. The results and late-data
tables must equal the uninterrupted run's, row for row (pane indexes included), apart from
when and by which batch a row was written -- unless the kill regrouped the micro-batches
(see :func:`assert_resumes_equal`).
"""

from __future__ import annotations

import ast
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from eventtime.ops.faults import FAULT_ENV

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROWS, BATCHES, SEED = 2400, 6, 11
# When and by which batch a row was written differ between runs by design.
RUN_COLUMNS = {"query_id", "batch_id", "detected_at", "detected_date", "written_at", "record_id"}
BATCH_LINE = re.compile(r"^\s+batch\s+(\d+)\s")
WORKER = Path(__file__).with_name("demo_worker.py")


def _demo_args(out: Path, *extra: str) -> list[str]:
    # the bounded session / calendar jobs after the streaming query are not what these tests kill
    return ["demo", "--output", str(out), "--rows", str(ROWS), "--batches", str(BATCHES), "--seed", str(SEED),
            "--streaming-only", *extra]


def _env(**extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (FAULT_ENV, "SENTRY_DSN")}
    env.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    env["PYSPARK_PYTHON"] = sys.executable
    env.update(extra)
    return env


def run_demo(out: Path, env: dict | None = None, kill_at_batch: int | None = None, kill_delay_s: float = 0.0,
             timeout_s: float = 600) -> tuple[int, str]:
    """Run the demo as a new process to its end, or kill its process group once batch
    ``kill_at_batch`` shows (the runs that are killed, by the test or by a fault point)."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "eventtime", *_demo_args(out)], env=env or _env(), stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT, text=True, start_new_session=True,
    )
    lines: list[str] = []
    deadline = time.monotonic() + timeout_s
    try:
        for line in proc.stdout:
            lines.append(line)
            match = BATCH_LINE.match(line)
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


class WarmDemo:
    """The demo command run in one long-lived worker process (``demo_worker.py``)."""

    def __init__(self, log_dir: Path) -> None:
        self.log_dir = log_dir
        self.runs = 0
        self.proc = subprocess.Popen(
            [sys.executable, str(WORKER)], env=_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            stderr=open(log_dir / "worker.log", "w"), text=True, start_new_session=True,
        )
        ready = self._reply(timeout_s=300)
        assert ready == {"ready": True}, (log_dir / "worker.log").read_text()[-3000:]

    def _reply(self, timeout_s: float) -> dict:
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        reader.join(timeout_s)
        if not box or not box[0]:
            self.close()
            pytest.fail("the demo worker did not answer:\n" + (self.log_dir / "worker.log").read_text()[-3000:])
        return json.loads(box[0])

    def run(self, out: Path, extra: tuple = (), env: dict | None = None, on_batch=None,
            timeout_s: float = 600) -> tuple[int, str]:
        """Run ``eventtime demo`` on ``out``; ``on_batch(batch_id)`` is called as each batch's
        progress line shows. Returns (exit code, everything printed)."""
        self.runs += 1
        log = self.log_dir / f"run{self.runs}.log"
        log.write_text("")
        self.proc.stdin.write(json.dumps({"argv": _demo_args(out, *extra), "env": env or {}, "log": str(log)}) + "\n")
        self.proc.stdin.flush()
        box: list[str] = []
        reader = threading.Thread(target=lambda: box.append(self.proc.stdout.readline()), daemon=True)
        reader.start()
        seen, deadline = 0, time.monotonic() + timeout_s
        while reader.is_alive() and time.monotonic() < deadline:
            reader.join(0.2)
            if on_batch is not None:
                lines = log.read_text().splitlines()
                for line in lines[seen:]:
                    match = BATCH_LINE.match(line)
                    if match:
                        on_batch(int(match.group(1)))
                seen = len(lines)
        text = log.read_text()
        if not box or not box[0]:
            self.close()
            pytest.fail("the demo did not finish in time (or the worker died):\n" + text[-3000:])
        return json.loads(box[0])["code"], text

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pass
        _reap_group(self.proc.pid)


@pytest.fixture(scope="module")
def warm(tmp_path_factory):
    worker = WarmDemo(tmp_path_factory.mktemp("worker"))
    yield worker
    worker.close()


def read_table(path: Path) -> list[tuple]:
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    table = snapshot_dataset(DeltaTable(str(path))).to_table()
    columns = sorted(c for c in table.column_names if c not in RUN_COLUMNS)
    rows = table.select(columns).to_pylist()
    return sorted((tuple((c, repr(r[c])) for c in columns) for r in rows))


def tables(out: Path) -> dict:
    return {name: read_table(out / name) for name in ("results", "late")}


def batch_files(out: Path) -> list[int]:
    """The file-source offset (the last input file) each committed micro-batch ended at."""
    offsets = out / "checkpoint" / "offsets"
    ends = []
    for path in sorted((p for p in offsets.iterdir() if p.name.isdigit()), key=lambda p: int(p.name)):
        ends.append(json.loads(path.read_text().splitlines()[2])["logOffset"])
    return ends


def _input_only_copy(baseline: Path, target: Path) -> Path:
    """A new output directory with the baseline's generated input (not its checkpoint or tables)."""
    target.mkdir()
    shutil.copytree(baseline / "input", target / "input")
    shutil.copy(baseline / "demo-input.json", target / "demo-input.json")
    return target


@pytest.fixture(scope="module")
def baseline(tmp_path_factory, warm):
    out = tmp_path_factory.mktemp("crash") / "baseline"
    code, text = warm.run(out)
    assert code == 0, text[-3000:]
    assert "conservation holds" in text
    result = tables(out)
    assert result["results"] and result["late"], "the baseline must have panes and late records"
    return out, result


def _rows(table: list[tuple]) -> list[dict]:
    """The rows of :func:`read_table` as dicts of values (a timestamp stays its repr)."""
    def value(text: str):
        try:
            return ast.literal_eval(text)
        except ValueError:
            return text

    return [{column: value(text) for column, text in row} for row in table]


def assert_regrouped_run_is_consistent(base_tables: dict, got: dict) -> None:
    """The restart regrouped micro-batches (docs/limitations.md, "Checkpoints and restarts"): a batch after it
    covers input files the uninterrupted run read in separate batches, so it starts from an
    earlier watermark. Then no record may be later than it was in the uninterrupted run, and
    each window's final aggregate must be the uninterrupted run's plus exactly the records
    that were late there and are on time here; invalid records are the same."""
    def ident(row: dict) -> tuple:
        return row["kind"], row["reason"], row["partition"], row["offset"]

    base_late = {ident(r): r for r in _rows(base_tables["late"])}
    got_late = {ident(r): r for r in _rows(got["late"])}
    assert len(got_late) == len(got["late"]), "late: a record written twice after the restart"
    assert set(got_late) <= set(base_late), f"late after the restart but not before: {set(got_late) - set(base_late)}"
    assert {k for k in base_late if k[0] == "invalid"} == {k for k in got_late if k[0] == "invalid"}
    expected: dict = {}
    for row in _rows(base_tables["results"]):
        window = (row["user_id"], row["window_start"])
        if window not in expected or int(row["pane_index"]) > expected[window][0]:
            expected[window] = (int(row["pane_index"]), int(row["count"]), float(row["amount"]), float(row["max_amount"]))
    finals = {w: list(v[1:]) for w, v in expected.items()}
    for key in set(base_late) - set(got_late):
        assert key[0] == "late", key
        record = base_late[key]
        payload = json.loads(record["payload"])
        window = (record["user_id"], record["window_start"])
        final = finals.setdefault(window, [0, 0.0, float("-inf")])
        final[0] += 1
        final[1] += payload["amount"]
        final[2] = max(final[2], payload["amount"])
    got_finals: dict = {}
    panes = set()
    for row in _rows(got["results"]):
        window = (row["user_id"], row["window_start"])
        pane = (window, row["pane_index"])
        assert pane not in panes, f"results: pane {pane} written twice after the restart"
        panes.add(pane)
        if window not in got_finals or int(row["pane_index"]) > got_finals[window][0]:
            got_finals[window] = (int(row["pane_index"]), int(row["count"]), float(row["amount"]), float(row["max_amount"]))
    assert set(got_finals) == set(finals), "results: the windows differ from the uninterrupted run plus the moved records"
    for window, (count, amount, max_amount) in finals.items():
        _, got_count, got_amount, got_max = got_finals[window]
        assert (got_count, got_max) == (count, max_amount) and got_amount == pytest.approx(amount, rel=1e-9), (
            f"results: window {window}: {got_finals[window][1:]} != {(count, amount, max_amount)}")


def assert_resumes_equal(warm: WarmDemo, out: Path, baseline: tuple) -> tuple[str, bool]:
    """Resume ``out`` to its end; compare with the baseline. Returns (what it printed, whether
    the restart regrouped micro-batches)."""
    base_dir, base_tables = baseline
    code, text = warm.run(out)
    assert code == 0, text[-3000:]
    assert "conservation holds" in text, text[-2000:]
    got = tables(out)
    if batch_files(out) != batch_files(base_dir):
        # Only a coarsening is allowed: every batch end of the restarted run is one of the baseline's.
        assert set(batch_files(out)) <= set(batch_files(base_dir)), (batch_files(out), batch_files(base_dir))
        assert_regrouped_run_is_consistent(base_tables, got)
        return text, True
    for name in ("results", "late"):
        missing = set(base_tables[name]) - set(got[name])
        extra = len(got[name]) - len(set(got[name]))
        assert not missing, f"{name}: {len(missing)} row(s) missing after the restart, e.g. {sorted(missing)[:2]}"
        assert extra == 0, f"{name}: {extra} duplicated row(s) after the restart"
        assert got[name] == base_tables[name], f"{name}: rows differ from the uninterrupted run"
    return text, False


# (point, batch): one stream is killed at each in turn; ``after_commit`` of batch 3 is the kill
# as batch 4 starts, once the resumed run has committed batch 3 again.
FAULT_CHAIN = (("before_write", 1), ("between_writes", 2), ("after_write", 3), ("after_commit", 3))


def _tables_so_far(out: Path) -> dict:
    """Both tables as they are (a table not written yet is empty)."""
    return {name: read_table(out / name) if (out / name / "_delta_log").exists() else [] for name in ("results", "late")}


@pytest.fixture(scope="module")
def fault_chain(baseline, tmp_path_factory):
    """One stream killed at each fault point in turn, each kill a new process that resumes the
    previous one's state (``FAULT_CHAIN``). Per point: (exit code, what it printed, the tables
    it left); and a function that restores the state the last kill left (right after Spark
    committed batch 3), kept as a snapshot: each user restores it to the same path (the file
    source's log names input files by path)."""
    base_dir, _ = baseline
    out = _input_only_copy(base_dir, tmp_path_factory.mktemp("chain") / "run")
    steps = {}
    for point, batch in FAULT_CHAIN:
        code, text = run_demo(out, env=_env(**{FAULT_ENV: f"kill:{point}:{batch}"}))
        steps[point] = (code, text, _tables_so_far(out))
    snapshot = out.with_name("snapshot")
    shutil.copytree(out, snapshot)

    def restore() -> Path:
        shutil.rmtree(out)
        shutil.copytree(snapshot, out)
        return out

    return steps, restore


@pytest.fixture(scope="module")
def killed_after_commit(fault_chain):
    """Restores the stream killed right after Spark committed batch 3 (the chain's last kill)."""
    return fault_chain[1]


@pytest.mark.parametrize("point", [point for point, _ in FAULT_CHAIN])
def test_a_kill_at_a_fault_point_leaves_only_rows_of_the_uninterrupted_run(baseline, fault_chain, point):
    # The kill is inside foreachBatch, after the offset log named the batch (or as the next
    # batch starts): the restart runs the same batch again, so every row written so far is a
    # row of the uninterrupted run.
    code, text, written = fault_chain[0][point]
    assert code == -signal.SIGKILL, f"the fault point {point} was not reached:\n{text[-2000:]}"
    for name in ("results", "late"):
        assert len(written[name]) == len(set(written[name])), f"{name}: a row written twice before the kill at {point}"
        extra = set(written[name]) - set(baseline[1][name])
        assert not extra, f"{name}: {len(extra)} row(s) not in the uninterrupted run after the kill at {point}"


def _kill_at_a_random_moment(out: Path, seed: int, first_batch: int) -> None:
    rng = random.Random(seed)
    batch, delay = rng.randint(first_batch, BATCHES - 1), rng.uniform(0.0, 1.5)
    code, text = run_demo(out, kill_at_batch=batch, kill_delay_s=delay)
    assert code == -signal.SIGKILL, f"the run ended before the kill (batch {batch}, +{delay:.2f} s):\n{text[-2000:]}"


def test_a_stream_killed_at_every_fault_point_then_at_a_random_moment_resumes_equal_to_the_uninterrupted_run(
        baseline, warm, fault_chain):
    out = fault_chain[1]()
    assert (out / "checkpoint" / "metadata").exists()
    assert all(code == -signal.SIGKILL for code, _, _ in fault_chain[0].values())
    _kill_at_a_random_moment(out, seed=2, first_batch=4)
    assert_resumes_equal(warm, out, baseline)


def test_kill_at_a_random_moment_then_restart_equals_uninterrupted_run(baseline, warm, tmp_path):
    base_dir, _ = baseline
    out = _input_only_copy(base_dir, tmp_path / "random")
    _kill_at_a_random_moment(out, seed=1, first_batch=1)
    assert_resumes_equal(warm, out, baseline)


def test_deleted_checkpoint_with_existing_tables_is_refused_unless_fresh_start(baseline, warm, tmp_path):
    base_dir, base_tables = baseline
    out = tmp_path / "deleted"
    shutil.copytree(base_dir, out)
    shutil.rmtree(out / "checkpoint")
    code, text = warm.run(out)
    assert code == 2, text[-3000:]
    assert "already holds rows of pipeline 'demo'" in text and "--fresh-start" in text, text[-3000:]
    assert tables(out) == base_tables, "a refused start must not write anything"
    code, text = warm.run(out, extra=("--fresh-start",))
    assert code == 0, text[-3000:]
    assert "fresh start" in text
    assert tables(out) == base_tables


def test_kill_between_the_file_source_log_and_the_offset_log_regroups_batches_consistently(baseline, warm,
                                                                                          killed_after_commit):
    # The state a kill leaves in that window (docs/limitations.md, "Checkpoints and restarts"), made exactly: the
    # run killed as batch 4 started had logged batch 4 in the file source's log and in the
    # offset log; without the offset log entry, the restart plans batch 4 anew and the file
    # source adds its next file to the one it had logged.
    out = killed_after_commit()
    offsets = out / "checkpoint" / "offsets"
    assert (out / "checkpoint" / "sources" / "0" / "4").exists() and not (out / "checkpoint" / "commits" / "4").exists()
    for path in (offsets / "4", offsets / ".4.crc"):
        path.unlink(missing_ok=True)
    text, regrouped = assert_resumes_equal(warm, out, baseline)
    assert regrouped, f"batch ends {batch_files(out)} equal the uninterrupted run's: nothing was regrouped"
    assert batch_files(out)[:5] == [0, 1, 2, 3, 5], batch_files(out)
    # ...and the check of a regrouped run can fail: each way a restart could be wrong is reported
    base_tables, got = baseline[1], tables(out)
    moved = [r for r in base_tables["late"] if r not in set(got["late"]) and dict(r)["kind"] == "'late'"]
    assert moved, "the regrouped batch moved no record from late to on time: the check below is weak"
    last_pane = max(got["results"], key=lambda r: int(dict(r)["pane_index"]))
    wrong = {
        "a pane lost": {**got, "results": [r for r in got["results"] if r != last_pane]},
        "a pane doubled": {**got, "results": sorted(got["results"] + [last_pane])},
        "a late record doubled": {**got, "late": sorted(got["late"] + [got["late"][0]])},
        "a record late only after the restart": {**got, "late": sorted(got["late"] + [moved[0]])},
        "a moved record lost": {**got, "late": [r for r in got["late"] if r != got["late"][-1]]},
        "an invalid record lost": {**got, "late": [r for r in got["late"] if dict(r)["kind"] != "'invalid'"]},
        "a count changed": {**got, "results": [
            tuple((c, str(int(v) + 1) if c == "count" and r == last_pane else v) for c, v in r) for r in got["results"]]},
    }
    for what, tables_ in wrong.items():
        with pytest.raises(AssertionError):
            assert_regrouped_run_is_consistent(base_tables, tables_)
            pytest.fail(f"not reported: {what}")


@pytest.mark.parametrize("damage", ["truncated", "corrupted"])
def test_damaged_state_fails_the_restart_loudly_with_an_alert(warm, killed_after_commit, damage):
    from sentry_receiver import SentryReceiver

    out = killed_after_commit()
    state_files = [p for p in (out / "checkpoint" / "state").rglob("*") if p.is_file() and p.suffix in (".zip", ".sst")]
    assert state_files
    for path in state_files:
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncated" else bytes(b ^ 0x5A for b in data))
    before = tables(out)
    with SentryReceiver() as receiver:
        code, text = warm.run(out, env=dict(SENTRY_DSN=receiver.dsn, NO_PROXY="127.0.0.1", no_proxy="127.0.0.1",
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


def test_unwritable_late_table_fails_clearly_after_retries_then_restart_loses_nothing(baseline, warm, tmp_path):
    # Tests run as root, so chmod does not stop a write: the table directory is moved away
    # and a plain file put at its path, which no storage layer can write a table into.
    base_dir, _ = baseline
    out = _input_only_copy(base_dir, tmp_path / "unwritable")
    late, moved = out / "late", out / "late.moved"
    broken: list[int] = []

    def break_table(batch_id: int) -> None:
        if batch_id >= 2 and not broken and late.is_dir():
            late.rename(moved)
            late.write_text("not a Delta table")
            broken.append(batch_id)

    code, text = warm.run(out, on_batch=break_table)
    assert broken, "the table was never broken (the run ended first)"
    assert code == 2, text[-3000:]
    assert "DeltaSinkError: could not write batch" in text and str(late) in text, text[-3000:]
    # retries=3 with backoff, then the query fails: Spark's tasks write the Delta tables, so the
    # retries happen in a task and their warnings go to Spark's executor log, not this console
    assert "after 4 attempt(s)" in text
    assert "NotADirectoryError" in text or "FileExistsError" in text, text[-3000:]
    late.unlink()
    moved.rename(late)
    assert_resumes_equal(warm, out, baseline)


def test_second_run_of_a_finished_demo_is_a_no_op(baseline, warm):
    # In place: the file source's checkpoint names its input files by absolute path, so a
    # copied output directory would be read again from the start (a copy is a new stream).
    # Last in this module because it runs on the baseline's own directory.
    base_dir, _ = baseline
    text, _ = assert_resumes_equal(warm, base_dir, baseline)
    assert "resuming from" in text
