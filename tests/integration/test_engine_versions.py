"""Which Spark minors the engine supports, and how another one is refused (no Spark started)."""

from __future__ import annotations

import zipfile

import pytest

from eventtime.spark import engine as jvm
from eventtime.spark.engine import EngineUnavailableError, EngineVersionError


def test_supported_minors():
    assert jvm.SUPPORTED_SPARK_MINORS == ("4.2", "4.3")


def test_packaged_jar_name_is_per_minor():
    assert jvm.packaged_jar_name("4.3.0") == "eventtime-engine-spark4.3.jar"
    assert jvm.packaged_jar_name("4.2.1") == "eventtime-engine-spark4.2.jar"


@pytest.mark.parametrize("version", ["4.1.1", "4.4.0", "3.5.3"])
def test_unsupported_pyspark_is_refused(monkeypatch, version):
    monkeypatch.setattr(jvm, "_pyspark_version", lambda: version)
    with pytest.raises(EngineVersionError) as err:
        jvm.engine_jar()
    message = str(err.value)
    assert version in message
    assert "4.2" in message and "4.3" in message


def test_jar_without_the_stamp_has_no_version(tmp_path):
    jar = tmp_path / "plain.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        z.writestr("eventtime/jvm/Engine.class", b"\xca\xfe\xba\xbe")
    assert jvm.jar_spark_version(str(jar)) is None
    assert jvm.jar_spark_version(str(tmp_path / "missing.jar")) is None
    not_a_zip = tmp_path / "broken.jar"
    not_a_zip.write_text("not a zip")
    assert jvm.jar_spark_version(str(not_a_zip)) is None


def test_stamped_jar_reports_its_version(tmp_path):
    jar = tmp_path / "stamped.jar"
    with zipfile.ZipFile(jar, "w") as z:
        z.writestr("eventtime-engine.properties", "spark.version=4.2.0\nspark.minor=4.2\n")
    assert jvm.jar_spark_version(str(jar)) == "4.2.0"


class _Session:
    def __init__(self, version):
        self.version = version


def test_check_engine_version_refuses_another_minor_and_an_unstamped_jar(tmp_path):
    stamped = tmp_path / "e42.jar"
    with zipfile.ZipFile(stamped, "w") as z:
        z.writestr("eventtime-engine.properties", "spark.version=4.2.0\n")
    jvm.check_engine_version(_Session("4.2.3"), str(stamped))  # same minor, another patch: fine
    with pytest.raises(EngineVersionError, match=r"4\.2\.0.*4\.3\.0"):
        jvm.check_engine_version(_Session("4.3.0"), str(stamped))
    plain = tmp_path / "plain.jar"
    with zipfile.ZipFile(plain, "w") as z:
        z.writestr("x", "y")
    with pytest.raises(EngineVersionError, match="unknown version"):
        jvm.check_engine_version(_Session("4.3.0"), str(plain))


def test_no_packaged_jar_and_no_javac_says_what_to_do(monkeypatch, tmp_path):
    """An install without the jar (a source install) on a machine without a JDK compiler."""
    monkeypatch.setattr(jvm, "_PACKAGED", tmp_path / "lib")
    monkeypatch.setattr(jvm, "_build_dir", lambda: tmp_path / "build")
    monkeypatch.setattr(jvm.shutil, "which", lambda name: None)
    with pytest.raises(EngineUnavailableError) as err:
        jvm.engine_jar()
    assert not isinstance(err.value, EngineVersionError)
    assert "javac" in str(err.value) and "wheel" in str(err.value)
