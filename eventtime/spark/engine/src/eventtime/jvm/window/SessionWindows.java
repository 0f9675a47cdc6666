package eventtime.jvm.window;

/**
 * Session windows (eventtime/core/window.py's {@code Session}): a record opens its own session
 * [ts, ts + gap), and a key's sessions that overlap merge ({@link Sessions}).
 */
public final class SessionWindows extends WindowAssigner {
  private static final long serialVersionUID = 1L;
  final long gapMs;

  public SessionWindows(long gapMs) {
    this.gapMs = gapMs;
  }

  @Override
  public boolean merging() {
    return true;
  }

  /** The end of a record's own session [ts, ts + gap), before it merges with any other. */
  public long ownSessionEnd(long ts) {
    return ts + gapMs;
  }

  /** Whether a record's own session fits in a long (its end does not overflow). */
  boolean fits(long ts) {
    return ts <= Long.MAX_VALUE - gapMs;
  }

  /** Two sessions merge when they overlap (half-open: touching is not overlapping). */
  public static boolean overlap(long start, long end, long otherStart, long otherEnd) {
    return start < otherEnd && otherStart < end;
  }
}
