package eventtime.jvm.window;

import java.util.List;

/**
 * Windows that do not merge, each a union of consecutive slices (eventtime/core/window.py's
 * {@code _SlicedAssigner}): the operator keeps a key's state per slice and builds a window's
 * pane from the slices it covers.
 */
public abstract class SlicedAssigner extends WindowAssigner {
  private static final long serialVersionUID = 1L;

  @Override
  public final boolean merging() {
    return false;
  }

  /** The unit slice starts are stored in, as multiples of it ({@link Slices}). */
  public abstract long sliceMs();

  /** Start of the slice containing ts. */
  public abstract long sliceOf(long ts);

  /** End (exclusive) of the window starting at ws. */
  public abstract long windowEnd(long ws);

  /** Starts of the windows containing the whole slice, ascending. */
  public abstract List<Long> windowsOfSlice(long sliceStart);

  /** Start of the last window of a slice (the one that expires last). */
  public abstract long lastWindowOfSlice(long sliceStart);

  /** Start of the first window containing ts. */
  public abstract long firstWindowOf(long ts);

  /** End of the last window containing ts (the one that expires last). */
  public abstract long lastWindowEnd(long ts);

  /** Whether a record lies in more than one window (it can then be too late for some only). */
  abstract boolean overlapping();

  /** Start of the window after the one starting at ws, among those of one record. */
  abstract long nextWindow(long ws);
}
