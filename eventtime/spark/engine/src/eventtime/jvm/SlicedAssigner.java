package eventtime.jvm;

import java.util.List;

/**
 * Windows that do not merge, each a union of consecutive slices (eventtime/core/window.py's
 * {@code _SlicedAssigner}): the operator keeps a key's state per slice and builds a window's
 * pane from the slices it covers.
 */
abstract class SlicedAssigner extends WindowAssigner {
  private static final long serialVersionUID = 1L;

  @Override
  final boolean merging() {
    return false;
  }

  /** The unit slice starts are stored in, as multiples of it ({@link Slices}). */
  abstract long sliceMs();

  /** Start of the slice containing ts. */
  abstract long sliceOf(long ts);

  /** End (exclusive) of the window starting at ws. */
  abstract long windowEnd(long ws);

  /** Starts of the windows containing the whole slice, ascending. */
  abstract List<Long> windowsOfSlice(long sliceStart);

  /** Start of the last window of a slice (the one that expires last). */
  abstract long lastWindowOfSlice(long sliceStart);

  /** Start of the first window containing ts. */
  abstract long firstWindowOf(long ts);

  /** End of the last window containing ts (the one that expires last). */
  abstract long lastWindowEnd(long ts);

  /** Whether a record lies in more than one window (it can then be too late for some only). */
  abstract boolean overlapping();

  /** Start of the window after the one starting at ws, among those of one record. */
  abstract long nextWindow(long ws);
}
