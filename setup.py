"""Build hook: compile the JVM engine into the wheel (pyproject.toml is the declaration).

``build_py`` compiles one engine jar per Spark minor into ``<build_lib>/eventtime/spark/engine/lib``
(the wheel only; the source tree and the sdist never hold a built jar):

* ``EVENTTIME_SPARK_JARS`` set: a ``os.pathsep``-separated list of Spark jars directories
  (e.g. each environment's ``pyspark/jars``); one jar each, for the Spark version in the
  ``spark-core_2.13-X.Y.Z.jar`` file name found there (``make wheel`` lists both minors);
* unset: one jar for the pyspark importable in the build environment (``--no-isolation``);
  without one, the wheel carries no jar (a warning says so) and compiles on first use.

An editable install (``pip install -e .``) builds no jar: it compiles on first use.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
_SPARK_CORE = re.compile(r"^spark-core_[0-9.]+-(\d+\.\d+\.\d+(?:[-.][\w.]+)?)\.jar$")


def _jvm_module():
    """eventtime/spark/engine/__init__.py, loaded by file path (importing the package would import its deps)."""
    spec = importlib.util.spec_from_file_location("_eventtime_build_jvm", HERE / "eventtime" / "spark" / "engine" / "__init__.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spark_version(jars_dir: Path) -> str:
    versions = sorted({m.group(1) for p in jars_dir.glob("spark-core_*.jar") if (m := _SPARK_CORE.match(p.name))})
    if len(versions) != 1:
        raise SystemExit(
            f"eventtime build: expected one spark-core_2.13-X.Y.Z.jar in {jars_dir}, found "
            f"{versions or 'none'} (EVENTTIME_SPARK_JARS lists Spark jars directories, e.g. pyspark/jars)"
        )
    return versions[0]


def _targets() -> list[Path]:
    listed = os.environ.get("EVENTTIME_SPARK_JARS")
    if listed is not None:
        dirs = [Path(p) for p in listed.split(os.pathsep) if p.strip()]
        missing = [str(d) for d in dirs if not d.is_dir()]
        if missing or not dirs:
            raise SystemExit(f"eventtime build: EVENTTIME_SPARK_JARS lists no Spark jars directory: {missing or listed!r}")
        return dirs
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.origin:
        return []
    return [Path(spec.origin).resolve().parent / "jars"]


class BuildPyWithEngine(build_py):
    def run(self):
        super().run()
        if getattr(self, "editable_mode", False):
            return
        targets = _targets()
        if not targets:
            print("eventtime build: WARNING no pyspark in the build environment and EVENTTIME_SPARK_JARS unset: "
                  "the wheel carries no engine jar (it will need javac on first use)", file=sys.stderr)
            return
        jvm = _jvm_module()
        lib = Path(self.build_lib) / "eventtime" / "spark" / "engine" / "lib"
        for stale in lib.glob("*.jar"):  # from an earlier build into the same build/lib
            stale.unlink()
        built: dict[str, str] = {}
        for jars_dir in targets:
            version = _spark_version(jars_dir)
            name = jvm.packaged_jar_name(version)
            if name in built:
                raise SystemExit(f"eventtime build: two Spark jars directories of Spark {name}: {built[name]} and {jars_dir}")
            built[name] = str(jars_dir)
            out = jvm.build_jar(lib / name, jars_dir, version, verbose=True)
            print(f"eventtime build: {out} (Spark {version}, from {jars_dir})", file=sys.stderr)


setup(cmdclass={"build_py": BuildPyWithEngine})
