package eventtime.jvm;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.io.UncheckedIOException;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The stateful operator: docs/semantics.md applied per user key, state per key in Spark's
 * state store (one small binary value: the key's live slices, pane indexes and timer).
 *
 * <p>The watermark W of a data batch is {@code getCurrentWatermarkInMs()} (computed from the
 * previous batches); a record is late when its last window has expired under W. Each key keeps
 * one event-time timer, at its earliest pending event (an ON_TIME firing m or an expiry m + L);
 * the timer handler sweeps the key's windows to the new watermark. A data batch first sweeps
 * to W itself (catch-up), so results do not depend on Spark running the no-data batch.
 */
public final class WindowOperator extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;
  private final Spec spec;
  private transient Layout lay;
  private transient ValueState<byte[]> state;

  public WindowOperator(Spec spec) {
    this.spec = spec;
  }

  static final class KeyState {
    long w;
    long timer = Long.MIN_VALUE;
    final TreeMap<Long, Acc[]> slices = new TreeMap<>();
    final TreeMap<Long, Long> panes = new TreeMap<>();
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    lay = new Layout(spec);
    state = getHandle().getValueState("s", Encoders.BINARY(), TTLConfig.NONE());
  }

  // --- state ---------------------------------------------------------------------------------

  private KeyState load() {
    byte[] bytes = state.get();
    if (bytes == null) return null;
    try (DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes))) {
      KeyState st = new KeyState();
      st.w = in.readLong();
      st.timer = in.readLong();
      int ns = in.readInt();
      for (int s = 0; s < ns; s++) {
        long start = in.readLong();
        Acc[] accs = new Acc[lay.na];
        for (int i = 0; i < lay.na; i++) accs[i] = Acc.read(in);
        st.slices.put(start, accs);
      }
      int np = in.readInt();
      for (int p = 0; p < np; p++) st.panes.put(in.readLong(), in.readLong());
      return st;
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
  }

  private void save(KeyState st) {
    if (st.slices.isEmpty() && st.panes.isEmpty()) {
      state.clear();
      return;
    }
    ByteArrayOutputStream buf = new ByteArrayOutputStream(64);
    try (DataOutputStream out = new DataOutputStream(buf)) {
      out.writeLong(st.w);
      out.writeLong(st.timer);
      out.writeInt(st.slices.size());
      for (Map.Entry<Long, Acc[]> e : st.slices.entrySet()) {
        out.writeLong(e.getKey());
        for (Acc a : e.getValue()) a.write(out);
      }
      out.writeInt(st.panes.size());
      for (Map.Entry<Long, Long> e : st.panes.entrySet()) {
        out.writeLong(e.getKey());
        out.writeLong(e.getValue());
      }
    } catch (IOException e) {
      throw new UncheckedIOException(e);
    }
    state.update(buf.toByteArray());
  }

  private Acc[] newAccs() {
    Acc[] a = new Acc[lay.na];
    for (int i = 0; i < lay.na; i++) a[i] = new Acc();
    return a;
  }

  private void mergeInto(Acc[] into, Acc[] from) {
    for (int i = 0; i < lay.na; i++) into[i].merge(spec, i, from[i]);
  }

  /** The accumulators of window [ws, ws + size) over the slices of {@code slices}, or null. */
  private Acc[] window(TreeMap<Long, Acc[]> slices, long ws) {
    Acc[] acc = null;
    for (Acc[] s : slices.subMap(ws, true, ws + spec.sizeMs, false).values()) {
      if (acc == null) acc = newAccs();
      mergeInto(acc, s);
    }
    return acc;
  }

  private TreeSet<Long> windowStarts(KeyState st) {
    TreeSet<Long> starts = new TreeSet<>();
    for (long s : st.slices.keySet()) starts.addAll(spec.windowsOfSlice(s));
    return starts;
  }

  // --- output rows ---------------------------------------------------------------------------

  private Object[] outRow(String kind, Row key, int keyOffset) {
    Object[] o = new Object[lay.oWidth];
    o[0] = kind;
    for (int i = 0; i < lay.nk; i++) o[1 + i] = key.get(keyOffset + i);
    return o;
  }

  private Row pane(Row key, long ws, String timing, long index, boolean fin, Acc[] acc, long watermark) {
    Object[] o = outRow("pane", key, 1);
    o[lay.oWs] = ws;
    o[lay.oWe] = ws + spec.sizeMs;
    o[lay.oTiming] = timing;
    o[lay.oIndex] = index;
    o[lay.oFinal] = fin;
    for (int i = 0; i < lay.na; i++) o[lay.oAgg0 + i] = acc[i].result(spec, i);
    o[lay.oWatermark] = watermark;
    return RowFactory.create(o);
  }

  private Row lateRecord(Row key, Row r, long ts, long watermark) {
    Object[] o = outRow("late", key, 1);
    o[lay.oReason] = "too_late";
    o[lay.oEventTime] = ts;
    // Spark reports 0 before the first watermark: no watermark yet (null).
    o[lay.oWatermark] = watermark > 0 ? watermark : null;
    o[lay.oLateness] = watermark - ts;
    o[lay.oWs] = spec.firstWindowOf(ts);
    o[lay.oWe] = spec.lastStart(ts, spec.slideMs) + spec.sizeMs;
    o[lay.oPart] = r.get(lay.part);
    o[lay.oOff] = r.get(lay.off);
    o[lay.oRec] = r.get(lay.rec);
    return RowFactory.create(o);
  }

  private Row invalidRecord(Row r, long watermark) {
    Object[] o = outRow("invalid", r, 1);
    o[lay.oReason] = r.get(lay.reason);
    o[lay.oRaw] = r.get(lay.raw);
    o[lay.oWatermark] = watermark > 0 ? watermark : null;
    o[lay.oPart] = r.get(lay.part);
    o[lay.oOff] = r.get(lay.off);
    o[lay.oRec] = r.get(lay.rec);
    return RowFactory.create(o);
  }

  private Row statsRow(Row r, long watermark) {
    Object[] o = new Object[lay.oWidth];
    o[0] = "partition_stats";
    o[lay.oPart] = r.get(lay.part);
    o[lay.oStatMax] = r.get(lay.tmax);
    o[lay.oStatRows] = r.get(lay.n);
    o[lay.oWatermark] = watermark;
    return RowFactory.create(o);
  }

  // --- the rules -----------------------------------------------------------------------------

  /** Fire every window with w_prev < m <= W, purge every window with m + L <= W. */
  private void sweep(KeyState st, long watermark, Row key, List<Row> out) {
    long wPrev = st.w;
    if (watermark <= wPrev) return;
    long lateness = spec.latenessMs;
    for (long ws : windowStarts(st)) {
      long m = spec.maxTs(ws);
      if (spec.finalOnly) {
        if (wPrev < m + lateness && m + lateness <= watermark) {
          Acc[] acc = window(st.slices, ws);
          if (acc != null) out.add(pane(key, ws, Spec.FINAL, 0, true, acc, watermark));
        }
      } else if (wPrev < m && m <= watermark) {
        Acc[] acc = window(st.slices, ws);
        if (acc == null) continue;
        boolean fin = m + lateness <= watermark;
        out.add(pane(key, ws, Spec.ON_TIME, 0, fin, acc, watermark));
        if (!fin) st.panes.put(ws, 1L);
      }
    }
    st.panes.entrySet().removeIf(e -> spec.maxTs(e.getKey()) + lateness <= watermark);
    st.slices.entrySet().removeIf(e -> spec.maxTs(spec.lastWindowOfSlice(e.getKey())) + lateness <= watermark);
    st.w = watermark;
  }

  private void armTimer(KeyState st) {
    long next = Long.MAX_VALUE;
    for (long ws : windowStarts(st)) {
      long m = spec.maxTs(ws);
      if (!spec.finalOnly && m > st.w) next = Math.min(next, m);
      if (m + spec.latenessMs > st.w) next = Math.min(next, m + spec.latenessMs);
    }
    boolean pending = st.timer != Long.MIN_VALUE && st.timer > st.w;
    if (next == Long.MAX_VALUE) {
      if (pending) getHandle().deleteTimer(st.timer);
      st.timer = Long.MIN_VALUE;
    } else if (!pending || st.timer != next) {
      if (pending) getHandle().deleteTimer(st.timer);
      getHandle().registerTimer(next);
      st.timer = next;
    }
  }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(Row key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    // A batch (static) query reports -1: no watermark yet, like a stream's initial 0.
    long watermark = spec.bounded ? 0 : Math.max(0, timerValues.getCurrentWatermarkInMs());
    List<Row> out = new ArrayList<>();
    Iterator<Row> it = CollectionConverters.asJava(rows);
    if (key.getInt(0) == Layout.PASS) {
      while (it.hasNext()) {
        Row r = it.next();
        out.add(r.getInt(lay.cls) == Layout.STATS ? statsRow(r, watermark) : invalidRecord(r, watermark));
      }
      return CollectionConverters.asScala(out.iterator());
    }
    KeyState st = load();
    if (st == null) {
      st = new KeyState();
      st.w = watermark;
    } else if (watermark > st.w) {
      sweep(st, watermark, key, out); // catch-up (normally a no-op)
    }
    TreeMap<Long, Acc[]> deltas = spec.finalOnly ? null : new TreeMap<>();
    while (it.hasNext()) {
      Row r = it.next();
      int cls = r.getInt(lay.cls);
      Acc[] add;
      long slice;
      if (cls == Layout.DATA) {
        long ts = r.getLong(lay.ms);
        if (!spec.isLive(ts, watermark)) {
          out.add(lateRecord(key, r, ts, watermark));
          continue;
        }
        slice = spec.sliceOf(ts);
        add = newAccs();
        Row rec = r.getStruct(lay.rec);
        for (int i = 0; i < lay.na; i++) add[i].add(spec, i, spec.aggFields[i] < 0 ? null : rec.get(spec.aggFields[i]), ts);
      } else if (cls == Layout.PARTIAL) {
        slice = r.getLong(lay.ms);
        if (spec.maxTs(spec.lastWindowOfSlice(slice)) + spec.latenessMs <= watermark) {
          throw new IllegalStateException(
              "eventtime: a map-side partial for slice " + slice + " is behind the operator's watermark " + watermark
                  + " (the batch watermark published to the tasks was wrong)");
        }
        add = Mapper.readPartial(lay, r);
      } else {
        continue;
      }
      Acc[] held = st.slices.get(slice);
      if (held == null) {
        held = newAccs();
        st.slices.put(slice, held);
      }
      mergeInto(held, add);
      if (deltas != null) {
        Acc[] d = deltas.get(slice);
        if (d == null) deltas.put(slice, add);
        else mergeInto(d, add);
      }
    }
    if (deltas != null && !deltas.isEmpty()) {
      // LATE panes: every live, already-due window of this key that received records now.
      TreeSet<Long> due = new TreeSet<>();
      for (long s : deltas.keySet()) {
        for (long ws : spec.windowsOfSlice(s)) {
          long m = spec.maxTs(ws);
          if (m <= watermark && watermark < m + spec.latenessMs) due.add(ws);
        }
      }
      for (long ws : due) {
        Acc[] acc = window(spec.discarding ? deltas : st.slices, ws);
        long index = st.panes.getOrDefault(ws, 0L);
        out.add(pane(key, ws, Spec.LATE, index, false, acc, watermark));
        st.panes.put(ws, index + 1);
      }
    }
    if (spec.bounded) {
      sweep(st, Spec.END_OF_INPUT_MS, key, out); // a static DataFrame ends with its input
    } else {
      armTimer(st);
    }
    save(st);
    return CollectionConverters.asScala(out.iterator());
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(Row key, TimerValues timerValues, ExpiredTimerInfo info) {
    List<Row> out = new ArrayList<>();
    KeyState st = load();
    if (st == null) return CollectionConverters.asScala(out.iterator());
    long watermark = timerValues.getCurrentWatermarkInMs();
    if (st.timer <= watermark) st.timer = Long.MIN_VALUE; // it fired
    sweep(st, watermark, key, out);
    armTimer(st);
    save(st);
    return CollectionConverters.asScala(out.iterator());
  }
}
