package eventtime.jvm.output;

import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.unsafe.types.TimestampNanosVal;

/**
 * The part of a read-only row view that differs between Spark minor versions: Spark 4.3 added
 * nanosecond timestamp getters to {@code InternalRow}. The engine is compiled with the
 * {@code spark-X.Y} folder of the installed pyspark (see {@code eventtime/spark/engine/__init__.py}).
 */
abstract class DelegatingRow extends InternalRow {
  private static final long serialVersionUID = 1L;

  protected InternalRow row;

  protected abstract int at(int i);

  @Override public TimestampNanosVal getTimestampNTZNanos(int i) { return row.getTimestampNTZNanos(at(i)); }
  @Override public TimestampNanosVal getTimestampLTZNanos(int i) { return row.getTimestampLTZNanos(at(i)); }
}
