package eventtime.jvm.spark;

import java.util.function.Supplier;
import org.apache.spark.sql.internal.SQLConf;
import org.apache.spark.sql.streaming.MapState;
import org.apache.spark.sql.streaming.ValueState;
import scala.Tuple2;

/**
 * Makes and uses Spark's state variables and timers of one task with interpreted projections.
 *
 * <p>{@code transformWithState} makes each state variable's encoders and the timers' anew in every
 * task of every micro-batch, and their projections at their first use, and so generates their
 * code every time (Spark's code cache saves the compiling, not the generating): in a profile of
 * 1 k-row batches, 40 % of the state stage's samples were in it. Interpreted, they cost little
 * to make, and not much more per row: a state row has one to three fields. The task's own conf,
 * with {@code spark.sql.codegen.factoryMode} set to {@code NO_CODEGEN} (and without subexpression
 * elimination, whose interpreted form clears a cache on every row), is in force only inside
 * {@link #call}: around making the state variables, each call of them ({@link #value}, {@link
 * #map}) and the timer calls. The user's session is unchanged, and the operator's own
 * projections (its SQL aggregations' among them) are made outside it.
 */
public final class InterpretedState {
  private SQLConf conf;

  /** Runs {@code body} (which makes or calls a state variable, or touches the timers) with that conf. */
  <T> T call(Supplier<T> body) {
    if (conf == null) conf = taskConf();
    return SQLConf.withExistingConf(conf, body::get);
  }

  public void run(Runnable body) {
    call(() -> {
      body.run();
      return null;
    });
  }

  /** {@code state}, each of its calls run with that conf. */
  public <S> ValueState<S> value(ValueState<S> state) {
    return new ValueState<S>() {
      private static final long serialVersionUID = 1L;

      @Override public boolean exists() { return call(state::exists); }
      @Override public S get() { return call(state::get); }
      @Override public void update(S value) { run(() -> state.update(value)); }
      @Override public void clear() { run(state::clear); }
    };
  }

  /** {@code state}, each of its calls (and its iterators' steps, which decode) run with that conf. */
  public <K, V> MapState<K, V> map(MapState<K, V> state) {
    return new MapState<K, V>() {
      private static final long serialVersionUID = 1L;

      @Override public boolean exists() { return call(state::exists); }
      @Override public V getValue(K key) { return call(() -> state.getValue(key)); }
      @Override public boolean containsKey(K key) { return call(() -> state.containsKey(key)); }
      @Override public void updateValue(K key, V value) { run(() -> state.updateValue(key, value)); }
      @Override public scala.collection.Iterator<Tuple2<K, V>> iterator() { return steps(call(state::iterator)); }
      @Override public scala.collection.Iterator<K> keys() { return steps(call(state::keys)); }
      @Override public scala.collection.Iterator<V> values() { return steps(call(state::values)); }
      @Override public void removeKey(K key) { run(() -> state.removeKey(key)); }
      @Override public void clear() { run(state::clear); }
    };
  }

  private <T> scala.collection.Iterator<T> steps(scala.collection.Iterator<T> it) {
    return new scala.collection.AbstractIterator<T>() {
      @Override public boolean hasNext() { return call(it::hasNext); }
      @Override public T next() { return call(it::next); }
    };
  }

  private static SQLConf taskConf() {
    SQLConf copy = new SQLConf();
    copy.settings().putAll(SQLConf.get().settings()); // as they are: checked when they were set
    copy.settings().put(SQLConf.CODEGEN_FACTORY_MODE().key(), "NO_CODEGEN");
    // an interpreted projection with it clears a cache on every row; these share no subexpression worth it
    copy.settings().put(SQLConf.SUBEXPRESSION_ELIMINATION_ENABLED().key(), "false");
    return copy;
  }
}
