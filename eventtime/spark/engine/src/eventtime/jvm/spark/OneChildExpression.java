package eventtime.jvm.spark;

import org.apache.spark.sql.catalyst.expressions.Expression;
import scala.collection.immutable.Seq;

/** A Catalyst expression of the engine's with one child (its children as Spark holds them). */
abstract class OneChildExpression extends Expression implements java.io.Serializable {
  private static final long serialVersionUID = 1L;
  protected final Seq<Expression> kids;

  OneChildExpression(Seq<Expression> children) {
    this.kids = children;
  }

  protected final Expression child() {
    return kids.apply(0);
  }

  @Override
  public Seq<Expression> children() {
    return kids;
  }

  @Override
  public boolean nullable() {
    return child().nullable();
  }
}
