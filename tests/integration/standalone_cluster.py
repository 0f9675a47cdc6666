"""A throwaway Spark standalone cluster on this machine: one master and N workers, each its own JVM.

    cluster = StandaloneCluster(tmp_path / "cluster", workers=2)
    cluster.start()            # returns once every worker is registered with the master
    cluster.master_url         # spark://127.0.0.1:<port>
    cluster.executor_pids()    # {executor id: pid} of the executors its workers launched
    cluster.stop()             # SIGTERM, then SIGKILL, to each daemon's whole process group

Every daemon is ``bin/spark-class`` of the Spark home given (by default the running
interpreter's pyspark), bound to 127.0.0.1 on free ports (master, master web UI, each
worker and its web UI), with its logs, work directory and an empty ``SPARK_CONF_DIR`` under
the directory given; the master's REST submission server is off. Each daemon leads its own
process group, and the executors (and their Python workers) a worker launches stay in that
group, so :meth:`stop` leaves nothing running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Optional

__all__ = ["StandaloneCluster", "free_port", "pyspark_home"]


def pyspark_home() -> Path:
    """The Spark home of the running interpreter's pyspark (its ``bin/spark-class``)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class ClusterError(RuntimeError):
    """The cluster did not come up (the message holds the daemons' log tails)."""


class StandaloneCluster:
    def __init__(self, directory: Path, workers: int = 2, cores: int = 1, memory: str = "1g",
                 spark_home: Optional[Path] = None, start_timeout_s: float = 180.0) -> None:
        self.directory = Path(directory)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.spark_home = Path(spark_home) if spark_home else pyspark_home()
        self.start_timeout_s = start_timeout_s
        self.master_port = free_port()
        self.master_ui_port = free_port()
        self.master_url = f"spark://127.0.0.1:{self.master_port}"
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs: dict[str, Path] = {}

    # -- environment ----------------------------------------------------------------------
    def env(self) -> dict:
        """The environment of the daemons (and a good base for spark-submit against them)."""
        conf_dir = self.directory / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        for name in ("SPARK_MASTER_HOST", "SPARK_MASTER_PORT", "SPARK_WORKER_DIR", "SPARK_WORKER_OPTS",
                     "SPARK_MASTER_OPTS", "SPARK_DAEMON_JAVA_OPTS"):
            env.pop(name, None)
        env.update(
            SPARK_HOME=str(self.spark_home),
            SPARK_CONF_DIR=str(conf_dir),
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_LOCAL_DIRS=str(self.directory / "local"),
            SPARK_LOG_DIR=str(self.directory / "logs"),
            SPARK_PID_DIR=str(self.directory / "pids"),
            SPARK_DAEMON_MEMORY="384m",
            SPARK_MASTER_OPTS="-Dspark.master.rest.enabled=false",
            PYSPARK_PYTHON=sys.executable,
        )
        return env

    def _spawn(self, name: str, args: list[str]) -> None:
        log = self.directory / "logs" / f"{name}.log"
        log.parent.mkdir(parents=True, exist_ok=True)
        self.logs[name] = log
        with open(log, "wb") as out:
            self.procs[name] = subprocess.Popen(
                [str(self.spark_home / "bin" / "spark-class"), *args], env=self.env(), stdout=out,
                stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True, cwd=self.directory,
            )

    # -- lifecycle ------------------------------------------------------------------------
    def start(self) -> "StandaloneCluster":
        self.directory.mkdir(parents=True, exist_ok=True)
        (self.directory / "local").mkdir(exist_ok=True)
        try:
            self._spawn("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                   "--port", str(self.master_port), "--webui-port", str(self.master_ui_port)])
            self._wait(lambda state: state is not None, "the master to serve its status")
            for i in range(self.workers):
                work = self.directory / f"worker-{i}"
                work.mkdir(exist_ok=True)
                self._spawn(f"worker-{i}", [
                    "org.apache.spark.deploy.worker.Worker", self.master_url, "--host", "127.0.0.1",
                    "--port", str(free_port()), "--webui-port", str(free_port()),
                    "--cores", str(self.cores), "--memory", self.memory, "--work-dir", str(work)])
            self._wait(lambda state: state is not None and self._alive(state) == self.workers,
                       f"{self.workers} workers to register")
        except BaseException:
            self.stop()
            raise
        return self

    def status(self) -> Optional[dict]:
        """The master's JSON status (http://127.0.0.1:<ui port>/json), or None if it does not answer."""
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
        try:
            with opener.open(f"http://127.0.0.1:{self.master_ui_port}/json", timeout=5) as response:
                return json.loads(response.read())
        except (OSError, ValueError):
            return None

    @staticmethod
    def _alive(state: dict) -> int:
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def _wait(self, ready, what: str) -> None:
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            dead = [name for name, proc in self.procs.items() if proc.poll() is not None]
            if dead:
                raise ClusterError(f"{', '.join(dead)} exited while waiting for {what}:\n{self.log_tails()}")
            if ready(self.status()):
                return
            time.sleep(0.5)
        raise ClusterError(f"timed out after {self.start_timeout_s:.0f} s waiting for {what}:\n{self.log_tails()}")

    def log_tails(self, chars: int = 2000) -> str:
        parts = []
        for name, path in self.logs.items():
            text = path.read_text(errors="replace") if path.exists() else ""
            parts.append(f"--- {name} ({path}) ---\n{text[-chars:]}")
        return "\n".join(parts)

    def stop(self, grace_s: float = 15.0) -> None:
        """SIGTERM to each daemon's process group (workers first), then SIGKILL to what is left."""
        order = [n for n in self.procs if n != "master"] + [n for n in self.procs if n == "master"]
        for name in order:
            _signal_group(self.procs[name].pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for name in order:
            proc = self.procs[name]
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                pass
        for name in order:
            # the leader may be gone while executors of its group live on: the group, always
            _signal_group(self.procs[name].pid, signal.SIGKILL)
            if self.procs[name].poll() is None:
                self.procs[name].wait(timeout=30)

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- executors ------------------------------------------------------------------------
    def executor_pids(self) -> dict[str, int]:
        """{executor id: pid} of the live ``CoarseGrainedExecutorBackend`` JVMs of this cluster's
        workers (recognised by process group, so other clusters' executors are never listed)."""
        groups = {proc.pid for name, proc in self.procs.items() if name != "master"}
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                argv = (entry / "cmdline").read_bytes().split(b"\0")
                if b"org.apache.spark.executor.CoarseGrainedExecutorBackend" not in argv:
                    continue
                if os.getpgid(int(entry.name)) not in groups:
                    continue
            except (OSError, ProcessLookupError):
                continue
            args = [a.decode() for a in argv]
            executor_id = args[args.index("--executor-id") + 1] if "--executor-id" in args else entry.name
            found[executor_id] = int(entry.name)
        return found


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass
