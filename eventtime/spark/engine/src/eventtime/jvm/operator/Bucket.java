package eventtime.jvm.operator;

import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Bytes;
import eventtime.jvm.window.Trigger;
import java.util.TreeSet;

/**
 * One bucket's own small state value (the operator's grouping key is a hash bucket of the user
 * key): the watermark it was last swept to, its one event-time timer, and what is pending in its
 * keys: the starts of the fixed windows with state in any of them, or, for session windows, the
 * index of which keys are due when ({@link DueIndex}).
 */
final class Bucket {
  /** The watermark every key of the bucket was last swept to. */
  long w;
  /** The event-time timer registered for the bucket (Long.MIN_VALUE: none). */
  long timer = Long.MIN_VALUE;
  /** Fixed windows: the starts of the windows with state in any of the bucket's keys. */
  final TreeSet<Long> windows = new TreeSet<>();
  /** Session windows: which keys are due when (null for fixed windows). */
  final DueIndex due;

  Bucket(DueIndex due) {
    this.due = due;
  }

  /** Nothing pending (the state value is then cleared); call after {@code due.flush()}. */
  boolean isEmpty() {
    return windows.isEmpty() && (due == null || due.isEmpty());
  }

  static Bucket decode(byte[] bytes, DueIndex due) {
    Bytes.In in = new Bytes.In(bytes);
    Bucket m = new Bucket(due);
    m.w = in.readVarLong();
    m.timer = in.readVarLong();
    int n = (int) in.readVarLong();
    for (int i = 0; i < n; i++) m.windows.add(in.readVarLong());
    if (due != null) due.read(in);
    return m;
  }

  byte[] encode() {
    Bytes.Out out = new Bytes.Out(32);
    out.writeVarLong(w);
    out.writeVarLong(timer);
    out.writeVarLong(windows.size());
    for (long ws : windows) out.writeVarLong(ws);
    if (due != null) due.write(out);
    return out.toByteArray();
  }

  /**
   * The next time the bucket needs the watermark (its timer), or Long.MAX_VALUE: the earliest
   * ON_TIME time m (not in final_only) or cleanup time of a window not yet due or expired at w.
   */
  long nextEvent(Spec spec) {
    if (due != null) return due.next();
    long next = Long.MAX_VALUE;
    for (long ws : windows) {
      long end = spec.sliced.windowEnd(ws);
      if (!spec.finalOnly && !Trigger.isDue(end, w)) next = Math.min(next, Trigger.maxTimestamp(end));
      if (!spec.trigger.isExpired(end, w)) next = Math.min(next, spec.trigger.cleanupTime(end));
    }
    return next;
  }
}
