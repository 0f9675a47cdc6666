package eventtime.jvm.window;

/**
 * The firing rules (eventtime/core/trigger.py, docs/semantics.md), each written once; a window
 * is given by its end (exclusive), whatever its kind (fixed, calendar, session).
 */
public final class Trigger implements java.io.Serializable {
  private static final long serialVersionUID = 1L;
  private final long latenessMs;
  private final boolean reportPartlyLate;
  /** The windows: one of the two is null. */
  private final SlicedAssigner sliced;
  private final SessionWindows sessions;

  public Trigger(WindowAssigner windows, long latenessMs, boolean reportPartlyLate) {
    this.latenessMs = latenessMs;
    this.reportPartlyLate = reportPartlyLate;
    this.sliced = windows instanceof SlicedAssigner ? (SlicedAssigner) windows : null;
    this.sessions = windows instanceof SessionWindows ? (SessionWindows) windows : null;
  }

  /** A window's max timestamp m = end - 1, the largest event time in [start, end). */
  public static long maxTimestamp(long end) {
    return end - 1;
  }

  /** A window is due (its ON_TIME pane fires) once its max timestamp end - 1 <= W. */
  public static boolean isDue(long end, long watermark) {
    return maxTimestamp(end) <= watermark;
  }

  /**
   * When a window expires: m + L, its max timestamp end - 1 plus the allowed lateness;
   * Long.MAX_VALUE when that overflows (past END_OF_INPUT_MS: never, as in the Python rules).
   */
  public long cleanupTime(long end) {
    long m = maxTimestamp(end);
    long t = m + latenessMs;
    return t >= m ? t : Long.MAX_VALUE;
  }

  /** A window is expired (its state purged, new records late) once m + L = cleanupTime(end) <= W. */
  public boolean isExpired(long end, long watermark) {
    return cleanupTime(end) <= watermark;
  }

  /** A record is live (not too late) while its last window has not expired. */
  public boolean isLive(long ts, long watermark) {
    return !isExpired(sliced.lastWindowEnd(ts), watermark);
  }

  /**
   * A live record is partly late when its first window has expired (windows expire in order of
   * their ends, so the ones it misses come first): reported only when asked (reportPartlyLate).
   */
  public boolean isPartlyLate(long ts, long watermark) {
    return reportPartlyLate && sliced != null && sliced.overlapping()
        && isExpired(sliced.windowEnd(sliced.firstWindowOf(ts)), watermark);
  }

  /** End of the last expired window of a partly late record: its missed windows span [firstWindowOf(ts), this). */
  public long lastExpiredWindowEnd(long ts, long watermark) {
    long ws = sliced.firstWindowOf(ts);
    while (isExpired(sliced.windowEnd(sliced.nextWindow(ws)), watermark)) ws = sliced.nextWindow(ws);
    return sliced.windowEnd(ws);
  }

  /**
   * Whether the map-side combine may fold a data row at ts under the batch's watermark: it is
   * live and not partly late (a record the operator reports). A session row when its own session
   * [ts, ts + gap) has not expired: whatever it merges with ends no earlier, so it is never late
   * (a row whose own session expired may still join a live one: the operator judges it).
   */
  public boolean foldable(long ts, long watermark) {
    if (sessions != null) return sessions.fits(ts) && !isExpired(sessions.ownSessionEnd(ts), watermark);
    return isLive(ts, watermark) && !isPartlyLate(ts, watermark);
  }

  /** Session windows: the width of the time slots of the bucket's due index ({@link DueIndex}). */
  public long dueSlotMs() {
    return Math.max(1, (sessions.gapMs + latenessMs) / 64);
  }
}
