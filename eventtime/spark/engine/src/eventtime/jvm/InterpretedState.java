package eventtime.jvm;

import org.apache.spark.sql.internal.SQLConf;

/**
 * Makes Spark's state variables and timers of one task with interpreted projections.
 *
 * <p>{@code transformWithState} makes each state variable's encoders and the timers' anew in every
 * task of every micro-batch, and so generates their code every time (Spark's code cache saves the
 * compiling, not the generating): in a profile of 1 k-row batches, 40 % of the state stage's
 * samples were in it. Interpreted, they cost little to make, and not much more per row: a state
 * row has one to three fields. The task's own conf, with {@code spark.sql.codegen.factoryMode}
 * set to {@code NO_CODEGEN}, is in force only inside {@link #run}; the user's session is
 * unchanged, and the operator's own projections (its SQL aggregations' among them) are made
 * outside it.
 */
final class InterpretedState {
  private SQLConf conf;

  /** Runs {@code body} (which makes a state variable or touches the timers) with that conf. */
  void run(Runnable body) {
    if (conf == null) conf = taskConf();
    SQLConf.withExistingConf(conf, () -> {
      body.run();
      return null;
    });
  }

  private static SQLConf taskConf() {
    SQLConf copy = new SQLConf();
    copy.settings().putAll(SQLConf.get().settings()); // as they are: checked when they were set
    copy.settings().put(SQLConf.CODEGEN_FACTORY_MODE().key(), "NO_CODEGEN");
    return copy;
  }
}
