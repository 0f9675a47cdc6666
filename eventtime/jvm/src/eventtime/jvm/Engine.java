package eventtime.jvm;

import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/** Entry point called from Python (eventtime/spark/aggregate.py) through py4j. */
public final class Engine {
  private Engine() {}

  /** The operator output of {@code input} (layout: see {@link Layout}) for the JSON spec. */
  public static Dataset<Row> apply(Dataset<Row> input, String specJson) {
    Spec spec = new Spec(specJson);
    StructType opSchema = Layout.operatorSchema(spec);
    Dataset<Row> mapped = mapInput(input, spec).mapPartitions(new Mapper(spec), Encoders.row(opSchema));
    return mapped
        .groupBy(functions.col("et__g"), functions.col("et__b"))
        .as(Encoders.row(Layout.groupSchema(spec)), Encoders.row(opSchema))
        .transformWithState(
            // A static DataFrame is one batch without a watermark: each key is processed once and
            // then swept to the end of input, so it needs no timers.
            // With per-partition watermarks the driver publishes W and tick rows wake the buckets.
            new WindowOperator(spec), spec.bounded || spec.publishedWatermark ? TimeMode.None() : TimeMode.EventTime(),
            OutputMode.Append(),
            Encoders.row(spec.outputType));
  }

  /** The map side alone (statistics, pass-through, map-side combine): the operator's input. */
  public static Dataset<Row> mapSide(Dataset<Row> input, String specJson) {
    Spec spec = new Spec(specJson);
    return mapInput(input, spec).mapPartitions(new Mapper(spec), Encoders.row(Layout.operatorSchema(spec)));
  }

  /**
   * The rows the {@link Mapper} reads: without those {@link Fold} consumed in the input's own
   * generated code, when every column it reads has a plain type (the same Java value in a UDF
   * argument as in a {@code Row}); else every row, the record nulled where it is not needed.
   */
  static Dataset<Row> mapInput(Dataset<Row> input, Spec spec) {
    StructType schema = input.schema();
    int nk = spec.keyFields.length, na = spec.aggKinds.length;
    if (3 + nk + na > Fold.MAX_ARGS) return withoutFoldedRecords(input, spec);
    java.util.List<Column> args = new java.util.ArrayList<>();
    args.add(input.col("et__ms"));
    args.add(input.col("et__cls"));
    args.add(input.col("et__part"));
    for (int i = 0; i < nk + na; i++) {
      org.apache.spark.sql.types.StructField f = schema.fields()[Layout.IN_K0 + i];
      if (!plain(f.dataType())) return withoutFoldedRecords(input, spec);
      args.add(input.col(f.name()));
    }
    if (!plain(schema.fields()[Layout.IN_PART].dataType())) return withoutFoldedRecords(input, spec);
    UserDefinedFunction fold = udf(new Fold(spec), args.size()).asNondeterministic();
    return input.filter(functions.not(fold.apply(args.toArray(new Column[0]))));
  }

  private static boolean plain(org.apache.spark.sql.types.DataType t) {
    return t instanceof org.apache.spark.sql.types.NumericType
        || t instanceof org.apache.spark.sql.types.StringType
        || t instanceof org.apache.spark.sql.types.BooleanType
        || t instanceof org.apache.spark.sql.types.BinaryType
        || t instanceof org.apache.spark.sql.types.NullType;
  }

  @SuppressWarnings({"unchecked", "rawtypes"})
  private static UserDefinedFunction udf(Fold f, int arity) {
    org.apache.spark.sql.types.DataType b = DataTypes.BooleanType;
    switch (arity) {
      case 3: return functions.udf((org.apache.spark.sql.api.java.UDF3) f, b);
      case 4: return functions.udf((org.apache.spark.sql.api.java.UDF4) f, b);
      case 5: return functions.udf((org.apache.spark.sql.api.java.UDF5) f, b);
      case 6: return functions.udf((org.apache.spark.sql.api.java.UDF6) f, b);
      case 7: return functions.udf((org.apache.spark.sql.api.java.UDF7) f, b);
      case 8: return functions.udf((org.apache.spark.sql.api.java.UDF8) f, b);
      case 9: return functions.udf((org.apache.spark.sql.api.java.UDF9) f, b);
      case 10: return functions.udf((org.apache.spark.sql.api.java.UDF10) f, b);
      case 11: return functions.udf((org.apache.spark.sql.api.java.UDF11) f, b);
      case 12: return functions.udf((org.apache.spark.sql.api.java.UDF12) f, b);
      case 13: return functions.udf((org.apache.spark.sql.api.java.UDF13) f, b);
      case 14: return functions.udf((org.apache.spark.sql.api.java.UDF14) f, b);
      case 15: return functions.udf((org.apache.spark.sql.api.java.UDF15) f, b);
      case 16: return functions.udf((org.apache.spark.sql.api.java.UDF16) f, b);
      case 17: return functions.udf((org.apache.spark.sql.api.java.UDF17) f, b);
      case 18: return functions.udf((org.apache.spark.sql.api.java.UDF18) f, b);
      case 19: return functions.udf((org.apache.spark.sql.api.java.UDF19) f, b);
      case 20: return functions.udf((org.apache.spark.sql.api.java.UDF20) f, b);
      case 21: return functions.udf((org.apache.spark.sql.api.java.UDF21) f, b);
      case 22: return functions.udf((org.apache.spark.sql.api.java.UDF22) f, b);
      default: throw new IllegalArgumentException("eventtime: " + arity + " map-side arguments (3 to 22)");
    }
  }

  /**
   * The input with the record struct nulled on the rows the map-side combine will fold
   * ({@link Live}): the struct is then neither built nor converted for them, only for the rows
   * that need their payload (late, invalid, or not judged).
   */
  static Dataset<Row> withoutFoldedRecords(Dataset<Row> input, Spec spec) {
    UserDefinedFunction live = functions.udf(new Live(spec), DataTypes.BooleanType).asNondeterministic();
    Column rec = input.col("et__rec");
    Column folded = live.apply(input.col("et__ms"), input.col("et__cls"));
    return input.withColumn("et__rec", functions.when(folded, functions.lit(null).cast(spec.recordType)).otherwise(rec));
  }

  /** Version of the engine's state layout (checked against the checkpoint by the Python side). */
  public static int stateLayout() {
    return 3;
  }
}
