package eventtime.jvm.operator;

import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import eventtime.jvm.state.Bytes;
import eventtime.jvm.window.Trigger;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.spark.sql.Row;

/**
 * The fixed windows (tumbling, sliding, calendar) of one user key (docs/semantics.md): the key's
 * live slices, each with its accumulators, and the next pane index of each window that had a
 * pane and has not expired. A window is the merge of its slices ({@link Spec}'s arithmetic). The
 * same rules as eventtime/core/reference.py, held to it by the transcript and property tests;
 * the session windows of a key are {@link Sessions}.
 *
 * <p>A Spark SQL (or Python) aggregation's buffer can be large (a sketch, a set of values), and a
 * key holds several live slices while a batch changes one or two of them. So the key's value
 * keeps only each such buffer's record count; the buffers of slice s are a state entry of their
 * own ({@link Buffers}, key and s: state layout 6), read when a window over s fires or s receives
 * records, written when s changed, removed with s.
 */
final class Slices {
  /** Receives the panes a key's windows produce (the window starting at ws). */
  interface Emit {
    void pane(long ws, String timing, long index, boolean fin, Acc[] values);
  }

  /** The state entries of one key's SQL buffers, one per slice (the slice's start). */
  interface Buffers {
    byte[] get(long slice);

    void put(long slice, byte[] bytes);

    void remove(long slice);
  }

  /** slice start -> its accumulators. */
  private final TreeMap<Long, Acc[]> slices = new TreeMap<>();
  /** window start -> the index of its next pane (windows that had a pane and are not expired). */
  private final TreeMap<Long, Long> panes = new TreeMap<>();
  /** What this batch's rows added, per slice (for the LATE panes; null until then, and in final_only). */
  private TreeMap<Long, Acc[]> added;
  private final Spec spec;
  private final int na;
  /** The key's buffer entries (null without SQL aggregations). */
  private final Buffers buffers;
  /** Slices whose SQL buffers are still in their entry, and those changed since they were read. */
  private final Set<Long> unread = new HashSet<>(), changedBuffers = new HashSet<>();

  Slices(Spec spec, int na, Buffers buffers) {
    this.spec = spec;
    this.na = na;
    this.buffers = spec.hasSql ? java.util.Objects.requireNonNull(buffers, "buffers") : null;
  }

  boolean isEmpty() {
    return slices.isEmpty() && panes.isEmpty();
  }


  /**
   * The accumulators of the window starting at ws over the slices of {@code from}, or null: the
   * slice's own when it is the only one (a pane only reads them), else a merge of them.
   */
  private Acc[] window(TreeMap<Long, Acc[]> from, long ws) {
    Acc[] only = null, acc = null;
    for (Map.Entry<Long, Acc[]> s : from.subMap(ws, true, spec.sliced.windowEnd(ws), false).entrySet()) {
      if (from == slices) readBuffers(s.getKey(), s.getValue());
      if (only == null) {
        only = s.getValue();
        continue;
      }
      if (acc == null) {
        acc = Acc.fresh(na);
        Acc.mergeAll(spec, acc, only);
      }
      Acc.mergeAll(spec, acc, s.getValue());
    }
    return acc != null ? acc : only;
  }

  /** Slice s's SQL buffers from their entry, when not read yet. */
  private void readBuffers(long slice, Acc[] accs) {
    if (!unread.remove(slice)) return;
    byte[] bytes = buffers.get(slice);
    if (bytes == null) throw new IllegalStateException("eventtime: the state has no buffers of slice " + slice);
    Bytes.In in = new Bytes.In(bytes);
    for (int i = 0; i < na; i++) {
      if (spec.kinds[i] != Spec.SQL) continue;
      Acc a = Acc.read(spec, i, in);
      if (a.n != accs[i].n) {
        throw new IllegalStateException("eventtime: slice " + slice + "'s buffer of aggregation " + i + " holds " + a.n
            + " records, its key's state " + accs[i].n);
      }
      accs[i].v = a.v;
    }
  }

  /**
   * Writes the buffers of the slices changed since they were read to their entries (before the
   * key's value is written with {@link #encode}).
   */
  void writeBuffers() {
    if (buffers == null) return;
    for (long slice : changedBuffers) {
      Acc[] accs = slices.get(slice);
      if (accs == null) continue;  // expired since: its entry was removed
      Bytes.Out out = new Bytes.Out(64);
      for (int i = 0; i < na; i++) if (spec.kinds[i] == Spec.SQL) accs[i].write(spec, i, out);
      buffers.put(slice, out.toByteArray());
    }
    changedBuffers.clear();
  }

  /** A slice is expired with the last window that holds it. */
  static boolean isExpired(Spec spec, long slice, long watermark) {
    return spec.trigger.isExpired(spec.sliced.windowEnd(spec.sliced.lastWindowOfSlice(slice)), watermark);
  }

  // --- encoding ------------------------------------------------------------------------------

  static Slices decode(Spec spec, int na, byte[] bytes, Buffers buffers) {
    Slices st = new Slices(spec, na, buffers);
    Bytes.In in = new Bytes.In(bytes);
    int ns = (int) in.readVarLong();
    long start = 0;
    for (int s = 0; s < ns; s++) {
      start = s == 0 ? in.readVarLong() : start + in.readVarLong() * spec.sliced.sliceMs();
      Acc[] accs = new Acc[na];
      for (int i = 0; i < na; i++) {
        if (spec.kinds[i] == Spec.SQL) {  // its count here, its buffer in the slice's entry
          accs[i] = new Acc();
          accs[i].n = in.readVarLong();
          if (accs[i].n > 0) {
            accs[i].v = Acc.UNREAD;
            st.unread.add(start);
          }
        } else {
          accs[i] = Acc.read(spec, i, in);
        }
      }
      st.slices.put(start, accs);
    }
    int np = (int) in.readVarLong();
    for (int p = 0; p < np; p++) st.panes.put(in.readVarLong(), in.readVarLong());
    return st;
  }

  /** Compact: variable-length integers, slice starts as deltas; SQL buffers apart ({@link #writeBuffers}). */
  byte[] encode() {
    Bytes.Out out = new Bytes.Out(48);
    out.writeVarLong(slices.size());
    long previous = 0;
    boolean first = true;
    for (Map.Entry<Long, Acc[]> e : slices.entrySet()) {
      out.writeVarLong(first ? e.getKey() : (e.getKey() - previous) / spec.sliced.sliceMs());
      previous = e.getKey();
      first = false;
      Acc[] accs = e.getValue();
      for (int i = 0; i < na; i++) {
        if (spec.kinds[i] == Spec.SQL) out.writeVarLong(accs[i].n);
        else accs[i].write(spec, i, out);
      }
    }
    out.writeVarLong(panes.size());
    for (Map.Entry<Long, Long> e : panes.entrySet()) {
      out.writeVarLong(e.getKey());
      out.writeVarLong(e.getValue());
    }
    return out.toByteArray();
  }

  // --- the rules -----------------------------------------------------------------------------

  /**
   * From wPrev to W: fire every window due under W and not under wPrev (FINAL at expiry in
   * final_only), purge every window and slice expired under W ({@link Spec#isDue}, {@link
   * Spec#isExpired}). Returns whether the state changed.
   */
  boolean sweep(long wPrev, long watermark, Emit emit) {
    if (watermark <= wPrev) return false;
    boolean changed = false;
    TreeSet<Long> starts = new TreeSet<>();
    for (long s : slices.keySet()) starts.addAll(spec.sliced.windowsOfSlice(s));
    for (long ws : starts) {
      long end = spec.sliced.windowEnd(ws);
      if (spec.finalOnly) {
        if (!spec.trigger.isExpired(end, wPrev) && spec.trigger.isExpired(end, watermark)) {
          Acc[] acc = window(slices, ws);
          if (acc != null) emit.pane(ws, Contract.FINAL, 0, true, acc);
        }
      } else if (!Trigger.isDue(end, wPrev) && Trigger.isDue(end, watermark)) {
        Acc[] acc = window(slices, ws);
        if (acc == null) continue;
        boolean fin = spec.trigger.isExpired(end, watermark);
        emit.pane(ws, Contract.ON_TIME, 0, fin, acc);
        if (!fin) {
          panes.put(ws, 1L);
          changed = true;
        }
      }
    }
    changed |= panes.entrySet().removeIf(e -> spec.trigger.isExpired(spec.sliced.windowEnd(e.getKey()), watermark));
    changed |= slices.entrySet().removeIf(e -> {
      if (!isExpired(spec, e.getKey(), watermark)) return false;
      if (buffers != null) {
        buffers.remove(e.getKey());
        unread.remove(e.getKey());
      }
      return true;
    });
    return changed;
  }

  /** Adds one record (its struct and event time) to its slice; true when the slice is new. */
  boolean addRecord(long slice, Row rec, long ts) {
    Acc[] add = Acc.fresh(na);
    for (int i = 0; i < na; i++) add[i].add(spec, i, spec.aggInput(i, rec), ts);
    return add(slice, add);
  }

  /** Adds accumulators (a record's, or a map-side partial) to a slice; true when the slice is new. */
  boolean add(long slice, Acc[] add) {
    Acc[] held = slices.get(slice);
    boolean created = held == null;
    if (created) {
      held = Acc.fresh(na);
      slices.put(slice, held);
    } else if (buffers != null) {
      readBuffers(slice, held);
    }
    if (buffers != null) changedBuffers.add(slice);
    Acc.mergeAll(spec, held, add);
    if (!spec.finalOnly) {
      if (added == null) added = new TreeMap<>();
      Acc[] d = added.get(slice);
      if (d == null) added.put(slice, add);
      else Acc.mergeAll(spec, d, add);
    }
    return created;
  }

  /**
   * After a batch's rows are added (the key swept to W first): a LATE pane for every window that
   * is due and not expired under W and received records now (of those records alone when
   * discarding).
   */
  void latePanes(long watermark, Emit emit) {
    if (added == null) return;
    TreeSet<Long> due = new TreeSet<>();
    for (long s : added.keySet()) {
      for (long ws : spec.sliced.windowsOfSlice(s)) {
        long end = spec.sliced.windowEnd(ws);
        if (Trigger.isDue(end, watermark) && !spec.trigger.isExpired(end, watermark)) due.add(ws);
      }
    }
    for (long ws : due) {
      Acc[] acc = window(spec.discarding ? added : slices, ws);
      long index = panes.getOrDefault(ws, 0L);
      emit.pane(ws, Contract.LATE, index, false, acc);
      panes.put(ws, index + 1);
    }
  }
}
