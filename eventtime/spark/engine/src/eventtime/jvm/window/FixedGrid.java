package eventtime.jvm.window;

import java.util.ArrayList;
import java.util.List;

/**
 * Tumbling and sliding windows (eventtime/core/window.py's {@code Tumbling}, {@code Sliding}):
 * windows start at offset + k * slide and are [start, start + size); slices are gcd(size, slide)
 * wide.
 */
public final class FixedGrid extends SlicedAssigner {
  private static final long serialVersionUID = 1L;
  final long sizeMs, slideMs, offsetMs;
  private final long sliceMs;

  public FixedGrid(long sizeMs, long slideMs, long offsetMs) {
    this.sizeMs = sizeMs;
    this.slideMs = slideMs;
    this.offsetMs = offsetMs;
    this.sliceMs = gcd(sizeMs, slideMs);
  }

  static long gcd(long a, long b) {
    while (b != 0) {
      long t = a % b;
      a = b;
      b = t;
    }
    return a;
  }

  /** The largest start on the grid of {@code step} that is at most ts. */
  long lastStart(long ts, long step) {
    return ts - Math.floorMod(ts - offsetMs, step);
  }

  @Override
  public long sliceMs() {
    return sliceMs;
  }

  @Override
  public long sliceOf(long ts) {
    return lastStart(ts, sliceMs);
  }

  @Override
  public long windowEnd(long ws) {
    return ws + sizeMs;
  }

  @Override
  public List<Long> windowsOfSlice(long sliceStart) {
    List<Long> starts = new ArrayList<>(4);
    long first = lastStart(sliceStart, slideMs);
    while (first - slideMs + sizeMs > sliceStart) first -= slideMs;
    for (long s = first; s <= sliceStart; s += slideMs) {
      if (s + sizeMs > sliceStart) starts.add(s);
    }
    return starts;
  }

  @Override
  public long lastWindowOfSlice(long sliceStart) {
    return lastStart(sliceStart, slideMs);
  }

  @Override
  public long firstWindowOf(long ts) {
    long last = lastStart(ts, slideMs);
    long first = last - ((sizeMs - 1) / slideMs) * slideMs;
    return first + sizeMs > ts ? first : first + slideMs;
  }

  @Override
  public long lastWindowEnd(long ts) {
    return lastStart(ts, slideMs) + sizeMs;
  }

  @Override
  public boolean overlapping() {
    return slideMs < sizeMs;
  }

  @Override
  public long nextWindow(long ws) {
    return ws + slideMs;
  }
}
