package eventtime.jvm.operator;

import eventtime.jvm.state.Bytes;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * For session windows, which keys of a bucket are due when: every key with sessions is listed
 * once under its next event (the earliest ON_TIME m or expiry m + L of its sessions), in time
 * slots of {@code slotMs}. Each slot's keys are stored as chunks in the bucket's map state, one
 * chunk per slot per batch that added keys to it, so a batch writes only what it touched and a
 * sweep reads only the slots whose earliest event has come: no scan of the bucket's keys. The
 * bucket's meta value keeps, per pending slot, its earliest event and its number of chunks (the
 * bucket's timer is the earliest of all). A key whose next event changed is listed again; its
 * old entry is stale, recognised by the event the key's state records, and dropped when read.
 */
final class DueIndex {
  static final StructType CHUNK_KEY = DataTypes.createStructType(new org.apache.spark.sql.types.StructField[] {
    DataTypes.createStructField("slot", DataTypes.LongType, false),
    DataTypes.createStructField("chunk", DataTypes.IntegerType, false)});

  /** A listed key and the event it is listed under. */
  static final class Entry {
    final long event;
    final Row key;

    Entry(long event, Row key) {
      this.event = event;
      this.key = key;
    }
  }

  private final MapState<Row, byte[]> chunks;
  private final long slotMs;
  /** slot -> {earliest event, number of chunks}. */
  final TreeMap<Long, long[]> slots = new TreeMap<>();
  private final Map<Long, List<Entry>> added = new HashMap<>();

  DueIndex(MapState<Row, byte[]> chunks, long slotMs) {
    this.chunks = chunks;
    this.slotMs = slotMs;
  }

  void read(Bytes.In in) {
    int n = (int) in.readVarLong();
    long slot = 0;
    for (int i = 0; i < n; i++) {
      slot += in.readVarLong();
      slots.put(slot, new long[] {slot * slotMs + in.readVarLong(), in.readVarLong()});
    }
  }

  void write(Bytes.Out out) {
    out.writeVarLong(slots.size());
    long previous = 0;
    for (Map.Entry<Long, long[]> e : slots.entrySet()) {
      out.writeVarLong(e.getKey() - previous);
      previous = e.getKey();
      out.writeVarLong(e.getValue()[0] - e.getKey() * slotMs);
      out.writeVarLong(e.getValue()[1]);
    }
  }

  boolean isEmpty() {
    return slots.isEmpty() && added.isEmpty();
  }

  /** The earliest pending event, or Long.MAX_VALUE. */
  long next() {
    long next = Long.MAX_VALUE;
    for (long[] s : slots.values()) next = Math.min(next, s[0]);
    for (List<Entry> l : added.values()) for (Entry e : l) next = Math.min(next, e.event);
    return next;
  }

  void add(long event, Row key) {
    added.computeIfAbsent(Math.floorDiv(event, slotMs), s -> new ArrayList<>()).add(new Entry(event, key));
  }

  /** Removes and returns the entries with event <= W (entries of those slots still pending stay). */
  List<Entry> takeDue(long watermark) {
    List<Entry> due = new ArrayList<>();
    List<Long> ready = new ArrayList<>();
    for (Map.Entry<Long, long[]> e : slots.entrySet()) if (e.getValue()[0] <= watermark) ready.add(e.getKey());
    for (long slot : ready) {
      long[] info = slots.remove(slot);
      for (int c = 0; c < info[1]; c++) {
        Row id = RowFactory.create(slot, c);
        byte[] bytes = chunks.getValue(id);
        chunks.removeKey(id);
        if (bytes == null) continue;
        for (Entry e : decode(bytes)) {
          if (e.event <= watermark) due.add(e);
          else add(e.event, e.key);
        }
      }
    }
    return due;
  }

  /** Writes the entries added since the last flush, one new chunk per slot. */
  void flush() {
    for (Map.Entry<Long, List<Entry>> e : added.entrySet()) {
      long slot = e.getKey();
      long[] info = slots.computeIfAbsent(slot, s -> new long[] {Long.MAX_VALUE, 0});
      for (Entry entry : e.getValue()) info[0] = Math.min(info[0], entry.event);
      chunks.updateValue(RowFactory.create(slot, (int) info[1]), encode(e.getValue()));
      info[1]++;
    }
    added.clear();
  }

  private static byte[] encode(List<Entry> entries) {
    Bytes.Out out = new Bytes.Out(16 * entries.size());
    out.writeVarLong(entries.size());
    for (Entry e : entries) {
      out.writeVarLong(e.event);
      out.writeShort(e.key.length());
      for (int i = 0; i < e.key.length(); i++) out.writeValue(e.key.get(i));
    }
    return out.toByteArray();
  }

  private static List<Entry> decode(byte[] bytes) {
    Bytes.In in = new Bytes.In(bytes);
    int n = (int) in.readVarLong();
    List<Entry> out = new ArrayList<>(n);
    for (int j = 0; j < n; j++) {
      long event = in.readVarLong();
      Object[] key = new Object[in.readShort()];
      for (int i = 0; i < key.length; i++) key[i] = in.readValue();
      out.add(new Entry(event, RowFactory.create(key)));
    }
    return out;
  }
}
