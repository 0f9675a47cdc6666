"""``eventtime demo --source kafka``: the demo read from a real local Kafka broker gives the same
tables as the file demo on the same rows, with the real Kafka partition and offset of every
late record, and leaves no broker behind; on pyspark 4.3 it is refused at once.

Runs in the pyspark 4.2 environment (Maven Central has no Kafka source for 4.3):

    PYSPARK_PYTHON=$PWD/.venv-spark4.2/bin/python .venv-spark4.2/bin/python -m pytest tests/integration/test_demo_kafka.py

Both demos run as ``eventtime`` commands of ``.venv-spark4.2`` in subprocesses (a reduced
demo: ``--rows``/``--batches`` small, ``--streaming-only``); the refusal runs ``.venv``'s.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

ROOT = Path(__file__).parents[2]
EVENTTIME42 = ROOT / ".venv-spark4.2" / "bin" / "eventtime"
EVENTTIME43 = ROOT / ".venv" / "bin" / "eventtime"
ROWS, BATCHES, SEED = 1200, 3, 7
TIMEOUT_S = 900  # a hung run fails instead of blocking the suite (not an assertion on speed)

#: Columns a run sets by itself: the query's id, its micro-batch numbers (the Kafka demo runs a
#: no-data micro-batch after each demo batch, the file demo reads its files back to back) and
#: the wall-clock time of the write.
RUN_COLUMNS = {"results": ["query_id", "batch_id", "written_at"],
               "late": ["query_id", "batch_id", "detected_at", "detected_date", "record_id"]}


def _kafka_ready() -> str | None:
    if not EVENTTIME42.exists():
        return f"{EVENTTIME42} is missing"
    probe = ("import pyspark\n"
             "from eventtime.sources import broker_jars\n"
             "from eventtime.spark.connectors import require_connector_jars\n"
             "broker_jars(); require_connector_jars('kafka', pyspark.__version__)\n")
    done = subprocess.run([str(EVENTTIME42.parent / "python"), "-c", probe], capture_output=True, text=True)
    return None if done.returncode == 0 else done.stderr.strip().splitlines()[-1]


def _env() -> dict:
    env = dict(os.environ)
    env.pop("SENTRY_DSN", None)
    env.pop("EVENTTIME_FAULT", None)
    env["PYSPARK_PYTHON"] = str(EVENTTIME42.parent / "python")
    return env


def _demo(out: Path, *extra: str) -> subprocess.CompletedProcess:
    argv = [str(EVENTTIME42), "demo", "--output", str(out), "--rows", str(ROWS), "--batches", str(BATCHES),
            "--seed", str(SEED), "--streaming-only", *extra]
    return subprocess.run(argv, capture_output=True, text=True, timeout=TIMEOUT_S, env=_env(), cwd=out.parent)


def _table(path: Path):
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    return snapshot_dataset(DeltaTable(str(path))).to_table().to_pandas()


def _rows(frame, drop: list[str]) -> list[dict]:
    """The rows without ``drop``, as dicts in one canonical order (payloads parsed).

    ``amount`` and ``mean_amount__sum`` (a pane's sums of amounts) are rounded to the cent: every
    amount has two decimals, so the exact sum has too, but the double the engine adds up depends
    on the order the rows reach it (a file is read by one task in its line order, a 4-partition
    topic by four tasks, each in offset order), e.g. 1032.78 against 1032.7799999999997; the mean
    (that sum over the count) to 1e-6."""
    rows = []
    for row in frame.drop(columns=drop).to_dict("records"):
        row = {k: (None if v is None or (isinstance(v, float) and v != v) else v) for k, v in row.items()}
        for name, digits in (("amount", 2), ("mean_amount__sum", 2), ("mean_amount", 6)):
            if row.get(name) is not None and "pane_timing" in row:
                row[name] = round(row[name], digits)
        if row.get("payload") is not None:
            row["payload"] = json.loads(row["payload"])
        rows.append(row)
    return sorted(rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))


def _broker_left(port: int) -> list[str]:
    """kafka.Kafka processes configured to listen on ``port`` (the demo's broker), and the port
    itself if something still listens there."""
    left = []
    pids = subprocess.run(["pgrep", "-f", "kafka.Kafka"], capture_output=True, text=True).stdout.split()
    for pid in pids:
        try:
            argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile
        configs = [a.decode() for a in argv if a.endswith(b"server.properties")]
        for config in configs:
            try:
                text = Path(config).read_text()
            except OSError:
                text = ""
            if f"127.0.0.1:{port}" in text or not text:  # its temp dir is gone: it was not stopped cleanly
                left.append(f"pid {pid}: {' '.join(a.decode() for a in argv)[-300:]}")
    with socket.socket() as sock:
        sock.settimeout(2)
        if sock.connect_ex(("127.0.0.1", port)) == 0:
            left.append(f"something still listens on 127.0.0.1:{port}")
    return left


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    why_not = _kafka_ready()
    if why_not is not None:
        pytest.skip(f"Kafka needs the pyspark 4.2 environment: {why_not}")
    base = tmp_path_factory.mktemp("demo-kafka")
    kafka = _demo(base / "kafka", "--source", "kafka")
    files = _demo(base / "files", "--source", "files")
    return base, kafka, files


def test_kafka_demo_runs_and_reports_the_topic(runs):
    base, kafka, _files = runs
    assert kafka.returncode == 0, f"exit {kafka.returncode}\n{kafka.stdout[-6000:]}\n{kafka.stderr[-6000:]}"
    assert "Traceback" not in kafka.stderr, kafka.stderr[-6000:]
    out = kafka.stdout
    # a progress line per micro-batch, every demo batch read (BATCHES data batches + the heartbeats)
    for i in range(1, BATCHES + 2):
        assert re.search(rf"^  batch +\d+  kafka +{i}/{BATCHES + 1}  rows ", out, re.M), out
    assert "\nsummary\n" in out and "conservation holds" in out, out
    assert re.search(r"^read from Kafka topic eventtime-demo \(4 partitions\) at 127\.0\.0\.1:\d+; the broker is stopped$",
                     out, re.M), out


def test_no_broker_is_left(runs):
    _base, kafka, _files = runs
    match = re.search(r"read from Kafka topic eventtime-demo \(4 partitions\) at 127\.0\.0\.1:(\d+)", kafka.stdout)
    assert match, kafka.stdout[-4000:]
    assert _broker_left(int(match.group(1))) == []


@pytest.mark.parametrize("table", ["results", "late"])
def test_kafka_demo_tables_equal_the_file_demo(runs, table):
    base, kafka, files = runs
    assert kafka.returncode == 0 and files.returncode == 0, (kafka.stderr[-3000:], files.stderr[-3000:])
    from_kafka = _table(base / "kafka" / table)
    from_files = _table(base / "files" / table)
    assert list(from_kafka.columns) == list(from_files.columns)
    assert len(from_kafka) > 0
    kafka_rows, file_rows = _rows(from_kafka, RUN_COLUMNS[table]), _rows(from_files, RUN_COLUMNS[table])
    if table == "late":
        # the Kafka rows also hold from_json's corrupt-record column (null: every value is a demo record)
        for row in kafka_rows:
            assert row["payload"].pop("_corrupt_record") is None, row
        kafka_rows = sorted(kafka_rows, key=lambda r: json.dumps(r, sort_keys=True, default=str))
        assert {r["kind"] for r in kafka_rows} == {"late", "invalid"}
    assert kafka_rows == file_rows


def test_late_rows_carry_the_kafka_partition_and_offset_of_their_record(runs):
    base, kafka, _files = runs
    assert kafka.returncode == 0, kafka.stderr[-3000:]
    produced = {}
    with open(base / "kafka" / "kafka-produced.jsonl", encoding="utf-8") as handle:
        for line in handle:
            rec = json.loads(line)
            produced[(rec["partition"], rec["offset"])] = rec
    from eventtime.cli.demo_data import DemoStream

    expected = sum(len(b) for b in DemoStream(seed=SEED, rows=ROWS, batches=BATCHES).micro_batches())
    assert len(produced) == expected  # every record acknowledged once, at its own (partition, offset)
    late = _table(base / "kafka" / "late")
    assert len(late) > 0
    for row in late.to_dict("records"):
        payload = json.loads(row["payload"])
        rec = produced[(int(row["partition"]), int(row["offset"]))]
        assert (payload["partition"], payload["offset"]) == (rec["partition"], rec["offset"])
        assert {k: payload[k] for k in ("user_id", "amount", "ts", "heartbeat")} == rec["value"]
        raw = row["raw_timestamp"]
        assert (None if isinstance(raw, float) and raw != raw else raw) == rec["value"]["ts"]


def test_pyspark_43_refuses_the_kafka_demo_at_once(tmp_path):
    if not EVENTTIME43.exists():
        pytest.skip(f"{EVENTTIME43} is missing")
    out = tmp_path / "never"
    done = subprocess.run([str(EVENTTIME43), "demo", "--source", "kafka", "--output", str(out)],
                          capture_output=True, text=True, timeout=120, env={**os.environ, "SENTRY_DSN": ""})
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "pyspark 4.2" in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) <= 3, done.stderr
    assert done.stdout == ""
    assert not out.exists()  # refused before anything was written (or a broker started)
