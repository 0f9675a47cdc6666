"""Run real Apache Flink 2.3 session windows on micro-batch scenarios (a cross-check for our model).

``run_flink(scenario)`` / ``run_flink_many(scenarios)`` feed scenarios (the project's scenario
dicts: ``window`` of type ``session``, ``max_out_of_orderness_ms``, ``allowed_lateness_ms``,
``batches``; other fields are ignored) to ``FlinkSessions.java`` beside this file and return, per
scenario::

    {"firings": [{"batch", "key", "window_start", "window_end", "count", "sum",
                  "watermark_ms", "cause"}],          # cause: "timer" | "element"
     "late":    [{"batch", "key", "ts", "value"}]}

``batch == len(scenario["batches"])`` is the end of input (Flink's final Long.MAX_VALUE watermark,
reported as ``watermark_ms == 2**63 - 1``); ``watermark_ms`` is None before the first watermark.
How Flink is driven (record order, exact watermarks, doubled time so that touching sessions do
not merge, how batch and cause are derived) is documented at the top of FlinkSessions.java.

Needs java/javac 11+ and the Flink jars, which ``scripts/flink-jars.sh`` unzips from PyPI's
``apache-flink-libraries`` wheel into ``$EVENTTIME_FLINK_DIR`` (default ``<repo>/.flink``); the
compiled class lives in ``<that dir>/classes/<hash of the .java>``, so an edit recompiles.
Everything runs offline once the jars are there; the script and the compile are safe to run
from parallel test workers. ``run_flink_many`` runs all scenarios in one JVM
and one Flink job (about 3-4 s in all for dozens of scenarios); ``separate=True`` runs one job per
scenario (about 1.5 s each), the plain reference that the shared job is checked against.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
JAVA_SOURCE = HERE / "FlinkSessions.java"
LOG4J_CONFIG = HERE / "log4j2.properties"
JARS_SCRIPT = REPO / "scripts" / "flink-jars.sh"
FLINK_DIR = Path(os.environ.get("EVENTTIME_FLINK_DIR", REPO / ".flink"))
MAIN_CLASS = "FlinkSessions"


class FlinkError(RuntimeError):
    """The Flink harness could not be set up or the Flink program failed."""


def _tool(name: str) -> str:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / name).exists():
        return str(Path(java_home) / "bin" / name)
    found = shutil.which(name)
    if not found:
        raise FlinkError(
            f"'{name}' not found (a JDK 11+ is needed; scripts/ensure-java.sh installs one)"
        )
    return found


@functools.cache
def ensure_jars() -> Path:
    """Run scripts/flink-jars.sh (idempotent, quick once done); return the jar folder."""
    _checked(["bash", str(JARS_SCRIPT), str(FLINK_DIR)], "scripts/flink-jars.sh", timeout=900)
    return FLINK_DIR / "lib"


def _checked(cmd: list[str], what: str, timeout: float) -> None:
    """Run a set-up command; a failure raises FlinkError with its output."""
    proc = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
    if proc.returncode != 0:
        raise FlinkError(f"{what} failed:\n{proc.stdout}{proc.stderr}".rstrip())


def _classpath(*extra: Path) -> str:
    return os.pathsep.join([str(ensure_jars() / "*"), *map(str, extra)])


@functools.cache
def compiled_classes() -> Path:
    """Compile FlinkSessions.java once per content hash; return its class folder."""
    jars = sorted(
        p.name for p in ensure_jars().glob("*.jar")
    )  # a new Flink recompiles too
    digest = hashlib.sha256(
        JAVA_SOURCE.read_bytes() + "\n".join(jars).encode()
    ).hexdigest()[:16]
    target = FLINK_DIR / "classes" / digest
    if (target / f"{MAIN_CLASS}.class").exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    building = Path(tempfile.mkdtemp(prefix=f"{digest}.", dir=target.parent))
    try:
        _checked([_tool("javac"), "-nowarn", "-cp", _classpath(), "-d", str(building), str(JAVA_SOURCE)],
                 f"javac {JAVA_SOURCE.name}", timeout=300)
        try:
            building.rename(target)  # atomic; a parallel worker may have won the race
        except OSError:
            if not (target / f"{MAIN_CLASS}.class").exists():
                raise
    finally:
        shutil.rmtree(building, ignore_errors=True)
    return target


@functools.cache
def flink_available() -> str | None:
    """None when the harness can run (jars fetched, program compiled), else the reason why not."""
    try:
        compiled_classes()
    except (FlinkError, OSError, subprocess.SubprocessError) as exc:
        return f"Flink harness unavailable: {exc}"
    return None


def run_flink_many(
    scenarios: list[dict], *, separate: bool = False, timeout: float | None = None
) -> list[dict]:
    """Run every scenario through Flink in one JVM; results in the same order.

    By default all scenarios share one Flink job (each on its own keys and stretch of time, see
    FlinkSessions.java); ``separate=True`` runs one job per scenario.
    """
    if not scenarios:
        return []
    classes = compiled_classes()
    if timeout is None:
        timeout = 120 + (3 if separate else 0.2) * len(scenarios)
    with tempfile.TemporaryDirectory(prefix="flink-sessions-") as tmp:
        src, dst = Path(tmp) / "in.json", Path(tmp) / "out.json"
        src.write_text(json.dumps(list(scenarios)))
        cmd = [
            _tool("java"),
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",  # short runs: faster start, no C2 warm-up
            f"-Dlog4j.configurationFile={LOG4J_CONFIG}",
            "-cp",
            _classpath(classes),
            MAIN_CLASS,
            *(["--separate"] if separate else []),
            str(src),
            str(dst),
        ]
        try:
            proc = subprocess.run(
                cmd, check=False, capture_output=True, text=True, timeout=timeout
            )
        except subprocess.TimeoutExpired as exc:
            raise FlinkError(f"Flink run timed out after {timeout:.0f} s") from exc
        if proc.returncode != 0 or not dst.exists():
            tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-40:])
            raise FlinkError(f"FlinkSessions exited with {proc.returncode}:\n{tail}")
        results = json.loads(dst.read_text())
    if len(results) != len(scenarios):
        raise FlinkError(f"expected {len(scenarios)} results, got {len(results)}")
    return results


def run_flink(scenario: dict, *, timeout: float | None = None) -> dict:
    """Run one scenario through Flink (its own job, real end-of-input watermark)."""
    return run_flink_many([scenario], timeout=timeout)[0]
