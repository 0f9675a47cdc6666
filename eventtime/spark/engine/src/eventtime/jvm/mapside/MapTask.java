package eventtime.jvm.mapside;

import eventtime.jvm.plan.Layout;
import eventtime.jvm.plan.PublishedWatermark;
import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.spark.TaskContext;

/**
 * The map side's state in one task: per-partition statistics and the map-side combine's table.
 *
 * <p>Two callers share it within a task: the {@link Fold} predicate, which consumes the rows it
 * can (heartbeats, live data rows) while Spark's generated code reads the input, and the {@link
 * Mapper}, which gets every other row and writes the task's output when its input ends. The
 * mapper opens it when the task starts reading ({@link #open}); the predicate finds it by task
 * attempt and plan ({@link #current}).
 */
final class MapTask {
  private static final Map<String, MapTask> OPEN = new ConcurrentHashMap<>();
  /** Per plan, the largest combine table an earlier task of it needed: the next ones start there, not growing to it row by row. */
  private static final Map<String, Integer> TABLE_SIZE = new ConcurrentHashMap<>();
  private static final int FIRST_TABLE = 1024, LARGEST_FIRST_TABLE = 1 << 20;

  final Spec spec;
  /** This batch's watermark when known exactly, else null (nothing is combined). */
  final Long watermark;
  /** The largest valid event time of the earlier batches (for the delay histograms), or null. */
  final Long runningMax;
  /** Per partition: rows, max valid event time, then the delays behind runningMax per Spec.delayBin. */
  final Map<Object, long[]> stats = new LinkedHashMap<>();
  final long[] nullPartition;
  final Partials partials;
  /** 0, or the class of the rows sent to every bucket at the end (TICK, or END which wins). */
  int wakeAll;
  /** The end-of-input control row's time, or MIN_VALUE. */
  private long endOfInputMs = Long.MIN_VALUE;
  /** Set when the task's input ended or the task completed: a {@link Fold} holding it looks again. */
  volatile boolean closed;
  /** Set by {@link Fold}: text keys reach the combine as Spark's UTF8String (the mapper's too, then). */
  boolean textKeysAsBytes;
  private final int width;
  private final String registeredAs;
  /** The statistics of the last partitions seen (a source's rows interleave a few), before the map. */
  private final Object[] recentPartitions = new Object[RECENT];
  private final long[][] recentStats = new long[RECENT][];
  private int recentNext;
  private static final int RECENT = 8;

  private MapTask(Spec spec, Long watermark, Long runningMax, String registeredAs) {
    this.spec = spec;
    this.watermark = watermark;
    this.runningMax = runningMax;
    this.width = runningMax == null ? 2 : 2 + Spec.DELAY_BINS;
    this.nullPartition = newStats(width);
    this.registeredAs = registeredAs;
    this.partials = new Partials(spec, TABLE_SIZE.getOrDefault(spec.planId, FIRST_TABLE));
  }

  private static String id(Spec spec, TaskContext tc) {
    return tc.taskAttemptId() + "/" + spec.planId;
  }

  /** The state of this task (outside a Spark task: a private one), registered until {@link #close}. */
  static MapTask open(Spec spec) {
    TaskContext tc = TaskContext.get();
    if (tc == null) return new MapTask(spec, PublishedWatermark.of(spec), PublishedWatermark.runningMax(spec), null);
    String id = id(spec, tc);
    MapTask task = new MapTask(spec, PublishedWatermark.of(spec), PublishedWatermark.runningMax(spec), id);
    OPEN.put(id, task);
    tc.addTaskCompletionListener((org.apache.spark.util.TaskCompletionListener) context -> {
      task.closed = true;
      OPEN.remove(id);
    });
    return task;
  }

  /** The state the mapper of this task and plan opened, or null. */
  static MapTask current(Spec spec) {
    TaskContext tc = TaskContext.get();
    return tc == null ? null : OPEN.get(id(spec, tc));
  }

  void close() {
    closed = true;
    if (registeredAs != null) OPEN.remove(registeredAs);
    TABLE_SIZE.merge(spec.planId, Math.min(partials.capacity(), LARGEST_FIRST_TABLE), Math::max);
  }

  /** Whether the operator's plan takes this task's invalid records beside it ({@link InvalidRecords}). */
  boolean invalidBeside;

  /** Whether a row of class {@code cls} is counted here and then written beside the operator ({@link InvalidRecords}). */
  boolean bypasses(int cls) {
    return cls == Layout.INVALID && invalidBeside && watermark != null;
  }

  boolean foldable(Long ms) {
    return ms != null && watermark != null && spec.trigger.foldable(ms, watermark);
  }

  /** Counts a row (any class but control and tick) in its partition's statistics. */
  void count(Object partition, int cls, Long ms) {
    long[] st;
    if (partition == null) {
      st = nullPartition;
    } else {
      st = recentStats(partition);
    }
    st[0]++;
    long m = ms == null ? 0 : ms;
    if (cls != Layout.INVALID && m > st[1]) st[1] = m;
    if (cls == Layout.DATA && runningMax != null) st[2 + Spec.delayBin(runningMax - m)]++;
  }

  /** Folds a live data row (into its slice, or its key's partial sessions): its keys at src[k0 ..], then its aggregated values. */
  void fold(Object[] src, int k0, long ms) {
    int nk = spec.keyFields.length;
    if (!spec.session) {
      partials.fold(src, k0, nk, spec.sliced.sliceOf(ms), ms);
      return;
    }
    int na = spec.aggKinds.length;
    Acc[] accs = partials.sessions(src, k0, nk).add(spec, ms, na);
    for (int i = 0; i < na; i++) accs[i].add(spec, i, src[k0 + nk + i], ms);
  }

  /**
   * A control or tick row: with per-partition watermarks every bucket must sweep at the end. The
   * end-of-input control row's time (END_OF_INPUT_MS + B) also moves the watermark.
   */
  void wake(int cls, Long ms) {
    if (cls == Layout.CONTROL && ms != null && ms > endOfInputMs) endOfInputMs = ms;
    if (spec.publishedWatermark) wakeAll = cls == Layout.CONTROL ? Layout.END : Math.max(wakeAll, Layout.TICK);
  }

  /**
   * The largest event time of the rows that move the watermark, or MIN_VALUE: the partitions'
   * maxima (valid records and heartbeats; a row that is not invalid has a time) and the end of
   * input.
   */
  long maxEventTime() {
    long max = Math.max(endOfInputMs, nullPartition[1]);
    for (long[] st : stats.values()) max = Math.max(max, st[1]);
    return max;
  }

  private long[] recentStats(Object partition) {
    for (int i = 0; i < RECENT; i++) {
      if (partition.equals(recentPartitions[i])) return recentStats[i];
    }
    long[] st = stats.computeIfAbsent(partition, p -> newStats(width));
    recentPartitions[recentNext] = partition;
    recentStats[recentNext] = st;
    recentNext = (recentNext + 1) % RECENT;
    return st;
  }

  private static long[] newStats(int width) {
    long[] st = new long[width];
    st[1] = Long.MIN_VALUE;
    return st;
  }
}
