package eventtime.jvm.output;

import eventtime.jvm.spark.SqlAggregate;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.spark.sql.Dataset;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.CatalystTypeConverters;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.StructType;

/**
 * Reconcile's merge of a mergeable Spark SQL aggregation (eventtime/spark/pane_merge.py): each
 * correction's panes' buffers (the bytes a pane carries, Contract.ACC_BUFFER) and late records,
 * merged and updated by Spark's own function ({@link SqlAggregate}) on the driver, then evaluated.
 */
public final class PaneMerge {
  private PaneMerge() {}

  /**
   * {@code cells}: rows {@code (cell int, buffer binary, record struct)}, each a pane's buffer
   * (record null) or a late record of {@code recordType} (buffer null) of correction {@code cell}.
   * The result: a row {@code (cell, value, buffer)} per cell, the value of {@code sql}'s result
   * type, the buffer as a pane carries it.
   */
  public static Dataset<Row> merge(Dataset<Row> cells, String sql, String recordTypeJson) {
    StructType recordType = (StructType) DataType.fromJson(recordTypeJson);
    SqlAggregate agg = SqlAggregate.of(sql, recordType);
    scala.Function1<Object, Object> toInternal = CatalystTypeConverters.createToCatalystConverter(recordType);
    Map<Integer, InternalRow> buffers = new TreeMap<>();
    for (Row r : cells.collectAsList()) {
      InternalRow buffer = buffers.computeIfAbsent(r.getInt(0), c -> agg.create());
      if (!r.isNullAt(1)) agg.merge(buffer, agg.read((byte[]) r.get(1)));
      if (!r.isNullAt(2)) agg.update(buffer, (InternalRow) toInternal.apply(r.getStruct(2)));
    }
    List<Row> out = new ArrayList<>(buffers.size());
    for (Map.Entry<Integer, InternalRow> e : buffers.entrySet()) {
      Object value = CatalystTypeConverters.convertToScala(agg.eval(e.getValue()), agg.resultType);
      out.add(RowFactory.create(e.getKey(), value, agg.write(e.getValue())));
    }
    StructType schema = new StructType()
        .add("cell", DataTypes.IntegerType, false)
        .add("value", agg.resultType, true)
        .add("buffer", DataTypes.BinaryType, true);
    return SparkSession.active().createDataFrame(out, schema);
  }
}
