package eventtime.jvm;

import eventtime.jvm.mapside.FoldExpression;
import eventtime.jvm.mapside.InvalidRecords;
import eventtime.jvm.mapside.Live;
import eventtime.jvm.mapside.MapSideWatermark;
import eventtime.jvm.mapside.Mapper;
import eventtime.jvm.mapside.Packed;
import eventtime.jvm.operator.BinaryRows;
import eventtime.jvm.operator.WindowOperator;
import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.spark.ResolvedOnce;
import eventtime.jvm.spark.RowBytes;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.TransformWithState;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** Entry point called from Python (eventtime/spark/aggregate.py) through py4j. */
public final class Engine {
  private Engine() {}

  /**
   * The operator output of {@code input} (layout: see {@link Layout}) for the plan document: one
   * struct column {@code et__out} of {@code spec.outputType}, whose fields the caller selects.
   */
  public static Dataset<Row> apply(Dataset<Row> input, String specJson) {
    Spec spec = new Spec(specJson);
    if (spec.bounded) {
      // A static plan's state store tasks report RocksDB snapshot uploads to the state store
      // coordinator (Spark 4.2), whose endpoint only the session's StreamingQueryManager
      // registers: made here, or the first task fails with RpcEndpointNotFoundException.
      input.sparkSession().streams();
    }
    MapSideWatermark moved = MapSideWatermark.of(input);
    Dataset<Row> source = moved == null ? input : moved.input;
    boolean invalidBeside = spec.splitInvalid && InvalidRecords.possible(source);
    Dataset<Row> mapped = mapInput(source, spec)
        .mapPartitions(new Packed.Pack(new Mapper(spec, moved != null, invalidBeside), spec), Encoders.row(Packed.schema()));
    if (moved != null) mapped = moved.apply(mapped);
    Dataset<byte[]> out = mapped
        .select(functions.col(Packed.GROUP), functions.col(Packed.VALUE))
        .groupBy(functions.col(Packed.GROUP))
        .as(ResolvedOnce.row(Layout.groupSchema(spec)), Encoders.row(Packed.valueSchema()))
        .transformWithState(
            // A static DataFrame is one batch without a watermark: each key is processed once and
            // then swept to the end of input, so it needs no timers.
            // With per-partition watermarks the driver publishes W and tick rows wake the buckets.
            new BinaryRows(new WindowOperator(spec), spec.outputType, Layout.operatorSchema(spec)),
            spec.bounded || spec.publishedWatermark ? TimeMode.None() : TimeMode.EventTime(),
            OutputMode.Append(),
            Encoders.BINARY());
    Dataset<Row> operated = out.select(RowBytes.column(out.col("value"), spec.outputType).alias("et__out"));
    return invalidBeside ? operated.union(InvalidRecords.of(source, spec)) : operated;
  }

  /**
   * The plan document of each eventtime operator in {@code df}'s plan (eventtime/plan.schema.json):
   * how {@code route} reads back the operator's configuration from the DataFrame it is given.
   */
  public static java.util.List<String> plansOf(Dataset<?> df) {
    java.util.List<String> found = new java.util.ArrayList<>();
    collectPlans(df.queryExecution().analyzed(), found);
    return found;
  }

  private static void collectPlans(LogicalPlan node, java.util.List<String> found) {
    Object processor = node instanceof TransformWithState ? ((TransformWithState) node).statefulProcessor() : null;
    if (processor instanceof BinaryRows) found.add(((BinaryRows) processor).plan());
    for (LogicalPlan child : scala.jdk.javaapi.CollectionConverters.asJava(node.children())) collectPlans(child, found);
  }

  /** The map side alone (statistics, pass-through, map-side combine): the operator's input. */
  public static Dataset<Row> mapSide(Dataset<Row> input, String specJson) {
    Spec spec = new Spec(specJson);
    return mapInput(input, spec).mapPartitions(new Mapper(spec), Encoders.row(Layout.operatorSchema(spec)));
  }

  /**
   * The rows the {@link Mapper} reads: without those {@link Fold} consumed in the input's own
   * generated code ({@link FoldExpression}), when every column it reads has a plain type (its
   * value in a {@code Row} follows from Spark's own: numbers, text, booleans, binary); else every
   * row, the record nulled where it is not needed.
   */
  static Dataset<Row> mapInput(Dataset<Row> input, Spec spec) {
    input = withBarrier(input);
    StructType schema = input.schema();
    int nk = spec.keyFields.length, na = spec.aggKinds.length;
    // a Spark SQL aggregation reads the record itself (Spark's internal row in the generated
    // code); without the fold there, every row reaches the Mapper with its record
    Dataset<Row> unfolded = spec.hasSql ? input : withoutFoldedRecords(input, spec);
    Column[] columns = new Column[nk + na];
    for (int i = 0; i < nk + na; i++) {
      if (i >= nk && spec.aggFields[i - nk] == Spec.RECORD) {
        columns[i] = input.col(schema.fields()[Layout.IN_REC].name());
        continue;
      }
      org.apache.spark.sql.types.StructField f = schema.fields()[Layout.IN_K0 + i];
      if (!plain(f.dataType())) return unfolded;
      columns[i] = input.col(f.name());
    }
    if (!plain(schema.fields()[Layout.IN_PART].dataType())) return unfolded;
    return input.filter(functions.not(FoldExpression.column(
        spec, input.col("et__ms"), input.col("et__cls"), input.col("et__part"), columns)));
  }

  /**
   * The input with a nondeterministic identity on its offset column: Spark's optimizer then keeps
   * the fold's filter above the input's projection, where it reads the projected columns, instead
   * of pushing it down into the user's own projections with each column it reads written out
   * again (a Kafka value's {@code from_json} parsed once per field read, a text timestamp parsed
   * once per use).
   */
  static Dataset<Row> withBarrier(Dataset<Row> input) {
    UserDefinedFunction same = functions.udf((org.apache.spark.sql.api.java.UDF1<Long, Long>) x -> x, DataTypes.LongType)
        .asNondeterministic();
    return input.withColumn("et__off", same.apply(input.col("et__off")));
  }

  private static boolean plain(org.apache.spark.sql.types.DataType t) {
    return t instanceof org.apache.spark.sql.types.NumericType
        || t instanceof org.apache.spark.sql.types.StringType
        || t instanceof org.apache.spark.sql.types.BooleanType
        || t instanceof org.apache.spark.sql.types.BinaryType
        || t instanceof org.apache.spark.sql.types.NullType;
  }

  /**
   * The input with the record struct nulled on the rows the map-side combine will fold
   * ({@link Live}): the struct is then neither built nor converted for them, only for the rows
   * that need their payload (late, invalid, or not judged).
   */
  static Dataset<Row> withoutFoldedRecords(Dataset<Row> input, Spec spec) {
    UserDefinedFunction live = functions.udf(new Live(spec), DataTypes.BooleanType).asNondeterministic();
    Column rec = input.col(Contract.RECORD_COLUMN);
    Column folded = live.apply(input.col("et__ms"), input.col("et__cls"));
    return input.withColumn(Contract.RECORD_COLUMN, functions.when(folded, functions.lit(null).cast(spec.recordType)).otherwise(rec));
  }

  /** The operator's grouping keys: bucket b's keyed rows at [b], its pass-through rows at [32 + b] ({@link Layout#group}). */
  public static int[] groupIds() {
    return Layout.groupIds();
  }

  /** How many times this JVM resolved the operator's state encoders ({@link ResolvedOnce}): not once per task. */
  public static long stateEncoderResolutions() {
    return ResolvedOnce.resolutions();
  }

  /** Version of the engine's state layout (checked against the checkpoint by the Python side). */
  public static int stateLayout() {
    return 5;
  }
}
