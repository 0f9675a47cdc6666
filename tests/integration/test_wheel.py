"""The wheel: built with one engine jar per supported Spark minor, installed into a fresh venv
with each minor's pyspark and run on a machine view with ``java`` but no ``javac``: a streaming
job and a bounded job on every minor, the demo and the README's dashboard on 4.3.

Everything happens in a temporary directory: the source is copied there (the files git
tracks or would track), the wheel and sdist are built there, the venv is made there. The
interpreters are explicit (``.venv``: pyspark 4.3, ``.venv-spark4.2``: pyspark 4.2), so the
test runs under either venv's pytest.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from eventtime.spark.engine import jar_spark_version
from transcripts import TRANSCRIPT_DIR, lists_merged_from, load_transcript

REPO = Path(__file__).resolve().parents[2]
PY43 = REPO / ".venv" / "bin" / "python"
PY42 = REPO / ".venv-spark4.2" / "bin" / "python"
CONSTRAINTS = REPO / "constraints" / "spark-4.3.txt"
TRANSCRIPT = TRANSCRIPT_DIR / "16_session_late_bridges.json"
JAR42 = "eventtime/spark/engine/lib/eventtime-engine-spark4.2.jar"
JAR43 = "eventtime/spark/engine/lib/eventtime-engine-spark4.3.jar"



@pytest.fixture(autouse=True)
def _both_environments():
    """The wheel is built for both Spark minors: fails (never skips) without both environments."""
    if not (PY43.exists() and PY42.exists()):
        pytest.fail("needs .venv and .venv-spark4.2 (make install creates both)")


def _run(cmd, **kwargs) -> subprocess.CompletedProcess:
    done = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, **kwargs)
    assert done.returncode == 0, f"{cmd} failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done


def _pyspark(python: Path) -> tuple[str, Path]:
    out = _run([python, "-c", "import os, pyspark; print(pyspark.__version__); print(os.path.dirname(pyspark.__file__))"])
    version, folder = out.stdout.split()
    return version, Path(folder) / "jars"


def _base_python() -> str:
    """The interpreter the dev venv was made from (a fresh venv is made from it too)."""
    for line in (REPO / ".venv" / "pyvenv.cfg").read_text().splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "executable":
            return value.strip()
    return shutil.which("python3") or sys.executable


def _copy_source(dest: Path) -> Path:
    """A clean checkout: the files git tracks plus the untracked ones it does not ignore."""
    listed = _run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=REPO).stdout
    for name in filter(None, listed.split("\0")):
        src = REPO / name
        if src.is_file():
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, dest / name)
    return dest


def _no_javac_bin(dest: Path) -> Path:
    """A bin folder with every command of /usr/bin except the JDK's tools, plus ``java``."""
    dest.mkdir()
    for entry in Path("/usr/bin").iterdir():
        if not os.path.realpath(entry).startswith("/usr/lib/jvm/"):
            (dest / entry.name).symlink_to(entry)
    java = shutil.which("java")
    assert java, "this test needs a java on PATH"
    (dest / "java").symlink_to(java)
    return dest


def _clean_env(path: str, python: Path) -> dict:
    env = {k: v for k, v in os.environ.items()
           if k not in {"JAVA_HOME", "SPARK_HOME", "PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON",
                        "PYSPARK_DRIVER_PYTHON", "SPARK_SUBMIT_OPTS", "EVENTTIME_SPARK_JARS", "PYTHONHOME"}}
    env["PATH"] = path
    env["PYSPARK_PYTHON"] = str(python)
    # the JIT setting every Spark JVM of the test run uses (tests/conftest.py), without the
    # class archive of the venv running pytest (another class path)
    env["SPARK_SUBMIT_OPTS"] = "-XX:TieredStopAtLevel=1"
    return env


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    root = tmp_path_factory.mktemp("wheel")
    src = _copy_source(root / "src")
    # a developer's tree holds jars compiled on first use: neither artefact may pick them up
    dev_jars = REPO / "eventtime" / "spark" / "engine" / "build"
    if dev_jars.is_dir():
        shutil.copytree(dev_jars, src / "eventtime" / "spark" / "engine" / "build")
    v43, jars43 = _pyspark(PY43)
    v42, jars42 = _pyspark(PY42)
    started = time.monotonic()
    env = _clean_env(os.environ["PATH"], PY43)
    env["EVENTTIME_SPARK_JARS"] = os.pathsep.join([str(jars43), str(jars42)])
    _run([PY43, "-m", "build", "--wheel", "--no-isolation", "--outdir", root / "dist", "."], cwd=src, env=env)
    build_s = time.monotonic() - started
    env.pop("EVENTTIME_SPARK_JARS")
    _run([PY43, "-m", "build", "--sdist", "--no-isolation", "--outdir", root / "sdist", "."], cwd=src, env=env)
    (wheel,) = (root / "dist").glob("eventtime-*.whl")
    (sdist,) = (root / "sdist").glob("eventtime-*.tar.gz")
    print(f"\nwheel {wheel.name}: {wheel.stat().st_size} bytes ({wheel.stat().st_size / 1e6:.2f} MB), "
          f"built in {build_s:.1f} s for Spark {v43} and {v42}")
    return {"root": root, "src": src, "wheel": wheel, "sdist": sdist, "v43": v43, "v42": v42}


def test_wheel_carries_one_stamped_jar_per_spark_minor(built):
    root = built["root"]
    with zipfile.ZipFile(built["wheel"]) as whl:
        names = whl.namelist()
        jars = sorted(n for n in names if n.endswith(".jar"))
        assert jars == [JAR42, JAR43], jars
        for name, version in ((JAR42, built["v42"]), (JAR43, built["v43"])):
            path = root / "jars" / Path(name).name
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(whl.read(name))
            assert jar_spark_version(str(path)) == version, name
            with zipfile.ZipFile(path) as jar:
                assert "eventtime/jvm/Engine.class" in jar.namelist()
                assert "eventtime/jvm/output/DelegatingRow.class" in jar.namelist()
        # the sources ride along (a different pyspark patch release can still rebuild)
        assert "eventtime/spark/engine/src/eventtime/jvm/Engine.java" in names
        assert "eventtime/spark/engine/spark-4.2/eventtime/jvm/output/DelegatingRow.java" in names
        assert "eventtime/spark/engine/spark-4.3/eventtime/jvm/output/DelegatingRow.java" in names
        assert "eventtime/spark/engine/src/eventtime/jvm/plan/Spec.java" in names
    assert built["wheel"].stat().st_size < 5_000_000
    # the jars went into the wheel only, never into the source tree
    assert not (built["src"] / "eventtime" / "spark" / "engine" / "lib").exists()
    assert not (REPO / "eventtime" / "spark" / "engine" / "lib").exists()


def test_sdist_has_no_built_jar(built):
    with tarfile.open(built["sdist"]) as tar:
        names = tar.getnames()
    assert not [n for n in names if n.endswith((".jar", ".class"))], [n for n in names if n.endswith(".jar")]
    top = names[0].split("/")[0]
    assert f"{top}/setup.py" in names
    assert f"{top}/eventtime/spark/engine/src/eventtime/jvm/Engine.java" in names


def test_wheel_without_the_variable_builds_for_the_importable_pyspark(built, tmp_path):
    """EVENTTIME_SPARK_JARS unset: one jar, for the build environment's pyspark (here 4.2);
    the jars of the earlier build in the same build/lib do not linger."""
    env = _clean_env(os.environ["PATH"], PY42)
    _run([PY42, "-m", "build", "--wheel", "--no-isolation", "--outdir", tmp_path, "."], cwd=built["src"], env=env)
    (wheel,) = tmp_path.glob("eventtime-*.whl")
    with zipfile.ZipFile(wheel) as whl:
        assert sorted(n for n in whl.namelist() if n.endswith(".jar")) == [JAR42]


# Each supported minor: its dev interpreter (the same command's output to compare with), its
# constraints and the jar the wheel carries for it.
MINORS = {
    "4.3": (PY43, CONSTRAINTS, JAR43),
    "4.2": (PY42, REPO / "constraints" / "spark-4.2.txt", JAR42),
}
_VENVS: dict = {}


def _install(built, minor: str) -> dict:
    """A fresh venv with the wheel and the minor's pyspark, and a PATH on which there is no javac
    (made once per minor for the module)."""
    if minor in _VENVS:
        return _VENVS[minor]
    root = built["root"]
    venv = root / f"venv-{minor}"
    _run([_base_python(), "-m", "venv", venv])
    python = venv / "bin" / "python"
    no_jdk = root / "no-jdk-bin"
    if not no_jdk.exists():
        _no_javac_bin(no_jdk)
    path = f"{venv / 'bin'}{os.pathsep}{no_jdk}"
    env = _clean_env(path, python)
    cwd = root / f"elsewhere-{minor}"
    cwd.mkdir()
    started = time.monotonic()
    _run([python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "-c", MINORS[minor][1],
          built["wheel"]], env=env, cwd=cwd)
    print(f"\ninstall of the wheel with pyspark {minor} into a fresh venv, without javac: {time.monotonic() - started:.1f} s")
    _VENVS[minor] = {"venv": venv, "python": python, "env": env, "cwd": cwd, "minor": minor,
                     "version": built["v43" if minor == "4.3" else "v42"]}
    return _VENVS[minor]


@pytest.fixture(scope="module", params=sorted(MINORS), ids=lambda m: f"spark{m}")
def each_installed(built, request):
    """The wheel installed with each supported pyspark minor."""
    return _install(built, request.param)


@pytest.fixture(scope="module")
def installed(built):
    """The wheel installed with pyspark 4.3 (the longer jobs run on it only)."""
    return _install(built, "4.3")


def test_no_javac_on_the_path(each_installed):
    installed = each_installed
    out = _run([installed["python"], "-c", "import shutil, json; print(json.dumps([shutil.which(c) for c in ('javac', 'jar', 'java')]))"],
               env=installed["env"], cwd=installed["cwd"])
    javac, jar, java = json.loads(out.stdout)
    assert javac is None and jar is None
    assert java is not None


def test_installed_engine_jar_is_the_packaged_one(each_installed):
    installed = each_installed
    out = _run([installed["python"], "-c", "import eventtime, pyspark; print(pyspark.__version__); print(eventtime.engine_jar())"],
               env=installed["env"], cwd=installed["cwd"])
    version, jar = out.stdout.split()
    assert version == installed["version"]
    site = _run([installed["python"], "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                env=installed["env"]).stdout.strip()
    assert jar == os.path.join(site, MINORS[installed["minor"]][2])
    assert jar_spark_version(jar) == installed["version"]


def test_installed_replay_on_spark_without_javac(each_installed, tmp_path):
    """A streaming job: a transcript replayed through a streaming query, from the wheel."""
    installed = each_installed
    scenario, expected = load_transcript(TRANSCRIPT)
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(scenario))
    flags = ["--merged-from"] if lists_merged_from(expected) else []
    # the same command in the minor's dev venv (editable install, the jar compiled there), at the same time
    dev_python = MINORS[installed["minor"]][0]
    dev = subprocess.Popen([dev_python.parent / "eventtime", "replay", path, "--engine", "spark", *flags],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path,
                           env=_clean_env(os.environ["PATH"], dev_python))
    started = time.monotonic()
    got = _run([installed["venv"] / "bin" / "eventtime", "replay", path, "--engine", "spark", *flags],
               env=installed["env"], cwd=installed["cwd"])
    print(f"\nreplay of {TRANSCRIPT.name} on Spark {installed['minor']} from the wheel, without javac: "
          f"{time.monotonic() - started:.1f} s")
    dev_out, dev_err = dev.communicate(timeout=600)
    assert dev.returncode == 0, dev_err[-4000:]

    from eventtime.harness.scenario import diff_outputs

    output = json.loads(got.stdout)
    assert diff_outputs(expected, output) is None, diff_outputs(expected, output)
    assert output == json.loads(dev_out)
    assert any(pane.get("merged_from") for batch in output["batches"] for pane in batch["panes"])


_BOUNDED = r"""
import json, sys
import eventtime
from eventtime.sinks import DeltaLateSink, DeltaResultsSink

out_dir = sys.argv[1]
spark = eventtime.local_session()
rows = [(f"k{i % 3}", 1_700_000_000_000 + i * 1000, float(i)) for i in range(121)] + [("k0", 0, 1.0)]
df = spark.createDataFrame(rows, "k string, ts long, v double")
out = (df.transform(eventtime.with_event_time("ts", unit="ms", max_out_of_orderness="10 seconds",
                                              min_valid="2000-01-01", max_future="36500 days"))
         .transform(eventtime.window_aggregate(keys=["k"], window=eventtime.Tumbling("1 minute"),
                                               aggregations=[eventtime.count(), eventtime.sum("v")])))
stats = eventtime.route(out, panes=DeltaResultsSink(out_dir + "/results", pipeline="wheel"),
                        late=DeltaLateSink(out_dir + "/late", pipeline="wheel"), pipeline="wheel").start(end_of_input=True)
panes = eventtime.latest_panes(out_dir + "/results", pipeline="wheel")
got = sorted((r.k, int(r.window_start.timestamp() * 1000), int(r.count), float(r.sum_v), bool(r.is_final))
             for r in panes.itertuples())
expected = sorted((r["k"], r["w"], r["n"], r["s"], True) for r in df.where("ts > 0").selectExpr(
    "k", "cast(floor(ts / 60000) * 60000 as long) as w", "v").groupBy("k", "w").agg({"*": "count", "v": "sum"})
    .withColumnRenamed("count(1)", "n").withColumnRenamed("sum(v)", "s").collect())
late = eventtime.read_late(out_dir + "/late").to_pandas()
spark.stop()
print("RESULT " + json.dumps({"spark": spark.version, "panes": len(got), "equal": got == expected, "rows_in": stats.rows_in,
                              "invalid": late["reason"].tolist()}))
"""


def test_installed_bounded_job_on_a_static_dataframe(each_installed, tmp_path):
    """A bounded job (a backfill): the README's bounded pattern on a static DataFrame into the Delta
    sinks, from the wheel, equal to Spark's batch groupBy; its 1970 record in the late table."""
    installed = each_installed
    script = tmp_path / "bounded.py"
    script.write_text(_BOUNDED)
    done = _run([installed["python"], script, tmp_path / "out"], env=installed["env"], cwd=installed["cwd"], timeout=600)
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    result = json.loads(line[len("RESULT "):])
    assert result == {"spark": installed["version"], "panes": 9, "equal": True, "rows_in": 122,
                      "invalid": ["before_min_valid"]}, done.stdout[-3000:]


def test_installed_demo_without_javac(installed):
    """A reduced demo (2 000 rows, 3 micro-batches; the default 40 000 / 20 takes minutes
    here): the streaming query, the conservation check and both bounded jobs."""
    out_dir = installed["cwd"] / "demo"
    done = _run([installed["venv"] / "bin" / "eventtime", "demo", "--output", out_dir, "--rows", "2000", "--batches", "3"],
                env=installed["env"], cwd=installed["cwd"], timeout=600)
    assert "conservation holds" in done.stdout, done.stdout[-3000:]
    assert (out_dir / "results" / "_delta_log").is_dir()
    assert (out_dir / "late" / "_delta_log").is_dir()
    assert "sessions per user_id" in done.stdout and "calendar days per user_id" in done.stdout
    # it ends with reconcile (count, sum, max and mean): the results then equal the batch truth
    assert re.search(r"after reconcile: 0 of [1-9]\d* windows differ", done.stdout), done.stdout[-3000:]
    again = _run([installed["venv"] / "bin" / "eventtime", "late", "reconcile", "--late", out_dir / "late",
                  "--results", out_dir / "results"], env=installed["env"], cwd=installed["cwd"], timeout=300)
    assert re.search(r"[1-9]\d* reconciled before, 0 reconciled now", again.stdout), again.stdout + again.stderr


_DASHBOARD = r"""
import datetime as dt, json, re, sys
import eventtime
from pyspark.sql import functions as F

code = [b for b in re.findall(r"```python\n(.*?)```", open(sys.argv[1]).read(), re.S) if b.startswith("dashboard = ")][0]
spark = eventtime.local_session()
utc = dt.timezone.utc
rows = [("home" if i % 3 else "cart", f"u{i % 7}", float(i * 13 % 97), "error" if i % 5 == 0 else "ok",
         dt.datetime(2024, 5, 1, 10, tzinfo=utc) + dt.timedelta(minutes=37 * i)) for i in range(80)]
raw = spark.createDataFrame(rows, "page string, user_id string, latency_ms double, status string, ts timestamp")
scope = {"eventtime": eventtime, "events": raw.transform(eventtime.with_event_time("ts"))}
exec(code, scope)
panes = []
eventtime.route(scope["dashboard"], panes=lambda t, b, q: panes.append(t), progress=False).start(end_of_input=True)
got = sorted((r["page"], r["count"], r["users"], r["p95_latency_ms"], r["last_status"]) for t in panes for r in t.to_pylist())
day = F.window(F.from_utc_timestamp("ts", "Asia/Shanghai"), "1 day").start
expected = sorted((r["page"], r["n"], r["users"], r["p95"], r["last"]) for r in raw.groupBy("page", day).agg(
    F.count("*").alias("n"), F.countDistinct("user_id").alias("users"), F.percentile_approx("latency_ms", 0.95).alias("p95"),
    F.max_by("status", "ts").alias("last")).collect())
spark.stop()
print("RESULT " + json.dumps({"panes": len(got), "equal": got == expected}))
"""


def test_installed_wheel_runs_the_readme_dashboard(installed, tmp_path):
    """Spark SQL aggregations (SqlAggregate in the packaged jar) from the installed wheel:
    the README's dashboard as written, equal to Spark's batch groupBy."""
    script = tmp_path / "dashboard.py"
    script.write_text(_DASHBOARD)
    done = _run([installed["python"], script, REPO / "README.md"], env=installed["env"], cwd=installed["cwd"], timeout=600)
    result = json.loads(done.stdout.split("RESULT ", 1)[1])
    assert result == {"panes": 6, "equal": True}, done.stdout[-3000:]


_REFUSAL = r"""
import json, sys
from pyspark.sql import SparkSession
from eventtime.spark import engine as jvm

jar42, jar43 = sys.argv[1:3]
spark = (SparkSession.builder.master("local[1]").appName("eventtime-refusal")
         .config("spark.jars", jar42).config("spark.ui.enabled", "false").getOrCreate())
out = {"spark": spark.version, "loaded": jvm._loaded(spark)}
try:
    jvm.check_engine_version(spark, jar42)
    out["check42"] = None
except jvm.EngineVersionError as exc:
    out["check42"] = str(exc)
jvm.check_engine_version(spark, jar43)  # the right minor passes
try:
    jvm.ensure_engine(spark)
    out["ensure"] = None
except jvm.EngineVersionError as exc:
    out["ensure"] = str(exc)
spark.stop()
print("RESULT " + json.dumps(out))
"""


def test_spark43_session_refuses_the_spark42_jar(built, tmp_path):
    """A Spark 4.3 session (its own JVM, .venv) with the wheel's 4.2 jar on spark.jars."""
    with zipfile.ZipFile(built["wheel"]) as whl:
        for name in (JAR42, JAR43):
            (tmp_path / Path(name).name).write_bytes(whl.read(name))
    jar42, jar43 = tmp_path / Path(JAR42).name, tmp_path / Path(JAR43).name
    done = _run([PY43, "-c", _REFUSAL, jar42, jar43], cwd=tmp_path, env=_clean_env(os.environ["PATH"], PY43))
    (line,) = [ln for ln in done.stdout.splitlines() if ln.startswith("RESULT ")]
    out = json.loads(line[len("RESULT "):])
    assert out["spark"] == built["v43"]
    assert out["loaded"] is True  # the engine class came from the 4.2 jar on spark.jars
    for message in (out["check42"], out["ensure"]):
        assert message is not None, out
        assert built["v42"] in message and built["v43"] in message, message
    assert str(jar42) in out["check42"]
