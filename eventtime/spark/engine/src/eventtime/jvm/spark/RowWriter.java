package eventtime.jvm.spark;

import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.UnsafeRowWriter;
import org.apache.spark.sql.types.BinaryType;
import org.apache.spark.sql.types.BooleanType;
import org.apache.spark.sql.types.ByteType;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DoubleType;
import org.apache.spark.sql.types.FloatType;
import org.apache.spark.sql.types.IntegerType;
import org.apache.spark.sql.types.LongType;
import org.apache.spark.sql.types.ShortType;
import org.apache.spark.sql.types.StringType;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.UTF8String;

/**
 * Writes a {@code Row} of {@code type} as Spark's binary row: with the writer calls Spark's
 * generated serializer makes when its non-null values are numbers, booleans, text (a Java string
 * or Spark's own UTF-8 string) and binary,
 * else with that serializer (one per task thread). Most rows the engine packs are such: the
 * operator's panes ({@link BinaryRows}) and the map side's partials ({@link Packed}). They skip
 * the generic serializer's per-field checks and conversions, and a text value that comes again
 * as the same object (a pane's kind and timing, a key's text for its several panes) is encoded
 * once.
 */
public final class RowWriter {
  private static final int LONG = 0, INT = 1, SHORT = 2, BYTE = 3, BOOLEAN = 4, DOUBLE = 5, FLOAT = 6, TEXT = 7,
      BINARY = 8, OTHER = 9;
  private static final int CACHE = 64;

  private final StructType type;
  private final int[] kinds;
  private final UnsafeRowWriter writer;
  private ExpressionEncoder.Serializer<Row> serializer;
  // the UTF-8 of the last text values, by identity of the Java string
  private final String[] cachedText = new String[CACHE];
  private final UTF8String[] cachedUtf8 = new UTF8String[CACHE];

  public RowWriter(StructType type) {
    this.type = type;
    kinds = new int[type.size()];
    for (int i = 0; i < kinds.length; i++) kinds[i] = kind(type.fields()[i].dataType());
    writer = new UnsafeRowWriter(kinds.length, 64);
  }

  private static int kind(DataType t) {
    if (t instanceof LongType) return LONG;
    if (t instanceof IntegerType) return INT;
    if (t instanceof ShortType) return SHORT;
    if (t instanceof ByteType) return BYTE;
    if (t instanceof BooleanType) return BOOLEAN;
    if (t instanceof DoubleType) return DOUBLE;
    if (t instanceof FloatType) return FLOAT;
    if (t instanceof StringType) return TEXT;
    if (t instanceof BinaryType) return BINARY;
    return OTHER;
  }

  /** The row's bytes (a copy: the caller keeps them). */
  public byte[] bytes(Row row) {
    byte[] written = write(row);
    if (written != null) return written;
    if (serializer == null) serializer = serializer(type);
    return serialized(serializer, row);
  }

  /** This task thread's serializer of {@code Row}s of {@code type} into Spark's binary rows. */
  static ExpressionEncoder.Serializer<Row> serializer(StructType type) {
    return SERIALIZERS.get().computeIfAbsent(type, t -> ExpressionEncoder.apply(t).createSerializer());
  }

  /** The row's bytes by Spark's own serializer (which reuses its row: the bytes are copied out). */
  static byte[] serialized(ExpressionEncoder.Serializer<Row> serializer, Row row) {
    return ((UnsafeRow) serializer.apply(row)).getBytes();
  }

  /*
   * Per task thread, the serializer of each row type: creating one generates its code (a third of
   * a small batch's operator time when each task made its own); one is not thread-safe.
   */
  private static final ThreadLocal<java.util.Map<StructType, ExpressionEncoder.Serializer<Row>>> SERIALIZERS =
      ThreadLocal.withInitial(java.util.HashMap::new);

  /** The row's bytes, or null when a non-null value is not one this writer handles. */
  byte[] write(Row row) {
    UnsafeRowWriter w = writer;
    w.reset();
    w.zeroOutNullBytes();
    for (int i = 0; i < kinds.length; i++) {
      Object v = row.get(i);
      if (v == null) {
        w.setNullAt(i);
        continue;
      }
      switch (kinds[i]) {
        case LONG:
          if (!(v instanceof Long)) return null;
          w.write(i, ((Long) v).longValue());
          break;
        case INT:
          if (!(v instanceof Integer)) return null;
          w.write(i, ((Integer) v).intValue());
          break;
        case SHORT:
          if (!(v instanceof Short)) return null;
          w.write(i, ((Short) v).shortValue());
          break;
        case BYTE:
          if (!(v instanceof Byte)) return null;
          w.write(i, ((Byte) v).byteValue());
          break;
        case BOOLEAN:
          if (!(v instanceof Boolean)) return null;
          w.write(i, ((Boolean) v).booleanValue());
          break;
        case DOUBLE:
          if (!(v instanceof Double)) return null;
          w.write(i, ((Double) v).doubleValue());
          break;
        case FLOAT:
          if (!(v instanceof Float)) return null;
          w.write(i, ((Float) v).floatValue());
          break;
        case TEXT:
          if (v instanceof UTF8String) w.write(i, (UTF8String) v);
          else if (v instanceof String) w.write(i, utf8((String) v));
          else return null;
          break;
        case BINARY:
          if (!(v instanceof byte[])) return null;
          w.write(i, (byte[]) v);
          break;
        default:
          return null;
      }
    }
    return w.getRow().getBytes();
  }

  private UTF8String utf8(String s) {
    int slot = System.identityHashCode(s) & (CACHE - 1);
    if (cachedText[slot] != s) {
      cachedText[slot] = s;
      cachedUtf8[slot] = UTF8String.fromString(s);
    }
    return cachedUtf8[slot];
  }
}
