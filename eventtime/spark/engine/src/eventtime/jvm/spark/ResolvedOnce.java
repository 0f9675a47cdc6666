package eventtime.jvm.spark;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.catalyst.analysis.Analyzer;
import org.apache.spark.sql.catalyst.analysis.SimpleAnalyzer$;
import org.apache.spark.sql.catalyst.encoders.ExpressionEncoder;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.types.StructType;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * An encoder of the operator's state variables (and of its grouping key) that Spark's analyzer
 * resolves once per JVM, not once per task.
 *
 * <p>{@code transformWithState} makes its state variables anew in every task of every batch,
 * and each resolves its encoders there ({@code ExpressionEncoder.resolveAndBind}: a run of
 * Spark's analyzer, about a millisecond apiece, four a task). The resolved encoder depends only
 * on the encoder and on the columns it is bound to, so it is kept, per JVM, under the two. The
 * value is Spark's own resolved encoder: nothing else changes, and the state's schema (in the
 * checkpoint) is the same as the plain encoder's.
 */
public final class ResolvedOnce<T> extends ExpressionEncoder<T> {
  private static final long serialVersionUID = 1L;
  private static final Map<List<Object>, ExpressionEncoder<?>> RESOLVED = new ConcurrentHashMap<>();
  private static final java.util.concurrent.atomic.AtomicLong RESOLUTIONS = new java.util.concurrent.atomic.AtomicLong();

  private ResolvedOnce(ExpressionEncoder<T> e) {
    super(e.encoder(), e.objSerializer(), e.objDeserializer());
  }

  private static <T> ExpressionEncoder<T> of(Encoder<T> encoder) {
    return new ResolvedOnce<>(org.apache.spark.sql.catalyst.encoders.package$.MODULE$.encoderFor(encoder));
  }

  /** {@code Encoders.row(schema)}, resolved once. */
  public static ExpressionEncoder<Row> row(StructType schema) {
    return of(Encoders.row(schema));
  }

  /** {@code Encoders.BINARY()}, resolved once. */
  public static ExpressionEncoder<byte[]> binary() {
    return of(Encoders.BINARY());
  }

  @Override
  @SuppressWarnings("unchecked")
  public ExpressionEncoder<T> resolveAndBind(Seq<Attribute> attrs, Analyzer analyzer) {
    if (analyzer != SimpleAnalyzer$.MODULE$) return super.resolveAndBind(attrs, analyzer);
    List<Object> key = new ArrayList<>();
    key.add(encoder());
    for (Attribute a : CollectionConverters.asJava(attrs)) {  // by name and type (each call's ids are new)
      key.add(a.name());
      key.add(a.dataType());
      key.add(a.nullable());
    }
    return (ExpressionEncoder<T>) RESOLVED.computeIfAbsent(key, k -> {
      RESOLUTIONS.incrementAndGet();
      return super.resolveAndBind(attrs, analyzer);
    });
  }

  /** How many times this JVM ran the analyzer for these encoders. */
  public static long resolutions() {
    return RESOLUTIONS.get();
  }
}
