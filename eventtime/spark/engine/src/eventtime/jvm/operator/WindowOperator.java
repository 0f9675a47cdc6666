package eventtime.jvm.operator;

import eventtime.jvm.mapside.Mapper;
import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.PublishedWatermark;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.spark.InterpretedState;
import eventtime.jvm.spark.ResolvedOnce;
import eventtime.jvm.state.Acc;
import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TTLConfig;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.streaming.ValueState;
import scala.Tuple2;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The stateful operator: docs/semantics.md applied per user key.
 *
 * <p>The grouping key is a hash bucket of the user key; the state is one entry per user key in
 * the bucket's map state (Spark's RocksDB store): the key's live slices (accumulators) and pane
 * indexes ({@link Slices}; its sessions, {@link Sessions}, for session windows), written only
 * when the key receives records or a window of it fires or expires. The bucket's own small value
 * ({@link Bucket}) holds the last swept watermark, the live window starts of all its keys and its
 * one event-time timer, at the earliest pending event (an ON_TIME firing m or a cleanup time
 * m + L). So a batch costs one state read and write per key it touches; per-key timers
 * (measured: ~60 % of the operator's time when every key moves its timer every batch) are not
 * needed. The rows it outputs are made by {@link OutputRows}.
 *
 * <p>The watermark W of a data batch is {@code getCurrentWatermarkInMs()} (computed from the
 * previous batches); a record is late when its last window has expired under W. A bucket first
 * sweeps every key to W when W moved (catch-up: with data in every batch Spark runs no no-data
 * batch, and the timer would fire only after the rows), then adds the rows; the timer sweeps
 * buckets that received no rows.
 */
public final class WindowOperator extends StatefulProcessor<Row, Row, Row> {
  private static final long serialVersionUID = 1L;
  final Spec spec;
  private transient Layout lay;
  private transient OutputRows rowsOut;
  private transient InterpretedState state; // makes and calls the state variables, touches the timers
  private transient ValueState<byte[]> meta;
  private transient MapState<Row, byte[]> keys;
  /** User keys whose state this operator read (a key per read; the scaling tests count them). */
  private long keysRead;
  /** Session windows only: the chunks of the bucket's {@link DueIndex}. */
  private transient MapState<Row, byte[]> dueChunks;
  /** Fixed windows with SQL aggregations only: each slice's SQL buffers ({@link Slices.Buffers}). */
  private transient MapState<Row, byte[]> sliceBuffers;

  public WindowOperator(Spec spec) {
    this.spec = spec;
  }

  long keysRead() {
    return keysRead;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    lay = new Layout(spec);
    rowsOut = new OutputRows(spec, lay);
    state = new InterpretedState();
    state.run(() -> {
      meta = state.value(getHandle().getValueState("meta", ResolvedOnce.binary(), TTLConfig.NONE()));
      keys = state.map(getHandle().getMapState("keys", ResolvedOnce.row(Layout.userKeySchema(spec)), ResolvedOnce.binary(), TTLConfig.NONE()));
      if (spec.session) {
        dueChunks = state.map(getHandle().getMapState("due", ResolvedOnce.row(DueIndex.CHUNK_KEY), ResolvedOnce.binary(), TTLConfig.NONE()));
      } else if (spec.hasSql) {
        sliceBuffers = state.map(getHandle().getMapState("buffers", ResolvedOnce.row(Layout.bufferKeySchema(spec)), ResolvedOnce.binary(), TTLConfig.NONE()));
      }
    });
  }

  /** The buffer entries of a user key's slices (null without SQL aggregations). */
  private Slices.Buffers buffersOf(Row key) {
    return sliceBuffers == null ? null : new SliceBuffers(sliceBuffers, key);
  }

  // --- state ---------------------------------------------------------------------------------

  private Bucket loadMeta() {
    byte[] bytes = meta.get();
    return bytes == null ? null : Bucket.decode(bytes, newDueIndex());
  }

  private Bucket newMeta() {
    return new Bucket(newDueIndex());
  }

  private DueIndex newDueIndex() {
    return spec.session ? new DueIndex(dueChunks, spec.trigger.dueSlotMs()) : null;
  }

  private void saveMeta(Bucket m) {
    if (m.due != null) m.due.flush();
    if (m.isEmpty()) meta.clear();
    else meta.update(m.encode());
  }

  private void store(Row key, Slices st) {
    st.writeBuffers();
    if (st.isEmpty()) keys.removeKey(key);
    else keys.updateValue(key, st.encode());
  }

  /** The panes of a key's fixed windows, as output rows carrying W. */
  private Slices.Emit panes(Row key, long watermark, List<Row> out) {
    return (ws, timing, index, fin, acc) -> out.add(rowsOut.pane(key, ws, spec.sliced.windowEnd(ws), timing, index, fin, acc, watermark, null));
  }

  // --- the bucket: catch-up sweep and timer --------------------------------------------------

  /**
   * Sweeps every key of the bucket to W when a window of it became due or expired, except the
   * keys in {@code skip} (they have rows in this batch and are swept as they are read; the state
   * read here for them is kept for that, {@link #prefetched}).
   */
  private void sweepBucket(Bucket m, long watermark, List<Row> out, Map<Object, List<Row>> skip) {
    if (watermark <= m.w) return;
    if (spec.session) {
      // only the keys listed as due by W (the keys in skip are swept as their rows are read)
      for (DueIndex.Entry e : m.due.takeDue(watermark)) {
        if (!skip.isEmpty() && skip.containsKey(groupKey(e.key, 0, lay.nk))) continue;
        byte[] bytes = keys.getValue(e.key);
        keysRead++;
        if (bytes == null) continue;
        Sessions st = Sessions.decode(spec, lay.na, bytes);
        if (st.indexedEvent != e.event) continue; // listed again since, under another event
        st.sweep(m.w, watermark, emitter(e.key, watermark, out));
        storeSessions(m, e.key, st);
      }
      m.w = watermark;
      return;
    }
    if (m.nextEvent(spec) <= watermark) {
      List<Tuple2<Row, byte[]>> entries = new ArrayList<>();
      for (Iterator<Tuple2<Row, byte[]>> it = CollectionConverters.asJava(keys.iterator()); it.hasNext(); ) entries.add(it.next());
      keysRead += entries.size();
      for (Tuple2<Row, byte[]> e : entries) {
        if (!skip.isEmpty()) {
          Object id = groupKey(e._1(), 0, lay.nk);
          if (skip.containsKey(id)) {
            prefetched.put(id, e._2());  // read here once: the key loop uses these bytes
            continue;
          }
        }
        Slices st = Slices.decode(spec, lay.na, e._2(), buffersOf(e._1()));
        if (st.sweep(m.w, watermark, panes(e._1(), watermark, out))) store(e._1(), st);
      }
      m.windows.removeIf(ws -> spec.trigger.isExpired(spec.sliced.windowEnd(ws), watermark));
    }
    m.w = watermark;
  }

  private void armTimer(Bucket m) {
    long next = m.nextEvent(spec);
    boolean pending = m.timer != Long.MIN_VALUE && m.timer > m.w;
    if (next == Long.MAX_VALUE) {
      if (pending) deleteTimer(m.timer);
      m.timer = Long.MIN_VALUE;
    } else if (!pending || m.timer != next) {
      if (pending) deleteTimer(m.timer);
      registerTimer(next);
      m.timer = next;
    }
  }

  private void registerTimer(long ms) {
    state.run(() -> getHandle().registerTimer(ms));
  }

  private void deleteTimer(long ms) {
    state.run(() -> getHandle().deleteTimer(ms));
  }

  private static Object groupKey(Row r, int from, int n) { // one key column: its value itself (a string caches its hash)
    if (n == 1) return keyValue(r.get(from));
    List<Object> k = new ArrayList<>(n);
    for (int i = 0; i < n; i++) k.add(keyValue(r.get(from + i)));
    return k;
  }

  private static Object keyValue(Object v) { return v instanceof byte[] ? ByteBuffer.wrap((byte[]) v) : v; }

  @Override
  public scala.collection.Iterator<Row> handleInputRows(Row group, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    // A static DataFrame has no watermark: 0, like a stream's initial one.
    long watermark = spec.bounded ? 0 : spec.publishedWatermark ? publishedWatermark()
        : Math.max(0, timerValues.getCurrentWatermarkInMs());
    if (Layout.isPass(spec, group.getInt(0))) {
      // Streamed, a row at a time: a flood of invalid records must not be held in the task.
      // WATERMARK rows (a task's largest event time, for Spark's watermark node) end here.
      return rows
          .filter(r -> r.getInt(lay.cls) != Layout.WATERMARK)
          .map(r -> r.getInt(lay.cls) == Layout.STATS ? rowsOut.statsRow(r, watermark) : rowsOut.invalidRecord(r, watermark));
    }
    List<Row> out = new ArrayList<>();
    Iterator<Row> it = CollectionConverters.asJava(rows);
    // The bucket's rows, per user key (in order of arrival).
    Map<Object, List<Row>> byKey = new LinkedHashMap<>();
    boolean end = false;
    while (it.hasNext()) {
      Row r = it.next();
      int cls = r.getInt(lay.cls);
      if (cls == Layout.TICK || cls == Layout.END) {  // per-partition watermarks: sweep this bucket
        end |= cls == Layout.END;
        continue;
      }
      byKey.computeIfAbsent(groupKey(r, Layout.K0, lay.nk), k -> new ArrayList<>()).add(r);
    }
    Bucket m = loadMeta();
    if (m == null && byKey.isEmpty()) return CollectionConverters.asScala(out.iterator());
    long wPrev;
    if (m == null) {
      m = newMeta();
      m.w = wPrev = watermark;
    } else {
      // Catch-up: with data in every batch Spark runs no no-data batch, and the timer due at W
      // would fire only after these rows. The keys with rows are swept as they are read.
      wPrev = m.w;
      sweepBucket(m, watermark, out, byKey);
      if (m.timer != Long.MIN_VALUE && m.timer <= watermark) {
        deleteTimer(m.timer); // it would fire after these rows with nothing left to do
        m.timer = Long.MIN_VALUE;
      }
    }
    for (Map.Entry<Object, List<Row>> e : byKey.entrySet()) {
      List<Row> keyRows = e.getValue();
      Row first = keyRows.get(0);
      Object[] kv = new Object[lay.nk];
      for (int i = 0; i < lay.nk; i++) kv[i] = first.get(Layout.K0 + i);
      if (spec.session) processSessionKey(m, RowFactory.create(kv), keyRows, wPrev, watermark, out);
      else processKey(m, RowFactory.create(kv), e.getKey(), keyRows, wPrev, watermark, out);
    }
    prefetched.clear();
    if (spec.bounded || end) {
      // a static DataFrame ends with its input; so does a stream whose end of input reached this bucket
      sweepBucket(m, Contract.END_OF_INPUT_MS, out, java.util.Collections.emptyMap());
    } else if (!spec.publishedWatermark) {
      armTimer(m);
    }
    saveMeta(m);
    return CollectionConverters.asScala(out.iterator());
  }

  /** The watermark the driver published for this batch (per-partition watermarks). */
  private long publishedWatermark() {
    Long w = PublishedWatermark.of(spec);
    if (w == null) {
      throw new IllegalStateException(
          "eventtime: watermark='per_partition' but the driver published no watermark for this batch; "
              + "start the query with eventtime.route(...).start(checkpoint=<a local path>)");
    }
    return Math.max(0, w);
  }

  private void processKey(Bucket m, Row key, Object id, List<Row> rows, long wPrev, long watermark, List<Row> out) {
    Slices st = null;
    for (Row r : rows) {
      int cls = r.getInt(lay.cls);
      long slice;
      boolean created;
      if (cls == Layout.DATA) {
        long ts = r.getLong(lay.ms);
        if (!spec.trigger.isLive(ts, watermark)) {
          out.add(rowsOut.lateRecord(r, ts, watermark));
          continue;
        }
        if (spec.trigger.isPartlyLate(ts, watermark)) {
          out.add(rowsOut.lateRecord(r, ts, watermark, Contract.PARTLY_LATE, spec.sliced.firstWindowOf(ts),
              spec.trigger.lastExpiredWindowEnd(ts, watermark)));
        }
        slice = spec.sliced.sliceOf(ts);
        if (st == null) st = load(key, id, wPrev, watermark, out);
        created = st.addRecord(slice, r.getStruct(lay.rec), ts);
      } else if (cls == Layout.PARTIAL) {
        slice = r.getLong(lay.ms);
        if (Slices.isExpired(spec, slice, watermark)) {
          throw new IllegalStateException(
              "eventtime: a map-side partial for slice " + slice + " is behind the operator's watermark " + watermark
                  + " (the batch watermark published to the tasks was wrong)");
        }
        Acc[] partial = Mapper.readPartial(lay, spec, r);
        if (st == null) st = load(key, id, wPrev, watermark, out);
        created = st.add(slice, partial);
      } else {
        continue;
      }
      if (created) m.windows.addAll(spec.sliced.windowsOfSlice(slice));
    }
    if (st == null) {
      // only late records: the key still needs its catch-up sweep
      st = load(key, id, wPrev, watermark, out);
      if (!sweptChanged) return;
    }
    st.latePanes(watermark, panes(key, watermark, out));
    if (spec.bounded) {
      // a static DataFrame ends with its input
      st.sweep(watermark, Contract.END_OF_INPUT_MS, panes(key, Contract.END_OF_INPUT_MS, out));
    }
    store(key, st);
  }

  private boolean sweptChanged;

  /**
   * The state of the keys with rows in this call, as the bucket's sweep read it (when it swept):
   * nothing writes a key with rows between the sweep and its turn in the key loop, which then
   * reads none of them from the store again.
   */
  private final Map<Object, byte[]> prefetched = new java.util.HashMap<>();

  // --- session windows (Sessions.java) ---------------------------------------------------------

  private Sessions.Emit emitter(Row key, long watermark, List<Row> out) {
    return new Sessions.Emit() {
      @Override
      public void pane(Sessions.Sess s, String timing, long index, boolean fin, Acc[] values, List<long[]> mergedFrom) {
        out.add(rowsOut.pane(key, s.start, s.end, timing, index, fin, values, watermark, mergedFrom));
      }

      @Override
      public void late(Row r, long ts, long ws, long we) {
        out.add(rowsOut.lateRecord(r, ts, watermark, Contract.TOO_LATE, ws, we));
      }
    };
  }

  /** Stores a key's sessions, listing the key in the due index under its next event. */
  private void storeSessions(Bucket m, Row key, Sessions st) {
    if (st.isEmpty()) {
      keys.removeKey(key); // its index entry, if any, is dropped when read
      return;
    }
    long next = st.nextEvent();
    if (next != st.indexedEvent) {
      st.indexedEvent = next;
      m.due.add(next, key);
    }
    keys.updateValue(key, st.encode());
  }

  /** One key of a session window: catch-up sweep to W, then the batch's rows merged in. */
  private void processSessionKey(Bucket m, Row key, List<Row> rows, long wPrev, long watermark, List<Row> out) {
    byte[] bytes = keys.getValue(key);
    keysRead++;
    Sessions st = bytes == null ? new Sessions(spec, lay.na) : Sessions.decode(spec, lay.na, bytes);
    st.sweep(wPrev, watermark, emitter(key, watermark, out));
    List<Row> data = new ArrayList<>(rows.size());
    for (Row r : rows) if (r.getInt(lay.cls) == Layout.DATA || r.getInt(lay.cls) == Layout.PARTIAL) data.add(r);
    st.add(data, lay, watermark, emitter(key, watermark, out));
    if (spec.bounded) st.sweep(watermark, Contract.END_OF_INPUT_MS, emitter(key, Contract.END_OF_INPUT_MS, out));
    storeSessions(m, key, st);
  }

  /** The key's state (new when none), swept from wPrev to W (the bucket's catch-up for this key). */
  private Slices load(Row key, Object id, long wPrev, long watermark, List<Row> out) {
    byte[] bytes = prefetched.remove(id);
    if (bytes == null) {
      bytes = keys.getValue(key);
      keysRead++;
    }
    if (bytes == null) {
      sweptChanged = false;
      return new Slices(spec, lay.na, buffersOf(key));
    }
    Slices st = Slices.decode(spec, lay.na, bytes, buffersOf(key));
    sweptChanged = st.sweep(wPrev, watermark, panes(key, watermark, out));
    return st;
  }

  @Override
  public scala.collection.Iterator<Row> handleExpiredTimer(Row group, TimerValues timerValues, ExpiredTimerInfo info) {
    List<Row> out = new ArrayList<>();
    Bucket m = loadMeta();
    long watermark = timerValues.getCurrentWatermarkInMs();
    if (m == null || watermark <= m.w) return CollectionConverters.asScala(out.iterator());
    if (m.timer <= watermark) m.timer = Long.MIN_VALUE; // it fired
    sweepBucket(m, watermark, out, java.util.Collections.emptyMap());
    armTimer(m);
    saveMeta(m);
    return CollectionConverters.asScala(out.iterator());
  }
}
