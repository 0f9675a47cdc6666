"""The JVM engine: its Java source (``eventtime/jvm/src``), compiled against pyspark's own jars.

``make install`` builds the jar (``python -m eventtime.spark.jvm``); a missing or stale jar is
built on first use, with the ``javac`` of the JDK 17 the set-up installs — nothing is
downloaded. :func:`eventtime.local_session` puts the jar on the session's class path
(``spark.jars``); for a session made elsewhere, :func:`ensure_engine` adds it with
``ADD JAR`` or says what to configure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

__all__ = ["engine_jar", "ensure_engine", "EngineUnavailableError", "ENGINE_CLASS"]

ENGINE_CLASS = "eventtime.jvm.Engine"
_SRC = Path(__file__).resolve().parent.parent / "jvm" / "src"


class EngineUnavailableError(RuntimeError):
    """The JVM engine cannot be built or is not on the session's class path."""


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _sources() -> list[Path]:
    return sorted(_SRC.rglob("*.java"))


def _fingerprint() -> str:
    import pyspark

    digest = hashlib.sha256(pyspark.__version__.encode())
    for path in _sources():
        digest.update(path.relative_to(_SRC).as_posix().encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


def _build_dir() -> Path:
    """Next to the sources when writable (an editable install), else the user's cache."""
    local = _SRC.parent / "build"
    try:
        local.mkdir(exist_ok=True)
        probe = local / ".probe"
        probe.write_text("")
        probe.unlink()
        return local
    except OSError:
        cache = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "eventtime"
        cache.mkdir(parents=True, exist_ok=True)
        return cache


def engine_jar(verbose: bool = False) -> str:
    """Path of the engine jar for this source and pyspark version; compiles it when missing.

    >>> spark = SparkSession.builder.config("spark.jars", eventtime.engine_jar()).getOrCreate()  # doctest: +SKIP
    """
    jar = _build_dir() / f"eventtime-engine-{_fingerprint()}.jar"
    if jar.exists():
        return str(jar)
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar_tool is None:
        raise EngineUnavailableError(
            "eventtime's engine is Java, compiled at install time, but no JDK compiler (javac) was found; "
            "install a JDK 17 (e.g. apt-get install openjdk-17-jdk-headless, or run `make install`)"
        )
    with tempfile.TemporaryDirectory(prefix="eventtime-javac-") as classes:
        command = [javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", classes,
                   "-cp", str(_pyspark_jars() / "*"), *map(str, _sources())]
        if verbose:
            print("eventtime: compiling the JVM engine:", " ".join(command[:1] + command[-len(_sources()):]), file=sys.stderr)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineUnavailableError(f"eventtime: compiling the JVM engine failed:\n{done.stderr}")
        tmp = jar.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([jar_tool, "cf", str(tmp), "-C", classes, "."], check=True, capture_output=True)
        os.replace(tmp, jar)
    return str(jar)


def _loaded(spark) -> bool:
    try:
        spark._jvm.java.lang.Class.forName(ENGINE_CLASS, True, spark._jvm.java.lang.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:  # py4j error: not on the class path
        return False


def ensure_engine(spark):
    """The engine's Java class in ``spark``'s JVM, adding the jar to the session when needed."""
    if not _loaded(spark):
        jar = engine_jar()
        try:
            spark.sql(f"ADD JAR '{jar}'")
        except Exception as exc:  # pragma: no cover - depends on the deployment
            raise EngineUnavailableError(
                f"eventtime's engine jar is not on the session's class path and ADD JAR failed ({exc}); create "
                f"the session with .config('spark.jars', eventtime.engine_jar()) or use eventtime.local_session()"
            ) from exc
        if not _loaded(spark):
            raise EngineUnavailableError(
                "eventtime's engine jar is not on the session's class path; create the session with "
                ".config('spark.jars', eventtime.engine_jar()) or use eventtime.local_session()"
            )
    loader = spark._jvm.java.lang.Thread.currentThread().getContextClassLoader()
    return spark._jvm.java.lang.Class.forName(ENGINE_CLASS, True, loader)

