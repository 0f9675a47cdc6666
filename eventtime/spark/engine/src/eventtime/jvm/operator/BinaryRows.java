package eventtime.jvm.operator;

import eventtime.jvm.mapside.Packed;
import eventtime.jvm.spark.RowWriter;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.streaming.ExpiredTimerInfo;
import org.apache.spark.sql.streaming.OutputMode;
import org.apache.spark.sql.streaming.StatefulProcessor;
import org.apache.spark.sql.streaming.TimeMode;
import org.apache.spark.sql.streaming.TimerValues;
import org.apache.spark.sql.types.StructType;

/**
 * The {@link WindowOperator}'s output rows as Spark's binary rows ({@code UnsafeRow} bytes), read
 * back as columns by {@link RowBytes}. With the output as Java {@code Row}s, Spark's plan holds a
 * serializer expression per output column (the record's struct nested in it), which its
 * optimizer and code generator go through again in every micro-batch; here the plan holds one
 * binary column, and the rows are written in the task ({@link RowWriter}: Spark's binary rows).
 */
public final class BinaryRows extends StatefulProcessor<Row, Row, byte[]> {
  private static final long serialVersionUID = 1L;
  private final WindowOperator operator;
  private final StructType type;
  /** The operator's input rows, which arrive packed ({@link Packed}). */
  private final StructType operatorType;
  private transient RowWriter writer;

  public BinaryRows(WindowOperator operator, StructType type, StructType operatorType) {
    this.operator = operator;
    this.type = type;
    this.operatorType = operatorType;
  }

  /** The plan the operator was read from. */
  public String plan() {
    return operator.spec.json;
  }

  @Override
  public void init(OutputMode outputMode, TimeMode timeMode) {
    operator.setHandle(getHandle());
    operator.init(outputMode, timeMode);
  }

  @Override
  public scala.collection.Iterator<byte[]> handleInputRows(Row key, scala.collection.Iterator<Row> rows, TimerValues timerValues) {
    return operator.handleInputRows(key, Packed.unpack(operatorType, rows), timerValues).map(this::bytes);
  }

  @Override
  public scala.collection.Iterator<byte[]> handleExpiredTimer(Row key, TimerValues timerValues, ExpiredTimerInfo info) {
    return operator.handleExpiredTimer(key, timerValues, info).map(this::bytes);
  }

  @Override
  public void close() {
    operator.close();
  }

  private byte[] bytes(Row row) {
    if (writer == null) writer = new RowWriter(type);
    return writer.bytes(row);
  }
}
