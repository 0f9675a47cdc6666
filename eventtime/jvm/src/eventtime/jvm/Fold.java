package eventtime.jvm;

import org.apache.spark.TaskContext;
import org.apache.spark.sql.api.java.*;

/**
 * The map side's filter: true for a row it has consumed into the task's {@link MapTask} (a
 * heartbeat, or a data row live under this batch's watermark: counted, then folded into the
 * map-side combine), false for a row the {@link Mapper} must see (invalid, late, control, or any
 * row when the watermark is not known). It runs inside Spark's generated code for the input
 * projection, so a consumed row is never built as a row with its record, converted to a Java
 * {@code Row} or serialized: only its key and aggregated columns are read.
 *
 * <p>Arguments: event time (ms), row class, partition, the key columns, then the aggregated
 * columns (3 to 22 in all; {@link Engine} uses it only then).
 */
final class Fold implements
        UDF3<Object, Object, Object, Boolean>,
        UDF4<Object, Object, Object, Object, Boolean>,
        UDF5<Object, Object, Object, Object, Object, Boolean>,
        UDF6<Object, Object, Object, Object, Object, Object, Boolean>,
        UDF7<Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF8<Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF9<Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF10<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF11<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF12<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF13<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF14<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF15<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF16<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF17<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF18<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF19<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF20<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF21<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean>,
        UDF22<Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Object, Boolean> {
  private static final long serialVersionUID = 1L;
  static final int MAX_ARGS = 22;
  private final Spec spec;
  // per deserialized copy, i.e. per task (Java deserialization leaves them at their defaults)
  private transient boolean looked;
  private transient long attempt;
  private transient MapTask task;
  private transient Object[] args;

  Fold(Spec spec) {
    this.spec = spec;
  }

  private boolean consume(Object ms, Object cls, Object partition) {
    TaskContext tc = TaskContext.get();
    if (tc == null || cls == null) return false;
    if (!looked || tc.taskAttemptId() != attempt) {
      task = MapTask.current(spec);
      attempt = tc.taskAttemptId();
      looked = true;
    }
    if (task == null) return false;
    int c = (Integer) cls;
    if (c == Layout.HEARTBEAT) {
      task.count(partition, c, (Long) ms);
      return true;
    }
    if (c != Layout.DATA || !task.foldable((Long) ms)) return false;
    long m = (Long) ms;
    task.count(partition, c, m);
    task.fold(args, 3, m);
    return true;
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2) {
    if (args == null) args = new Object[MAX_ARGS];
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15, Object a16) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    args[16] = a16;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15, Object a16, Object a17) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    args[16] = a16;
    args[17] = a17;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15, Object a16, Object a17, Object a18) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    args[16] = a16;
    args[17] = a17;
    args[18] = a18;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15, Object a16, Object a17, Object a18, Object a19) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    args[16] = a16;
    args[17] = a17;
    args[18] = a18;
    args[19] = a19;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15, Object a16, Object a17, Object a18, Object a19, Object a20) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    args[16] = a16;
    args[17] = a17;
    args[18] = a18;
    args[19] = a19;
    args[20] = a20;
    return consume(a0, a1, a2);
  }

  @Override
  public Boolean call(Object a0, Object a1, Object a2, Object a3, Object a4, Object a5, Object a6, Object a7, Object a8, Object a9, Object a10, Object a11, Object a12, Object a13, Object a14, Object a15, Object a16, Object a17, Object a18, Object a19, Object a20, Object a21) {
    if (args == null) args = new Object[MAX_ARGS];
    args[3] = a3;
    args[4] = a4;
    args[5] = a5;
    args[6] = a6;
    args[7] = a7;
    args[8] = a8;
    args[9] = a9;
    args[10] = a10;
    args[11] = a11;
    args[12] = a12;
    args[13] = a13;
    args[14] = a14;
    args[15] = a15;
    args[16] = a16;
    args[17] = a17;
    args[18] = a18;
    args[19] = a19;
    args[20] = a20;
    args[21] = a21;
    return consume(a0, a1, a2);
  }
}
