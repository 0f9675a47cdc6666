package eventtime.jvm.operator;

import eventtime.jvm.mapside.Mapper;
import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.PublishedWatermark;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.spark.SqlAggregate;
import eventtime.jvm.window.Trigger;
import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import com.fasterxml.jackson.databind.node.ArrayNode;
import com.fasterxml.jackson.databind.node.ObjectNode;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TwsTester;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The engine without a query: {@link Mapper} and {@link WindowOperator} run in-process through
 * Spark's {@code TwsTester}, one call per key and data batch, then {@code setWatermark(W')} for
 * the no-data batch (which fires the event-time timers). Rows go in and out as JSON. The
 * property tests use it to hold the operator to the reference model over many generated
 * scenarios in seconds; the real queries (classification, watermark, routing) are tested too.
 */
public final class InProcess {
  private static final ObjectMapper JSON = new ObjectMapper();
  private final Spec spec;
  private final Layout lay;
  private final TwsTester<Row, Row, Row> tester;
  private final WindowOperator operator;
  private final Map<List<Object>, Row> keys = new LinkedHashMap<>();

  public InProcess(String specJson) {
    spec = new Spec(specJson);
    lay = new Layout(spec);
    operator = new WindowOperator(spec);
    tester = new TwsTester<>(
        operator,
        scala.collection.immutable.List$.MODULE$.empty(),
        spec.bounded ? TimeMode.None() : TimeMode.EventTime(),
        OutputMode.Append(),
        // The tester would drop rows behind the watermark; the operator decides lateness itself.
        spec.bounded ? scala.Option.empty() : scala.Option.apply(new NeverLate()));
  }

  private static Object value(JsonNode v, DataType t) {
    if (v == null || v.isNull()) return null;
    if (t.equals(DataTypes.StringType)) return v.asText();
    if (t.equals(DataTypes.LongType)) return v.asLong();
    if (t.equals(DataTypes.IntegerType)) return v.asInt();
    if (t.equals(DataTypes.ShortType)) return (short) v.asInt();
    if (t.equals(DataTypes.ByteType)) return (byte) v.asInt();
    if (t.equals(DataTypes.DoubleType)) return v.asDouble();
    if (t.equals(DataTypes.FloatType)) return (float) v.asDouble();
    if (t.equals(DataTypes.BooleanType)) return v.asBoolean();
    if (t instanceof DecimalType) return new BigDecimal(v.asText());
    throw new IllegalArgumentException("InProcess: unsupported column type " + t);
  }

  private static void put(ObjectNode o, String name, Object v) {
    if (v == null) o.putNull(name);
    else if (v instanceof Long) o.put(name, (Long) v);
    else if (v instanceof Integer) o.put(name, (Integer) v);
    else if (v instanceof Short) o.put(name, (Short) v);
    else if (v instanceof Byte) o.put(name, (Byte) v);
    else if (v instanceof Double) o.put(name, (Double) v);
    else if (v instanceof Float) o.put(name, (Float) v);
    else if (v instanceof Boolean) o.put(name, (Boolean) v);
    else if (v instanceof BigDecimal) o.put(name, (BigDecimal) v);
    else if (v instanceof Row) {
      Row r = (Row) v;
      ArrayNode a = o.putArray(name);
      for (int i = 0; i < r.length(); i++) {
        ObjectNode cell = JSON.createObjectNode();
        put(cell, "v", r.get(i));
        a.add(cell.get("v"));
      }
    } else if (v instanceof scala.collection.Seq) {
      ArrayNode a = o.putArray(name);
      for (Object item : scala.jdk.javaapi.CollectionConverters.asJava((scala.collection.Seq<?>) v)) {
        ObjectNode cell = JSON.createObjectNode();
        put(cell, "v", item);
        a.add(cell.get("v"));
      }
    } else o.put(name, v.toString());
  }

  private String render(List<Row> rows) {
    ArrayNode out = JSON.createArrayNode();
    StructField[] fields = spec.outputType.fields();
    for (Row r : rows) {
      ObjectNode o = out.addObject();
      for (int i = 0; i < fields.length; i++) put(o, fields[i].name(), r.get(i));
    }
    return out.toString();
  }

  /**
   * One data batch: {@code rowsJson} is a list of {"rec": [...], "ms", "cls", "reason", "raw",
   * "part", "off"}; the operator sees {@code watermark}; the map-side combine runs with it when
   * {@code combine} (records are kept on every row here: the mapper judges them itself).
   * Returns the output rows as a JSON list of objects.
   */
  public String batch(String rowsJson, long watermark, boolean combine) throws java.io.IOException {
    List<Row> input = new ArrayList<>();
    StructField[] recFields = spec.recordType.fields();
    for (JsonNode r : JSON.readTree(rowsJson)) {
      Object[] rec = new Object[recFields.length];
      for (int i = 0; i < recFields.length; i++) rec[i] = value(r.get("rec").get(i), recFields[i].dataType());
      int nk = spec.keyFields.length, na = spec.aggFields.length;
      Object[] in = new Object[Layout.IN_K0 + nk + na];
      in[Layout.IN_MS] = r.get("ms").isNull() ? null : r.get("ms").asLong();
      in[Layout.IN_CLS] = r.get("cls").asInt();
      in[Layout.IN_REASON] = r.get("reason").isNull() ? null : r.get("reason").asText();
      in[Layout.IN_RAW] = r.get("raw").isNull() ? null : r.get("raw").asText();
      in[Layout.IN_PART] = r.get("part").isNull() ? null : r.get("part").asText();
      in[Layout.IN_OFF] = r.get("off").isNull() ? null : r.get("off").asLong();
      in[Layout.IN_REC] = RowFactory.create(rec);
      for (int i = 0; i < nk; i++) in[Layout.IN_K0 + i] = rec[spec.keyFields[i]];
      for (int i = 0; i < na; i++) in[Layout.IN_K0 + nk + i] = spec.aggFields[i] < 0 ? null : rec[spec.aggFields[i]];
      input.add(RowFactory.create(in));
    }
    return render(run(combine ? watermark : null, watermark, input));
  }

  /**
   * The map side, then the operator once per group (bucket, or pass-through), each told the
   * batch's watermark as the driver publishes it to tasks: the map side {@code combineUnder}
   * (null: it combines nothing), the operator {@code watermark} (read with per-partition
   * watermarks).
   */
  private List<Row> run(Long combineUnder, long watermark, List<Row> input) {
    Mapper mapper = new Mapper(spec);
    PublishedWatermark.publishOutsideTask(combineUnder);
    Map<List<Object>, List<Row>> groups = new LinkedHashMap<>();
    for (Iterator<Row> it = mapper.call(input.iterator()); it.hasNext(); ) {
      Row r = it.next();
      List<Object> k = java.util.Collections.singletonList(Layout.group(spec, r.getInt(0), r.getInt(1)));
      keys.putIfAbsent(k, RowFactory.create(k.get(0)));
      groups.computeIfAbsent(k, x -> new ArrayList<>()).add(r);
    }
    PublishedWatermark.publishOutsideTask(watermark);
    List<Row> out = new ArrayList<>();
    for (Map.Entry<List<Object>, List<Row>> g : groups.entrySet()) {
      out.addAll(CollectionConverters.asJava(tester.test(keys.get(g.getKey()), CollectionConverters.asScala(g.getValue()).toList())));
    }
    return out;
  }

  /**
   * The no-data batch: the watermark moves to {@code watermark} and due timers fire. With
   * per-partition watermarks (no timers) the driver's tick instead: one tick row, which the
   * map side sends to every bucket (the end-of-input row at {@code END_OF_INPUT_MS}).
   */
  public String advance(long watermark) {
    if (!spec.publishedWatermark) return render(CollectionConverters.asJava(tester.setWatermark(watermark)));
    Object[] in = new Object[Layout.IN_K0 + spec.keyFields.length + spec.aggFields.length];
    in[Layout.IN_CLS] = watermark == Contract.END_OF_INPUT_MS ? Layout.CONTROL : Layout.TICK;
    return render(run(null, watermark, java.util.Collections.singletonList(RowFactory.create(in))));
  }

  private static final class NeverLate extends scala.runtime.AbstractFunction1<Row, Object> implements java.io.Serializable {
    private static final long serialVersionUID = 1L;

    @Override
    public Object apply(Row row) {
      return Long.MAX_VALUE;
    }
  }

  /** User keys whose state the operator has read so far. */
  public long keysRead() {
    return operator.keysRead();
  }

  /** Number of state entries left: user keys in the buckets' maps, due-index chunks, slice buffers, bucket values. */
  public int stateEntries() {
    int n = 0;
    for (Row g : keys.values()) {
      n += tester.peekMapState("keys", g).size();
      if (spec.session) n += tester.peekMapState("due", g).size();
      else if (spec.hasSql) n += tester.peekMapState("buffers", g).size();
      if (tester.peekValueState("meta", g).isDefined()) n++;
    }
    return n;
  }

  /** Number of entries of one state variable: "keys", "due", "buffers" (map states) or "meta". */
  public int stateEntries(String state) {
    int n = 0;
    for (Row g : keys.values()) {
      if (state.equals("meta")) n += tester.peekValueState(state, g).isDefined() ? 1 : 0;
      else n += tester.peekMapState(state, g).size();
    }
    return n;
  }

  /** The output positions {@link Layout} found in the spec's output schema, by column name (tests). */
  public static String outputPositions(Spec spec) throws java.io.IOException {
    Layout l = new Layout(spec);
    java.util.Map<String, Integer> out = new java.util.LinkedHashMap<>();
    String[] names = {"window_start", "window_end", "pane_timing", "pane_index", "is_final", "reason", "event_time",
        "raw_timestamp", "watermark", "lateness_ms", "partition", "offset", "payload", "stat_max_event_time",
        "stat_rows", "stat_delays", "merged_from", "et__rec"};
    int[] at = {l.oWs, l.oWe, l.oTiming, l.oIndex, l.oFinal, l.oReason, l.oEventTime, l.oRaw, l.oWatermark,
        l.oLateness, l.oPart, l.oOff, l.oPayload, l.oStatMax, l.oStatRows, l.oStatDelays, l.oMerged, l.oRec};
    for (int i = 0; i < names.length; i++) out.put(names[i], at[i]);
    for (int i = 0; i < l.na; i++) {
      out.put(spec.aggNames[i], l.oAgg[i]);
      if (l.oAccA[i] >= 0) out.put(spec.aggNames[i] + "/a", l.oAccA[i]);
      if (l.oAccB[i] >= 0) out.put(spec.aggNames[i] + "/b", l.oAccB[i]);
    }
    out.put("width", l.oWidth);
    return JSON.writeValueAsString(out);
  }

  /**
   * {@link Spec}'s window arithmetic for many arguments in one call (the property tests hold it
   * to the Python rules without a py4j round trip per value): {@code calls} is a JSON list of
   * {@code [method, arg...]}, e.g. {@code [["sliceOf", 5], ["isLive", 5, 9]]}; the answer is
   * the JSON list of their results.
   */
  public static String arithmetic(Spec spec, String calls) throws java.io.IOException {
    ArrayNode out = JSON.createArrayNode();
    for (JsonNode call : JSON.readTree(calls)) {
      String method = call.get(0).asText();
      long a = call.get(1).asLong();
      switch (method) {
        case "sliceOf": out.add(spec.sliced.sliceOf(a)); break;
        case "firstWindowOf": out.add(spec.sliced.firstWindowOf(a)); break;
        case "maxTs": out.add(Trigger.maxTimestamp(spec.sliced.windowEnd(a))); break;
        case "windowEnd": out.add(spec.sliced.windowEnd(a)); break;
        case "lastWindowEnd": out.add(spec.sliced.lastWindowEnd(a)); break;
        case "isLive": out.add(spec.trigger.isLive(a, call.get(2).asLong())); break;
        case "foldable": out.add(spec.trigger.foldable(a, call.get(2).asLong())); break;
        case "isDue": out.add(Trigger.isDue(a, call.get(2).asLong())); break;
        case "isExpired": out.add(spec.trigger.isExpired(a, call.get(2).asLong())); break;
        case "cleanupTime": out.add(spec.trigger.cleanupTime(a)); break;
        case "windowsOfSlice": {
          ArrayNode starts = out.addArray();
          for (long start : spec.sliced.windowsOfSlice(a)) starts.add(start);
          break;
        }
        default: throw new IllegalArgumentException("InProcess.arithmetic: no method " + method);
      }
    }
    return JSON.writeValueAsString(out);
  }

  /**
   * Each of {@code sqls} (Spark SQL aggregate expressions) over the rows of {@code df}, run as the
   * engine runs a {@link SqlAggregate}: the rows dealt at random (by {@code seed}) into
   * {@code parts} buffers, each written to bytes and read back, merged in a random order, and
   * evaluated: one row, one column per expression.
   */
  public static org.apache.spark.sql.Dataset<Row> sqlAggregates(
      org.apache.spark.sql.Dataset<Row> df, List<String> sqls, int seed, int parts) {
    org.apache.spark.sql.catalyst.InternalRow[] rows = (org.apache.spark.sql.catalyst.InternalRow[])
        df.queryExecution().executedPlan().executeCollect();
    java.util.Random random = new java.util.Random(seed);
    Object[] out = new Object[sqls.size()];
    StructType type = new StructType();
    for (int a = 0; a < sqls.size(); a++) {
      SqlAggregate agg = SqlAggregate.of(sqls.get(a), df.schema());
      List<org.apache.spark.sql.catalyst.InternalRow> buffers = new ArrayList<>();
      for (int p = 0; p < parts; p++) buffers.add(agg.create());
      for (org.apache.spark.sql.catalyst.InternalRow row : rows) agg.update(buffers.get(random.nextInt(parts)), row);
      java.util.Collections.shuffle(buffers, random);
      org.apache.spark.sql.catalyst.InternalRow total = agg.read(agg.write(buffers.get(0)));
      for (int p = 1; p < parts; p++) {
        org.apache.spark.sql.catalyst.InternalRow part = buffers.get(p);
        agg.merge(total, random.nextBoolean() ? part : agg.read(agg.write(part)));
      }
      out[a] = org.apache.spark.sql.catalyst.CatalystTypeConverters.convertToScala(agg.eval(total), agg.resultType);
      type = type.add("a" + a, agg.resultType, true);
    }
    return df.sparkSession().createDataFrame(List.of(RowFactory.create(out)), type);
  }
}
