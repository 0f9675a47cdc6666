package eventtime.jvm.mapside;

import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.Spec;
import java.util.HashMap;
import java.util.Map;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * The map side's filter: true for a row it has consumed into the task's {@link MapTask} (a
 * heartbeat, an invalid record written beside the operator ({@link InvalidRecords}), or a data
 * row live under this batch's watermark: counted, then folded into the map-side combine), false
 * for a row the {@link Mapper} must see (late, control, or any row when the watermark is not
 * known). {@link FoldExpression} calls it from Spark's generated
 * code for the input, with Spark's own values (text as {@link UTF8String}, not decoded): a
 * consumed row is never built as a row with its record, converted to a Java {@code Row} or
 * serialized, and its key is packed from its bytes.
 */
public final class Fold implements java.io.Serializable {
  private static final long serialVersionUID = 2L;
  private final Spec spec;
  // per deserialized copy, i.e. per task (Java deserialization leaves them at their defaults)
  private transient boolean looked;
  private transient long attempt;
  private transient MapTask task;
  private transient Thread owner;
  private transient Object[] scratch;
  /** Text partitions seen by this task, as Java strings (one decoding per distinct value). */
  private transient Map<UTF8String, String> partitionText;

  Fold(Spec spec) {
    this.spec = spec;
  }

  /** The array the generated code fills with the row's key then aggregated values. */
  public Object[] scratch() {
    if (scratch == null) scratch = new Object[spec.keyFields.length + spec.aggKinds.length];
    return scratch;
  }

  /**
   * Consumes the row when it can. {@code values}: the key columns then the aggregated columns,
   * as Spark holds them (text as {@link UTF8String}, decimals as {@link Decimal}, numbers boxed).
   */
  public boolean call(boolean msNull, long ms, boolean clsNull, int cls, Object partition, Object[] values) {
    if (clsNull) return false;
    // the task's state, looked up once a task, not in Spark's thread-local task context every row
    if (task == null || task.closed || owner != Thread.currentThread()) {
      TaskContext tc = TaskContext.get();
      if (tc == null) return false;
      // a task held here is closed or was found on another thread: look it up again
      if (!looked || tc.taskAttemptId() != attempt || task != null) {
        task = MapTask.current(spec);
        if (task != null) task.textKeysAsBytes = true;
        attempt = tc.taskAttemptId();
        owner = Thread.currentThread();
        looked = true;
      }
      if (task == null) return false;
    }
    Long time = msNull ? null : ms;
    if (cls == Layout.HEARTBEAT || task.bypasses(cls)) {
      task.count(partition(partition), cls, time);
      return true;
    }
    if (cls != Layout.DATA || !task.foldable(time)) return false;
    task.count(partition(partition), cls, time);
    int nk = spec.keyFields.length;
    Object record = null, copy = null;
    for (int i = 0; i < values.length; i++) {
      Object v = values[i];
      if (v instanceof Decimal) values[i] = ((Decimal) v).toJavaBigDecimal();
      else if (i >= nk && v instanceof UTF8String) values[i] = v.toString();
      else if (v instanceof InternalRow) {  // the record, for the Spark SQL aggregations: a copy
        if (v != record) {  // (the generated code reuses its buffer for the next row), once
          record = v;
          copy = ((InternalRow) v).copy();
        }
        values[i] = copy;
      }
    }
    task.fold(values, 0, ms);
    return true;
  }

  /** The partition as the {@link Mapper} sees it in a {@code Row} (text as a Java string). */
  private Object partition(Object p) {
    if (p instanceof UTF8String) {
      if (partitionText == null) partitionText = new HashMap<>();
      String s = partitionText.get(p);
      if (s == null) {
        s = p.toString();
        partitionText.put(((UTF8String) p).clone(), s);
      }
      return s;
    }
    return p instanceof Decimal ? ((Decimal) p).toJavaBigDecimal() : p;
  }
}
