package eventtime.jvm.spark;

import java.io.IOException;
import java.net.URI;
import java.net.URISyntaxException;
import java.nio.file.Files;
import java.nio.file.attribute.PosixFilePermission;
import java.util.EnumSet;
import java.util.Set;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.ChecksumFs;
import org.apache.hadoop.fs.DelegateToFileSystem;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.FsConstants;
import org.apache.hadoop.fs.FsServerDefaults;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.RawLocalFileSystem;
import org.apache.hadoop.fs.local.LocalConfigKeys;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.io.nativeio.NativeIO;

/**
 * Hadoop's local file system for {@code FileContext} (what Spark's checkpoint manager uses for
 * {@code file:} paths) without a process per call. Without Hadoop's native library (pyspark's
 * wheel has none), {@code RawLocalFileSystem} runs {@code readlink} for every
 * {@code getFileLinkStatus} (twice per checkpoint rename) and {@code chmod} for every file it
 * creates: 2 124 processes in a session running a 13-batch test query three times (JFR). Here a plain
 * file's link status is its status (what Hadoop returns too: its {@code readlink} of a
 * {@code file:} URI always fails) and permissions are set with {@code java.nio}; symbolic
 * links, sticky / set-id bits and a loaded native library take Hadoop's own path.
 *
 * <p>{@code eventtime.local_session()} sets {@code fs.AbstractFileSystem.file.impl} to
 * {@link ContextFs} for local masters.
 */
public final class LocalFiles {
  private LocalFiles() {}

  /** {@code RawLocalFileSystem} with {@code setPermission} and {@code getFileLinkStatus} in-process. */
  public static class RawFs extends RawLocalFileSystem {
    private static final PosixFilePermission[] BITS = {
      PosixFilePermission.OTHERS_EXECUTE, PosixFilePermission.OTHERS_WRITE, PosixFilePermission.OTHERS_READ,
      PosixFilePermission.GROUP_EXECUTE, PosixFilePermission.GROUP_WRITE, PosixFilePermission.GROUP_READ,
      PosixFilePermission.OWNER_EXECUTE, PosixFilePermission.OWNER_WRITE, PosixFilePermission.OWNER_READ};

    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      short mode = permission.toShort();
      if (NativeIO.isAvailable() || (mode & ~0777) != 0) {
        super.setPermission(p, permission);
        return;
      }
      Set<PosixFilePermission> set = EnumSet.noneOf(PosixFilePermission.class);
      for (int bit = 0; bit < BITS.length; bit++) {
        if ((mode & (1 << bit)) != 0) set.add(BITS[bit]);
      }
      Files.setPosixFilePermissions(pathToFile(p).toPath(), set);
    }

    @Override
    public FileStatus getFileLinkStatus(Path f) throws IOException {
      if (NativeIO.isAvailable() || Files.isSymbolicLink(pathToFile(f).toPath())) return super.getFileLinkStatus(f);
      return getFileStatus(f);
    }
  }

  /** The {@code FileContext} file system for {@code file:}: Hadoop's {@code LocalFs} over {@link RawFs}. */
  public static class ContextFs extends ChecksumFs {
    public ContextFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(new RawContextFs(uri, conf));
    }

    public ContextFs(Configuration conf) throws IOException, URISyntaxException {
      this(FsConstants.LOCAL_FS_URI, conf);
    }
  }

  /** Hadoop's {@code RawLocalFs}, whose file system is fixed to {@code RawLocalFileSystem}, over {@link RawFs}. */
  static class RawContextFs extends DelegateToFileSystem {
    RawContextFs(URI uri, Configuration conf) throws IOException, URISyntaxException {
      super(uri, new RawFs(), conf, FsConstants.LOCAL_FS_URI.getScheme(), false);
    }

    @Override
    public int getUriDefaultPort() {
      return -1;
    }

    @Override
    public FsServerDefaults getServerDefaults(Path f) throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    @SuppressWarnings("deprecation")
    public FsServerDefaults getServerDefaults() throws IOException {
      return LocalConfigKeys.getServerDefaults();
    }

    @Override
    public boolean isValidName(String src) {
      return true;
    }
  }
}
