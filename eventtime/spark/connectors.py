"""The Maven artifacts that Spark users take from Maven Central, per Spark minor version.

One table, read by the session (:func:`eventtime.local_session` with ``kafka=True`` /
``delta=True``), by the resolver (``python -m eventtime.spark.connectors kafka delta broker``,
which ``make`` runs: ``mvn`` fetches from Maven Central into ``~/.m2`` and the jars are copied
into the environment's ``share/eventtime/jars``) and by the error messages that say what to
install. Pure Python: importing it starts no Spark.

What Maven Central serves (checked 2026-11-26): Spark's Kafka source stops at 4.2.0 (no
``spark-sql-kafka-0-10_2.13:4.3.0``), and the newest Delta (4.4.0, ``delta-spark_4.2_2.13``)
supports pyspark <= 4.2.0. So Kafka and Delta-on-Spark run on pyspark 4.2; pyspark 4.3
runs everything else (Delta through delta-rs).

>>> connector_coordinates("kafka", "4.2.0")
'org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0'
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Optional

__all__ = [
    "KAFKA_BROKER",
    "CONNECTORS",
    "ConnectorUnavailableError",
    "connector_coordinates",
    "connector_jars",
    "jars_home",
    "resolve",
    "spark_minor",
]

# Apache Kafka's own broker (KRaft), for local runs and tests: kafka.Kafka from these jars
KAFKA_BROKER = "org.apache.kafka:kafka_2.13:4.1.1"

# connector -> Spark minor -> Maven coordinates (Scala 2.13)
CONNECTORS: dict[str, dict[str, str]] = {
    "kafka": {
        "4.2": "org.apache.spark:spark-sql-kafka-0-10_2.13:4.2.0",
    },
    "delta": {
        "4.2": "io.delta:delta-spark_4.2_2.13:4.4.0",
    },
}

_WHY_NOT = {
    "kafka": "Maven Central serves Spark's Kafka source (spark-sql-kafka-0-10_2.13) up to 4.2.0",
    "delta": "the newest Delta Lake on Maven Central (4.4.0) supports Spark up to 4.2",
}


class ConnectorUnavailableError(RuntimeError):
    """A Spark connector (Kafka source, Delta Lake) is not available for this Spark version."""


def spark_minor(version: str) -> str:
    """``"4.2.0"`` -> ``"4.2"``."""
    return ".".join(version.split(".")[:2])



def connector_coordinates(name: str, spark_version: str) -> str:
    """Maven coordinates of connector ``name`` for ``spark_version``; refuses an unserved pair."""
    if name not in CONNECTORS:
        raise ValueError(f"connector must be one of {sorted(CONNECTORS)}, got {name!r}")
    by_minor = CONNECTORS[name]
    if spark_minor(spark_version) not in by_minor:
        supported = ", ".join(f"pyspark {m}.x" for m in sorted(by_minor))
        raise ConnectorUnavailableError(
            f"no {name} connector for Spark {spark_version}: {_WHY_NOT[name]}; use {supported} "
            f"(in a checkout: .venv-spark{sorted(by_minor)[-1]}, which `make install` creates; elsewhere: pip install "
            f"'pyspark=={sorted(by_minor)[-1]}.*', then python -m eventtime.spark.connectors {name})"
        )
    return by_minor[spark_minor(spark_version)]


def jars_home() -> Path:
    """Where ``scripts/resolve-jars.py`` puts resolved jars: ``$EVENTTIME_JARS`` or the
    environment's ``share/eventtime/jars``."""
    return Path(os.environ.get("EVENTTIME_JARS") or Path(sys.prefix) / "share" / "eventtime" / "jars")


def bundle_name(coordinates: str) -> str:
    """Folder name of a resolved artifact: ``artifact-version``."""
    _group, artifact, version = coordinates.split(":")
    return f"{artifact}-{version}"


def connector_jars(name: str, spark_version: str) -> Optional[list[str]]:
    """The resolved jars of connector ``name`` for ``spark_version`` (``None`` when not resolved)."""
    folder = jars_home() / bundle_name(connector_coordinates(name, spark_version))
    if not (folder / ".complete").exists():
        return None
    return sorted(str(p) for p in folder.glob("*.jar"))


def require_connector_jars(name: str, spark_version: str) -> list[str]:
    """The resolved jars of connector ``name``, or an error that says how to get them."""
    coordinates = connector_coordinates(name, spark_version)
    jars = connector_jars(name, spark_version)
    if jars is None:
        raise ConnectorUnavailableError(
            f"the {name} connector ({coordinates}) is not installed in {jars_home()}: run "
            f"`python -m eventtime.spark.connectors {name}` (needs mvn and Maven Central; `make install` does it), "
            f"or start Spark with --packages {coordinates}"
        )
    return jars


_POM = """<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>
<groupId>eventtime</groupId><artifactId>resolve</artifactId><version>0</version><packaging>pom</packaging>
<dependencies><dependency><groupId>{g}</groupId><artifactId>{a}</artifactId><version>{v}</version></dependency></dependencies>
</project>"""


def _artifact_name(jar: str) -> str:
    """'kafka-clients-3.9.2.jar' -> 'kafka-clients' (the name up to the version)."""
    parts = jar[:-4].split("-")
    for i, part in enumerate(parts):
        if i > 0 and part[:1].isdigit():
            return "-".join(parts[:i])
    return jar[:-4]


def resolve(coordinates: str, skip: frozenset = frozenset()) -> Path:
    """Resolve ``coordinates`` and its runtime dependencies with ``mvn`` (cached in ``~/.m2``)
    into ``jars_home()``; jars whose artifact name is in ``skip`` (those Spark ships) are left
    out so that a session never holds two versions of one library. Done once per bundle."""
    out = jars_home() / bundle_name(coordinates)
    if (out / ".complete").exists():
        return out
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ConnectorUnavailableError(f"resolving {coordinates} needs Maven (mvn): apt-get install maven")
    g, a, v = coordinates.split(":")
    with tempfile.TemporaryDirectory(prefix="eventtime-mvn-") as work:
        pom = Path(work, "pom.xml")
        pom.write_text(_POM.format(g=g, a=a, v=v))
        tmp = Path(work, "jars")
        done = subprocess.run([mvn, "-q", "-B", "-f", str(pom), "dependency:copy-dependencies",
                               f"-DoutputDirectory={tmp}", "-DincludeScope=runtime"], capture_output=True, text=True)
        if done.returncode != 0:
            raise ConnectorUnavailableError(
                f"mvn could not resolve {coordinates} from Maven Central:\n{done.stdout[-3000:]}{done.stderr[-2000:]}")
        if out.exists():
            shutil.rmtree(out)
        out.mkdir(parents=True)
        kept = [jar for jar in sorted(tmp.glob("*.jar")) if _artifact_name(jar.name) not in skip]
        for jar in kept:
            shutil.copy2(jar, out / jar.name)
    (out / ".complete").write_text(coordinates + "\n")
    print(f"eventtime: {coordinates}: {len(kept)} jars in {out}", file=sys.stderr)
    return out


def _main(argv: list[str]) -> int:
    import pyspark

    shipped = frozenset(_artifact_name(j.name) for j in (Path(pyspark.__file__).resolve().parent / "jars").glob("*.jar"))
    for name in argv or ["kafka", "delta", "broker"]:
        if name == "broker":
            resolve(KAFKA_BROKER)
            continue
        try:
            resolve(connector_coordinates(name, pyspark.__version__), shipped)
        except ConnectorUnavailableError as exc:
            print(f"eventtime: skipped: {exc}", file=sys.stderr)
    return 0


if __name__ == "__main__":  # python -m eventtime.spark.connectors [kafka] [delta] [broker]
    sys.exit(_main(sys.argv[1:]))
