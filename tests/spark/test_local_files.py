"""The local session's Hadoop FileContext for file: paths (eventtime.jvm.spark.LocalFiles): the
checkpoint manager's calls behave as Hadoop's own, without a process per call."""

from __future__ import annotations

import os
import stat

import pytest

from eventtime.spark.session import LOCAL_FILE_CONTEXT, LOCAL_FILE_CONTEXT_KEY

pytestmark = pytest.mark.spark


def _context(spark):
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    return jvm, jvm.org.apache.hadoop.fs.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)


def _write(spark, fc, path: str, data: bytes) -> None:
    jvm = spark._jvm
    flags = jvm.java.util.EnumSet.of(jvm.org.apache.hadoop.fs.CreateFlag.CREATE, jvm.org.apache.hadoop.fs.CreateFlag.OVERWRITE)
    out = fc.create(jvm.org.apache.hadoop.fs.Path(path), flags, spark.sparkContext._gateway.new_array(jvm.org.apache.hadoop.fs.Options.CreateOpts, 0))
    out.write(bytearray(data))
    out.close()


def _rename(spark, fc, src: str, dst: str, overwrite: bool) -> None:
    jvm = spark._jvm
    Rename = jvm.org.apache.hadoop.fs.Options.Rename
    options = spark.sparkContext._gateway.new_array(Rename, 1)
    options[0] = Rename.OVERWRITE if overwrite else Rename.NONE
    fc.rename(jvm.org.apache.hadoop.fs.Path(src), jvm.org.apache.hadoop.fs.Path(dst), options)


def test_the_local_session_uses_the_in_process_file_context(spark):
    jvm, fc = _context(spark)
    assert spark._jsc.hadoopConfiguration().get(LOCAL_FILE_CONTEXT_KEY) == LOCAL_FILE_CONTEXT
    assert fc.getDefaultFileSystem().getClass().getName() == LOCAL_FILE_CONTEXT


def test_create_rename_and_link_status_behave_as_hadoops(spark, tmp_path):
    jvm, fc = _context(spark)
    first, second, target = (f"file:{tmp_path}/{name}" for name in ("a.tmp", "b.tmp", "offset"))
    _write(spark, fc, first, b"one")
    mode = stat.S_IMODE(os.stat(tmp_path / "a.tmp").st_mode)
    assert mode == 0o644 & ~_umask(), oct(mode)  # Hadoop's default file permission, umask applied
    assert (tmp_path / ".a.tmp.crc").exists()  # still the checksummed file system

    _rename(spark, fc, first, target, overwrite=False)
    assert (tmp_path / "offset").read_bytes() == b"one" and not (tmp_path / "a.tmp").exists()

    _write(spark, fc, second, b"two")
    with pytest.raises(Exception, match="FileAlreadyExistsException|already exists"):
        _rename(spark, fc, second, target, overwrite=False)
    _rename(spark, fc, second, target, overwrite=True)
    assert (tmp_path / "offset").read_bytes() == b"two"

    status = fc.getFileLinkStatus(jvm.org.apache.hadoop.fs.Path(target))
    assert status.isFile() and not status.isSymlink() and status.getLen() == 3


def test_link_status_equals_hadoops_own(spark, tmp_path):
    """Files, directories, symbolic links (with and without the file: scheme) and missing
    paths: the same answer as Hadoop's RawLocalFileSystem, or the same error."""
    jvm = spark._jvm
    conf = spark._jsc.hadoopConfiguration()
    ours, hadoops = jvm.eventtime.jvm.spark.LocalFiles.RawFs(), jvm.org.apache.hadoop.fs.RawLocalFileSystem()
    for fs in (ours, hadoops):
        fs.initialize(jvm.java.net.URI("file:///"), conf)
    (tmp_path / "file").write_bytes(b"12345")
    (tmp_path / "dir").mkdir()
    os.symlink(tmp_path / "file", tmp_path / "link")
    os.symlink(tmp_path / "gone", tmp_path / "dangling")

    def answer(fs, path):
        try:
            s = fs.getFileLinkStatus(jvm.org.apache.hadoop.fs.Path(path))
        except Exception as exc:  # py4j wraps the Java exception
            return ("error", type(exc).__name__, "FileNotFoundException" in str(exc))
        return (s.isFile(), s.isDirectory(), s.isSymlink(), s.getLen(), s.getPath().toString(),
                s.getSymlink().toString() if s.isSymlink() else None)

    for name in ("file", "dir", "link", "dangling", "missing"):
        for path in (f"file:{tmp_path}/{name}", f"{tmp_path}/{name}"):
            assert answer(ours, path) == answer(hadoops, path), path


def _umask() -> int:
    current = os.umask(0)
    os.umask(current)
    return current
