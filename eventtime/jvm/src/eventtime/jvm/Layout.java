package eventtime.jvm;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Column positions of the three row layouts:
 *
 * <pre>
 * input    (from Python)  : et__rec, et__ms, et__cls, et__reason, et__raw, et__part, et__off
 * operator (mapper output): et__g, k0..kn, et__cls, et__ms, et__part, et__off, et__reason, et__raw,
 *                           et__n, et__tmax, et__rec, then per aggregation i: n, t, lo, hi, d, v
 * output   (Spark result) : kind, keys, window_start, window_end, pane_timing, pane_index, is_final,
 *                           aggregations, reason, event_time, raw_timestamp, watermark, lateness_ms,
 *                           partition, offset, payload, stat_max_event_time, stat_rows, et__rec
 * </pre>
 */
final class Layout {
  // row classes
  static final int DATA = 0, HEARTBEAT = 1, INVALID = 2, STATS = 3, PARTIAL = 4, CONTROL = 5;
  // group of the operator key: 0 = the user key, 1 = stateless pass-through (invalid records, statistics)
  static final int KEYED = 0, PASS = 1;

  // input
  static final int IN_REC = 0, IN_MS = 1, IN_CLS = 2, IN_REASON = 3, IN_RAW = 4, IN_PART = 5, IN_OFF = 6;

  final int nk, na;
  // operator input
  final int cls, ms, part, off, reason, raw, n, tmax, rec, p0, width;
  // output
  final int oWs, oWe, oTiming, oIndex, oFinal, oAgg0, oReason, oEventTime, oRaw, oWatermark, oLateness, oPart, oOff,
      oPayload, oStatMax, oStatRows, oRec, oWidth;

  Layout(Spec spec) {
    nk = spec.keyFields.length;
    na = spec.aggKinds.length;
    cls = nk + 1;
    ms = nk + 2;
    part = nk + 3;
    off = nk + 4;
    reason = nk + 5;
    raw = nk + 6;
    n = nk + 7;
    tmax = nk + 8;
    rec = nk + 9;
    p0 = nk + 10;
    width = p0 + 6 * na;
    oWs = nk + 1;
    oWe = nk + 2;
    oTiming = nk + 3;
    oIndex = nk + 4;
    oFinal = nk + 5;
    oAgg0 = nk + 6;
    oReason = oAgg0 + na;
    oEventTime = oReason + 1;
    oRaw = oReason + 2;
    oWatermark = oReason + 3;
    oLateness = oReason + 4;
    oPart = oReason + 5;
    oOff = oReason + 6;
    oPayload = oReason + 7;
    oStatMax = oReason + 8;
    oStatRows = oReason + 9;
    oRec = oReason + 10;
    oWidth = oReason + 11;
  }

  static StructType operatorSchema(Spec spec) {
    List<StructField> f = new ArrayList<>();
    f.add(DataTypes.createStructField("et__g", DataTypes.IntegerType, false));
    for (int i = 0; i < spec.keyFields.length; i++) {
      f.add(DataTypes.createStructField("et__k" + i, spec.recordType.fields()[spec.keyFields[i]].dataType(), true));
    }
    f.add(DataTypes.createStructField("et__cls", DataTypes.IntegerType, false));
    f.add(DataTypes.createStructField("et__ms", DataTypes.LongType, true));
    f.add(DataTypes.createStructField("et__part", DataTypes.StringType, true));
    f.add(DataTypes.createStructField("et__off", DataTypes.LongType, true));
    f.add(DataTypes.createStructField("et__reason", DataTypes.StringType, true));
    f.add(DataTypes.createStructField("et__raw", DataTypes.StringType, true));
    f.add(DataTypes.createStructField("et__n", DataTypes.LongType, true));
    f.add(DataTypes.createStructField("et__tmax", DataTypes.LongType, true));
    f.add(DataTypes.createStructField("et__rec", spec.recordType, true));
    for (int i = 0; i < spec.aggKinds.length; i++) {
      f.add(DataTypes.createStructField("et__p" + i + "n", DataTypes.LongType, true));
      f.add(DataTypes.createStructField("et__p" + i + "t", DataTypes.LongType, true));
      f.add(DataTypes.createStructField("et__p" + i + "lo", DataTypes.LongType, true));
      f.add(DataTypes.createStructField("et__p" + i + "hi", DataTypes.LongType, true));
      f.add(DataTypes.createStructField("et__p" + i + "d", DataTypes.DoubleType, true));
      f.add(DataTypes.createStructField("et__p" + i + "v", partialValueType(spec, i), true));
    }
    return DataTypes.createStructType(f);
  }

  static StructType keySchema(Spec spec) {
    StructType op = operatorSchema(spec);
    return DataTypes.createStructType(java.util.Arrays.copyOfRange(op.fields(), 0, spec.keyFields.length + 1));
  }

  static DataType partialValueType(Spec spec, int i) {
    String kind = spec.aggKinds[i];
    if ((kind.equals("sum") || kind.equals("mean")) && spec.aggDecimal[i]) {
      return DataTypes.createDecimalType(DecimalType.MAX_PRECISION(), spec.aggDecimalScale[i]);
    }
    if (kind.equals("min") || kind.equals("max") || kind.equals("first") || kind.equals("last")) {
      return spec.recordType.fields()[spec.aggFields[i]].dataType();
    }
    return DataTypes.LongType;
  }
}
