"""The JVM engine: its Java source (``eventtime/spark/engine/src``), compiled against pyspark's own jars.

The engine is built once per Spark minor version: ``eventtime/spark/engine/src`` plus the small
``eventtime/spark/engine/spark-X.Y`` folder of that minor (what differs between Spark's internal APIs).
A wheel carries the jars built at wheel build (``eventtime/spark/engine/lib``), so an installed
package needs a Java runtime but no compiler; an editable install (``make install``) compiles
the jar with ``javac`` on first use. Every jar records the Spark version it was built against,
and a session of another Spark minor is refused at start (:class:`EngineVersionError`).

:func:`eventtime.local_session` puts the jar on the session's class path (``spark.jars``); for
a session made elsewhere, :func:`ensure_engine` adds it with ``ADD JAR`` or says what to
configure.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Optional

__all__ = [
    "engine_jar",
    "ensure_engine",
    "check_engine_version",
    "jar_spark_version",
    "EngineUnavailableError",
    "EngineVersionError",
    "ENGINE_CLASS",
    "SUPPORTED_SPARK_MINORS",
]

ENGINE_CLASS = "eventtime.jvm.Engine"
_JVM = Path(__file__).resolve().parent  # eventtime/spark/engine: the Java sources beside this file
_SRC = _JVM / "src"
# jars built at wheel build, one per supported Spark minor (absent in a source checkout)
_PACKAGED = _JVM / "lib"
_VERSION_RESOURCE = "eventtime-engine.properties"
SUPPORTED_SPARK_MINORS = tuple(sorted(p.name[len("spark-"):] for p in _JVM.glob("spark-*") if p.is_dir()))


class EngineUnavailableError(RuntimeError):
    """The JVM engine cannot be built or is not on the session's class path."""


class EngineVersionError(EngineUnavailableError):
    """The engine jar was built for another Spark minor version than the session runs."""


def _minor(version: str) -> str:
    # connectors.spark_minor, written again: setup.py loads this file alone (by its path, no
    # package) to build the wheel's jars, so it imports nothing of eventtime
    return ".".join(version.split(".")[:2])


def _pyspark_version() -> str:
    import pyspark

    return pyspark.__version__


def _overlay(spark_version: str) -> Path:
    """The ``spark-X.Y`` source folder for ``spark_version``; refuses an unsupported minor."""
    folder = _JVM / f"spark-{_minor(spark_version)}"
    if not folder.is_dir():
        raise EngineVersionError(
            f"eventtime's engine supports Spark {' and '.join(SUPPORTED_SPARK_MINORS)}, not Spark "
            f"{spark_version}; install a supported pyspark (pip install 'pyspark>=4.2,<4.4')"
        )
    return folder


def _pyspark_jars() -> Path:
    import pyspark

    return Path(pyspark.__file__).resolve().parent / "jars"


def _sources(spark_version: str) -> list[Path]:
    return sorted(_SRC.rglob("*.java")) + sorted(_overlay(spark_version).rglob("*.java"))


# The contract between Python and the engine, written once (eventtime/core/contract.py reads it).
_CONTRACT = _JVM.parent.parent / "contract.json"


def contract_java() -> str:
    """``eventtime.jvm.plan.Contract``, generated from ``eventtime/contract.json`` for every build."""
    import json

    contract = json.loads(_CONTRACT.read_text(encoding="utf-8"))
    lines = ["package eventtime.jvm.plan;", "",
             "/** Generated from eventtime/contract.json by eventtime.spark.engine at build time: edit the JSON. */",
             "public final class Contract {", "  private Contract() {}"]
    lines += [f"  public static final String {name} = {json.dumps(value)};" for name, value in contract["strings"].items()]
    lines += [f"  public static final int {name} = {int(value)};" for name, value in contract["ints"].items()]
    lines += [f"  public static final long {name} = {int(value)}L;" for name, value in contract["longs"].items()]
    lines += [f"  public static final String COL_{name.upper()} = {json.dumps(name)};" for name in contract["columns"]]
    return "\n".join(lines + ["}", ""])


def _fingerprint(spark_version: str) -> str:
    digest = hashlib.sha256(spark_version.encode())
    for path in [*_sources(spark_version), _CONTRACT]:
        digest.update(path.relative_to(_JVM.parent.parent).as_posix().encode())
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


def packaged_jar_name(spark_version: str) -> str:
    """File name of the jar a wheel carries for ``spark_version``'s minor."""
    return f"eventtime-engine-spark{_minor(spark_version)}.jar"


def _stamped_version(text: str) -> Optional[str]:
    """The ``spark.version`` of an engine jar's ``eventtime-engine.properties``."""
    for line in text.splitlines():
        if line.startswith("spark.version="):
            return line.split("=", 1)[1].strip()
    return None


def jar_spark_version(jar: str) -> Optional[str]:
    """The Spark version an engine jar was built against (``None`` for a jar without the stamp)."""
    try:
        with zipfile.ZipFile(jar) as z:
            text = z.read(_VERSION_RESOURCE).decode()
    except (KeyError, OSError, zipfile.BadZipFile):
        return None
    return _stamped_version(text)


def build_jar(out: Path, spark_jars: Path, spark_version: str, verbose: bool = False) -> Path:
    """Compile the engine against ``spark_jars`` (a folder of Spark's jars) into ``out``."""
    javac, jar_tool = shutil.which("javac"), shutil.which("jar")
    if javac is None or jar_tool is None:
        raise EngineUnavailableError(
            f"eventtime's engine jar for Spark {_minor(spark_version)} is not packaged with this install and no "
            "JDK compiler (javac) was found to build it; install eventtime from its wheel (which carries the "
            "jar), or install a JDK 17 (e.g. apt-get install openjdk-17-jdk-headless, or run `make install`)"
        )
    with tempfile.TemporaryDirectory(prefix="eventtime-javac-") as classes, \
            tempfile.TemporaryDirectory(prefix="eventtime-generated-") as generated:
        contract = Path(generated, "eventtime", "jvm", "plan", "Contract.java")
        contract.parent.mkdir(parents=True)
        contract.write_text(contract_java(), encoding="utf-8")
        sources = [*_sources(spark_version), contract]
        command = [javac, "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", classes,
                   "-cp", str(spark_jars / "*"), *map(str, sources)]
        if verbose:
            print(f"eventtime: compiling the JVM engine for Spark {spark_version} ({len(sources)} files)", file=sys.stderr)
        done = subprocess.run(command, capture_output=True, text=True)
        if done.returncode != 0:
            raise EngineUnavailableError(f"eventtime: compiling the JVM engine failed:\n{done.stderr}")
        Path(classes, _VERSION_RESOURCE).write_text(
            f"spark.version={spark_version}\nspark.minor={_minor(spark_version)}\n")
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([jar_tool, "cf", str(tmp), "-C", classes, "."], check=True, capture_output=True)
        os.replace(tmp, out)
    return out


def engine_jar(verbose: bool = False) -> str:
    """Path of the engine jar for the installed pyspark: the one a wheel carries, or one
    compiled from the sources (once per source and Spark version) in a source checkout.

    >>> spark = SparkSession.builder.config("spark.jars", eventtime.engine_jar()).getOrCreate()  # doctest: +SKIP
    """
    version = _pyspark_version()
    _overlay(version)
    packaged = _PACKAGED / packaged_jar_name(version)
    if packaged.exists():
        return str(packaged)
    jar = _build_dir() / f"eventtime-engine-{_fingerprint(version)}.jar"
    if jar.exists():
        return str(jar)
    return str(build_jar(jar, _pyspark_jars(), version, verbose=verbose))


def check_engine_version(spark, jar: Optional[str] = None) -> None:
    """Refuse a session whose Spark minor version differs from the engine jar's.

    Raised at session start, with both versions and what to do, instead of a
    ``NoSuchMethodError`` in the middle of a stream.
    """
    jar = jar or engine_jar()
    built = jar_spark_version(jar)
    running = spark.version
    if built is None or _minor(built) != _minor(running):
        raise EngineVersionError(
            f"eventtime's engine jar {jar} was built for Spark {built or 'an unknown version'}, but the session "
            f"runs Spark {running}; use the jar built for Spark {_minor(running)} (pip install the eventtime wheel "
            f"into the environment whose pyspark is {_minor(running)}.x, or rebuild with "
            f"`python -c 'import eventtime; print(eventtime.engine_jar())'` there)"
        )


def _loaded(spark) -> bool:
    try:
        spark._jvm.java.lang.Class.forName(ENGINE_CLASS, True, spark._jvm.java.lang.Thread.currentThread().getContextClassLoader())
        return True
    except Exception:  # py4j error: not on the class path
        return False


def _loaded_spark_version(spark, loader) -> Optional[str]:
    """The Spark version stamped in the engine jar that ``spark``'s JVM loaded."""
    url = loader.getResource(_VERSION_RESOURCE)
    if url is None:
        return None
    return _stamped_version(bytes(url.openStream().readAllBytes()).decode())


_CHECKED: set = set()


def ensure_engine(spark):
    """The engine's Java class in ``spark``'s JVM, adding the jar to the session when needed.

    Refuses (:class:`EngineVersionError`) an engine jar built for another Spark minor version.
    """
    if not _loaded(spark):
        jar = engine_jar()
        check_engine_version(spark, jar)
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
    key = (id(spark._jvm), spark.version)
    if key not in _CHECKED:
        built = _loaded_spark_version(spark, loader)
        if built is None or _minor(built) != _minor(spark.version):
            raise EngineVersionError(
                f"the eventtime engine jar on the session's class path was built for Spark "
                f"{built or 'an unknown version'}, but the session runs Spark {spark.version}; put the jar built for "
                f"Spark {_minor(spark.version)} on spark.jars (eventtime.engine_jar() in an environment whose pyspark "
                f"is {_minor(spark.version)}.x)"
            )
        _CHECKED.add(key)
    return spark._jvm.java.lang.Class.forName(ENGINE_CLASS, True, loader)
