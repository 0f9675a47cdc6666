package eventtime.jvm.output;

import org.apache.spark.sql.catalyst.InternalRow;

/**
 * The part of a read-only row view that differs between Spark minor versions: Spark 4.2's
 * {@code InternalRow} has no nanosecond timestamp getters, so there is nothing to add here.
 * The engine is compiled with the {@code spark-X.Y} folder of the installed pyspark (see
 * {@code eventtime/spark/engine/__init__.py}).
 */
abstract class DelegatingRow extends InternalRow {
  private static final long serialVersionUID = 1L;

  protected InternalRow row;

  protected abstract int at(int i);
}
