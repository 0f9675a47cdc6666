package eventtime.jvm.spark;

import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.ConditionalExpression;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeBlock;
import org.apache.spark.sql.catalyst.expressions.codegen.CodeGenerator;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.expressions.codegen.FalseLiteral$;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.DataType;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * Its child's value, which is the same for the whole micro-batch (the batch's
 * {@code current_timestamp()}), handed to Spark's generated code as a reference object instead
 * of a literal in the code. Spark writes the batch timestamp into the code as a constant, so each
 * batch's code was new: compiled again, and run from the interpreter up with no JIT profile
 * (measured: the tumbling benchmark ran 8-12 % slower than with the time pinned by {@code now=}).
 * Same value, same semantics; not foldable, so the optimizer keeps it. Deterministic: Spark's
 * batch timestamp is nondeterministic only because it changes from one batch to the next; within
 * a batch it is one value, recorded in the offset log, so a batch run again gets it again. So the
 * optimizer treats it as the constant it is for the batch, as it does a pinned {@code now}: the
 * generated code of the input stage is that of the pinned time but for the addition of {@code
 * max_future} (compared line by line).
 *
 * <p>A {@link ConditionalExpression} with no input always evaluated: the generated code never
 * evaluates the child (it reads the value), so Spark's common-subexpression elimination must not
 * take the child out as a subexpression of its own, which would write the value into the code
 * after all (measured: a class compiled per batch once the same bound appeared twice in a stage).
 */
public final class BatchValue extends OneChildExpression implements ConditionalExpression {
  private static final long serialVersionUID = 1L;

  public BatchValue(Seq<Expression> children) {
    super(children);
  }

  /** {@code child}'s value, kept out of the generated code's text. */
  public static Column column(Column child) {
    return ExpressionUtils.column(new BatchValue(
        CollectionConverters.asScala(List.of(ExpressionUtils.expression(child))).toList()));
  }

  @Override
  public DataType dataType() {
    return child().dataType();
  }

  @Override
  public boolean deterministic() {
    return true;
  }

  @Override
  public boolean foldable() {
    return false;
  }

  @Override
  public Seq<Expression> alwaysEvaluatedInputs() {
    return CollectionConverters.asScala(List.<Expression>of()).toList();
  }

  @Override
  public ConditionalExpression withNewAlwaysEvaluatedInputs(Seq<Expression> inputs) {
    return this;
  }

  @Override
  public Seq<Seq<Expression>> branchGroups() {
    return CollectionConverters.asScala(List.<Seq<Expression>>of()).toList();
  }

  @Override
  public Object eval(InternalRow row) {
    return child().eval(row);
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    Expression c = child();
    Object value = c.foldable() ? c.eval(null) : null;
    if (value == null) return c.genCode(ctx); // not one value per batch, or null (no value in the code)
    DataType type = c.dataType();
    String javaType = CodeGenerator.javaType(type);
    String ref = ctx.addReferenceObj("batchValue", value, CodeGenerator.boxedType(type));
    String unboxed = CodeGenerator.isPrimitiveType(type) ? ref + "." + javaType + "Value()" : ref;
    return new ExprCode(block(javaType + " " + ev.value() + " = " + unboxed + ";"), FalseLiteral$.MODULE$, ev.value());
  }

  private static CodeBlock block(String code) {
    return new CodeBlock(
        CollectionConverters.asScala(List.of(code)).toList(),
        CollectionConverters.asScala(List.<org.apache.spark.sql.catalyst.expressions.codegen.JavaCode>of()).toList());
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
    return new BatchValue(children.toList());
  }

  @Override
  public int productArity() {
    return 1;
  }

  @Override
  public Object productElement(int n) {
    return kids;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof BatchValue;
  }
}
