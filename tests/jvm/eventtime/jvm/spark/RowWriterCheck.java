package eventtime.jvm.spark;

import eventtime.jvm.plan.Contract;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** {@link RowWriter}'s bytes against Spark's own serializer's (tests/spark/test_state_bytes.py). */
public final class RowWriterCheck {
  private RowWriterCheck() {}

  /**
   * {@link RowWriter} against Spark's own serializer over {@code rows} seeded random rows of every
   * type it writes (with nulls, NaN, -0.0, infinities, extreme integers, empty and non-ASCII
   * text, text repeated as the same object) beside columns it leaves to the serializer (a
   * decimal, a date, a struct), null in most rows: {mismatched rows, rows RowWriter wrote}.
   */
  public static long[] run(long seed, int rows) {
    StructType type = DataTypes.createStructType(new StructField[] {
      DataTypes.createStructField("s", DataTypes.StringType, true),
      DataTypes.createStructField("l", DataTypes.LongType, true),
      DataTypes.createStructField("i", DataTypes.IntegerType, true),
      DataTypes.createStructField("h", DataTypes.ShortType, true),
      DataTypes.createStructField("b", DataTypes.ByteType, true),
      DataTypes.createStructField("z", DataTypes.BooleanType, true),
      DataTypes.createStructField("d", DataTypes.DoubleType, true),
      DataTypes.createStructField("f", DataTypes.FloatType, true),
      DataTypes.createStructField("bin", DataTypes.BinaryType, true),
      DataTypes.createStructField("t", DataTypes.StringType, true),
      DataTypes.createStructField("dec", DataTypes.createDecimalType(10, 2), true),
      DataTypes.createStructField("dt", DataTypes.DateType, true),
      DataTypes.createStructField("rec", DataTypes.createStructType(new StructField[] {
        DataTypes.createStructField("x", DataTypes.LongType, true)}), true),
    });
    java.util.Random r = new java.util.Random(seed);
    String[] texts = {"", Contract.PANE, Contract.ON_TIME, "user0000042", "a \"q\" \u00fc-\u00f1-\ud83d\ude00", "\u0000x", "long text ".repeat(20)};
    double[] doubles = {0.0, -0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, Double.MIN_VALUE, 1.5e300, -2.25};
    float[] floats = {0.0f, -0.0f, Float.NaN, Float.POSITIVE_INFINITY, Float.MIN_VALUE, 3.5f};
    long[] longs = {0, 1, -1, Long.MIN_VALUE, Long.MAX_VALUE, 1L << 53, (1L << 53) + 1};
    RowWriter writer = new RowWriter(type);
    org.apache.spark.sql.catalyst.encoders.ExpressionEncoder.Serializer<Row> serializer = RowWriter.serializer(type);
    long mismatched = 0, written = 0;
    for (int n = 0; n < rows; n++) {
      Object[] v = new Object[type.size()];
      boolean sameText = r.nextInt(4) == 0;
      v[0] = r.nextInt(5) == 0 ? null : texts[r.nextInt(texts.length)];
      v[1] = r.nextInt(5) == 0 ? null : r.nextBoolean() ? longs[r.nextInt(longs.length)] : r.nextLong();
      v[2] = r.nextInt(5) == 0 ? null : r.nextInt();
      v[3] = r.nextInt(5) == 0 ? null : (short) r.nextInt();
      v[4] = r.nextInt(5) == 0 ? null : (byte) r.nextInt();
      v[5] = r.nextInt(5) == 0 ? null : r.nextBoolean();
      v[6] = r.nextInt(5) == 0 ? null : r.nextBoolean() ? doubles[r.nextInt(doubles.length)] : r.nextGaussian();
      v[7] = r.nextInt(5) == 0 ? null : floats[r.nextInt(floats.length)];
      byte[] bin = new byte[r.nextInt(20)];
      r.nextBytes(bin);
      v[8] = r.nextInt(5) == 0 ? null : bin;
      // the same object as column s, or an equal copy of it (RowWriter caches by identity)
      v[9] = sameText ? v[0] : v[0] == null ? null : new String(((String) v[0]).toCharArray());
      v[10] = r.nextInt(8) == 0 ? new BigDecimal(r.nextInt(100000)).movePointLeft(2) : null;
      v[11] = r.nextInt(8) == 0 ? java.sql.Date.valueOf("2024-05-01") : null;
      v[12] = r.nextInt(8) == 0 ? RowFactory.create(r.nextLong()) : null;
      Row row = RowFactory.create(v);
      byte[] expected = RowWriter.serialized(serializer, row);
      byte[] fast = writer.write(row);
      if (fast != null) written++;
      if (fast != null && !java.util.Arrays.equals(fast, expected)) mismatched++;
      // the text as Spark's own UTF8String (a map-side partial's key): the same bytes
      Object[] utf8 = v.clone();
      for (int i : new int[] {0, 9}) if (utf8[i] != null) utf8[i] = org.apache.spark.unsafe.types.UTF8String.fromString((String) utf8[i]);
      byte[] fromUtf8 = writer.write(RowFactory.create(utf8));
      if (fast != null && !java.util.Arrays.equals(fromUtf8, expected)) mismatched++;
    }
    return new long[] {mismatched, written};
  }
}
