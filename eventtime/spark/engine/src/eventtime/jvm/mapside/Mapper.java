package eventtime.jvm.mapside;

import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import java.util.Iterator;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Map side of the engine, before the shuffle (one task = one input partition):
 *
 * <ul>
 *   <li>per-partition statistics (rows, max valid event time) for the alerts;
 *   <li>heartbeats and end-of-input control rows stop here (they only move the watermark);
 *   <li>invalid records pass through whole to the stateless group;
 *   <li>the map-side combine: when the batch's watermark W is known exactly (the local property
 *       the driver sets for this query and batch, see Router), data rows that are live under W
 *       are folded into one partial accumulator per (key, slice), or for session windows into
 *       the key's partial sessions ({@link SessionPartials}: rows whose own session has not
 *       expired). A row that is not foldable passes through whole, so the operator reports it as
 *       late with its payload (or, for sessions, merges it when it joins a live session). Without
 *       W every row passes through; the result is the same, only the shuffle is larger.
 * </ul>
 *
 * <p>With plain column types most of this happens before a row reaches the mapper: {@link Fold}
 * counts and folds heartbeats and live rows into the task's {@link MapTask} in the input's
 * generated code, and the mapper sees the rest (invalid, late, control rows), then writes the
 * task's partial, pass-through and statistics rows when its input ends.
 */
public final class Mapper implements MapPartitionsFunction<Row, Row> {
  private static final long serialVersionUID = 1L;
  private final Spec spec;
  /** Whether to write the task's largest event time as a row of its own ({@link MapSideWatermark}). */
  private final boolean watermarkRow;
  /**
   * Whether {@link Packed}'s writer takes the rows: a partial row's text key may then stay Spark's
   * UTF8String, as the combine holds it; Spark's {@code Row} encoder needs a Java string.
   */
  private final boolean packed;
  /** Whether the plan takes invalid records beside the operator ({@link InvalidRecords}). */
  private final boolean invalidBeside;

  public Mapper(Spec spec) {
    this(spec, false, false, false);
  }

  /** The engine's mapper, packed. {@code watermarkRow}: Spark's watermark node follows the map side and reads that row. */
  public Mapper(Spec spec, boolean watermarkRow, boolean invalidBeside) {
    this(spec, watermarkRow, true, invalidBeside);
  }

  private Mapper(Spec spec, boolean watermarkRow, boolean packed, boolean invalidBeside) {
    this.spec = spec;
    this.invalidBeside = invalidBeside;
    this.watermarkRow = watermarkRow;
    this.packed = packed;
  }

  @Override
  public Iterator<Row> call(Iterator<Row> input) {
    final Layout lay = new Layout(spec);
    final MapTask task = MapTask.open(spec);
    task.invalidBeside = invalidBeside;
    final int nk = lay.nk, na = lay.na;
    // the row's keys then aggregated values, as MapTask.fold reads them
    final Object[] scratch = new Object[nk + na];

    return new Iterator<Row>() {
      private Row pending;
      private Iterator<Row> tail;

      private Row process(Row r) {
        int cls = r.getInt(Layout.IN_CLS);
        if (cls == Layout.CONTROL || cls == Layout.TICK) {
          task.wake(cls, r.isNullAt(Layout.IN_MS) ? null : r.getLong(Layout.IN_MS));
          return null;
        }
        Long ms = r.isNullAt(Layout.IN_MS) ? null : r.getLong(Layout.IN_MS);
        task.count(r.get(Layout.IN_PART), cls, ms);
        if (cls == Layout.HEARTBEAT || task.bypasses(cls)) return null;
        Row rec = r.isNullAt(Layout.IN_REC) ? null : r.getStruct(Layout.IN_REC);
        if (cls == Layout.INVALID) return passRow(Layout.PASS, keysOf(r), Layout.INVALID, null, r, rec);
        // a data row without its record was judged live under this batch's watermark (Live)
        if (rec == null || task.foldable(ms)) {
          for (int i = 0; i < nk; i++) {
            Object k = r.get(Layout.IN_K0 + i);
            scratch[i] = task.textKeysAsBytes && k instanceof String ? UTF8String.fromString((String) k) : k;
          }
          for (int i = 0; i < na; i++) {
            int f = spec.aggFields[i];
            scratch[nk + i] = f == Spec.RECORD ? rec : f < 0 ? null : r.get(lay.inA0 + i);
          }
          task.fold(scratch, 0, ms);
          return null;
        }
        return passRow(Layout.KEYED, keysOf(r), Layout.DATA, ms, r, rec);
      }

      private Object[] keysOf(Row r) {
        Object[] keys = new Object[nk];
        for (int i = 0; i < nk; i++) keys[i] = r.get(Layout.IN_K0 + i);
        return keys;
      }

      private Row passRow(int group, Object[] keys, int cls, Long ms, Row r, Row rec) {
        Object[] o = new Object[lay.width];
        o[0] = group;
        o[1] = spec.bucketOf(keys);
        System.arraycopy(keys, 0, o, Layout.K0, nk);
        o[lay.cls] = cls;
        o[lay.ms] = ms;
        o[lay.part] = partitionText(r.get(Layout.IN_PART));
        o[lay.off] = r.get(Layout.IN_OFF);
        o[lay.reason] = r.get(Layout.IN_REASON);
        o[lay.raw] = r.get(Layout.IN_RAW);
        o[lay.rec] = rec;
        return RowFactory.create(o);
      }

      private Iterator<Row> finish() {
        task.close();
        java.util.List<Row> rows = new java.util.ArrayList<>(task.partials.size() + task.stats.size() + 1 + spec.buckets);
        for (Partials.Entry e : task.partials.drain()) {
          if (e.sessions == null) {
            rows.add(partialRow(e.keys, e.slice, null, e.accs));
            continue;
          }
          for (int i = 0; i < e.sessions.n; i++) {
            rows.add(partialRow(e.keys, e.sessions.starts[i], e.sessions.ends[i], e.sessions.accs[i]));
          }
        }
        for (int b = 0; task.wakeAll != 0 && b < spec.buckets; b++) {
          Object[] o = new Object[lay.width];
          o[0] = Layout.KEYED;
          o[1] = b;
          o[lay.cls] = task.wakeAll;
          rows.add(RowFactory.create(o));
        }
        long max = watermarkRow ? task.maxEventTime() : Long.MIN_VALUE;
        if (max != Long.MIN_VALUE) {
          Object[] o = new Object[lay.width];
          o[0] = Layout.PASS;
          o[1] = 0;
          o[lay.cls] = Layout.WATERMARK;
          o[lay.ms] = max;
          rows.add(RowFactory.create(o));
        }
        if (task.nullPartition[0] > 0) rows.add(statsRow(null, task.nullPartition));
        for (Map.Entry<Object, long[]> e : task.stats.entrySet()) rows.add(statsRow(partitionText(e.getKey()), e.getValue()));
        return rows.iterator();
      }

      /** A partial row: a slice's accumulators, or a partial session's [start, end) and accumulators. */
      private Row partialRow(Object[] keys, long sliceOrStart, Long sessionEnd, Acc[] accs) {
        Object[] o = new Object[lay.width];
        o[0] = Layout.KEYED;
        o[1] = spec.bucketOf(keys);
        System.arraycopy(keys, 0, o, Layout.K0, nk);
        for (int i = Layout.K0; !packed && i < Layout.K0 + nk; i++) {
          if (o[i] instanceof UTF8String) o[i] = o[i].toString();
        }
        o[lay.cls] = Layout.PARTIAL;
        o[lay.ms] = sliceOrStart;
        o[lay.tmax] = sessionEnd;
        o[lay.p0] = Acc.encode(spec, accs);
        return RowFactory.create(o);
      }

      private Row statsRow(String partition, long[] st) {
        Object[] o = new Object[lay.width];
        o[0] = Layout.PASS;
        o[1] = 0;
        o[lay.cls] = Layout.STATS;
        o[lay.part] = partition;
        o[lay.n] = st[0];
        o[lay.tmax] = st[1] == Long.MIN_VALUE ? null : st[1];
        if (st.length > 2) {  // {"bin": count, ...} in the pass-through row's binary column
          StringBuilder text = new StringBuilder("{");
          for (int b = 0; b < Spec.DELAY_BINS; b++) {
            if (st[2 + b] == 0) continue;
            if (text.length() > 1) text.append(',');
            text.append('"').append(b).append("\":").append(st[2 + b]);
          }
          if (text.length() > 1) o[lay.p0] = text.append('}').toString().getBytes(java.nio.charset.StandardCharsets.UTF_8);
        }
        return RowFactory.create(o);
      }

      @Override
      public boolean hasNext() {
        if (pending != null) return true;
        if (tail == null) {
          while (input.hasNext()) {
            Row o = process(input.next());
            if (o != null) {
              pending = o;
              return true;
            }
          }
          tail = finish();
        }
        return tail.hasNext();
      }

      @Override
      public Row next() {
        if (!hasNext()) throw new NoSuchElementException();
        if (pending != null) {
          Row r = pending;
          pending = null;
          return r;
        }
        return tail.next();
      }
    };
  }

  /** The partition column's text: Java's text of an integer (the same as Spark's), else the text as given. */
  static String partitionText(Object partition) {
    return partition == null ? null : partition.toString();
  }

  /** The accumulators of a partial row (class PARTIAL) of the operator input. */
  public static Acc[] readPartial(Layout lay, Spec spec, Row r) {
    return Acc.decode(spec, (byte[]) r.get(lay.p0));
  }
}
