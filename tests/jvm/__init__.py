"""The engine's test-only Java (``tests/jvm/eventtime/jvm/operator``: ``InProcess``, the operator run
in-process by Spark's ``TwsTester`` for the property tests), compiled against the engine jar and
pyspark's jars into a jar of its own that the wheel does not ship. Built once per source and
engine jar (``tests/jvm/build``); the test session puts it beside the engine jar."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

HERE = Path(__file__).parent


def engine_test_jar(engine_jar: str) -> str:
    """The path of the test jar built against ``engine_jar``."""
    import pyspark

    sources = sorted(HERE.rglob("*.java"))
    digest = hashlib.sha256(Path(engine_jar).read_bytes())
    for path in sources:
        digest.update(path.relative_to(HERE).as_posix().encode() + path.read_bytes())
    out = HERE / "build" / f"eventtime-tests-{digest.hexdigest()[:16]}.jar"
    if out.exists():
        return str(out)
    jars = Path(pyspark.__file__).resolve().parent / "jars"
    with tempfile.TemporaryDirectory(prefix="eventtime-tests-javac-") as classes:
        subprocess.run([shutil.which("javac"), "-nowarn", "-encoding", "UTF-8", "--release", "17", "-d", classes,
                        "-cp", f"{engine_jar}{os.pathsep}{jars / '*'}", *map(str, sources)], check=True)
        out.parent.mkdir(exist_ok=True)
        tmp = out.with_suffix(f".{os.getpid()}.tmp")
        subprocess.run([shutil.which("jar"), "cf", str(tmp), "-C", classes, "."], check=True)
        os.replace(tmp, out)
    return str(out)
