package eventtime.jvm.mapside;

import eventtime.jvm.plan.Contract;
import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.PublishedWatermark;
import eventtime.jvm.plan.Spec;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.api.java.UDF0;
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.expressions.UserDefinedFunction;
import org.apache.spark.sql.functions;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Invalid records beside the operator, not through it: a record whose event time is invalid
 * belongs to no window and changes no state, so it needs neither the shuffle nor the operator.
 * When its batch's watermark is known in the tasks (a static DataFrame; a stream whose driver
 * published it, see {@link PublishedWatermark}), the map side counts it in its partition's
 * statistics and drops it ({@link MapTask#bypasses}), and this branch of the plan writes it as
 * the operator would ({@link OutputRows#invalidRecord}) straight from the input, in Spark's
 * generated code. When the watermark is not known, it goes through the operator as before.
 *
 * <p>The branch reads the operator's input a second time: Spark runs the input's plan (the
 * source, and every step before the operator, such as an enrichment's lookups) twice in each
 * batch. So it is the user's choice ({@code window_aggregate(split_invalid=True)}, {@link
 * Spec#splitInvalid}), for inputs where a flood of invalid records costs more than a second read.
 */
public final class InvalidRecords {
  private InvalidRecords() {}

  /**
   * Whether the plan can take invalid records beside the operator: when the operator's input
   * holds no watermark node of Spark's (a second scan of it would be a second node, and Spark
   * would push the branch's filter below it, holding the query's watermark back).
   */
  public static boolean possible(Dataset<Row> input) {
    return !hasWatermarkNode(((org.apache.spark.sql.classic.Dataset<Row>) input).queryExecution().analyzed());
  }

  private static boolean hasWatermarkNode(LogicalPlan plan) {
    if (plan instanceof EventTimeWatermark) return true;
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      if (hasWatermarkNode(child)) return true;
    }
    return false;
  }

  /** The invalid records of {@code input} (the operator input) as the operator's output column {@code et__out}. */
  public static Dataset<Row> of(Dataset<Row> input, Spec spec) {
    Layout lay = new Layout(spec);
    UserDefinedFunction known = functions.udf(new BatchWatermark(spec), DataTypes.LongType).asNondeterministic();
    Dataset<Row> invalid = input
        .filter(functions.col("et__cls").equalTo(Layout.INVALID))
        .withColumn("et__w", known.apply())
        .filter(functions.col("et__w").isNotNull());
    StructField[] fields = spec.outputType.fields();
    Column[] out = new Column[fields.length];
    for (int i = 0; i < fields.length; i++) {
      Column c;
      if (i == 0) c = functions.lit(Contract.INVALID_RECORD);
      else if (i <= lay.nk) c = functions.col("et__k" + (i - 1));
      else if (i == lay.oReason) c = functions.col("et__reason");
      else if (i == lay.oRaw) c = functions.col("et__raw");
      // Spark reports 0 before the first watermark: no watermark yet (null), as the operator writes it
      else if (i == lay.oWatermark) c = functions.when(functions.col("et__w").gt(0), functions.col("et__w"));
      else if (i == lay.oPart) c = functions.col("et__part").cast(DataTypes.StringType);
      else if (i == lay.oOff) c = functions.col("et__off");
      else if (i == lay.oRec) c = functions.col(Contract.RECORD_COLUMN);
      else c = functions.lit(null);
      out[i] = c.cast(fields[i].dataType()).alias(fields[i].name());
    }
    return invalid.select(functions.struct(out).alias("et__out"));
  }

  /** This batch's watermark when the tasks know it (as the map side reads it), else null; looked up once a task. */
  static final class BatchWatermark implements UDF0<Long> {
    private static final long serialVersionUID = 1L;
    private final Spec spec;
    private transient long attempt = -1;
    private transient Long watermark;

    BatchWatermark(Spec spec) {
      this.spec = spec;
    }

    @Override
    public Long call() {
      TaskContext tc = TaskContext.get();
      long id = tc == null ? -2 : tc.taskAttemptId();
      if (id != attempt) {
        Long w = PublishedWatermark.of(spec);
        watermark = w == null ? null : Math.max(0, w);
        attempt = id;
      }
      return watermark;
    }
  }
}
