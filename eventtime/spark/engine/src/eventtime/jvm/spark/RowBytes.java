package eventtime.jvm.spark;

import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.JavaCode;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * A binary column holding Spark's binary rows ({@link UnsafeRow} bytes of {@code type}, written by
 * {@link BinaryRows}) read as a struct of {@code type}: the row points at the bytes, nothing is
 * copied or converted.
 */
public final class RowBytes extends OneChildExpression {
  private static final long serialVersionUID = 1L;
  private final StructType type;

  public RowBytes(Seq<Expression> children, StructType type) {
    super(children);
    this.type = type;
  }

  /** {@code child} (binary) as a struct of {@code type}. */
  public static Column column(Column child, StructType type) {
    return ExpressionUtils.column(new RowBytes(
        CollectionConverters.asScala(List.of(ExpressionUtils.expression(child))).toList(), type));
  }

  /** The row {@code bytes} hold (its fields point into them). */
  public static UnsafeRow of(byte[] bytes, int fields) {
    UnsafeRow row = new UnsafeRow(fields);
    row.pointTo(bytes, bytes.length);
    return row;
  }

  @Override
  public DataType dataType() {
    return type;
  }

  @Override
  public Object eval(InternalRow row) {
    Object bytes = child().eval(row);
    return bytes == null ? null : of((byte[]) bytes, type.size());
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    ExprCode c = child().genCode(ctx);
    String isNull = ctx.freshName("rowBytesIsNull");
    String value = ctx.freshName("rowBytes");
    String code = c.code().toString() + "\n"
        + "boolean " + isNull + " = " + c.isNull() + ";\n"
        + "InternalRow " + value + " = " + isNull + " ? null : " + RowBytes.class.getName() + ".of(" + c.value() + ", "
        + type.size() + ");\n";
    return new ExprCode(new CodeBlock(
        CollectionConverters.asScala(List.of(code)).toList(),
        CollectionConverters.asScala(List.<JavaCode>of()).toList()),
        JavaCode.isNullVariable(isNull), JavaCode.variable(value, type));
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
    return new RowBytes(children.toList(), type);
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    return n == 0 ? kids : type;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof RowBytes;
  }
}
