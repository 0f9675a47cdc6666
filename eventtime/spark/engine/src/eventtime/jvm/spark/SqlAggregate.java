package eventtime.jvm.spark;

import java.util.ArrayList;
import java.util.List;
import org.apache.spark.sql.SparkSession;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Alias;
import org.apache.spark.sql.catalyst.expressions.Attribute;
import org.apache.spark.sql.catalyst.expressions.BindReferences;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.JoinedRow;
import org.apache.spark.sql.catalyst.expressions.MutableProjection;
import org.apache.spark.sql.catalyst.expressions.NamedExpression;
import org.apache.spark.sql.catalyst.expressions.Size;
import org.apache.spark.sql.catalyst.expressions.GenericInternalRow;
import org.apache.spark.sql.catalyst.expressions.SpecificInternalRow;
import org.apache.spark.sql.catalyst.expressions.UnsafeProjection;
import org.apache.spark.sql.catalyst.expressions.UnsafeRow;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateExpression;
import org.apache.spark.sql.catalyst.expressions.aggregate.AggregateFunction;
import org.apache.spark.sql.catalyst.expressions.aggregate.CollectSet;
import org.apache.spark.sql.catalyst.expressions.aggregate.Count;
import org.apache.spark.sql.catalyst.expressions.aggregate.DeclarativeAggregate;
import org.apache.spark.sql.catalyst.expressions.aggregate.ImperativeAggregate;
import org.apache.spark.sql.catalyst.expressions.aggregate.NoOp$;
import org.apache.spark.sql.catalyst.expressions.aggregate.TypedImperativeAggregate;
import org.apache.spark.sql.catalyst.plans.logical.Aggregate;
import org.apache.spark.sql.catalyst.plans.logical.LogicalPlan;
import org.apache.spark.sql.catalyst.plans.logical.Project;
import org.apache.spark.sql.types.DataType;
import org.apache.spark.sql.types.StructType;
import scala.jdk.javaapi.CollectionConverters;

/**
 * One Spark SQL aggregate function over the user's record, run by Spark's own implementation of
 * it, as Spark's {@code AggregatingAccumulator} runs one: its buffer is created, updated with a
 * record, merged with another buffer, evaluated, and written to bytes and read back. Declarative
 * functions ({@code sum}, {@code stddev}, {@code max_by}, ...) through their initial, update,
 * merge and evaluate expressions; imperative ones ({@code approx_count_distinct}) and typed
 * imperative ones ({@code percentile_approx}, {@code collect_set}, a registered
 * {@code Aggregator}) through their methods. {@code count(DISTINCT x)} is exact:
 * {@code size(collect_set(x))}. A {@code FILTER (WHERE ...)} clause is applied on update.
 */
public final class SqlAggregate implements java.io.Serializable {
  private static final long serialVersionUID = 1L;

  /** The SQL text it was made from, and its result type. */
  public final String sql;
  public final DataType resultType;
  /** The buffer as it is written (a typed imperative function's object as its bytes). */
  final StructType bufferType;
  private final DataType[] bufferFields;
  private final Expression[] initial, update, merge;
  private final Expression result, filter;
  private final ImperativeAggregate imperative;
  private final boolean typed;
  /**
   * Every buffer field is fixed-width ({@code UnsafeRow.isMutable}, Spark's hash aggregation's
   * test): the buffer is then an {@link UnsafeRow} over its own bytes, read and written without
   * copying its values one by one (boxed) into a generic row and back.
   */
  private final boolean unsafe;
  /** count(DISTINCT x): the set's size, a bigint as Spark's count. */
  private final boolean distinctCount;
  /** What the function reads, from the record, when it is not the record itself (else null). */
  private final Expression[] project;
  private final StructType projectType;

  private transient MutableProjection initialProjection, updateProjection, mergeProjection, inputProjection;
  private transient InternalRow input;
  private transient UnsafeProjection writer;
  private transient JoinedRow joined;
  /** The bytes of a new buffer, when {@link #unsafe}. */
  private transient byte[] initialBytes;

  /**
   * The aggregate of {@code sql} (one aggregate expression, e.g. {@code percentile_approx(ms,
   * 0.95)}) over rows of {@code recordType}, resolved by the active session's analyzer.
   */
  public static SqlAggregate of(String sql, StructType recordType) {
    LogicalPlan analyzed = analyze(empty(recordType), org.apache.spark.sql.functions.expr(sql));
    // functions Spark writes as others at optimization (count_if, bool_and, ...: RuntimeReplaceable)
    analyzed = org.apache.spark.sql.catalyst.optimizer.ReplaceExpressions$.MODULE$.apply(analyzed);
    // ...and the expressions they share (With) computed once per record, in a projection below
    analyzed = org.apache.spark.sql.catalyst.optimizer.RewriteWithExpression$.MODULE$.apply(analyzed);
    if (analyzed instanceof Project && ((Project) analyzed).child() instanceof Aggregate
        && isRename(((Project) analyzed).projectList())) {
      analyzed = ((Project) analyzed).child();  // the aggregate's result, renamed
    }
    if (!(analyzed instanceof Aggregate)) {
      throw new IllegalArgumentException("it is not one aggregate function call");
    }
    Aggregate aggregate = (Aggregate) analyzed;
    Expression body = (Expression) (Object) aggregate.aggregateExpressions().head();
    if (body instanceof Alias) body = ((Alias) body).child();
    if (!(body instanceof AggregateExpression)) {
      throw new IllegalArgumentException("it is not one aggregate function call (it is " + body.prettyName()
          + "); write the aggregate alone, e.g. percentile_approx(x, 0.95), and compute on its result after the window");
    }
    if (!body.deterministic()) {
      throw new IllegalArgumentException("it is not deterministic: a pane must be the same when Spark re-runs a batch");
    }
    LogicalPlan child = aggregate.child();
    Expression[] project = null;
    if (child instanceof Project) {
      List<Attribute> record = CollectionConverters.asJava(((Project) child).child().output());
      List<Expression> list = new ArrayList<>();
      for (NamedExpression e : CollectionConverters.asJava(((Project) child).projectList())) list.add((Expression) (Object) e);
      project = bind(list, record);
    }
    return new SqlAggregate(sql, (AggregateExpression) body, child.output(), project);
  }

  /**
   * The SQL text of {@code column} (a {@code pyspark.sql.Column}'s aggregate) resolved over rows of
   * {@code recordType}, which {@link #of} reads back as the same aggregate; refused when it does not.
   */
  public static String sqlOf(org.apache.spark.sql.Column column, StructType recordType) {
    var empty = empty(recordType);
    LogicalPlan analyzed = analyze(empty, column);
    Expression body = analyzed instanceof Aggregate
        ? (Expression) (Object) ((Aggregate) analyzed).aggregateExpressions().head() : null;
    if (body instanceof Alias) body = ((Alias) body).child();
    if (!(body instanceof AggregateExpression)) {
      throw new IllegalArgumentException("it is not one aggregate function call");
    }
    String sql = body.sql();
    Expression again = (Expression) (Object) ((Aggregate) analyze(empty, org.apache.spark.sql.functions.expr(sql)))
        .aggregateExpressions().head();
    if (again instanceof Alias) again = ((Alias) again).child();
    if (!again.semanticEquals(body)) {
      throw new IllegalArgumentException("its SQL text " + sql + " reads back as another expression; write it as text");
    }
    return sql;
  }

  private static org.apache.spark.sql.Dataset<org.apache.spark.sql.Row> empty(StructType recordType) {
    return SparkSession.active().createDataFrame(new ArrayList<org.apache.spark.sql.Row>(), recordType);
  }

  /** The analyzed plan of {@code empty.agg(column)}. */
  private static LogicalPlan analyze(org.apache.spark.sql.Dataset<org.apache.spark.sql.Row> empty,
      org.apache.spark.sql.Column column) {
    try {
      return ((org.apache.spark.sql.classic.Dataset<org.apache.spark.sql.Row>) empty).agg(column)
          .queryExecution().analyzed();
    } catch (Exception e) {  // Spark's AnalysisException, a checked exception Scala does not declare
      if (String.valueOf(e.getMessage()).contains("MISSING_GROUP_BY")) {
        throw new IllegalArgumentException("it is not one aggregate function call (it reads a column outside one)");
      }
      throw SqlAggregate.<RuntimeException>rethrow(e);
    }
  }

  @SuppressWarnings("unchecked")
  private static <T extends Throwable> T rethrow(Throwable e) throws T {
    throw (T) e;
  }

  private static boolean isRename(scala.collection.immutable.Seq<NamedExpression> list) {
    if (list.size() != 1) return false;
    Expression e = (Expression) (Object) list.head();
    if (e instanceof Alias) e = ((Alias) e).child();
    return e instanceof org.apache.spark.sql.catalyst.expressions.AttributeReference;
  }

  SqlAggregate(String sql, AggregateExpression aggregate, scala.collection.immutable.Seq<Attribute> input,
      Expression[] project) {
    this.sql = sql;
    this.project = project;
    if (project != null) {
      StructType in = new StructType();
      for (Attribute a : CollectionConverters.asJava(input)) in = in.add(a.name(), a.dataType(), true);
      projectType = in;
    } else {
      projectType = null;
    }
    List<Attribute> inputList = CollectionConverters.asJava(input);
    AggregateFunction fn = aggregate.aggregateFunction();
    Expression eval = null;
    if (aggregate.isDistinct()) {
      if (!(fn instanceof Count) || fn.children().size() != 1) {
        throw new IllegalArgumentException("DISTINCT is supported in count(DISTINCT x) of one column; for others "
            + "aggregate collect_set(x) and compute on it");
      }
      fn = new CollectSet(fn.children().head());
    }
    filter = aggregate.filter().isDefined()
        ? bind(aggregate.filter().get(), inputList) : null;
    List<Attribute> buffer = new ArrayList<>();
    List<Attribute> inputBuffer = new ArrayList<>();
    if (fn instanceof DeclarativeAggregate) {
      DeclarativeAggregate d = (DeclarativeAggregate) fn;
      buffer.addAll(CollectionConverters.asJava(d.aggBufferAttributes()));
      inputBuffer.addAll(CollectionConverters.asJava(d.inputAggBufferAttributes()));
      List<Attribute> updateInput = new ArrayList<>(buffer);
      updateInput.addAll(CollectionConverters.asJava(input));
      List<Attribute> mergeInput = new ArrayList<>(buffer);
      mergeInput.addAll(inputBuffer);
      initial = CollectionConverters.asJava(d.initialValues()).toArray(new Expression[0]);
      update = bind(CollectionConverters.asJava(d.updateExpressions()), updateInput);
      merge = bind(CollectionConverters.asJava(d.mergeExpressions()), mergeInput);
      eval = d.evaluateExpression();
      imperative = null;
      typed = false;
    } else {
      ImperativeAggregate i = (ImperativeAggregate) bind(
          ((ImperativeAggregate) fn).withNewMutableAggBufferOffset(0).withNewInputAggBufferOffset(0), inputList);
      buffer.addAll(CollectionConverters.asJava(i.aggBufferAttributes()));
      int n = buffer.size();
      initial = update = merge = noOps(n);
      imperative = i;
      typed = i instanceof TypedImperativeAggregate;
      eval = i;
    }
    distinctCount = aggregate.isDistinct();
    if (distinctCount) eval = new Size(eval, false);
    StructType type = new StructType();
    for (Attribute a : buffer) type = type.add(a.name(), a.dataType(), true);
    bufferType = type;
    bufferFields = new DataType[type.size()];
    boolean fixed = !typed;
    for (int f = 0; f < bufferFields.length; f++) {
      bufferFields[f] = type.fields()[f].dataType();
      fixed &= UnsafeRow.isMutable(bufferFields[f]);
    }
    unsafe = fixed;
    result = bind(eval, buffer);
    resultType = distinctCount ? org.apache.spark.sql.types.DataTypes.LongType : result.dataType();
  }

  private static Expression[] noOps(int n) {
    Expression[] out = new Expression[n];
    java.util.Arrays.fill(out, NoOp$.MODULE$);
    return out;
  }

  private static Expression[] bind(List<Expression> exprs, List<Attribute> input) {
    Expression[] out = new Expression[exprs.size()];
    for (int i = 0; i < out.length; i++) out[i] = bind(exprs.get(i), input);
    return out;
  }

  /**
   * {@code BindReferences.bindReference(e, input)}: its {@code AttributeSeq} is a class of the
   * Scala package object {@code expressions}, which Java cannot name, so it is reached by name.
   */
  private static Expression bind(Expression e, List<Attribute> input) {
    try {
      Class<?> seqClass = Class.forName("org.apache.spark.sql.catalyst.expressions.package$AttributeSeq");
      Object seq = seqClass.getConstructor(scala.collection.immutable.Seq.class)
          .newInstance(CollectionConverters.asScala(input).toList());
      return (Expression) BindReferences.class
          .getMethod("bindReference", Expression.class, seqClass, boolean.class)
          .invoke(null, e, seq, false);
    } catch (ReflectiveOperationException ex) {
      Throwable cause = ex.getCause() != null ? ex.getCause() : ex;
      if (cause instanceof RuntimeException) throw (RuntimeException) cause;
      throw new IllegalStateException(cause);
    }
  }

  /** Spark's generated code for the expressions (its interpreted projection where it cannot generate). */
  private static MutableProjection projection(Expression[] exprs) {
    return MutableProjection.create(CollectionConverters.asScala(List.of(exprs)).toSeq());
  }

  private void ready() {
    if (joined != null) return;
    initialProjection = projection(initial);
    updateProjection = projection(update);
    mergeProjection = projection(merge);
    writer = UnsafeProjection.create(bufferType);
    if (project != null) {
      input = new SpecificInternalRow(projectType);
      inputProjection = projection(project).target(input);
    }
    joined = new JoinedRow();
  }

  /** The result type as JSON (for the Python side). */
  public String resultTypeJson() {
    return resultType.json();
  }

  /** A new, empty buffer. */
  public InternalRow create() {
    ready();
    if (initialBytes != null) return unsafeRow(initialBytes.clone());
    // a generic row: cheaper to make than a SpecificInternalRow, and a window makes many
    GenericInternalRow buffer = new GenericInternalRow(bufferFields.length);
    initialProjection.target(buffer).apply(InternalRow.empty());
    if (imperative != null) imperative.initialize(buffer);
    if (!unsafe) return buffer;
    // an UnsafeRow of the initial values, written once (with room for a long decimal's bytes)
    initialBytes = writer.apply(buffer).getBytes().clone();
    return unsafeRow(initialBytes.clone());
  }

  /** Adds one record (the user's row, in Spark's internal form). */
  public void update(InternalRow buffer, InternalRow record) {
    ready();
    if (project != null) record = inputProjection.apply(record);
    if (filter != null) {
      Object keep = filter.eval(record);
      if (keep == null || !((Boolean) keep)) return;
    }
    if (imperative != null) imperative.update(buffer, record);
    else updateProjection.target(buffer).apply(joined.apply(buffer, record));
  }

  /** Merges {@code other} (a buffer of this aggregate, not written) into {@code buffer}. */
  public void merge(InternalRow buffer, InternalRow other) {
    ready();
    if (typed) ((TypedImperativeAggregate<?>) imperative).mergeBuffersObjects(buffer, other);
    else if (imperative != null) imperative.merge(buffer, other);
    else mergeProjection.target(buffer).apply(joined.apply(buffer, other));
  }

  /** The aggregate's value over the buffer, in Spark's internal form. */
  public Object eval(InternalRow buffer) {
    ready();
    Object value = result.eval(buffer);
    return distinctCount ? (Object) Long.valueOf((Integer) value) : value;
  }

  /** The buffer's bytes, its own (the buffer itself is left as it was). */
  public byte[] write(InternalRow buffer) {
    ready();
    if (buffer instanceof UnsafeRow) {  // its bytes, not shared with the buffer, which may change again
      UnsafeRow u = (UnsafeRow) buffer;
      byte[] bytes = u.getBytes();
      return bytes == u.getBaseObject() ? bytes.clone() : bytes;
    }
    InternalRow row = buffer;
    if (typed) {
      row = buffer.copy();
      ((TypedImperativeAggregate<?>) imperative).serializeAggregateBufferInPlace(row);
    }
    // the projection's row is reused: its bytes are the projection's own array when they fill it
    UnsafeRow written = writer.apply(row);
    byte[] bytes = written.getBytes();
    return bytes == written.getBaseObject() ? bytes.clone() : bytes;
  }

  private UnsafeRow unsafeRow(byte[] bytes) {
    UnsafeRow row = new UnsafeRow(bufferFields.length);
    row.pointTo(bytes, bytes.length);
    return row;
  }

  /** A buffer read back from {@link #write}'s bytes. */
  public InternalRow read(byte[] bytes) {
    ready();
    if (unsafe) return unsafeRow(bytes);  // the bytes are this buffer's own
    UnsafeRow written = unsafeRow(bytes);
    GenericInternalRow buffer = new GenericInternalRow(bufferFields.length);
    if (typed) {  // the object, deserialized (as merging into a new buffer would, without making one)
      TypedImperativeAggregate<?> t = (TypedImperativeAggregate<?>) imperative;
      buffer.update(0, t.deserialize(written.getBinary(0)));
      return buffer;
    }
    for (int i = 0; i < bufferFields.length; i++) {  // the values as they are (the bytes are this buffer's own)
      buffer.update(i, written.isNullAt(i) ? null : written.get(i, bufferFields[i]));
    }
    return buffer;
  }
}
