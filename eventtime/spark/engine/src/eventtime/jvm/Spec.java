package eventtime.jvm;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.time.DayOfWeek;
import java.time.Instant;
import java.time.LocalDate;
import java.time.ZoneId;
import java.time.temporal.TemporalAdjusters;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Everything the JVM engine needs, parsed from the JSON the Python adapter writes
 * (eventtime/spark/aggregate.py). Window arithmetic follows eventtime/core/window.py exactly
 * (held to it by tests/spark/test_operator_inprocess.py): fixed windows start at offset + k *
 * slide and are half-open [start, start + size); calendar windows run from local midnight to
 * local midnight in a zone, and each is its own slice.
 */
public final class Spec implements Serializable {
  private static final long serialVersionUID = 1L;


  public final long sizeMs, slideMs, offsetMs, latenessMs, sliceMs;
  /** Calendar windows (local day / week / month in {@link #zone}) instead of a fixed grid. */
  public final boolean calendar;
  /** Session windows (merging, per key; see {@link Sessions}): records closer than gapMs. */
  public final boolean session;
  public final long gapMs;
  public static final int DAY = 0, WEEK = 1, MONTH = 2;
  private final int calendarUnit;
  private final ZoneId zone;
  private final DayOfWeek weekStart;
  /** The last calendar window computed, {start, end}: consecutive rows mostly share one. */
  private transient volatile long[] lastCalendarWindow;
  /** Invalid records beside the operator ({@link InvalidRecords}); a record too late for some windows reported (PARTLY_LATE). */
  public final boolean finalOnly, discarding, bounded, splitInvalid, reportPartlyLate;
  /** Positions, in the record struct, of the key columns and of each aggregation's input (-1: none). */
  public final int[] keyFields;
  public final String[] aggKinds, aggNames;
  /** Aggregation kinds as codes (switches on them are cheap in the per-row path). */
  public final int[] kinds;

  public static final int COUNT = 0, SUM = 1, MEAN = 2, MIN = 3, MAX = 4, FIRST = 5, LAST = 6, SQL = 7;
  /** A Spark SQL aggregation's input: the whole record ({@link #aggInput}). */
  public static final int RECORD = -2;
  private static final java.util.List<String> KIND_NAMES = java.util.Arrays.asList(
      Contract.AGG_COUNT, Contract.AGG_SUM, Contract.AGG_MEAN, Contract.AGG_MIN, Contract.AGG_MAX, Contract.AGG_FIRST, Contract.AGG_LAST, Contract.AGG_SQL);
  public final int[] aggFields;
  /** Aggregations whose input is an integral column (exact 128-bit sums) or a decimal one. */
  public final boolean[] aggIntegral, aggDecimal;
  public final int[] aggDecimalScale;
  /** Each Spark SQL aggregation's function (null for the built-in kinds), and whether there is one. */
  public final SqlAggregate[] sqlAggs;
  public boolean hasSql;
  /** Spark SQL aggregations whose panes carry their buffer's bytes (Contract.ACC_BUFFER). */
  public final boolean[] aggMergeable;
  /** The record as Spark's internal row, for the SQL aggregations (per task). */
  private transient scala.Function1<Object, Object> toInternal;
  private transient Object[] lastInternal;
  /** The user's columns as one struct (the late / invalid record's payload). */
  public final StructType recordType;
  /** Unique per plan (per Engine call): the map side's per-task state is found by task and plan. */
  public final String planId = java.util.UUID.randomUUID().toString();
  /** The operator output: kind, keys, window fields, aggregations, record fields, et__rec. */
  public final StructType outputType;
  /** Local property carrying "queryId:batchId:watermark" for the map-side combine. */
  public final String watermarkProperty;
  /** Number of hash buckets of the key (the operator's grouping key; fixed per checkpoint). */
  public final int buckets;
  /**
   * Per-partition watermarks (docs/semantics.md): the driver computes W for each batch and
   * publishes it (eventtime/spark/router.py); the operator uses it instead of Spark's watermark,
   * has no timers, and is woken by tick rows sent to every bucket.
   */
  public final boolean publishedWatermark;
  /** B, the max out-of-orderness (the lateness advisor's delays, {@link #delayBin}). */
  public final long maxOutOfOrdernessMs;
  /** Position of the event-time column in the record (-1: not one of its columns), and the session's zone. */
  final int eventTimeField;
  final String sessionTimeZone;
  /** Spark's cast of the record's event time to text, bound to field 0 of a one-field row (per task). */
  private transient org.apache.spark.sql.catalyst.expressions.Cast rawCast;

  public Spec(String json) {
    try {
      JsonNode n = new ObjectMapper().readTree(json);
      JsonNode w = n.get("window");
      String type = w.get("type").asText();
      calendar = Contract.WINDOW_CALENDAR.equals(type);
      session = Contract.WINDOW_SESSION.equals(type);
      gapMs = session ? w.get("gap_ms").asLong() : 0;
      if (session) {
        calendarUnit = -1;
        zone = null;
        weekStart = null;
        sizeMs = slideMs = offsetMs = 0;
        sliceMs = 1;
      } else if (calendar) {
        calendarUnit = java.util.Arrays.asList(Contract.UNIT_DAY, Contract.UNIT_WEEK, Contract.UNIT_MONTH).indexOf(w.get("unit").asText());
        if (calendarUnit < 0) throw new IllegalArgumentException("eventtime: unknown calendar unit " + w.get("unit"));
        zone = ZoneId.of(w.get("tz").asText());
        weekStart = w.has("week_start") ? DayOfWeek.valueOf(w.get("week_start").asText().toUpperCase(java.util.Locale.ROOT)) : DayOfWeek.MONDAY;
        sizeMs = slideMs = offsetMs = 0;
        sliceMs = 1; // slice starts are stored as deltas of sliceMs
      } else {
        calendarUnit = -1;
        zone = null;
        weekStart = null;
        sizeMs = w.get("size_ms").asLong();
        slideMs = Contract.WINDOW_SLIDING.equals(type) ? w.get("slide_ms").asLong() : sizeMs;
        offsetMs = w.get("offset_ms").asLong();
        sliceMs = gcd(sizeMs, slideMs);
      }
      latenessMs = n.get("allowed_lateness_ms").asLong();
      finalOnly = Contract.FINAL_ONLY.equals(n.get("emit").asText());
      discarding = Contract.DISCARDING.equals(n.get("accumulation").asText());
      bounded = n.get("bounded").asBoolean();
      splitInvalid = n.path("split_invalid").asBoolean(false);
      reportPartlyLate = n.has("report_partly_late") && n.get("report_partly_late").asBoolean();
      watermarkProperty = n.get("watermark_property").asText();
      buckets = n.get("buckets").asInt();
      if (buckets < 1 || buckets > Layout.MAX_BUCKETS) {
        throw new IllegalArgumentException("buckets must be 1.." + Layout.MAX_BUCKETS + ", got " + buckets);
      }
      maxOutOfOrdernessMs = n.has("max_out_of_orderness_ms") ? n.get("max_out_of_orderness_ms").asLong() : 0;
      eventTimeField = n.has("event_time_field") ? n.get("event_time_field").asInt() : -1;
      sessionTimeZone = n.has("session_time_zone") ? n.get("session_time_zone").asText() : "UTC";
      JsonNode wm = n.get("watermark");
      publishedWatermark = !bounded && wm != null && Contract.PER_PARTITION.equals(wm.get("mode").asText());
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
      sqlAggs = new SqlAggregate[a];
      aggMergeable = new boolean[a];
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
        if (kinds[i] == SQL) {
          sqlAggs[i] = SqlAggregate.of(g.get("expression").asText(), recordType);
          aggFields[i] = RECORD;
          hasSql = true;
          aggMergeable[i] = g.has("mergeable") && g.get("mergeable").asBoolean();
        }
      }
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("eventtime: cannot read the engine spec: " + e.getMessage(), e);
    }
  }

  /**
   * The histogram bin of a delay (how far behind the running maximum a record arrived, ms):
   * 0 for none, the delay itself below 8, then 8 bins per power of two (at most 1/8 wide);
   * eventtime/query/advise.py decodes the bounds.
   */
  public static final int DELAY_BINS = 8 * 61;  // delayBin of Long.MAX_VALUE is the last

  /** Aggregation i's input in the record {@code rec}: its column's value, the record itself, or null. */
  public Object aggInput(int i, org.apache.spark.sql.Row rec) {
    int f = aggFields[i];
    return f == RECORD ? rec : f < 0 || rec == null ? null : rec.get(f);
  }

  /** A record, as the SQL aggregations read it (Spark's internal row). */
  org.apache.spark.sql.catalyst.InternalRow internal(org.apache.spark.sql.Row rec) {
    Object[] last = lastInternal;  // the record's conversion, once for all its SQL aggregations
    if (last != null && last[0] == rec) return (org.apache.spark.sql.catalyst.InternalRow) last[1];
    if (toInternal == null) {
      toInternal = org.apache.spark.sql.catalyst.CatalystTypeConverters.createToCatalystConverter(recordType);
    }
    Object row = toInternal.apply(rec);
    lastInternal = new Object[] {rec, row};
    return (org.apache.spark.sql.catalyst.InternalRow) row;
  }

  /**
   * The largest valid event time of the batches before, from the global watermark W = max - B
   * they left: W + B, or null before the first watermark and at the end of input (Python's
   * {@code core.watermark.running_max_ms}).
   */
  public Long runningMax(long watermark) {
    return watermark > 0 && watermark < Contract.END_OF_INPUT_MS ? watermark + maxOutOfOrdernessMs : null;
  }

  public static int delayBin(long delay) {
    if (delay <= 0) return 0;
    if (delay < 8) return (int) delay;
    int e = 63 - Long.numberOfLeadingZeros(delay);
    return 8 * (e - 2) + (int) ((delay >>> (e - 3)) & 7);
  }

  /**
   * A late record's {@code raw_timestamp}: Spark's own text of the record's event-time value
   * ({@code cast(<column> as string)} in the session's zone), or null when the event time is not
   * a column of the record or is null.
   */
  String rawText(org.apache.spark.sql.Row rec) {
    if (eventTimeField < 0 || rec == null || rec.isNullAt(eventTimeField)) return null;
    DataType type = recordType.fields()[eventTimeField].dataType();
    if (rawCast == null) {
      rawCast = new org.apache.spark.sql.catalyst.expressions.Cast(
          new org.apache.spark.sql.catalyst.expressions.BoundReference(0, type, true),
          org.apache.spark.sql.types.DataTypes.StringType, scala.Option.apply(sessionTimeZone));
    }
    Object value = org.apache.spark.sql.catalyst.CatalystTypeConverters.convertToCatalyst(rec.get(eventTimeField));
    Object text = rawCast.eval(new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(new Object[] {value}));
    return text == null ? null : text.toString();
  }

  /** The bucket of a user key: a hash that is the same in every JVM (no identity hashes). */
  public int bucketOf(Object[] keys) {
    long h = 0x9E3779B97F4A7C15L;
    for (Object k : keys) {
      int e;
      if (k == null) e = 0;
      else if (k instanceof byte[]) e = java.util.Arrays.hashCode((byte[]) k);
      else if (k instanceof java.math.BigDecimal) e = ((java.math.BigDecimal) k).stripTrailingZeros().hashCode();
      else e = k instanceof org.apache.spark.unsafe.types.UTF8String ? Partials.stringHash(k) : k.hashCode();
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

  /** {start, end} of the calendar window containing ts (local midnight to local midnight). */
  private long[] calendarWindow(long ts) {
    long[] last = lastCalendarWindow;
    if (last != null && last[0] <= ts && ts < last[1]) return last;
    LocalDate first = Instant.ofEpochMilli(ts).atZone(zone).toLocalDate();
    LocalDate next;
    if (calendarUnit == WEEK) {
      first = first.with(TemporalAdjusters.previousOrSame(weekStart));
      next = first.plusWeeks(1);
    } else if (calendarUnit == MONTH) {
      first = first.withDayOfMonth(1);
      next = first.plusMonths(1);
    } else {
      next = first.plusDays(1);
    }
    // atStartOfDay: a midnight in a DST gap is the instant the gap starts; in an overlap the
    // earlier of the two midnights (Python's fold=0 reads both the same way)
    long[] window = {first.atStartOfDay(zone).toInstant().toEpochMilli(), next.atStartOfDay(zone).toInstant().toEpochMilli()};
    lastCalendarWindow = window;
    return window;
  }

  public long sliceOf(long ts) {
    return calendar ? calendarWindow(ts)[0] : lastStart(ts, sliceMs);
  }

  /** End (exclusive) of the window starting at ws. */
  public long windowEnd(long ws) {
    return calendar ? calendarWindow(ws)[1] : ws + sizeMs;
  }

  /** Largest event time of the window starting at ws. */
  public long maxTs(long ws) {
    return maxTimestamp(windowEnd(ws));
  }

  /** Starts of the windows containing the whole slice, ascending. */
  public List<Long> windowsOfSlice(long sliceStart) {
    if (calendar) return java.util.Collections.singletonList(sliceStart);
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
    return calendar ? sliceStart : lastStart(sliceStart, slideMs);
  }

  /** End of the last window containing ts (the one that expires last). */
  public long lastWindowEnd(long ts) {
    return calendar ? calendarWindow(ts)[1] : lastStart(ts, slideMs) + sizeMs;
  }

  // --- the firing rules (eventtime/core/trigger.py), each written once; a window is given by
  // its end (exclusive), whatever its kind (fixed, calendar, session) -----------------------

  /** A window's max timestamp m = end - 1, the largest event time in [start, end). */
  public static long maxTimestamp(long end) {
    return end - 1;
  }

  /** A window is due (its ON_TIME pane fires) once its max timestamp end - 1 <= W. */
  public boolean isDue(long end, long watermark) {
    return maxTimestamp(end) <= watermark;
  }

  /**
   * When a window expires: m + L, its max timestamp end - 1 plus the allowed lateness;
   * Long.MAX_VALUE when that overflows (past END_OF_INPUT_MS: never, as in the Python rules).
   */
  public long cleanupTime(long end) {
    long m = maxTimestamp(end);
    long t = m + latenessMs;
    return t >= m ? t : Long.MAX_VALUE;
  }

  /** A window is expired (its state purged, new records late) once m + L = cleanupTime(end) <= W. */
  public boolean isExpired(long end, long watermark) {
    return cleanupTime(end) <= watermark;
  }

  /** A record is live (not too late) while its last window has not expired. */
  public boolean isLive(long ts, long watermark) {
    return !isExpired(lastWindowEnd(ts), watermark);
  }

  /**
   * A live record is partly late when its first window has expired (windows expire in order of
   * their ends, so the ones it misses come first): reported only when asked (reportPartlyLate).
   */
  public boolean isPartlyLate(long ts, long watermark) {
    return reportPartlyLate && !session && !calendar && slideMs < sizeMs
        && isExpired(firstWindowOf(ts) + sizeMs, watermark);
  }

  /** End of the last expired window of a partly late record: its missed windows span [firstWindowOf(ts), this). */
  public long lastExpiredWindowEnd(long ts, long watermark) {
    long end = firstWindowOf(ts) + sizeMs;
    while (isExpired(end + slideMs, watermark)) end += slideMs;
    return end;
  }

  /** Session windows: the end of a record's own session [ts, ts + gap), before it merges with any other. */
  public long ownSessionEnd(long ts) {
    return ts + gapMs;
  }

  /** Session windows: two sessions merge when they overlap (half-open: touching is not overlapping). */
  public static boolean sessionsOverlap(long start, long end, long otherStart, long otherEnd) {
    return start < otherEnd && otherStart < end;
  }

  /** Session windows: the width of the time slots of the bucket's due index ({@link DueIndex}). */
  public long dueSlotMs() {
    return Math.max(1, (gapMs + latenessMs) / 64);
  }

  /**
   * Whether the map-side combine may fold a data row at ts under the batch's watermark: it is
   * live and not partly late (a record the operator reports). A session row when its own session
   * [ts, ts + gap) has not expired: whatever it merges with ends no earlier, so it is never late
   * (a row whose own session expired may still join a live one: the operator judges it).
   */
  public boolean foldable(long ts, long watermark) {
    if (session) return ts <= Long.MAX_VALUE - gapMs && !isExpired(ownSessionEnd(ts), watermark);
    return isLive(ts, watermark) && !isPartlyLate(ts, watermark);
  }

  /** Start of the first window containing ts. */
  public long firstWindowOf(long ts) {
    if (calendar) return calendarWindow(ts)[0];
    long last = lastStart(ts, slideMs);
    long first = last - ((sizeMs - 1) / slideMs) * slideMs;
    return first + sizeMs > ts ? first : first + slideMs;
  }
}
