package eventtime.jvm.mapside;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.plans.logical.EventTimeWatermark;
import org.apache.spark.sql.catalyst.plans.logical.Filter;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.catalyst.plans.logical.Union;
import org.apache.spark.sql.functions;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Spark's watermark computed after the map side instead of before it.
 *
 * <p>{@code with_event_time} defines the watermark on {@code __et_wm}: Spark's watermark node
 * then takes the maximum over every input row, in a plan stage of its own (the node has no
 * generated code), so the input rows are written out as Spark rows once more before the map
 * side reads them. The map side already knows that maximum: each task counts every row with a
 * valid event time (data rows, heartbeats) and sees the end-of-input control row. When only
 * projections and filters that Spark's optimizer pushes below the node anyway (deterministic,
 * not reading {@code __et_wm}) lie between the node and the operator input, the maximum over
 * the rows that reach the map side is the node's maximum. The node is then taken out of the
 * input and put after the {@link Mapper}, on one row per task that carries the task's maximum
 * ({@link Layout#WATERMARK}), with the same delay. That row goes on to the operator's
 * pass-through group, which skips it (a filter here would be one more node for Spark's optimizer
 * to go through in every micro-batch). Otherwise (a filter Spark keeps above the node, a join,
 * ...) the input is left as it is.
 */
public final class MapSideWatermark {
  /** The column of the watermark that {@code with_event_time} defines (eventtime/spark/extract.py). */
  static final String EVENT_TIME_COLUMN = "__et_wm";
  /** The column, on the mapper's output, that carries each task's maximum to the moved node. */
  static final String CARRIER = "et__wm";

  /** The input without the node. */
  public final Dataset<Row> input;
  /** The node's delay (ms). */
  final long delayMs;

  private MapSideWatermark(Dataset<Row> input, long delayMs) {
    this.input = input;
    this.delayMs = delayMs;
  }

  /** The input with its {@code __et_wm} watermark node taken out, or null when it cannot be moved. */
  public static MapSideWatermark of(Dataset<Row> input) {
    if (!input.isStreaming()) return null;
    org.apache.spark.sql.classic.Dataset<Row> ds = (org.apache.spark.sql.classic.Dataset<Row>) input;
    long[] delay = {-1};
    LogicalPlan stripped = strip(ds.queryExecution().analyzed(), delay);
    if (stripped == null || delay[0] < 0) return null;
    return new MapSideWatermark(org.apache.spark.sql.classic.Dataset.ofRows(ds.sparkSession(), stripped), delay[0]);
  }

  /**
   * {@code plan} without the watermark node on {@code __et_wm}, when only projections, filters
   * Spark pushes below the node, and the unions of streams lie above it; null otherwise. {@code
   * delay[0]}: the node's delay.
   */
  private static LogicalPlan strip(LogicalPlan plan, long[] delay) {
    if (plan instanceof EventTimeWatermark) {
      EventTimeWatermark w = (EventTimeWatermark) plan;
      if (!w.eventTime().name().equals(EVENT_TIME_COLUMN) || delay[0] >= 0) return null;
      delay[0] = EventTimeWatermark.getDelayMs(w.delay());
      return w.child();
    }
    if (plan instanceof Project) {
      Project p = (Project) plan;
      LogicalPlan child = strip(p.child(), delay);
      return child == null ? null : new Project(p.projectList(), child);
    }
    if (plan instanceof Filter) {
      Filter f = (Filter) plan;
      if (!f.condition().deterministic() || f.condition().references().exists(a -> a.name().equals(EVENT_TIME_COLUMN))) {
        return null;
      }
      LogicalPlan child = strip(f.child(), delay);
      return child == null ? null : new Filter(f.condition(), child);
    }
    if (plan instanceof Union) {
      // the per-partition ticks are a second stream beside the records (window_aggregate)
      List<LogicalPlan> children = new ArrayList<>();
      boolean found = false;
      for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
        if (!child.isStreaming() || !contains(child)) {
          children.add(child);
          continue;
        }
        LogicalPlan s = strip(child, delay);
        if (s == null) return null;
        children.add(s);
        found = true;
      }
      return found ? plan.withNewChildren(CollectionConverters.asScala(children).toSeq()) : null;
    }
    return null;
  }

  private static boolean contains(LogicalPlan plan) {
    if (plan instanceof EventTimeWatermark && ((EventTimeWatermark) plan).eventTime().name().equals(EVENT_TIME_COLUMN)) {
      return true;
    }
    for (LogicalPlan child : CollectionConverters.asJava(plan.children())) {
      if (contains(child)) return true;
    }
    return false;
  }

  /** The mapper's packed output ({@link Packed}) with the watermark node on the carrier rows (the operator skips them). */
  public Dataset<Row> apply(Dataset<Row> mapped) {
    return mapped
        .withColumn(CARRIER, functions.timestamp_millis(functions.col(Packed.WATERMARK_MS)))
        .withWatermark(CARRIER, delayMs + " milliseconds");
  }
}
