import org.apache.flink.configuration.Configuration;
import org.apache.flink.table.api.EnvironmentSettings;
import org.apache.flink.table.api.TableEnvironment;

/**
 * The benchmark's windows in Apache Flink SQL (window table-valued functions), for
 * benchmarks/bench_windowing.py: the generated rows as CSV files, event time {@code ts} (epoch
 * ms) with a watermark 10 s behind (the benchmark's B), count and sum of {@code amount} per key
 * and window into a blackhole sink, at parallelism 2, bounded (the files are read once; the end
 * of input fires every window).
 *
 * <pre>java -cp &lt;flink lib and sql jars&gt;:. FlinkSqlWindows CSV_DIR T|S|SE</pre>
 *
 * Prints one line: {@code ms=<the job's time>} (from its submission to its end).
 */
public final class FlinkSqlWindows {
  public static void main(String[] args) throws Exception {
    String dir = args[0], workload = args[1];
    Configuration conf = new Configuration();
    conf.setString("parallelism.default", "2");
    conf.setString("table.exec.resource.default-parallelism", "2");
    TableEnvironment t = TableEnvironment.create(EnvironmentSettings.newInstance().inStreamingMode().withConfiguration(conf).build());
    t.executeSql("CREATE TABLE src (key STRING, ts BIGINT, amount DOUBLE, part INT, hb BOOLEAN, "
        + "et AS TO_TIMESTAMP_LTZ(ts, 3), WATERMARK FOR et AS et - INTERVAL '10' SECOND) "
        + "WITH ('connector' = 'filesystem', 'path' = '" + dir + "', 'format' = 'csv')");
    t.executeSql("CREATE TABLE panes (key STRING, window_start TIMESTAMP(3), window_end TIMESTAMP(3), n BIGINT, s DOUBLE) "
        + "WITH ('connector' = 'blackhole')");
    String window;
    switch (workload) {
      case "T":
        window = "TUMBLE(TABLE src, DESCRIPTOR(et), INTERVAL '1' MINUTES)";
        break;
      case "S":
        window = "HOP(TABLE src, DESCRIPTOR(et), INTERVAL '1' MINUTES, INTERVAL '5' MINUTES)";
        break;
      case "SE":
        window = "SESSION(TABLE src PARTITION BY key, DESCRIPTOR(et), INTERVAL '30' SECONDS)";
        break;
      default:
        throw new IllegalArgumentException("workload: T, S or SE, not " + workload);
    }
    long t0 = System.nanoTime();
    t.executeSql("INSERT INTO panes SELECT key, window_start, window_end, COUNT(*), SUM(amount) FROM TABLE(" + window
        + ") WHERE NOT hb GROUP BY key, window_start, window_end").await();
    System.out.println("ms=" + (System.nanoTime() - t0) / 1_000_000);
  }
}
