package eventtime.jvm;

import java.nio.ByteBuffer;
import java.util.Arrays;
import java.util.HashMap;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.NoSuchElementException;
import org.apache.spark.TaskContext;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;

/**
 * Map side of the engine, before the shuffle (one task = one input partition):
 *
 * <ul>
 *   <li>per-partition statistics (rows, max valid event time) for the alerts;
 *   <li>heartbeats and end-of-input control rows stop here (they only move the watermark);
 *   <li>invalid records pass through whole to the stateless group;
 *   <li>the map-side combine: when the batch's watermark W is known exactly (the local property
 *       the driver sets for this query and batch, see Router), data rows that are live under W
 *       are folded into one partial accumulator per (key, slice). A row that is not live passes
 *       through whole, so the operator reports it as late with its payload. Without W every row
 *       passes through; the result is the same, only the shuffle is larger.
 * </ul>
 */
public final class Mapper implements MapPartitionsFunction<Row, Row> {
  private static final long serialVersionUID = 1L;
  private final Spec spec;
  private final Long knownWatermark;

  public Mapper(Spec spec) {
    this(spec, null);
  }

  /** A mapper told the batch's watermark directly (the in-process runner, {@link InProcess}). */
  Mapper(Spec spec, Long knownWatermark) {
    this.spec = spec;
    this.knownWatermark = knownWatermark;
  }

  /** The watermark of this batch when the driver published it for this query and batch, else null. */
  static Long batchWatermark(Spec spec) {
    if (spec.bounded) return 0L;
    TaskContext tc = TaskContext.get();
    if (tc == null) return null;
    String value = tc.getLocalProperty(spec.watermarkProperty);
    String query = tc.getLocalProperty("sql.streaming.queryId");
    String batch = tc.getLocalProperty("streaming.sql.batchId");
    if (value == null || query == null || batch == null) return null;
    String[] parts = value.split(":");
    if (parts.length < 3 || !parts[0].equals(query) || !parts[1].equals(batch)) return null;
    return Long.parseLong(parts[2]);
  }

  /** The largest valid event time of the earlier batches, when the driver published it (else null). */
  static Long batchRunningMax(Spec spec) {
    TaskContext tc = TaskContext.get();
    if (spec.bounded || tc == null) return null;
    String value = tc.getLocalProperty(spec.watermarkProperty);
    String query = tc.getLocalProperty("sql.streaming.queryId");
    String batch = tc.getLocalProperty("streaming.sql.batchId");
    if (value == null || query == null || batch == null) return null;
    String[] parts = value.split(":");
    if (parts.length != 4 || !parts[0].equals(query) || !parts[1].equals(batch) || parts[3].isEmpty()) return null;
    return Long.parseLong(parts[3]);
  }

  static final class GroupKey {
    final Object[] keys;
    final long slice;
    final int hash;

    GroupKey(Object[] keys, long slice) {
      this.keys = keys;
      this.slice = slice;
      // mixed (murmur3's finalizer), so that near-consecutive key hashes ("user0001", "user0002")
      // and slices one window apart spread over the whole table
      long h = Arrays.hashCode(keys) * 0x9E3779B97F4A7C15L + slice;
      h = (h ^ (h >>> 33)) * 0xFF51AFD7ED558CCDL;
      h = (h ^ (h >>> 33)) * 0xC4CEB9FE1A85EC53L;
      this.hash = (int) (h ^ (h >>> 33));
    }

    @Override
    public int hashCode() {
      return hash;
    }

    @Override
    public boolean equals(Object o) {
      if (!(o instanceof GroupKey)) return false;
      GroupKey g = (GroupKey) o;
      return slice == g.slice && Arrays.equals(keys, g.keys);
    }
  }

  @Override
  public Iterator<Row> call(Iterator<Row> input) {
    final Layout lay = new Layout(spec);
    final Long watermark = knownWatermark != null ? knownWatermark : batchWatermark(spec);
    // in-process runs (global watermark): the running maximum is W + B once W moved
    final Long runningMax = knownWatermark != null
        ? (!spec.publishedWatermark && knownWatermark > 0 ? knownWatermark + spec.maxOutOfOrdernessMs : null)
        : batchRunningMax(spec);
    final Map<String, long[]> stats = new LinkedHashMap<>();
    // per partition: rows, max valid event time, then (when there is a running maximum) the
    // delays of its valid records behind it, counted per Spec.delayBin
    final int width = runningMax == null ? 2 : 2 + Spec.DELAY_BINS;
    final long[] nullPartition = newStats(width);
    final Map<GroupKey, Object[]> partials = new HashMap<>();
    final int nk = lay.nk, na = lay.na;

    return new Iterator<Row>() {
      private Row pending;
      private Iterator<Row> tail;
      /** 0, or the class of the rows sent to every bucket at the end (TICK, or END which wins). */
      private int wakeAll;

      private Row process(Row r) {
        int cls = r.getInt(Layout.IN_CLS);
        if (cls == Layout.CONTROL || cls == Layout.TICK) {
          // per-partition watermarks: every bucket must sweep to the published W (or to the end)
          if (spec.publishedWatermark) wakeAll = cls == Layout.CONTROL ? Layout.END : Math.max(wakeAll, Layout.TICK);
          return null;
        }
        String partition = r.isNullAt(Layout.IN_PART) ? null : r.getString(Layout.IN_PART);
        long[] st = partition == null ? nullPartition : stats.computeIfAbsent(partition, p -> newStats(width));
        st[0]++;
        long ms = r.isNullAt(Layout.IN_MS) ? 0 : r.getLong(Layout.IN_MS);
        if (cls != Layout.INVALID && ms > st[1]) st[1] = ms;
        if (cls == Layout.HEARTBEAT) return null;
        if (cls == Layout.DATA && runningMax != null) {
          st[2 + Spec.delayBin(runningMax - ms)]++;
        }
        Row rec = r.isNullAt(Layout.IN_REC) ? null : r.getStruct(Layout.IN_REC);
        Object[] keys = new Object[nk];
        for (int i = 0; i < nk; i++) keys[i] = r.get(Layout.IN_K0 + i);
        if (cls == Layout.INVALID) return passRow(Layout.PASS, keys, Layout.INVALID, null, r, rec);
        // a data row without its record was judged live under this batch's watermark (Live)
        if (rec == null || (watermark != null && spec.foldable(ms, watermark))) {
          Object[] hashable = new Object[nk];
          for (int i = 0; i < nk; i++) hashable[i] = keys[i] instanceof byte[] ? ByteBuffer.wrap((byte[]) keys[i]) : keys[i];
          long slice = spec.sliceOf(ms);
          GroupKey group = new GroupKey(hashable, slice);
          Object[] entry = partials.get(group);
          if (entry == null) {
            Acc[] accs = new Acc[na];
            for (int i = 0; i < na; i++) accs[i] = new Acc();
            entry = new Object[] {keys, accs};
            partials.put(group, entry);
          }
          Acc[] accs = (Acc[]) entry[1];
          for (int i = 0; i < na; i++) {
            accs[i].add(spec, i, spec.aggFields[i] < 0 ? null : r.get(lay.inA0 + i), ms);
          }
          return null;
        }
        return passRow(Layout.KEYED, keys, Layout.DATA, ms, r, rec);
      }

      private Row passRow(int group, Object[] keys, int cls, Long ms, Row r, Row rec) {
        Object[] o = new Object[lay.width];
        o[0] = group;
        o[1] = spec.bucketOf(keys);
        System.arraycopy(keys, 0, o, Layout.K0, nk);
        o[lay.cls] = cls;
        o[lay.ms] = ms;
        o[lay.part] = r.get(Layout.IN_PART);
        o[lay.off] = r.get(Layout.IN_OFF);
        o[lay.reason] = r.get(Layout.IN_REASON);
        o[lay.raw] = r.get(Layout.IN_RAW);
        o[lay.rec] = rec;
        return RowFactory.create(o);
      }

      private Iterator<Row> finish() {
        java.util.List<Row> rows = new java.util.ArrayList<>(partials.size() + stats.size() + 1);
        for (Map.Entry<GroupKey, Object[]> e : partials.entrySet()) {
          Object[] o = new Object[lay.width];
          Object[] keys = (Object[]) e.getValue()[0];
          o[0] = Layout.KEYED;
          o[1] = spec.bucketOf(keys);
          System.arraycopy(keys, 0, o, Layout.K0, nk);
          o[lay.cls] = Layout.PARTIAL;
          o[lay.ms] = e.getKey().slice;
          o[lay.p0] = Acc.encode(spec, (Acc[]) e.getValue()[1]);
          rows.add(RowFactory.create(o));
        }
        for (int b = 0; wakeAll != 0 && b < spec.buckets; b++) {
          Object[] o = new Object[lay.width];
          o[0] = Layout.KEYED;
          o[1] = b;
          o[lay.cls] = wakeAll;
          rows.add(RowFactory.create(o));
        }
        if (nullPartition[0] > 0) rows.add(statsRow(null, nullPartition));
        for (Map.Entry<String, long[]> e : stats.entrySet()) rows.add(statsRow(e.getKey(), e.getValue()));
        partials.clear();
        return rows.iterator();
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

  private static long[] newStats(int width) {
    long[] st = new long[width];
    st[1] = Long.MIN_VALUE;
    return st;
  }

  /** The accumulators of a partial row (class PARTIAL) of the operator input. */
  static Acc[] readPartial(Layout lay, Spec spec, Row r) {
    return Acc.decode(spec, (byte[]) r.get(lay.p0));
  }
}
