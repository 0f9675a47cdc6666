package eventtime.jvm.window;

import java.io.Serializable;

/**
 * The windows a record's event time belongs to, one subtype per window kind as in
 * eventtime/core/window.py: the fixed grid (tumbling, sliding) and calendar windows lie on
 * slices, sessions merge. Windows are half-open [start, end).
 */
public abstract class WindowAssigner implements Serializable {
  private static final long serialVersionUID = 1L;

  /** Whether windows merge per key (sessions) instead of lying on slices. */
  abstract boolean merging();
}
