package eventtime.jvm.mapside;

import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.PublishedWatermark;
import eventtime.jvm.plan.Spec;
import org.apache.spark.TaskContext;
import org.apache.spark.sql.api.java.UDF2;

/**
 * Whether a row of the operator input is a data row that is live under this batch's watermark
 * (so the map-side combine folds it and its record is not needed). Evaluated in the input
 * projection, where it nulls the record struct of such rows: the {@link Mapper} then reads only
 * the key and aggregated columns of them, and a null record is how it knows to combine. Rows it
 * cannot judge (no watermark published for this query and batch) keep their record. Used only
 * where {@link Fold} is not (a key, partition or aggregated column of a type other than numbers,
 * text, booleans and binary: see Engine.mapInput).
 */
public final class Live implements UDF2<Long, Integer, Boolean> {
  private static final long serialVersionUID = 1L;
  private final Spec spec;
  // transient: per deserialized copy, i.e. per task (Java deserialization leaves them at their
  // defaults: false / 0 / null, not at field initializers)
  private transient boolean read;
  private transient long attempt;
  private transient Long watermark;

  public Live(Spec spec) {
    this.spec = spec;
  }

  @Override
  public Boolean call(Long ms, Integer cls) {
    if (ms == null || cls == null || cls != Layout.DATA) return false;
    TaskContext tc = TaskContext.get();
    if (tc == null) return false;
    if (!read || tc.taskAttemptId() != attempt) {
      watermark = PublishedWatermark.of(spec);
      attempt = tc.taskAttemptId();
      read = true;
    }
    return watermark != null && spec.trigger.foldable(ms, watermark);
  }
}
