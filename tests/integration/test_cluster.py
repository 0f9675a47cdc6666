"""The streaming job on a real Spark standalone cluster: a master and two workers, each its own JVM.

``examples/cluster_job.py`` is submitted with ``bin/spark-submit --master spark://...`` to a
cluster this module starts (:mod:`standalone_cluster`: loopback only, free ports, everything
under a temporary directory, stopped at the end, also on failure), over a generated stream
of JSON files read one per micro-batch. Its two Delta tables must equal, row for row, those
of the same job run by spark-submit with ``--master local[2]``: once undisturbed, and once
with one executor JVM killed with SIGKILL mid-stream (after the stream committed its first
micro-batches). Spark of the cluster, of spark-submit and of the driver is the running
interpreter's pyspark (pyspark 4.2 under ``make test-integration``), the engine jar the one
``eventtime.engine_jar()`` gives it.

Columns left out of the comparison: ``query_id`` (a new id per query run, so per run: the
local and the cluster run are different queries), ``written_at`` / ``detected_at`` /
``detected_date`` (wall clock). Everything else is compared, ``batch_id`` included: both
runs read one file per micro-batch, so every row is written by the same batch.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from standalone_cluster import StandaloneCluster, free_port, pyspark_home  # noqa: E402

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
JOB = ROOT / "examples" / "cluster_job.py"
ROWS, BATCHES, SEED = 3000, 10, 5
RUN_COLUMNS = {"query_id", "written_at", "detected_at", "detected_date", "record_id"}
KILL_DELAY_S = 1.0  # after batch 2's offsets are logged: when its tasks run (not an assertion)
JOB_TIMEOUT_S = 900  # a hang guard only: a job still running after it is killed and reported


def _engine_jar() -> str:
    import eventtime

    return eventtime.engine_jar()


def _submit_env(base: dict | None = None) -> dict:
    env = dict(base or os.environ)
    env.pop("EVENTTIME_FAULT", None)
    env.pop("SENTRY_DSN", None)
    env.update(SPARK_HOME=str(pyspark_home()), SPARK_LOCAL_IP="127.0.0.1", PYSPARK_PYTHON=sys.executable,
               PYSPARK_DRIVER_PYTHON=sys.executable)
    return env


def submit_command(master: str, input_dir: Path, output_dir: Path, *conf: str, job_args: tuple = ()) -> list[str]:
    command = [str(pyspark_home() / "bin" / "spark-submit"), "--master", master, "--jars", _engine_jar(),
               "--conf", f"spark.executorEnv.PYSPARK_PYTHON={sys.executable}"]
    for item in conf:
        command += ["--conf", item]
    return command + [str(JOB), str(input_dir), str(output_dir), *job_args]


def cluster_conf(events: Path) -> tuple[str, ...]:
    events.mkdir(parents=True, exist_ok=True)
    return ("spark.executor.cores=1", "spark.cores.max=2", "spark.executor.memory=768m",
            "spark.eventLog.enabled=true", "spark.eventLog.compress=false", f"spark.eventLog.dir=file://{events}")


class Submitted:
    """One spark-submit run in its own process group, its output in a log file."""

    def __init__(self, command: list[str], log: Path, env: dict | None = None) -> None:
        self.log = log
        self.handle = open(log, "wb")
        self.proc = subprocess.Popen(command, env=_submit_env(env), stdout=self.handle, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True, cwd=ROOT)

    def wait(self) -> int:
        try:
            return self.proc.wait(timeout=JOB_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"spark-submit still running after {JOB_TIMEOUT_S} s:\n{self.text()[-4000:]}")
        finally:
            self.close()

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def close(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)  # the driver JVM and its Python, whatever is left
        except ProcessLookupError:
            pass
        if self.proc.poll() is None:
            self.proc.wait(timeout=30)
        self.handle.close()


def run_job(master: str, input_dir: Path, output_dir: Path, log: Path, *conf: str, job_args: tuple = ()) -> str:
    job = Submitted(submit_command(master, input_dir, output_dir, *conf, job_args=job_args), log)
    code = job.wait()
    assert code == 0, f"spark-submit --master {master} exited {code}:\n{job.text()[-6000:]}"
    return job.text()


def read_table(path: Path) -> list[tuple]:
    """The table's rows as sorted tuples of (column, repr(value)), without RUN_COLUMNS."""
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    table = snapshot_dataset(DeltaTable(str(path))).to_table()
    columns = sorted(c for c in table.column_names if c not in RUN_COLUMNS)
    return sorted(tuple((c, repr(row[c])) for c in columns) for row in table.select(columns).to_pylist())


def tables(out: Path) -> dict:
    return {name: read_table(out / name) for name in ("results", "late")}


def assert_same_tables(got: dict, expected: dict, what: str) -> None:
    for name in ("results", "late"):
        want, have = Counter(expected[name]), Counter(got[name])
        lost, extra = want - have, have - want
        assert not lost and not extra, (
            f"{what}: {name}: {sum(lost.values())} row(s) lost, {sum(extra.values())} extra (duplicated or "
            f"different), e.g. lost {sorted(lost)[:1]}, extra {sorted(extra)[:1]}")
        assert got[name] == expected[name]


def events_of(events_dir: Path) -> list[dict]:
    """The Spark event log(s) of the runs written to ``events_dir`` (one JSON event a line)."""
    found = []
    for path in sorted(events_dir.rglob("*")):  # Spark 4 writes rolling logs: a directory per app
        if path.is_file() and path.name.startswith(("events_", "app-")):
            for line in path.read_text(errors="replace").splitlines():
                if line.strip():
                    found.append(json.loads(line))
    return found


# -- fixtures -------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("cluster")


@pytest.fixture(scope="module")
def input_dir(work) -> Path:
    from eventtime.cli.demo_data import DemoStream, write_stream

    directory = work / "input"
    assert len(write_stream(DemoStream(rows=ROWS, batches=BATCHES, seed=SEED), str(directory))) == BATCHES + 1
    return directory


@pytest.fixture(scope="module")
def local_run(work, input_dir) -> dict:
    out = work / "local"
    text = run_job("local[2]", input_dir, out, work / "local.log")
    assert "master: local[2]" in text, text[-3000:]
    result = tables(out)
    assert result["results"] and result["late"], "the local run must write panes and late records"
    kinds = Counter(dict(row)["kind"] for row in result["late"])
    assert set(kinds) == {"'late'", "'invalid'"}, kinds
    return result


SESSIONS = ("--sessions", "20 seconds")


@pytest.fixture(scope="module")
def session_local_run(work, input_dir) -> dict:
    out = work / "local-sessions"
    run_job("local[2]", input_dir, out, work / "local-sessions.log", job_args=SESSIONS)
    result = tables(out)
    assert result["results"] and result["late"], "the local session run must write panes and late records"
    return result


@pytest.fixture(scope="module")
def cluster(work):
    cluster = StandaloneCluster(work / "standalone", workers=2, cores=1, memory="1g")
    cluster.start()
    try:
        yield cluster
    finally:
        cluster.stop()
    assert not cluster.executor_pids()


# -- tests ----------------------------------------------------------------------------------
def test_cluster_has_a_master_and_two_workers_each_its_own_jvm(cluster):
    status = cluster.status()
    assert status["url"] == cluster.master_url
    alive = [w for w in status["workers"] if w["state"] == "ALIVE"]
    assert len(alive) == 2 and all(w["cores"] == 1 and w["memory"] == 1024 for w in alive), alive
    pids = {name: proc.pid for name, proc in cluster.procs.items()}
    assert len(set(pids.values())) == 3 and all(proc.poll() is None for proc in cluster.procs.values())


def test_job_on_the_cluster_equals_the_local_run(cluster, work, input_dir, local_run):
    out, events = work / "clean", work / "events-clean"
    text = run_job(cluster.master_url, input_dir, out, work / "clean.log", *cluster_conf(events))
    assert f"master: {cluster.master_url}" in text, text[-3000:]
    log = events_of(events)
    added = [e for e in log if e["Event"] == "SparkListenerExecutorAdded"]
    assert len(added) == 2 and {e["Executor Info"]["Host"] for e in added} == {"127.0.0.1"}, added
    # the work ran on the executors (not the driver): task ends on both executors
    ran_on = {e["Task Info"]["Executor ID"] for e in log if e["Event"] == "SparkListenerTaskEnd"}
    assert ran_on == {e["Executor ID"] for e in added}, ran_on
    assert_same_tables(tables(out), local_run, "cluster run")


def test_session_job_on_the_cluster_equals_the_local_run(cluster, work, input_dir, session_local_run):
    """Session windows on the executors: the map-side combine's partial sessions, merged by the
    operator, give the local run's panes and late records row for row."""
    out = work / "clean-sessions"
    run_job(cluster.master_url, input_dir, out, work / "clean-sessions.log", *cluster_conf(work / "events-sessions"),
            job_args=SESSIONS)
    got = tables(out)
    timings = Counter(dict(row)["pane_timing"] for row in got["results"])
    merged = sum(dict(row)["merged_from"] != "[]" for row in got["results"])
    assert timings["'ON_TIME'"] and timings["'LATE'"] and merged, (timings, merged)  # late firings and merges ran
    assert_same_tables(got, session_local_run, "cluster session run")


def test_sql_and_python_aggregations_equal_the_input_less_the_late_records(local_run, input_dir, work):
    """The job's Spark SQL aggregations (exact and approximate distinct counts, run by the
    engine) and its Python one (run by the Python workers) in each window's latest pane equal
    the same functions over the input records of that user and window that are not in the
    late table (the cluster runs equal this run: the tests above)."""
    from deltalake import DeltaTable

    from eventtime.sinks import snapshot_dataset

    late = snapshot_dataset(DeltaTable(str(work / "local" / "late"))).to_table().to_pylist()
    left_out = {(r["partition"], r["offset"]) for r in late}
    windows: dict = {}
    for path in sorted(input_dir.glob("batch-*.json")):
        for line in path.read_text().splitlines():
            row = json.loads(line)
            if row["heartbeat"] or (str(row["partition"]), row["offset"]) in left_out:
                continue
            start = int(row["ts"]) // 60_000 * 60_000
            windows.setdefault((row["user_id"], start), []).append(row["amount"])
    panes = snapshot_dataset(DeltaTable(str(work / "local" / "results"))).to_table().to_pylist()
    latest: dict = {}
    for pane in panes:
        window = (pane["user_id"], int(pane["window_start"].timestamp() * 1000))
        if window not in latest or pane["pane_index"] > latest[window]["pane_index"]:
            latest[window] = pane
    assert set(latest) == set(windows) and len(latest) > 100
    wrong = [(w, p["count"], p["distinct_amounts"], p["approx_amounts"], p["big_orders"], windows[w])
             for w, p in latest.items()
             if (p["count"], p["distinct_amounts"], p["big_orders"]) != (
                 len(windows[w]), len({a for a in windows[w] if a is not None}), sum(a is not None and a >= 50 for a in windows[w]))
             or abs(p["approx_amounts"] - p["distinct_amounts"]) > max(1, 0.15 * p["distinct_amounts"])]
    assert not wrong, wrong[:3]


def test_executor_killed_mid_stream_loses_and_duplicates_nothing(cluster, work, input_dir, local_run):
    out, events = work / "killed", work / "events-killed"
    commits, offsets = out / "checkpoint" / "commits", out / "checkpoint" / "offsets"
    command = submit_command(cluster.master_url, input_dir, out, *cluster_conf(events))
    job = Submitted(command, work / "killed.log")
    killed: dict = {}
    try:
        # Kill once batches 0 and 1 are committed and batch 2 is planned (its offsets are logged),
        # a moment later: its job (planned in about 0.6 s here, then about 1.5 s of tasks on both
        # executors) is about to run or running. Whether tasks were lost with the executor is
        # read from the event log below and reported; the tables must be equal either way.
        while job.proc.poll() is None and not killed:
            if (commits / "1").exists() and (offsets / "2").exists():
                time.sleep(KILL_DELAY_S)
                pids = cluster.executor_pids()
                if len(pids) == 2:
                    executor_id = min(pids, key=int)
                    killed = {"executor": executor_id, "pid": pids[executor_id],
                              "committed": sorted(int(p.name) for p in commits.iterdir() if p.name.isdigit())}
                    os.kill(pids[executor_id], signal.SIGKILL)
                    break
            time.sleep(0.05)
        code = job.wait()
    finally:
        job.close()
    assert killed, f"the job ended before an executor could be killed:\n{job.text()[-4000:]}"
    restarted = code != 0
    if restarted:
        # the query failed on the executor loss: restart it from its checkpoint
        text = run_job(cluster.master_url, input_dir, out, work / "killed-restart.log", *cluster_conf(events))
        assert "last batch" in text
    final = max(int(p.name) for p in commits.iterdir() if p.name.isdigit())
    assert max(killed["committed"]) < final, (killed, final)  # the kill was mid-stream

    log = events_of(events)
    removed = [e for e in log if e["Event"] == "SparkListenerExecutorRemoved"]
    assert killed["executor"] in {e["Executor ID"] for e in removed}, removed
    lost_tasks = [e for e in log if e["Event"] == "SparkListenerTaskEnd"
                  and e["Task End Reason"]["Reason"] != "Success"]
    added = [e["Executor ID"] for e in log if e["Event"] == "SparkListenerExecutorAdded"]
    report = {"killed": killed, "query restarted": restarted, "final batch": final,
              "executors added": added, "failed tasks": [
                  (e["Stage ID"], e["Task Info"]["Executor ID"], e["Task End Reason"]["Reason"]) for e in lost_tasks]}
    print("executor kill:", json.dumps(report))
    (work / "killed-report.json").write_text(json.dumps(report, indent=1))
    assert_same_tables(tables(out), local_run, f"cluster run with executor {killed['executor']} killed")


def test_unreachable_master_is_refused_with_its_url_before_any_query(work, input_dir):
    port = free_port()  # nothing listens there
    master = f"spark://127.0.0.1:{port}"
    out = work / "unreachable"
    job = Submitted(submit_command(master, input_dir, out), work / "unreachable.log")
    code = job.wait()
    text = job.text()
    assert code == 2, text[-4000:]
    assert f"cannot reach the Spark master {master}" in text, text[-4000:]
    assert "127.0.0.1:" + str(port) + ": Connection refused" in text, text[-4000:]
    assert "--master" in text and "start-master.sh" in text
    assert not out.exists(), "nothing may be written for a master that is not there"
    assert "SparkContext: Running Spark version" not in text, "the session was started"


def test_check_master(cluster):
    from eventtime.spark.cluster import MasterUnreachableError, check_master, standalone_masters

    check_master(cluster.master_url)  # a running master: nothing to say
    check_master("local[2]")
    check_master("local-cluster[2,1,1024]")
    port = free_port()
    with pytest.raises(MasterUnreachableError, match=rf"cannot reach the Spark master spark://127\.0\.0\.1:{port} "):
        check_master(f"spark://127.0.0.1:{port}", timeout_s=2)
    # a list of masters (standby masters): one that answers is enough
    check_master(f"spark://127.0.0.1:{port},{cluster.master_url[len('spark://'):]}")
    assert standalone_masters("spark://h1:7077,h2:7078") == [("h1", 7077), ("h2", 7078)]
    assert standalone_masters("spark://h1") == [("h1", 7077)]
    assert standalone_masters("spark://[::1]:7080") == [("::1", 7080)]
    for bad in ("spark://", "spark://h1:port"):
        with pytest.raises(ValueError, match="not a Spark standalone master URL"):
            standalone_masters(bad)
