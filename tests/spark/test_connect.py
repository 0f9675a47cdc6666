"""Spark Connect, as a user meets it: a real Spark Connect server on 127.0.0.1 started with the
engine jar (``--jars``), and a client script (``SparkSession.builder.remote("sc://...")``) per
item, in its own process (a Connect client changes process-wide state of pyspark, and this
process may hold the classic session of tests/conftest.py).

* ``with_event_time`` on a static DataFrame works (its rows, collected through Connect);
* ``window_aggregate`` refuses with :class:`ClassicSessionRequiredError`, naming what to do,
  and the server ran nothing for it (its SQL executions and jobs, read from its status API);
* ``with_event_time`` on a streaming DataFrame refuses likewise: its control source and
  batch-time column are the engine's, reached through py4j.

The recognition itself is tested without a server at the end.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from eventtime.spark.connect import ClassicSessionRequiredError, is_connect, require_classic
from eventtime.spark.engine import EngineUnavailableError

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
START_TIMEOUT_S = 180.0


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


class ConnectServer:
    """``spark-submit --class SparkConnectServer --jars <engine jar>`` of the running pyspark,
    bound to 127.0.0.1 (gRPC and the status UI on free ports), in its own process group."""

    def __init__(self, directory: Path, jar: str) -> None:
        import pyspark

        self.directory = directory
        self.spark_home = Path(pyspark.__file__).resolve().parent
        self.jar = jar
        self.port = _free_port()
        self.ui_port = _free_port()
        self.log = directory / "connect-server.log"
        self.proc = None

    def start(self) -> "ConnectServer":
        env = dict(os.environ, SPARK_HOME=str(self.spark_home), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_CONF_DIR=str(self.directory / "conf"), PYSPARK_PYTHON=sys.executable, TZ="UTC")
        for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_API_MODE", "MASTER"):
            env.pop(name, None)
        (self.directory / "conf").mkdir(parents=True, exist_ok=True)
        command = [
            str(self.spark_home / "bin" / "spark-submit"), "--class", SERVER_CLASS, "--name", "eventtime-connect-test",
            "--master", "local[1]", "--jars", self.jar,
            "--conf", "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf", f"spark.connect.grpc.binding.port={self.port}",
            "--conf", f"spark.ui.port={self.ui_port}", "--conf", "spark.ui.showConsoleProgress=false",
            "--conf", "spark.sql.shuffle.partitions=1", "--conf", "spark.sql.session.timeZone=UTC",
            "--conf", f"spark.local.dir={self.directory / 'local'}",
        ]
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.directory)
        deadline = time.monotonic() + START_TIMEOUT_S
        while not _listening(self.port):
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited ({self.proc.returncode}):\n{self.log_tail()}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the Spark Connect server did not listen in {START_TIMEOUT_S:.0f} s:\n{self.log_tail()}")
            time.sleep(0.3)
        return self

    def log_tail(self, chars: int = 3000) -> str:
        return self.log.read_text(errors="replace")[-chars:] if self.log.exists() else ""

    def stop(self) -> None:
        if self.proc is None:
            return
        for sig, wait_s in ((signal.SIGTERM, 15), (signal.SIGKILL, 30)):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                self.proc.wait(timeout=wait_s)
                break
            except subprocess.TimeoutExpired:
                continue


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    from eventtime.spark import engine_jar

    started = ConnectServer(tmp_path_factory.mktemp("connect"), engine_jar())
    try:
        yield started.start()
    finally:
        started.stop()


# Read by the client scripts: the server's SQL executions and jobs so far (its status API).
_COUNTS = '''
import json, time, urllib.request

def server_work(ui_port):
    """(SQL executions, jobs) the Connect server has run so far."""
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    def get(path):
        with opener.open(f"http://127.0.0.1:{ui_port}/api/v1/applications{path}", timeout=10) as response:
            return json.loads(response.read())
    app = get("")[0]["id"]
    return len(get(f"/{app}/sql?details=false")), len(get(f"/{app}/jobs"))

def settled(ui_port, before=None):
    """The counts once the server's listener has caught up (they grew past ``before``, if given)."""
    deadline = time.monotonic() + 30
    last = server_work(ui_port)
    while time.monotonic() < deadline:
        time.sleep(0.5)
        now = server_work(ui_port)
        if now == last and (before is None or all(n > b for n, b in zip(now, before))):
            return now
        last = now
    return last
'''


def run_client(server: ConnectServer, body: str) -> dict:
    """Run ``body`` as a user's script with ``spark`` a Spark Connect session of ``server``;
    the script sets ``result`` (a dict), which is returned."""
    script = (
        "import json, sys\n"
        "from pyspark.sql import SparkSession\n"
        "import eventtime\n"
        + _COUNTS
        + f"spark = SparkSession.builder.remote('sc://127.0.0.1:{server.port}').getOrCreate()\n"
        + f"UI_PORT = {server.ui_port}\n"
        + "result = {}\n"
        + textwrap.dedent(body)
        + "\nprint('RESULT ' + json.dumps(result, default=str))\n"
    )
    env = dict(os.environ, SPARK_LOCAL_IP="127.0.0.1", PYTHONWARNINGS="ignore::FutureWarning", TZ="UTC")
    for name in ("SPARK_REMOTE", "SPARK_CONNECT_MODE_ENABLED", "SPARK_LOCAL_REMOTE", "SPARK_API_MODE"):
        env.pop(name, None)
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300,
                          cwd=str(server.directory))
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, (
        f"client exited {done.returncode}\nstdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-5000:]}\n"
        f"server log:\n{server.log_tail()}")
    return json.loads(lines[-1][len("RESULT "):])


# -- with a real Spark Connect server -----------------------------------------------------------

WHAT_TO_DO = ("spark-submit --jars", "spark.api.mode', 'classic'", "eventtime.engine_jar()", "eventtime.local_session()")


@pytest.mark.spark
@pytest.mark.component
def test_with_event_time_on_a_static_connect_dataframe_works(server):
    result = run_client(server, """
        df = spark.createDataFrame([(1, 1_700_000_000_000), (2, None), (3, 5)], "user_id int, ts long")
        events = df.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="30 seconds"))
        result["session"] = type(spark).__module__
        result["columns"] = events.columns
        result["rows"] = [row.asDict() for row in events.orderBy("user_id").collect()]
        result["settings"] = json.loads(events.schema["__et_ms"].metadata["eventtime"])
    """)
    assert result["session"] == "pyspark.sql.connect.session"
    assert result["columns"] == ["user_id", "ts", "__et_reason", "__et_raw", "__et_ms", "__et_wm", "__et_valid"]
    assert result["rows"] == [
        {"user_id": 1, "ts": 1_700_000_000_000, "__et_reason": None, "__et_raw": None, "__et_ms": 1_700_000_000_000,
         "__et_wm": "2023-11-14 22:13:20", "__et_valid": True},
        {"user_id": 2, "ts": None, "__et_reason": "null_timestamp", "__et_raw": None, "__et_ms": None,
         "__et_wm": None, "__et_valid": False},
        {"user_id": 3, "ts": 5, "__et_reason": "before_min_valid", "__et_raw": "5", "__et_ms": None,
         "__et_wm": None, "__et_valid": False},
    ]
    # the settings window_aggregate would read survive the trip through Connect
    assert result["settings"]["max_out_of_orderness_ms"] == 30_000 and result["settings"]["column"] == "ts"


@pytest.mark.spark
@pytest.mark.component
def test_window_aggregate_refuses_a_connect_dataframe_before_anything_runs(server):
    result = run_client(server, """
        df = spark.range(2).selectExpr("1 AS user_id", "1700000000000 + id * 30000 AS ts")  # a job to collect
        events = df.transform(eventtime.with_event_time("ts", unit="ms"))
        before = server_work(UI_PORT)
        result["rows"] = len(events.collect())
        # the server's counts move with real work: the collect above shows in both
        result["after_collect"] = after_collect = settled(UI_PORT, before)
        result["before"] = before
        try:
            events.transform(eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute"),
                                                        allowed_lateness="10 minutes"))
        except eventtime.ClassicSessionRequiredError as exc:
            result["error"] = type(exc).__name__
            result["message"] = str(exc)
            result["is_runtime_error"] = isinstance(exc, RuntimeError)
            result["is_engine_unavailable"] = isinstance(exc, eventtime.spark.engine.EngineUnavailableError)
        time.sleep(1.5)
        result["after_refusal"] = settled(UI_PORT)
    """)
    assert result["rows"] == 2
    assert all(a > b for a, b in zip(result["after_collect"], result["before"])), result
    assert result.get("error") == "ClassicSessionRequiredError", result
    assert result["is_runtime_error"] and result["is_engine_unavailable"]
    message = result["message"]
    assert message.startswith("window_aggregate needs a classic (py4j) Spark session, but was given a Spark Connect "
                              "DataFrame (pyspark.sql.connect.dataframe.DataFrame)"), message
    assert "no py4j gateway" in message and "even when the Connect server has the engine jar" in message
    for advice in WHAT_TO_DO:
        assert advice in message, (advice, message)
    assert "with_event_time on a static (batch) DataFrame works" in message
    # nothing ran on the server for the refused call: no SQL execution (an ADD JAR would be one), no job
    assert result["after_refusal"] == result["after_collect"], result


@pytest.mark.spark
@pytest.mark.component
def test_with_event_time_refuses_a_streaming_connect_dataframe(server):
    result = run_client(server, """
        stream = spark.readStream.format("rate").option("rowsPerSecond", 1).load()
        result["before"] = settled(UI_PORT)
        for now in (None, 1_700_000_000_000):  # a pinned `now` still needs the engine's control source
            try:
                stream.transform(eventtime.with_event_time("timestamp", max_out_of_orderness="5 seconds", now=now))
            except eventtime.ClassicSessionRequiredError as exc:
                result[str(now)] = str(exc)
        result["streams"] = [q.name for q in spark.streams.active]
        time.sleep(1.5)
        result["after"] = settled(UI_PORT)
    """)
    for now in ("None", "1700000000000"):
        message = result.get(now)
        assert message, result
        assert message.startswith("with_event_time on a streaming DataFrame needs a classic (py4j) Spark session"), message
        for advice in WHAT_TO_DO:
            assert advice in message, (advice, message)
    assert result["streams"] == []
    assert result["after"] == result["before"], result  # no SQL execution, no job: no ADD JAR, no query


# -- the recognition, without a server ----------------------------------------------------------


def _fake(module: str, name: str = "DataFrame", **attrs):
    cls = type(name, (), attrs)
    cls.__module__ = module
    return cls


def test_recognises_connect_classes_by_module():
    ConnectDataFrame = _fake("pyspark.sql.connect.dataframe")
    ConnectSession = _fake("pyspark.sql.connect.session", "SparkSession")
    assert is_connect(ConnectDataFrame()) and is_connect(ConnectSession())
    assert is_connect(_fake("pyspark.sql.connect")())

    class Mine(ConnectDataFrame):  # a user's subclass (defined in this module) is still Connect's
        pass

    assert is_connect(Mine())
    for module in ("pyspark.sql.classic.dataframe", "pyspark.sql.dataframe", "pyspark.sql.connectors", __name__):
        assert not is_connect(_fake(module)()), module
    assert not is_connect(None) and not is_connect("sc://127.0.0.1")


@pytest.mark.spark
def test_require_classic_passes_classic_objects(spark):
    df = spark.range(1)
    assert not is_connect(df) and not is_connect(spark)
    require_classic(df, "window_aggregate")
    require_classic(spark, "route")


class _Untouchable:
    """Any attribute read is a call to Spark: the refusal must come before one."""

    def __getattr__(self, name):
        raise AssertionError(f"the refusal read .{name} first")


def test_window_aggregate_refuses_before_reading_the_dataframe():
    import eventtime

    ConnectDataFrame = _fake("pyspark.sql.connect.dataframe")
    ConnectDataFrame.__getattr__ = _Untouchable.__getattr__
    step = eventtime.window_aggregate(keys=["user_id"], window=eventtime.Tumbling("1 minute"))
    with pytest.raises(ClassicSessionRequiredError) as caught:
        step(ConnectDataFrame())
    assert isinstance(caught.value, EngineUnavailableError) and isinstance(caught.value, RuntimeError)
    assert caught.value.what == "window_aggregate"
    assert str(caught.value).startswith("window_aggregate needs a classic (py4j) Spark session")


def test_with_event_time_refuses_only_a_streaming_connect_dataframe():
    import eventtime

    step = eventtime.with_event_time("ts", unit="ms")
    Streaming = _fake("pyspark.sql.connect.dataframe", isStreaming=True)
    Streaming.__getattr__ = _Untouchable.__getattr__
    with pytest.raises(ClassicSessionRequiredError, match="^with_event_time on a streaming DataFrame needs"):
        step(Streaming())
    Static = _fake("pyspark.sql.connect.dataframe", isStreaming=False)
    Static.__getattr__ = _Untouchable.__getattr__
    with pytest.raises(AssertionError, match=r"read \.columns"):  # refused nothing: went on to its columns
        step(Static())
