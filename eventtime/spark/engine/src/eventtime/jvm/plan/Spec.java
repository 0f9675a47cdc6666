package eventtime.jvm.plan;

import eventtime.jvm.spark.SqlAggregate;
import eventtime.jvm.window.CalendarWindows;
import eventtime.jvm.window.FixedGrid;
import eventtime.jvm.window.SessionWindows;
import eventtime.jvm.window.SlicedAssigner;
import eventtime.jvm.window.Trigger;
import eventtime.jvm.window.WindowAssigner;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.Serializable;
import java.time.DayOfWeek;
import java.time.ZoneId;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;

/**
 * Everything the JVM engine needs, read from the operator's plan document the Python side
 * builds (eventtime/plan.schema.json, eventtime/spark/plan.py): the windows ({@link
 * WindowAssigner}), the firing rules ({@link Trigger}), the aggregations and the row types.
 */
public final class Spec implements Serializable {
  private static final long serialVersionUID = 1L;

  /** The windows ({@link WindowAssigner}): sliced (fixed grid, calendar) or merging (sessions); one of the two is null. */
  final WindowAssigner window;
  public final SlicedAssigner sliced;
  public final SessionWindows sessions;
  /** Session windows (merging, per key; see {@link Sessions}). */
  public final boolean session;
  /** The firing rules (allowed lateness: latenessMs). */
  public final Trigger trigger;
  public final long latenessMs;
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
  /** Local property carrying the batch's watermark for the map side ({@link PublishedWatermark}). */
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

  /** The plan document this spec was read from (eventtime/plan.schema.json; {@link Engine#plansOf}). */
  public final String json;

  /**
   * Reads the operator's plan (eventtime/plan.schema.json), once: every field is required (the
   * defaults live in Python), and a document of another version is refused.
   */
  public Spec(String json) {
    this.json = json;
    try {
      JsonNode plan = new ObjectMapper().readTree(json);
      int version = field(plan, "version", "plan").asInt(-1);
      if (version != Contract.PLAN_VERSION) {
        throw new IllegalArgumentException("eventtime: the operator's plan has version " + plan.get("version")
            + ", this engine reads version " + Contract.PLAN_VERSION + " (the Python package and the engine jar differ)");
      }
      JsonNode n = field(plan, "config", "plan"), in = field(plan, "input", "plan"), run = field(plan, "run", "plan");
      window = readWindow(field(n, "window", "config"));
      sliced = window instanceof SlicedAssigner ? (SlicedAssigner) window : null;
      sessions = window instanceof SessionWindows ? (SessionWindows) window : null;
      session = sessions != null;
      latenessMs = field(n, "allowed_lateness_ms", "config").asLong();
      finalOnly = Contract.FINAL_ONLY.equals(field(n, "emit", "config").asText());
      discarding = Contract.DISCARDING.equals(field(n, "accumulation", "config").asText());
      reportPartlyLate = field(n, "report_partly_late", "config").asBoolean();
      trigger = new Trigger(window, latenessMs, reportPartlyLate);
      maxOutOfOrdernessMs = field(n, "max_out_of_orderness_ms", "config").asLong();
      bounded = field(run, "bounded", "run").asBoolean();
      splitInvalid = field(run, "split_invalid", "run").asBoolean();
      watermarkProperty = field(run, "watermark_property", "run").asText();
      buckets = field(run, "buckets", "run").asInt();
      if (buckets < 1 || buckets > Layout.MAX_BUCKETS) {
        throw new IllegalArgumentException("buckets must be 1.." + Layout.MAX_BUCKETS + ", got " + buckets);
      }
      eventTimeField = field(in, "event_time_field", "input").asInt();
      sessionTimeZone = field(in, "session_time_zone", "input").asText();
      JsonNode wm = field(n, "watermark", "config");
      publishedWatermark = !bounded && Contract.PER_PARTITION.equals(field(wm, "mode", "config.watermark").asText());
      recordType = (StructType) DataType.fromJson(field(in, "record_type", "input").asText());
      outputType = (StructType) DataType.fromJson(field(plan, "output_type", "plan").asText());
      JsonNode keys = field(in, "key_fields", "input");
      keyFields = new int[keys.size()];
      for (int i = 0; i < keyFields.length; i++) keyFields[i] = keys.get(i).asInt();
      JsonNode aggs = field(n, "aggregations", "config"), reads = field(in, "aggregations", "input");
      int a = aggs.size();
      if (reads.size() != a) throw new IllegalArgumentException("eventtime: input.aggregations must match config.aggregations");
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
        JsonNode g = aggs.get(i), r = reads.get(i);
        String where = "config.aggregations[" + i + "]", read = "input.aggregations[" + i + "]";
        aggKinds[i] = field(g, "kind", where).asText();
        kinds[i] = KIND_NAMES.indexOf(aggKinds[i]);
        if (kinds[i] < 0) throw new IllegalArgumentException("eventtime: unknown aggregation kind " + aggKinds[i]);
        aggNames[i] = field(g, "name", where).asText();
        aggFields[i] = field(r, "field", read).asInt();
        aggIntegral[i] = field(r, "integral", read).asBoolean();
        aggDecimal[i] = field(r, "decimal", read).asBoolean();
        aggDecimalScale[i] = field(r, "scale", read).asInt();
        aggMergeable[i] = field(r, "mergeable", read).asBoolean();
        if (kinds[i] == SQL) {
          sqlAggs[i] = SqlAggregate.of(field(g, "expression", where).asText(), recordType);
          aggFields[i] = RECORD;
          hasSql = true;
        }
      }
    } catch (java.io.IOException e) {
      throw new IllegalArgumentException("eventtime: cannot read the operator's plan: " + e.getMessage(), e);
    }
  }

  /** The assigner of the plan's {@code config.window} (eventtime/plan.schema.json). */
  private static WindowAssigner readWindow(JsonNode w) {
    String type = field(w, "type", "config.window").asText();
    if (Contract.WINDOW_SESSION.equals(type)) return new SessionWindows(field(w, "gap_ms", "config.window").asLong());
    if (Contract.WINDOW_CALENDAR.equals(type)) {
      String unit = field(w, "unit", "config.window").asText();
      int code = java.util.Arrays.asList(Contract.UNIT_DAY, Contract.UNIT_WEEK, Contract.UNIT_MONTH).indexOf(unit);
      if (code < 0) throw new IllegalArgumentException("eventtime: unknown calendar unit " + unit);
      DayOfWeek weekStart = code == CalendarWindows.WEEK
          ? DayOfWeek.valueOf(field(w, "week_start", "config.window").asText().toUpperCase(java.util.Locale.ROOT)) : null;
      return new CalendarWindows(code, ZoneId.of(field(w, "tz", "config.window").asText()), weekStart);
    }
    long size = field(w, "size_ms", "config.window").asLong();
    long slide = Contract.WINDOW_SLIDING.equals(type) ? field(w, "slide_ms", "config.window").asLong() : size;
    if (!Contract.WINDOW_SLIDING.equals(type) && !Contract.WINDOW_TUMBLING.equals(type)) {
      throw new IllegalArgumentException("eventtime: unknown window type " + type);
    }
    return new FixedGrid(size, slide, field(w, "offset_ms", "config.window").asLong());
  }

  /** A required field of the plan, or an error naming it. */
  static JsonNode field(JsonNode node, String name, String where) {
    JsonNode value = node.get(name);
    if (value == null || (value.isNull() && !name.endsWith("_signal"))) {
      throw new IllegalArgumentException("eventtime: the operator's plan lacks " + where + "." + name);
    }
    return value;
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
  public org.apache.spark.sql.catalyst.InternalRow internal(org.apache.spark.sql.Row rec) {
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
  public String rawText(org.apache.spark.sql.Row rec) {
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
      else e = k instanceof org.apache.spark.unsafe.types.UTF8String ? stringHash(k) : k.hashCode();
      h = (h ^ e) * 0xFF51AFD7ED558CCDL;
      h ^= h >>> 33;
    }
    return (int) Math.floorMod(h, (long) buckets);
  }

  /** {@code k.toString().hashCode()} of a UTF8String, without decoding it when it is ASCII. */
  static int stringHash(Object k) {
    org.apache.spark.unsafe.types.UTF8String s = (org.apache.spark.unsafe.types.UTF8String) k;
    Object base = s.getBaseObject();
    long at = s.getBaseOffset();
    int h = 0;
    for (int i = 0, n = s.numBytes(); i < n; i++) {
      byte b = org.apache.spark.unsafe.Platform.getByte(base, at + i);
      if (b < 0) return s.toString().hashCode();  // not ASCII: the Java string's UTF-16 units differ
      h = 31 * h + b;
    }
    return h;
  }
}
