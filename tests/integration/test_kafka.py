"""Apache Kafka for real: a local KRaft broker (eventtime.sources.LocalKafka, Kafka 4.1.1) feeding
the example job (examples/kafka_job.py) through Spark's Kafka source, on 4-partition topics.

Runs in the pyspark 4.2 environment only (Maven Central has no Kafka source for 4.3):

    PYSPARK_PYTHON=$PWD/.venv-spark4.2/bin/python .venv-spark4.2/bin/python -m pytest tests/integration/test_kafka.py

The process's one SparkSession is the ``spark`` fixture of tests/conftest.py, which has the
Kafka and Delta connectors wherever they are resolved (what test_delta_spark.py's
``local_session(kafka=True, delta=True)`` gets too). The crash test runs the job in
subprocesses of its own.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from eventtime.harness.scenario import diff_outputs, parse_scenario, run_reference

pytestmark = pytest.mark.spark

ROOT = Path(__file__).parents[2]
SPARK42 = ROOT / ".venv-spark4.2" / "bin" / "python"
SPARK43 = ROOT / ".venv" / "bin" / "python"


def _kafka_ready() -> str | None:
    try:
        import pyspark

        from eventtime.sources import broker_jars
        from eventtime.spark.connectors import connector_jars

        broker_jars()
        if connector_jars("kafka", pyspark.__version__) is None:
            return "the Kafka connector is not resolved (python -m eventtime.spark.connectors kafka)"
    except Exception as exc:  # ConnectorUnavailableError (pyspark 4.3), KafkaUnavailableError (no broker jars)
        return f"{type(exc).__name__}: {exc}"
    return None


_WHY_NOT = _kafka_ready()


@pytest.fixture
def kafka_ready():
    """Fails (never skips) a Kafka test whose connector or broker jars are missing: `make
    test` runs this file in the pyspark 4.2 environment, where `make install` resolved them."""
    if _WHY_NOT is not None:
        pytest.fail(f"Kafka needs the pyspark 4.2 environment with its jars (make install): {_WHY_NOT}")


needs_kafka = pytest.mark.usefixtures("kafka_ready")

# -- the scenario: 4 partitions, out of order, one lagging, one going silent, bogus timestamps ------
T = 1_700_000_000_000  # a multiple of the 10 s window
NOW = T + 1_000_000
LEADER, LAGGING, SILENT, BOGUS = 0, 1, 2, 3


def _s(seconds: float) -> int:
    return T + int(seconds * 1000)


def _rec(key: str, seconds: float, value: int, partition: int) -> dict:
    return {"key": key, "ts": _s(seconds), "value": value, "partition": partition}


BATCHES = [
    [_rec("a", 12, 1, LEADER), _rec("a", 5, 2, LEADER), _rec("b", 3, 3, LAGGING), _rec("c", 11, 4, SILENT),
     _rec("d", 10, 5, BOGUS), {"key": "d", "ts": 0, "value": 6, "partition": BOGUS}],
    [_rec("a", 25, 7, LEADER), _rec("a", 21, 8, LEADER), _rec("b", 9, 9, LAGGING), _rec("c", 14, 10, SILENT),
     _rec("d", 24, 11, BOGUS), {"key": "d", "ts": NOW + 30 * 86_400_000, "value": 12, "partition": BOGUS}],
    [_rec("a", 33, 13, LEADER), _rec("a", 18, 14, LEADER), _rec("b", 15, 15, LAGGING), _rec("b", 12, 16, LAGGING),
     _rec("d", 31, 17, BOGUS)],
    [_rec("a", 44, 18, LEADER), _rec("b", 22, 19, LAGGING), _rec("b", 19, 20, LAGGING), _rec("d", 42, 21, BOGUS),
     _rec("a", 8, 22, BOGUS), {"key": "d", "ts": 1, "value": 23, "partition": BOGUS}],
    [_rec("a", 52, 24, LEADER), _rec("b", 28, 25, LAGGING), _rec("d", 51, 26, BOGUS)],
    [_rec("a", 61, 27, LEADER), _rec("b", 35, 28, LAGGING), _rec("b", 27, 29, LAGGING), _rec("d", 60, 30, BOGUS)],
    [_rec("a", 70, 31, LEADER), _rec("b", 44, 32, LAGGING), _rec("d", 69, 33, BOGUS)],
]
IDLE_TIMEOUT_MS = 3000
LAG_ALERT_MS = 5000  # partitions 0 and 3 stay within 2 s of the lead; 1 lags 9 s and more


SESSION_GAP_MS = 6000  # key a: three records in two batches merge into one session; b's lagging rows are late


def scenario(mode: str) -> dict:
    """``mode``: the watermark mode, or "sessions" (session windows under the global watermark)."""
    watermark = {"mode": mode, "idle_timeout_ms": IDLE_TIMEOUT_MS} if mode == "per_partition" else {"mode": "global"}
    window = {"type": "session", "gap_ms": SESSION_GAP_MS} if mode == "sessions" else \
        {"type": "tumbling", "size_ms": 10_000, "offset_ms": 0}
    return {
        "window": window,
        "max_out_of_orderness_ms": 1000,
        "allowed_lateness_ms": 2000,
        "min_valid_ms": 946_684_800_000,  # 2000-01-01
        "max_future_ms": 86_400_000,
        "now_ms": NOW,
        "batch_interval_ms": 1000,
        "watermark": watermark,
        "batches": BATCHES,
    }


@pytest.fixture(scope="module")
def kafka():
    if _WHY_NOT is not None:
        pytest.fail(f"Kafka needs the pyspark 4.2 environment with its jars (make install): {_WHY_NOT}")
    from eventtime.sources import LocalKafka

    with LocalKafka() as broker:
        yield broker


class Run:
    def __init__(self, mode, replay, got, expected):
        self.mode, self.replay, self.got, self.expected = mode, replay, got, expected


def _replay(spark, kafka, tmp_path_factory, mode: str) -> Run:
    from kafka_harness import CapturingAlerter, KafkaReplay

    topic = f"scenario-{mode.replace('_', '-')}"
    kafka.create_topic(topic, 4)
    alerter = CapturingAlerter(pipeline=f"kafka_{mode}", partition_lag_ms=LAG_ALERT_MS)
    replay = KafkaReplay(scenario(mode), spark, kafka, topic, str(tmp_path_factory.mktemp(f"kafka-{mode}")), alerter)
    got = replay.run()
    return Run(mode, replay, got, run_reference(parse_scenario(scenario(mode)), merged_from=mode == "sessions"))


@pytest.fixture(scope="module")
def per_partition(spark, kafka, tmp_path_factory):
    return _replay(spark, kafka, tmp_path_factory, "per_partition")


@pytest.fixture(scope="module")
def global_run(spark, kafka, tmp_path_factory):
    return _replay(spark, kafka, tmp_path_factory, "global")


@pytest.fixture(scope="module")
def sessions_run(spark, kafka, tmp_path_factory):
    return _replay(spark, kafka, tmp_path_factory, "sessions")


def _late_by_partition(run: Run) -> dict:
    """Late records per Kafka partition (the scenario's, i.e. the partition they were produced to)."""
    counts = {p: 0 for p in range(4)}
    for batch in run.expected["batches"]:
        for late in batch["late"]:
            rid = next(i for i, r in enumerate(run.replay.records)
                       if r.key == late["key"] and r.fields.get("value") == late["value"])
            counts[run.replay.records[rid].partition] += 1
    return counts


@needs_kafka
@pytest.mark.parametrize("mode", ["per_partition", "global", "sessions"])
def test_kafka_fed_panes_and_late_records_equal_the_reference_model(request, mode):
    """Out of order, a lagging and a silent partition, 0 / 1970 / far-future timestamps, through a
    real broker and Spark's Kafka source: every micro-batch's panes, late and invalid records and
    watermark equal the reference model's on the same batches. "sessions": session windows (the
    map-side combine's partial sessions), their merges and supersessions included."""
    run = request.getfixturevalue({"per_partition": "per_partition", "global": "global_run", "sessions": "sessions_run"}[mode])
    assert len(run.got["batches"]) == len(BATCHES)
    difference = diff_outputs(run.expected, run.got)
    assert difference is None, difference
    panes = sum(len(b["panes"]) for b in run.got["batches"])
    invalid = [r for b in run.got["batches"] for r in b["invalid"]]
    assert panes > 0
    assert sorted(r["reason"] for r in invalid) == ["before_min_valid", "before_min_valid", "too_far_in_future"]


@needs_kafka
def test_per_partition_watermarks_keep_the_lagging_partition_on_time(per_partition, global_run):
    """The lagging partition's records are late under the global watermark, on time under its own."""
    assert diff_outputs(per_partition.expected, per_partition.got) is None
    assert diff_outputs(global_run.expected, global_run.got) is None
    pp, gl = _late_by_partition(per_partition), _late_by_partition(global_run)
    print(f"late per partition: per_partition {pp}, global {gl}")
    assert gl[LAGGING] > 0 and pp[LAGGING] == 0, (pp, gl)
    assert sum(pp.values()) < sum(gl.values())
    # the record far behind on partition 3 is late under both
    assert pp[BOGUS] >= 1 and gl[BOGUS] >= 1


@needs_kafka
def test_silent_partition_stops_holding_the_watermark_after_idle_timeout(per_partition):
    """Partition 2 sends nothing after batch 1: W waits for it (at most its max - B) until it has been
    silent for idle_timeout of processing time, then moves past it."""
    config = scenario("per_partition")
    silent_max = max(r["ts"] for b in BATCHES for r in b if r["partition"] == SILENT)
    hold = silent_max - config["max_out_of_orderness_ms"]
    last_seen = max(i for i, b in enumerate(BATCHES) if any(r["partition"] == SILENT for r in b))
    watermarks = [b["watermark_ms"] for b in per_partition.got["batches"]]
    idle_from = next(i for i in range(len(BATCHES))
                     if (i - last_seen) * config["batch_interval_ms"] >= IDLE_TIMEOUT_MS)
    assert all(w is None or w <= hold for w in watermarks[:idle_from]), watermarks
    assert all(w > hold for w in watermarks[idle_from:]), watermarks
    idle_alerts = [a for a in per_partition.replay.alerter.alerts if a.kind == "watermark_idle"]
    assert [str(a.data["partition"]) for a in idle_alerts] == [str(SILENT)], idle_alerts
    assert f"partition {SILENT} is idle" in idle_alerts[0].message


@needs_kafka
def test_lag_alert_names_the_kafka_partition(global_run):
    """The skew monitor's lag alert names the lagging Kafka partition (and only it lags)."""
    lag = [a for a in global_run.replay.alerter.alerts if a.kind == "partition_lag"]
    assert lag, [a.kind for a in global_run.replay.alerter.alerts]
    # the lagging partition, and the silent one once the others have moved on
    assert {str(a.data["partition"]) for a in lag} == {str(LAGGING), str(SILENT)}
    assert all(f"partition {a.data['partition']} lags the global max event time" in a.message for a in lag)
    first = min((a for a in lag if str(a.data["partition"]) == str(LAGGING)), key=lambda a: a.data["batch_id"])
    assert first.data["lag_ms"] > LAG_ALERT_MS


@needs_kafka
@pytest.mark.parametrize("mode", ["per_partition", "global"])
def test_late_rows_carry_the_kafka_partition_and_offset_of_the_record(request, mode):
    run = request.getfixturevalue("per_partition" if mode == "per_partition" else "global_run")
    rows = [row for t in run.replay.late_tables for row in t.to_pylist()]
    assert len(rows) == sum(len(b["late"]) + len(b["invalid"]) for b in run.expected["batches"])
    for row in rows:
        rid = json.loads(row["payload"])["rid"]
        partition, offset = run.replay.produced[rid]
        # the late table's partition column is text (any source's partition names fit it)
        assert (row["partition"], row["offset"]) == (str(partition), offset), row


# -- the example job end to end, Delta tables, crash and restart -----------------------------------
ROWS_PER_PARTITION, MAX_OFFSETS = 100, 40


def _dataset(seed: int = 7) -> list:
    """(partition, value) of every record: 4 partitions of 100 events, 2 per second, out of
    order by up to 3 s, partition 1 lagging 30 s, every 25th far behind (late), one bogus 0,
    and one value that is not JSON (partition 2)."""
    rng = random.Random(seed)
    out = []
    for p in range(4):
        for i in range(ROWS_PER_PARTITION):
            seconds = i / 2 - rng.uniform(0, 3) - (30 if p == 1 else 0) + 30
            if i % 25 == 24:
                seconds -= 40
            out.append((p, json.dumps({"user_id": f"u{rng.randrange(5)}", "amount": round(rng.uniform(1, 100), 2),
                                       "ts": _s(seconds)})))
    out.append((3, json.dumps({"user_id": "u0", "amount": 1.0, "ts": 0})))
    out.append((2, "this is {not json"))
    return out


def _job(out: Path, bootstrap: str, topic: str) -> list:
    return [sys.executable, str(ROOT / "examples" / "kafka_job.py"), "--bootstrap-servers", bootstrap,
            "--topic", topic, "--output", str(out), "--idle-timeout", "1 hour",
            "--max-offsets-per-trigger", str(MAX_OFFSETS)]


def _env() -> dict:
    env = {k: v for k, v in os.environ.items() if k != "SENTRY_DSN"}
    env.update(PYSPARK_PYTHON=sys.executable, SPARK_LOCAL_IP="127.0.0.1")
    return env


def _commits(out: Path) -> int:
    folder = out / "checkpoint" / "commits"
    return len([n for n in os.listdir(folder) if n.isdigit()]) if folder.is_dir() else 0


def run_job(out: Path, bootstrap: str, topic: str, kill_at_commits: int | None = None, timeout_s: float = 600) -> tuple:
    """The job in its own process group to its end, or SIGKILLed (the group, JVM included) once
    the checkpoint has ``kill_at_commits`` committed batches. Returns (exit code, killed, output)."""
    log = out.parent / f"{out.name}-{time.monotonic_ns()}.log"
    with open(log, "w") as handle:
        proc = subprocess.Popen(_job(out, bootstrap, topic), env=_env(), stdout=handle, stderr=subprocess.STDOUT,
                                start_new_session=True, cwd=str(ROOT))
    killed = False
    deadline = time.monotonic() + timeout_s
    try:
        while proc.poll() is None:
            if kill_at_commits is not None and _commits(out) >= kill_at_commits:
                os.killpg(proc.pid, signal.SIGKILL)
                killed = True
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the Kafka job did not finish in {timeout_s} s:\n{log.read_text()[-3000:]}")
            time.sleep(0.05)
        code = proc.wait(60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # nothing of the run (its JVM) outlives it
        except ProcessLookupError:
            pass
    return code, killed, log.read_text()


RUN_COLUMNS = {"query_id", "batch_id", "detected_at", "detected_date", "written_at", "record_id"}


def read_table(path: Path) -> list:
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    table = snapshot_dataset(DeltaTable(str(path))).to_table()
    columns = sorted(c for c in table.column_names if c not in RUN_COLUMNS)
    return sorted(tuple((c, repr(r[c])) for c in columns) for r in table.select(columns).to_pylist())


@pytest.fixture(scope="module")
def job_topic(kafka):
    topic = "orders"
    kafka.create_topic(topic, 4)
    produced = {}
    records = _dataset()
    for (partition, value), where in zip(records, kafka.produce(topic, [(None, v, p) for p, v in records])):
        assert where[0] == partition
        produced[where] = value
    return topic, produced


@pytest.fixture(scope="module")
def baseline(kafka, job_topic, tmp_path_factory):
    out = tmp_path_factory.mktemp("kafka-baseline") / "out"
    code, _, log = run_job(out, kafka.bootstrap_servers, job_topic[0])
    assert code == 0, log[-4000:]
    return out


@needs_kafka
def test_late_table_carries_partition_and_offset_and_quarantines_non_json(baseline, job_topic):
    """Every record is in the late table or in a pane; each late / invalid row's Kafka partition and
    offset point at exactly the value produced there; the non-JSON value is malformed_record."""
    from deltalake import DeltaTable

    _, produced = job_topic
    late = DeltaTable(str(baseline / "late")).to_pyarrow_table().to_pylist()
    seen = set()
    for row in late:
        where = (int(row["partition"]), row["offset"])
        assert where in produced and where not in seen, row
        seen.add(where)
        value = produced[where]
        if row["reason"] == "malformed_record":
            assert value == "this is {not json" and json.loads(row["payload"])["_corrupt_record"] == value, row
        else:
            assert json.loads(row["payload"])["ts"] == json.loads(value)["ts"], row
    reasons = sorted(r["reason"] for r in late)
    assert reasons.count("malformed_record") == 1 and reasons.count("before_min_valid") == 1
    assert reasons.count("too_late") > 0
    malformed = next(r for r in late if r["reason"] == "malformed_record")
    assert malformed["kind"] == "invalid" and malformed["partition"] == "2"
    # panes came out too (windows still open at the end of the topic hold the rest: no end of input)
    results = DeltaTable(str(baseline / "results")).to_pyarrow_table().to_pylist()
    assert results and sum(r["count"] for r in results if r["pane_index"] == 0) + len(late) <= len(produced)


@needs_kafka
def test_job_killed_twice_mid_stream_resumes_equal_to_an_uninterrupted_run(kafka, job_topic, baseline, tmp_path):
    """SIGKILL the Kafka-fed job (its process group) twice mid-stream, restart from the checkpoint:
    the Delta tables equal the uninterrupted run's row for row, nothing lost or written twice."""
    out = tmp_path / "out"
    topic = job_topic[0]
    code, killed, log = run_job(out, kafka.bootstrap_servers, topic, kill_at_commits=2)
    assert killed, f"the first run ended ({code}) before batch 2:\n{log[-3000:]}"
    first = _commits(out)
    code, killed, log = run_job(out, kafka.bootstrap_servers, topic, kill_at_commits=first + 3)
    assert killed, f"the second run ended ({code}) before it was killed:\n{log[-3000:]}"
    code, _, log = run_job(out, kafka.bootstrap_servers, topic)
    assert code == 0, log[-4000:]
    for name in ("results", "late"):
        expected, got = read_table(baseline / name), read_table(out / name)
        lost = [r for r in expected if r not in got]
        duplicated = len(got) - len(set(got))
        print(f"{name}: {len(expected)} rows uninterrupted, {len(got)} after two kills; lost {len(lost)}, "
              f"duplicated {duplicated}")
        assert got == expected, f"{name}: lost {len(lost)}, duplicated {duplicated}"


# -- bad set-ups fail before the query starts ----------------------------------------------------
@needs_kafka
def test_missing_topic_fails_before_the_query_starts(spark, kafka):
    from eventtime.sources import KafkaSourceError
    from kafka_harness import load_kafka_job

    job = load_kafka_job()
    before = len(spark.streams.active)
    with pytest.raises(KafkaSourceError, match=r"Kafka topic 'no-such-topic' does not exist on 127\.0\.0\.1:\d+.*create it"):
        job.build_query(spark, kafka.bootstrap_servers, "no-such-topic", "unused")
    assert len(spark.streams.active) == before


@needs_kafka
def test_broker_down_fails_before_the_query_starts(spark, tmp_path):
    from eventtime.sources import KafkaSourceError, free_port
    from kafka_harness import load_kafka_job

    down = f"127.0.0.1:{free_port()}"
    job = load_kafka_job()
    before = len(spark.streams.active)
    with pytest.raises(KafkaSourceError, match=rf"no Kafka broker answers at {down}.*start the broker"):
        job.build_query(spark, down, "events", str(tmp_path))
    assert len(spark.streams.active) == before
    # the command line says so too, and exits 2 without starting Spark
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "kafka_job.py"), "--bootstrap-servers", down,
                           "--topic", "events", "--output", str(tmp_path / "out")],
                          capture_output=True, text=True, env=_env(), timeout=120)
    assert done.returncode == 2 and f"no Kafka broker answers at {down}" in done.stderr, done.stderr
    assert not (tmp_path / "out").exists()


def test_local_kafka_without_broker_jars_names_the_command(tmp_path, monkeypatch):
    from eventtime.sources import KafkaUnavailableError, LocalKafka

    monkeypatch.setenv("EVENTTIME_JARS", str(tmp_path))
    with pytest.raises(KafkaUnavailableError, match=r"python -m eventtime\.spark\.connectors broker"):
        LocalKafka().start()


def test_kafka_session_on_pyspark_4_3_is_refused_with_what_to_install():
    code = ("import eventtime, pyspark\n"
            "from eventtime.spark.connectors import ConnectorUnavailableError\n"
            "assert pyspark.__version__.startswith('4.3'), pyspark.__version__\n"
            "try:\n    eventtime.local_session(kafka=True)\n"
            "except ConnectorUnavailableError as exc:\n    print('REFUSED', exc)\n")
    done = subprocess.run([str(SPARK43), "-c", code], capture_output=True, text=True, timeout=300, cwd=str(ROOT))
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.startswith("REFUSED") and "4.2" in done.stdout and "spark-sql-kafka-0-10" in done.stdout, done.stdout
