package eventtime.jvm.plan;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * Column positions of the three row layouts:
 *
 * <pre>
 * input    (from Python)  : et__ms, et__cls, et__reason, et__raw, et__part (an integer or text column as it is,
 *                           else its text), et__off, et__rec (null for a row the map-side combine folds when
 *                           Live is used; with Fold such rows never reach the mapper), k0..kn, a0..am (each
 *                           aggregation's input column)
 * operator (mapper output): et__g, et__b, k0..kn, et__cls, et__ms, et__part, et__off, et__reason, et__raw,
 *                           et__n, et__tmax, et__rec, et__accs (a partial's accumulators, binary); a partial
 *                           row's et__ms is its slice, or its partial session's start, et__tmax that session's end
 * output   (Spark result) : kind, keys, window_start, window_end, pane_timing, pane_index, is_final,
 *                           aggregations (each one's value, then its accumulator columns), reason, event_time, raw_timestamp, watermark, lateness_ms,
 *                           partition, offset, payload, stat_max_event_time, stat_rows, merged_from, et__rec
 * </pre>
 */
public final class Layout {
  // row classes (the contract: eventtime/contract.json)
  public static final int DATA = Contract.CLS_DATA, HEARTBEAT = Contract.CLS_HEARTBEAT, INVALID = Contract.CLS_INVALID,
      STATS = Contract.CLS_STATS, PARTIAL = Contract.CLS_PARTIAL, CONTROL = Contract.CLS_CONTROL;
  // per-partition watermarks: a tick (the driver's W moved) and the end of input, sent to every bucket
  public static final int TICK = Contract.CLS_TICK, END = Contract.CLS_END;
  // a task's largest event time, for Spark's watermark node after the map side (MapSideWatermark)
  public static final int WATERMARK = Contract.CLS_WATERMARK;
  // group of the operator key: 0 = keyed rows, 1 = stateless pass-through (invalid records, statistics)
  public static final int KEYED = 0, PASS = 1;
  // position of the first key column in the operator input (after et__g and the bucket et__b)
  public static final int K0 = 2;

  // input
  public static final int IN_MS = 0, IN_CLS = 1, IN_REASON = 2, IN_RAW = 3, IN_PART = 4, IN_OFF = 5, IN_REC = 6, IN_K0 = 7;

  public final int nk, na;
  // input: the first aggregation input column
  public final int inA0;
  // operator input
  public final int cls, ms, part, off, reason, raw, n, tmax, rec, p0, width;
  // output
  // output: each aggregation's value and accumulator columns (ACC_SUM / ACC_N, ACC_MS or ACC_BUFFER; else -1)
  public final int[] oAgg, oAccA, oAccB;
  public final int oWs, oWe, oTiming, oIndex, oFinal, oReason, oEventTime, oRaw, oWatermark, oLateness, oPart, oOff,
      oPayload, oStatMax, oStatRows, oStatDelays, oMerged, oRec, oWidth;

  public Layout(Spec spec) {
    nk = spec.keyFields.length;
    na = spec.aggKinds.length;
    inA0 = IN_K0 + nk;
    cls = K0 + nk;
    ms = cls + 1;
    part = cls + 2;
    off = cls + 3;
    reason = cls + 4;
    raw = cls + 5;
    n = cls + 6;
    tmax = cls + 7;
    rec = cls + 8;
    p0 = cls + 9;
    width = p0 + 1;
    // output: the positions of the schema Python defines (spark/aggregate.py, output_schema), by
    // name (keys and aggregations may not take these names); keys follow kind, the aggregations
    // follow is_final
    StructType out = spec.outputType;
    if (out.fieldIndex(Contract.COL_KIND) != 0) throw new IllegalArgumentException("the output's first column must be kind");
    oWs = out.fieldIndex(Contract.COL_WINDOW_START);
    oWe = out.fieldIndex(Contract.COL_WINDOW_END);
    oTiming = out.fieldIndex(Contract.COL_PANE_TIMING);
    oIndex = out.fieldIndex(Contract.COL_PANE_INDEX);
    oFinal = out.fieldIndex(Contract.COL_IS_FINAL);
    oAgg = new int[na];
    oAccA = new int[na];
    oAccB = new int[na];
    int paneColumns = 0;
    for (int i = 0; i < na; i++) {
      String name = spec.aggNames[i];
      oAgg[i] = out.fieldIndex(name);
      boolean mean = spec.kinds[i] == Spec.MEAN, firstLast = spec.kinds[i] == Spec.FIRST || spec.kinds[i] == Spec.LAST;
      oAccA[i] = mean ? out.fieldIndex(name + Contract.ACC_SUM) : firstLast ? out.fieldIndex(name + Contract.ACC_MS)
          : spec.aggMergeable[i] ? out.fieldIndex(name + Contract.ACC_BUFFER) : -1;
      oAccB[i] = mean ? out.fieldIndex(name + Contract.ACC_N) : -1;
      paneColumns += 1 + (oAccA[i] >= 0 ? 1 : 0) + (oAccB[i] >= 0 ? 1 : 0);
    }
    oReason = out.fieldIndex(Contract.COL_REASON);
    oEventTime = out.fieldIndex(Contract.COL_EVENT_TIME);
    oRaw = out.fieldIndex(Contract.COL_RAW_TIMESTAMP);
    oWatermark = out.fieldIndex(Contract.COL_WATERMARK);
    oLateness = out.fieldIndex(Contract.COL_LATENESS_MS);
    oPart = out.fieldIndex(Contract.COL_PARTITION);
    oOff = out.fieldIndex(Contract.COL_OFFSET);
    oPayload = out.fieldIndex(Contract.COL_PAYLOAD);
    oStatMax = out.fieldIndex(Contract.COL_STAT_MAX_EVENT_TIME);
    oStatRows = out.fieldIndex(Contract.COL_STAT_ROWS);
    oStatDelays = out.fieldIndex(Contract.COL_STAT_DELAYS);
    oMerged = out.fieldIndex(Contract.COL_MERGED_FROM);
    oRec = out.fieldIndex(Contract.RECORD_COLUMN);
    oWidth = out.fields().length;
    if (oWs != nk + 1 || oReason != oFinal + 1 + paneColumns) {
      throw new IllegalArgumentException("the output's keys must follow kind and its aggregations is_final: " + out);
    }
  }

  public static StructType operatorSchema(Spec spec) {
    List<StructField> f = new ArrayList<>();
    f.add(DataTypes.createStructField("et__g", DataTypes.IntegerType, false));
    f.add(DataTypes.createStructField("et__b", DataTypes.IntegerType, false));
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
    f.add(DataTypes.createStructField(Contract.RECORD_COLUMN, spec.recordType, true));
    f.add(DataTypes.createStructField("et__accs", DataTypes.BinaryType, true));
    return DataTypes.createStructType(f);
  }

  /**
   * The grouping key of the operator: one int, the id ({@link #GROUP_IDS}) of a keyed row's bucket
   * or of a pass-through row's ({@link #group}). One sort key that its sort prefix holds whole:
   * Spark sorts the operator's input by it with a radix sort, without comparing rows.
   */
  public static StructType groupSchema(Spec spec) {
    return DataTypes.createStructType(new StructField[] {DataTypes.createStructField(GROUP, DataTypes.IntegerType, false)});
  }

  public static final String GROUP = "et__gb";

  /**
   * The grouping key of bucket b's keyed rows is GROUP_IDS[b], of its pass-through rows
   * GROUP_IDS[MAX_BUCKETS + b]. Spark sends a grouping key g to shuffle partition
   * pmod(murmur3(g, seed 42), P); each id here was chosen (the smallest non-negative ints, in
   * order) so that murmur3(id, 42) is congruent to b modulo 1 441 440 = lcm(1..16, 32). Bucket b
   * then goes to partition b mod P for every P that divides that number (1 to 16, 18, 20, 24, 32,
   * ...): the 32 buckets spread evenly over the operator's tasks. The ints 0..31 split 12 / 20 over
   * 2 partitions and 5 / 10 / 7 / 10 over 4, and the task with most buckets set the operator
   * stage's time. tests/spark/test_group_ids.py checks the property against Spark's own hash.
   */
  static final int MAX_BUCKETS = 32;

  private static final int[] GROUP_IDS = {
    2126800, 1671380, 1392405, 1735434, 1530556, 1090612, 956620, 158097,
    679099, 2478329, 133458, 232430, 2698549, 307343, 4070739, 753697,
    39190, 5972625, 548450, 455639, 2292860, 527213, 1194168, 870464,
    655546, 962550, 2284580, 632854, 5082129, 533776, 323021, 3681841,
    2151835, 1840692, 3539904, 2191357, 3286798, 2683937, 2219572, 804828,
    762656, 3839493, 717611, 2055115, 3158620, 607348, 4466817, 917905,
    185348, 6317162, 2851019, 2343345, 2320702, 3165310, 2118316, 5296722,
    2116379, 1018332, 2938996, 720338, 6077097, 1451472, 1120859, 6800976,
  };

  private static final java.util.Map<Integer, Integer> SLOT_OF_ID = new java.util.HashMap<>();

  static {
    for (int i = 0; i < GROUP_IDS.length; i++) SLOT_OF_ID.put(GROUP_IDS[i], i);
  }

  /** The grouping ids in order: the keyed buckets' then the pass-through buckets'. */
  public static int[] groupIds() {
    return GROUP_IDS.clone();
  }

  /** The operator's grouping key of an operator row's group (KEYED or PASS) and bucket. */
  public static int group(Spec spec, int group, int bucket) {
    return GROUP_IDS[group == PASS ? MAX_BUCKETS + bucket : bucket];
  }

  /** Whether the operator's grouping key is a pass-through group. */
  public static boolean isPass(Spec spec, int groupingKey) {
    Integer slot = SLOT_OF_ID.get(groupingKey);
    if (slot == null) throw new IllegalStateException("not a grouping key of this engine: " + groupingKey);
    return slot >= MAX_BUCKETS;
  }

  /** The user key (the key of the per-key state map). */
  public static StructType userKeySchema(Spec spec) {
    StructField[] f = operatorSchema(spec).fields();
    return DataTypes.createStructType(java.util.Arrays.copyOfRange(f, K0, K0 + spec.keyFields.length));
  }

  /** The key of a slice's SQL buffers ({@link Slices.Buffers}): the user key and the slice's start. */
  public static StructType bufferKeySchema(Spec spec) {
    return userKeySchema(spec).add(DataTypes.createStructField("et__slice", DataTypes.LongType, false));
  }

}
