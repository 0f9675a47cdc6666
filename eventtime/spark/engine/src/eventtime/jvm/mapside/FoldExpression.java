package eventtime.jvm.mapside;

import eventtime.jvm.plan.Spec;
import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.DataTypes;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * {@link Fold} as a Catalyst expression, so that Spark's generated code for the input calls it
 * with Spark's own values: no conversion of the row (or of a struct of its columns) to Java
 * objects, no decoding of text. Children: event time (ms), row class, partition, then the key
 * columns and the aggregated columns. Nondeterministic, so the optimizer neither moves nor
 * duplicates it (each call may consume the row).
 */
public final class FoldExpression extends Expression implements java.io.Serializable {
  private static final long serialVersionUID = 1L;
  private final Fold fold;
  private final Seq<Expression> kids;

  public FoldExpression(Fold fold, Seq<Expression> children) {
    this.fold = fold;
    this.kids = children;
  }

  /** The filter column: true for a row {@link Fold} consumed. */
  public static Column column(Spec spec, Column ms, Column cls, Column partition, Column[] values) {
    List<Expression> c = new ArrayList<>();
    c.add(ExpressionUtils.expression(ms));
    c.add(ExpressionUtils.expression(cls));
    c.add(ExpressionUtils.expression(partition));
    for (Column v : values) c.add(ExpressionUtils.expression(v));
    return ExpressionUtils.column(new FoldExpression(new Fold(spec), CollectionConverters.asScala(c).toList()));
  }

  @Override
  public Seq<Expression> children() {
    return kids;
  }

  @Override
  public boolean nullable() {
    return false;
  }

  @Override
  public DataType dataType() {
    return DataTypes.BooleanType;
  }

  @Override
  public boolean deterministic() {
    return false;
  }

  @Override
  public Object eval(InternalRow row) {
    Object ms = kids.apply(0).eval(row), cls = kids.apply(1).eval(row);
    Object[] values = fold.scratch();
    for (int i = 0; i < values.length; i++) values[i] = kids.apply(3 + i).eval(row);
    return fold.call(ms == null, ms == null ? 0L : (Long) ms, cls == null, cls == null ? 0 : (Integer) cls,
        kids.apply(2).eval(row), values);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    String f = ctx.addReferenceObj("eventtimeFold", fold, Fold.class.getName());
    String values = ctx.freshName("foldValues");
    StringBuilder code = new StringBuilder();
    ExprCode ms = kids.apply(0).genCode(ctx), cls = kids.apply(1).genCode(ctx), part = kids.apply(2).genCode(ctx);
    code.append(ms.code()).append('\n').append(cls.code()).append('\n').append(part.code()).append('\n');
    code.append("Object[] ").append(values).append(" = ").append(f).append(".scratch();\n");
    for (int i = 3; i < kids.length(); i++) {
      ExprCode v = kids.apply(i).genCode(ctx);
      code.append(v.code()).append('\n');
      code.append(values).append('[').append(i - 3).append("] = ").append(boxed(v, kids.apply(i).dataType())).append(";\n");
    }
    code.append("boolean ").append(ev.value()).append(" = ").append(f).append(".call(")
        .append(ms.isNull()).append(", ").append(ms.value()).append(", ")
        .append(cls.isNull()).append(", ").append(cls.value()).append(", ")
        .append(boxed(part, kids.apply(2).dataType())).append(", ").append(values).append(");\n");
    CodeBlock block = new CodeBlock(
        CollectionConverters.asScala(List.of(code.toString())).toList(),
        CollectionConverters.asScala(List.<org.apache.spark.sql.catalyst.expressions.codegen.JavaCode>of()).toList());
    return new ExprCode(block, FalseLiteral$.MODULE$, ev.value());
  }

  /** Java code for the value of {@code v} as an Object (null when null). */
  private static String boxed(ExprCode v, DataType type) {
    String value = v.value().toString();
    if (CodeGenerator.isPrimitiveType(type)) value = CodeGenerator.boxedType(type) + ".valueOf(" + value + ")";
    return "(" + v.isNull() + " ? null : (Object) " + value + ")";
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
    return new FoldExpression(fold, children.toList());
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    return n == 0 ? fold : kids;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof FoldExpression;
  }
}
