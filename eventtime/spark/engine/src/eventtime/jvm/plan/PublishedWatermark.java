package eventtime.jvm.plan;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import org.apache.spark.TaskContext;

/**
 * A micro-batch's watermark as the driver publishes it to the batch's tasks: the local property
 * the plan names ({@code run.watermark_property}), holding eventtime/plan.schema.json's
 * {@code batch_watermark} (eventtime/spark/plan.py writes it).
 */
public final class PublishedWatermark {
  private PublishedWatermark() {}

  /** Outside a Spark task (the engine run in one thread, as the tests' in-process runner does). */
  private static final ThreadLocal<Long> OUTSIDE_TASK = new ThreadLocal<>();

  /** Publishes the batch's watermark to the engine's parts that run in this thread outside a task (null: none). */
  public static void publishOutsideTask(Long watermark) {
    OUTSIDE_TASK.set(watermark);
  }

  /** The watermark of this task's batch when the driver published it for its query and batch, else null. */
  public static Long of(Spec spec) {
    if (spec.bounded) return 0L;
    if (TaskContext.get() == null) return OUTSIDE_TASK.get();
    Long[] published = published(spec);
    return published == null ? null : published[0];
  }

  /** The largest valid event time of the earlier batches, when the driver published it (else null). */
  public static Long runningMax(Spec spec) {
    if (spec.bounded) return null;
    if (TaskContext.get() == null) {  // a global watermark's W + B; per-partition watermarks publish none here
      Long w = OUTSIDE_TASK.get();
      return w == null || spec.publishedWatermark ? null : spec.runningMax(w);
    }
    Long[] published = published(spec);
    return published == null ? null : published[1];
  }

  private static Long[] published(Spec spec) {
    TaskContext tc = TaskContext.get();
    if (tc == null) return null;
    return read(tc.getLocalProperty(spec.watermarkProperty), tc.getLocalProperty("sql.streaming.queryId"),
        tc.getLocalProperty("streaming.sql.batchId"));
  }

  /**
   * A batch's watermark as the driver published it (plan.schema.json's batch_watermark): {W,
   * W + B or null} when it is for {@code query} and {@code batch}, else null.
   */
  public static Long[] read(String value, String query, String batch) {
    if (value == null || query == null || batch == null) return null;
    Object[] cached = last;  // read once per batch, not once per bucket
    JsonNode n;
    if (cached != null && cached[0].equals(value)) {
      n = (JsonNode) cached[1];
    } else {
      try {
        n = new ObjectMapper().readTree(value);
      } catch (java.io.IOException e) {
        throw new IllegalArgumentException("eventtime: cannot read the batch's watermark " + value, e);
      }
      last = new Object[] {value, n};
    }
    if (!query.equals(n.path("query_id").asText(null)) || !batch.equals(n.path("batch_id").asText(null))) return null;
    JsonNode max = n.get("running_max_ms");
    return new Long[] {n.get("watermark_ms").asLong(), max == null || max.isNull() ? null : max.asLong()};
  }

  private static volatile Object[] last;
}
