package eventtime.jvm.output;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.io.Serializable;
import java.nio.channels.Channels;
import java.util.ArrayList;
import java.util.Iterator;
import java.util.List;
import org.apache.arrow.vector.ipc.ArrowStreamWriter;
import org.apache.spark.api.python.PythonRDD;
import org.apache.spark.rdd.RDD;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.GenericArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.execution.LogicalRDD;
import org.apache.spark.sql.execution.arrow.ArrowWriter;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.Decimal;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;
import org.apache.spark.unsafe.types.BinaryView;
import org.apache.spark.unsafe.types.CalendarInterval;
import org.apache.spark.unsafe.types.UTF8String;
import org.apache.spark.unsafe.types.VariantVal;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One micro-batch of the operator output ({@code et__out}, the struct of {@code Spec.outputType})
 * to the driver's Python as Arrow, split by {@code kind} in the tasks: each task writes one Arrow
 * stream per shape (panes, records, statistics) with only that shape's columns, and the driver
 * serves them to Python over PySpark's authenticated local socket, as {@code toArrow} does. A
 * pane then carries its dozen columns into Arrow instead of the output's two dozen, and Python
 * filters nothing.
 *
 * <p>The shapes come from Python (eventtime/spark/router.py) as JSON: per shape, the kinds it
 * takes and its columns, each a field of the output struct as it is, as a timestamp (epoch ms to
 * Spark's microseconds) or as session bounds (the same, inside {@code merged_from}).
 */
public final class Collect {
  private Collect() {}

  static final int AS_IS = 0, TIMESTAMP = 1, BOUNDS = 2;

  /** One shape: the kinds it takes, its Spark schema, and per column the output field and its conversion. */
  static final class Shape implements Serializable {
    private static final long serialVersionUID = 1L;
    final UTF8String[] kinds;
    final StructType schema;
    final int[] source;
    final int[] conversion;

    Shape(UTF8String[] kinds, StructType schema, int[] source, int[] conversion) {
      this.kinds = kinds;
      this.schema = schema;
      this.source = source;
      this.conversion = conversion;
    }

    boolean takes(UTF8String kind) {
      for (UTF8String k : kinds) if (kind.equals(k)) return true;
      return false;
    }
  }

  // the type of window_aggregate's merged_from column (Spark's transform of the bounds: elements not null)
  private static final DataType BOUNDS_TYPE = DataTypes.createArrayType(DataTypes.createStructType(new StructField[] {
    DataTypes.createStructField("start", DataTypes.TimestampType, true),
    DataTypes.createStructField("end", DataTypes.TimestampType, true),
  }), false);

  /** The shapes of {@code shapesJson} over an output struct of {@code outputType}. */
  static Shape[] shapes(StructType outputType, String shapesJson) {
    try {
      JsonNode all = new ObjectMapper().readTree(shapesJson);
      Shape[] shapes = new Shape[all.size()];
      for (int s = 0; s < shapes.length; s++) {
        JsonNode n = all.get(s);
        UTF8String[] kinds = new UTF8String[n.get("kinds").size()];
        for (int k = 0; k < kinds.length; k++) kinds[k] = UTF8String.fromString(n.get("kinds").get(k).asText());
        JsonNode cols = n.get("columns");
        StructField[] fields = new StructField[cols.size()];
        int[] source = new int[cols.size()];
        int[] conversion = new int[cols.size()];
        for (int c = 0; c < fields.length; c++) {
          JsonNode col = cols.get(c);
          source[c] = outputType.fieldIndex(col.get("field").asText());
          String as = col.has("as") ? col.get("as").asText() : "";
          conversion[c] = "timestamp".equals(as) ? TIMESTAMP : "bounds".equals(as) ? BOUNDS : AS_IS;
          DataType type = conversion[c] == TIMESTAMP ? DataTypes.TimestampType
              : conversion[c] == BOUNDS ? BOUNDS_TYPE : outputType.fields()[source[c]].dataType();
          fields[c] = DataTypes.createStructField(col.get("name").asText(), type, true);
        }
        shapes[s] = new Shape(kinds, DataTypes.createStructType(fields), source, conversion);
      }
      return shapes;
    } catch (IOException e) {
      throw new IllegalArgumentException("eventtime: bad collect shapes " + shapesJson, e);
    }
  }

  /**
   * A pipeline's shapes over its output type, both parsed here once: {@code route} keeps the
   * result and serves every batch with it (parsing them took 0.46–0.90 ms a batch).
   */
  public static Pipeline parse(String outputTypeJson, String shapesJson) {
    StructType outputType = (StructType) DataType.fromJson(outputTypeJson);
    return new Pipeline(outputType.size(), shapes(outputType, shapesJson));
  }

  /** What one pipeline's batches are served with: the width of its output struct and its shapes. */
  public static final class Pipeline {
    private final int width;
    private final Shape[] shapes;

    private Pipeline(int width, Shape[] shapes) {
      this.width = width;
      this.shapes = shapes;
    }

    /** The Spark schema of each shape (JSON of a list of StructTypes), for the Python side's Arrow types. */
    public String schemas() {
      StringBuilder out = new StringBuilder("[");
      for (Shape s : shapes) {
        if (out.length() > 1) out.append(',');
        out.append(s.schema.json());
      }
      return out.append(']').toString();
    }

    /** {@link Collect#serve} of one batch of this pipeline. */
    public Object[] serve(Dataset<Row> batch, boolean largeVarTypes) {
      return Collect.serve(batch, width, shapes, largeVarTypes);
    }
  }

  /**
   * Runs {@code batch} (one column: the output struct) and serves to Python, per task, one Arrow
   * IPC stream per shape in the shapes' order: PySpark's {@code [port, secret, server]}. Text
   * and binary columns are Arrow's large types when {@code largeVarTypes} (as toArrow has them
   * under spark.sql.execution.arrow.useLargeVarTypes).
   */
  static Object[] serve(Dataset<Row> batch, int width, Shape[] shapes, boolean largeVarTypes) {
    RDD<InternalRow> rows = rows(batch);
    // runJob with the encoder itself: RDD.collect's function holds its RDD, and Spark's closure
    // check would serialize the batch's whole lineage (its plan's closures and the operator) on
    // the driver in every batch.
    byte[][][] perTask = (byte[][][]) rows.sparkContext().runJob(
        rows, new Encode(shapes, width, largeVarTypes), scala.reflect.ClassTag$.MODULE$.apply(byte[][].class));
    List<Object> streams = new ArrayList<>();
    for (byte[][] task : perTask) streams.addAll(java.util.Arrays.asList((Object[]) task));
    return PythonRDD.serveIterator(CollectionConverters.asScala(streams.iterator()), "serve-eventtime");
  }

  /**
   * The batch's rows. In {@code foreachBatch} the batch is the micro-batch's own executed plan
   * wrapped as a {@code LogicalRDD}: its RDD as it is (a plan over it would copy every row once
   * more); otherwise the plan's.
   */
  private static RDD<InternalRow> rows(Dataset<Row> batch) {
    LogicalPlan plan = batch.queryExecution().analyzed();
    if (plan instanceof LogicalRDD) return ((LogicalRDD) plan).rdd();
    return batch.queryExecution().toRdd();
  }

  /** One task: its rows to one Arrow stream per shape. */
  static final class Encode extends scala.runtime.AbstractFunction1<scala.collection.Iterator<InternalRow>, byte[][]>
      implements Serializable {
    private static final long serialVersionUID = 1L;
    private final Shape[] shapes;
    private final int width;
    private final boolean largeVarTypes;

    Encode(Shape[] shapes, int width, boolean largeVarTypes) {
      this.shapes = shapes;
      this.width = width;
      this.largeVarTypes = largeVarTypes;
    }

    @Override
    public byte[][] apply(scala.collection.Iterator<InternalRow> rows) {
      try {
        return encode(CollectionConverters.asJava(rows));
      } catch (IOException e) {
        throw new java.io.UncheckedIOException(e);
      }
    }

    private byte[][] encode(Iterator<InternalRow> rows) throws IOException {
      ArrowWriter[] writers = new ArrowWriter[shapes.length];
      try {
        Shaped[] views = new Shaped[shapes.length];
        for (int s = 0; s < shapes.length; s++) {
          // the types toArrow gives the same columns (timestamps in UTC)
          writers[s] = ArrowWriter.create(shapes[s].schema, "UTC", true, largeVarTypes);
          views[s] = new Shaped(shapes[s]);
        }
        while (rows.hasNext()) {
          InternalRow out = rows.next().getStruct(0, width);
          UTF8String kind = out.getUTF8String(0);
          for (int s = 0; s < shapes.length; s++) {
            if (shapes[s].takes(kind)) {
              writers[s].write(views[s].over(out));
              break;
            }
          }
        }
        byte[][] streams = new byte[shapes.length][];
        for (int s = 0; s < shapes.length; s++) {
          ArrowWriter w = writers[s];
          w.finish();
          ByteArrayOutputStream bytes = new ByteArrayOutputStream();
          try (ArrowStreamWriter stream = new ArrowStreamWriter(w.root(), null, Channels.newChannel(bytes))) {
            stream.start();
            stream.writeBatch();
            stream.end();
          }
          streams[s] = bytes.toByteArray();
        }
        return streams;
      } finally {
        for (ArrowWriter w : writers) if (w != null) w.root().close();
      }
    }
  }

  /** An output row seen as one shape's columns (times converted from epoch ms as they are read). */
  static final class Shaped extends DelegatingRow {
    private static final long serialVersionUID = 1L;
    private final Shape shape;

    Shaped(Shape shape) {
      this.shape = shape;
    }

    Shaped over(InternalRow row) {
      this.row = row;
      return this;
    }

    @Override
    protected int at(int i) {
      return shape.source[i];
    }

    @Override
    public int numFields() {
      return shape.source.length;
    }

    @Override
    public boolean isNullAt(int i) {
      return row.isNullAt(at(i));
    }

    @Override
    public long getLong(int i) {
      long v = row.getLong(at(i));
      return shape.conversion[i] == TIMESTAMP ? Math.multiplyExact(v, 1000L) : v;
    }

    @Override
    public ArrayData getArray(int i) {
      ArrayData a = row.getArray(at(i));
      if (shape.conversion[i] != BOUNDS || a == null) return a;
      Object[] bounds = new Object[a.numElements()];
      for (int b = 0; b < bounds.length; b++) {
        InternalRow r = a.getStruct(b, 2);
        bounds[b] = new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(new Object[] {
          r.isNullAt(0) ? null : (Object) Math.multiplyExact(r.getLong(0), 1000L),
          r.isNullAt(1) ? null : (Object) Math.multiplyExact(r.getLong(1), 1000L)});
      }
      return new GenericArrayData(bounds);
    }

    @Override public boolean getBoolean(int i) { return row.getBoolean(at(i)); }
    @Override public byte getByte(int i) { return row.getByte(at(i)); }
    @Override public short getShort(int i) { return row.getShort(at(i)); }
    @Override public int getInt(int i) { return row.getInt(at(i)); }
    @Override public float getFloat(int i) { return row.getFloat(at(i)); }
    @Override public double getDouble(int i) { return row.getDouble(at(i)); }
    @Override public Decimal getDecimal(int i, int precision, int scale) { return row.getDecimal(at(i), precision, scale); }
    @Override public UTF8String getUTF8String(int i) { return row.getUTF8String(at(i)); }
    @Override public byte[] getBinary(int i) { return row.getBinary(at(i)); }
    @Override public BinaryView getBinaryView(int i) { return row.getBinaryView(at(i)); }
    @Override public CalendarInterval getInterval(int i) { return row.getInterval(at(i)); }
    @Override public VariantVal getVariant(int i) { return row.getVariant(at(i)); }
    @Override public InternalRow getStruct(int i, int numFields) { return row.getStruct(at(i), numFields); }
    @Override public MapData getMap(int i) { return row.getMap(at(i)); }

    @Override
    public Object get(int i, DataType type) {
      if (isNullAt(i)) return null;
      if (shape.conversion[i] == TIMESTAMP) return getLong(i);
      if (shape.conversion[i] == BOUNDS) return getArray(i);
      return row.get(at(i), type);
    }

    @Override
    public void setNullAt(int i) {
      throw new UnsupportedOperationException("eventtime: a shaped output row is read-only");
    }

    @Override
    public void update(int i, Object value) {
      throw new UnsupportedOperationException("eventtime: a shaped output row is read-only");
    }

    @Override
    public InternalRow copy() {
      Object[] values = new Object[numFields()];
      for (int i = 0; i < values.length; i++) {
        DataType t = shape.schema.fields()[i].dataType();
        Object v = get(i, t);
        values[i] = v instanceof InternalRow ? ((InternalRow) v).copy() : v instanceof ArrayData ? ((ArrayData) v).copy()
            : v instanceof UTF8String ? ((UTF8String) v).clone() : v;
      }
      return new org.apache.spark.sql.catalyst.expressions.GenericInternalRow(values);
    }
  }
}
