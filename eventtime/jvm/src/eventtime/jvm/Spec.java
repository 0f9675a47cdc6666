package eventtime.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Everything the JVM engine needs, parsed from the JSON the Python adapter writes
 * (eventtime/spark/aggregate.py). Window arithmetic follows eventtime/core/window.py exactly:
 * windows start at offset + k * slide and are half-open [start, start + size).
 */
public final class Spec implements Serializable {
  private static final long serialVersionUID = 1L;

  public static final long END_OF_INPUT_MS = 253_402_300_799_999L;
  public static final String ON_TIME = "ON_TIME";
  public static final String LATE = "LATE";
  public static final String FINAL = "FINAL";

  public final long sizeMs, slideMs, offsetMs, latenessMs, sliceMs;
  public final boolean finalOnly, discarding, bounded;
  /** Positions, in the record struct, of the key columns and of each aggregation's input (-1: none). */
  public final int[] keyFields;
  public final String[] aggKinds, aggNames;
  /** Aggregation kinds as codes (switches on them are cheap in the per-row path). */
  public final int[] kinds;

  public static final int COUNT = 0, SUM = 1, MEAN = 2, MIN = 3, MAX = 4, FIRST = 5, LAST = 6;
  private static final java.util.List<String> KIND_NAMES = java.util.Arrays.asList("count", "sum", "mean", "min", "max", "first", "last");
  public final int[] aggFields;
  /** Aggregations whose input is an integral column (exact 128-bit sums) or a decimal one. */
  public final boolean[] aggIntegral, aggDecimal;
  public final int[] aggDecimalScale;
  /** The user's columns as one struct (the late / invalid record's payload). */
  public final StructType recordType;
  /** The operator output: kind, keys, window fields, aggregations, record fields, et__rec. */
  public final StructType outputType;
  /** Local property carrying "queryId:batchId:watermark" for the map-side combine. */
  public final String watermarkProperty;
  /** Number of hash buckets of the key (the operator's grouping key; fixed per checkpoint). */
  public final int buckets;

  public Spec(String json) {
    try {
      JsonNode n = new ObjectMapper().readTree(json);
      sizeMs = n.get("size_ms").asLong();
      slideMs = n.get("slide_ms").asLong();
      offsetMs = n.get("offset_ms").asLong();
      latenessMs = n.get("allowed_lateness_ms").asLong();
      sliceMs = gcd(sizeMs, slideMs);
      finalOnly = "final_only".equals(n.get("emit").asText());
      discarding = "discarding".equals(n.get("accumulation").asText());
      bounded = n.get("bounded").asBoolean();
      watermarkProperty = n.get("watermark_property").asText();
      buckets = n.get("buckets").asInt();
      recordType = (StructType) DataType.fromJson(n.get("record_type").asText());
      outputType = (StructType) DataType.fromJson(n.get("output_type").asText());
      JsonNode keys = n.get("key_fields");
      keyFields = new int[keys.size()];
      for (int i = 0; i < keyFields.length; i++) keyFields[i] = keys.get(i).asInt();
      JsonNode aggs = n.get("aggregations");
      int a = aggs.size();
      aggKinds = new String[a];
      kinds = new int[a];
      aggNames = new String[a];
      aggFields = new int[a];
      aggIntegral = new boolean[a];
      aggDecimal = new boolean[a];
      aggDecimalScale = new int[a];
      for (int i = 0; i < a; i++) {
        JsonNode g = aggs.get(i);
        aggKinds[i] = g.get("kind").asText();
        kinds[i] = KIND_NAMES.indexOf(aggKinds[i]);
        if (kinds[i] < 0) throw new IllegalArgumentException("eventtime: unknown aggregation kind " + aggKinds[i]);
        aggNames[i] = g.get("name").asText();
        aggFields[i] = g.get("field").asInt();
        aggIntegral[i] = g.get("integral").asBoolean();
        aggDecimal[i] = g.get("decimal").asBoolean();
        aggDecimalScale[i] = g.get("scale").asInt();
      }
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("eventtime: cannot read the engine spec: " + e.getMessage(), e);
    }
  }

  /** The bucket of a user key: a hash that is the same in every JVM (no identity hashes). */
  public int bucketOf(Object[] keys) {
    long h = 0x9E3779B97F4A7C15L;
    for (Object k : keys) {
      int e;
      if (k == null) e = 0;
      else if (k instanceof byte[]) e = java.util.Arrays.hashCode((byte[]) k);
      else if (k instanceof java.math.BigDecimal) e = ((java.math.BigDecimal) k).stripTrailingZeros().hashCode();
      else e = k.hashCode();
      h = (h ^ e) * 0xFF51AFD7ED558CCDL;
      h ^= h >>> 33;
    }
    return (int) Math.floorMod(h, (long) buckets);
  }

  static long gcd(long a, long b) {
    while (b != 0) {
      long t = a % b;
      a = b;
      b = t;
    }
    return a;
  }

  public long lastStart(long ts, long step) {
    return ts - Math.floorMod(ts - offsetMs, step);
  }

  public long sliceOf(long ts) {
    return lastStart(ts, sliceMs);
  }

  /** Largest event time of the window starting at ws. */
  public long maxTs(long ws) {
    return ws + sizeMs - 1;
  }

  /** Starts of the windows containing the whole slice, ascending. */
  public List<Long> windowsOfSlice(long sliceStart) {
    List<Long> starts = new ArrayList<>(4);
    long first = lastStart(sliceStart, slideMs);
    while (first - slideMs + sizeMs > sliceStart) first -= slideMs;
    for (long s = first; s <= sliceStart; s += slideMs) {
      if (s + sizeMs > sliceStart) starts.add(s);
    }
    return starts;
  }

  /** Start of the last window of a slice (the one that expires last). */
  public long lastWindowOfSlice(long sliceStart) {
    return lastStart(sliceStart, slideMs);
  }

  /** A record is live (not too late) while its last window has not expired: last_ws + size - 1 + L > W. */
  public boolean isLive(long ts, long watermark) {
    return lastStart(ts, slideMs) + sizeMs - 1 + latenessMs > watermark;
  }

  /** Start of the first window containing ts. */
  public long firstWindowOf(long ts) {
    long last = lastStart(ts, slideMs);
    long first = last - ((sizeMs - 1) / slideMs) * slideMs;
    return first + sizeMs > ts ? first : first + slideMs;
  }
}
