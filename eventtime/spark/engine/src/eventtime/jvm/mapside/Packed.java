package eventtime.jvm.mapside;

import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.spark.RowWriter;
import java.util.HashMap;
import java.util.Iterator;
import java.util.Map;
import org.apache.spark.api.java.function.MapPartitionsFunction;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/**
 * The operator input between the {@link Mapper} and the {@link WindowOperator} as Spark's binary
 * rows: the grouping key ({@link Layout#group}), the task's largest event time on its carrier row
 * ({@link MapSideWatermark}), and the whole operator row ({@link Layout}) as {@link UnsafeRow}
 * bytes. With the operator rows as Java {@code Row}s, Spark's plan holds a serializer after the
 * mapper and a deserializer before the operator, an expression per column with the record's
 * struct nested in both: about 330 expressions (of about 730 in the whole plan for one key, two
 * aggregations and five record columns) that the analyzer and optimizer go through again in
 * every micro-batch. Here the plan holds three columns, and the rows are written ({@link
 * RowWriter}) and read (Spark's generated deserializer) in the tasks.
 */
public final class Packed {
  private Packed() {}

  public static final String GROUP = Layout.GROUP, WATERMARK_MS = "et__wm_ms", VALUE = "et__v";

  /** The mapper's output: (et__gb, et__wm_ms, et__v). */
  public static StructType schema() {
    return DataTypes.createStructType(new StructField[] {
      DataTypes.createStructField(GROUP, DataTypes.IntegerType, false),
      DataTypes.createStructField(WATERMARK_MS, DataTypes.LongType, true),
      DataTypes.createStructField(VALUE, DataTypes.BinaryType, false),
    });
  }

  /** The operator's input without the carrier column (the value rows of the operator). */
  public static StructType valueSchema() {
    StructField[] f = schema().fields();
    return DataTypes.createStructType(new StructField[] {f[0], f[2]});
  }

  /*
   * Per task thread, the deserializer of each row type (as RowWriter's serializers): creating one
   * generates its code; one is not thread-safe.
   */
  private static final ThreadLocal<Map<StructType, ExpressionEncoder.Deserializer<Row>>> DESERIALIZERS =
      ThreadLocal.withInitial(HashMap::new);

  /** The {@link Mapper}'s rows, packed. */
  public static final class Pack implements MapPartitionsFunction<Row, Row> {
    private static final long serialVersionUID = 1L;
    private final Mapper mapper;
    private final Spec spec;

    public Pack(Mapper mapper, Spec spec) {
      this.mapper = mapper;
      this.spec = spec;
    }

    @Override
    public Iterator<Row> call(Iterator<Row> input) throws Exception {
      Iterator<Row> rows = mapper.call(input);
      RowWriter writer = new RowWriter(Layout.operatorSchema(spec));
      Layout lay = new Layout(spec);
      int cls = lay.cls, ms = lay.ms;
      return new Iterator<Row>() {
        @Override
        public boolean hasNext() {
          return rows.hasNext();
        }

        @Override
        public Row next() {
          Row r = rows.next();
          byte[] bytes = writer.bytes(r);
          Object carrier = r.getInt(cls) == Layout.WATERMARK ? r.get(ms) : null;
          return RowFactory.create(Layout.group(spec, r.getInt(0), r.getInt(1)), carrier, bytes);
        }
      };
    }
  }

  /** The operator rows of packed value rows. */
  public static scala.collection.Iterator<Row> unpack(StructType operatorType, scala.collection.Iterator<Row> rows) {
    ExpressionEncoder.Deserializer<Row> deserializer = DESERIALIZERS.get().computeIfAbsent(
        operatorType, t -> {
          ExpressionEncoder<Row> encoder = ExpressionEncoder.apply(t);
          return encoder.resolveAndBind(encoder.resolveAndBind$default$1(), encoder.resolveAndBind$default$2())
              .createDeserializer();
        });
    int width = operatorType.size();
    int value = valueSchema().fieldIndex(VALUE);
    UnsafeRow row = new UnsafeRow(width);
    return rows.map(r -> {
      byte[] bytes = (byte[]) r.get(value);
      row.pointTo(bytes, bytes.length);
      return deserializer.apply(row);
    });
  }
}
