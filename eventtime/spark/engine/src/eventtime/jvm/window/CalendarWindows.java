package eventtime.jvm.window;

import java.time.DayOfWeek;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.temporal.TemporalAdjusters;
import java.util.Collections;
import java.util.List;

/**
 * Calendar windows (eventtime/core/window.py's {@code Calendar}): a local day, week or month in
 * a zone, from local midnight to local midnight; each window is its own slice.
 */
public final class CalendarWindows extends SlicedAssigner {
  private static final long serialVersionUID = 1L;
  public static final int DAY = 0, WEEK = 1, MONTH = 2;
  private final int unit;
  private final ZoneId zone;
  private final DayOfWeek weekStart;
  /** The last window computed, {start, end}: consecutive rows mostly share one. */
  private transient volatile long[] last;

  public CalendarWindows(int unit, ZoneId zone, DayOfWeek weekStart) {
    this.unit = unit;
    this.zone = zone;
    this.weekStart = weekStart;
  }

  /** {start, end} of the window containing ts. */
  private long[] window(long ts) {
    long[] cached = last;
    if (cached != null && cached[0] <= ts && ts < cached[1]) return cached;
    LocalDate first = Instant.ofEpochMilli(ts).atZone(zone).toLocalDate();
    LocalDate next;
    if (unit == WEEK) {
      first = first.with(TemporalAdjusters.previousOrSame(weekStart));
      next = first.plusWeeks(1);
    } else if (unit == MONTH) {
      first = first.withDayOfMonth(1);
      next = first.plusMonths(1);
    } else {
      next = first.plusDays(1);
    }
    // atStartOfDay: a midnight in a DST gap is the instant the gap starts; in an overlap the
    // earlier of the two midnights (Python's fold=0 reads both the same way)
    long[] window = {first.atStartOfDay(zone).toInstant().toEpochMilli(), next.atStartOfDay(zone).toInstant().toEpochMilli()};
    last = window;
    return window;
  }

  @Override
  public long sliceMs() {
    return 1; // slice starts are stored as deltas of 1 ms
  }

  @Override
  public long sliceOf(long ts) {
    return window(ts)[0];
  }

  @Override
  public long windowEnd(long ws) {
    return window(ws)[1];
  }

  @Override
  public List<Long> windowsOfSlice(long sliceStart) {
    return Collections.singletonList(sliceStart);
  }

  @Override
  public long lastWindowOfSlice(long sliceStart) {
    return sliceStart;
  }

  @Override
  public long firstWindowOf(long ts) {
    return window(ts)[0];
  }

  @Override
  public long lastWindowEnd(long ts) {
    return window(ts)[1];
  }

  @Override
  public boolean overlapping() {
    return false;
  }

  @Override
  public long nextWindow(long ws) {
    return windowEnd(ws);
  }
}
