package eventtime.jvm.mapside;

import eventtime.jvm.plan.Spec;
import eventtime.jvm.state.Acc;
import java.math.BigDecimal;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import org.apache.spark.sql.Row;
import org.apache.spark.sql.RowFactory;
import org.apache.spark.sql.types.DataTypes;
import org.apache.spark.sql.types.DecimalType;
import org.apache.spark.sql.types.StructField;
import org.apache.spark.sql.types.StructType;

/** The map side's parts run alone, for the tests (tests/spark/test_spark_engine.py). */
public final class MapSideChecks {
  private MapSideChecks() {}

  /**
   * {@link Partials} against accumulators kept apart ({@link Acc} objects in a map by key and
   * slice, added to directly) over {@code rows} seeded rows: one key column (null, or from
   * {@code keys} texts of up to 30 bytes as UTF8String, or longs), 50 slices, values with nulls,
   * NaN, -0.0, infinities and extreme integers; enough (key, slice) entries to grow the table from
   * 16 slots many times. Returns {entries that differ, entries drained}.
   */
  public static long[] partialsCheck(Spec spec, long seed, int rows, int keys, boolean text) {
    java.util.Random r = new java.util.Random(seed);
    Object[] pool = new Object[keys];
    for (int i = 1; i < keys; i++) {
      pool[i] = text ? org.apache.spark.unsafe.types.UTF8String.fromString("k\u00e9".repeat(r.nextInt(10)) + i) : (Object) (r.nextBoolean() ? i : r.nextLong());
    }
    double[] doubles = {-0.0, Double.NaN, Double.POSITIVE_INFINITY, Double.NEGATIVE_INFINITY, 1e300, 0.1};
    long[] longs = {Long.MIN_VALUE, Long.MAX_VALUE, -1, 1L << 62};
    int na = spec.aggKinds.length;
    Partials table = new Partials(spec, 16);
    Map<List<Object>, Acc[]> expected = new java.util.HashMap<>();
    Object[] src = new Object[1 + na];
    for (int n = 0; n < rows; n++) {
      Object k = pool[r.nextInt(keys)];
      long slice = r.nextInt(50) * 60_000L, ms = slice + r.nextInt(60_000);
      src[0] = k instanceof org.apache.spark.unsafe.types.UTF8String ? ((org.apache.spark.unsafe.types.UTF8String) k).clone() : k;
      for (int i = 0; i < na; i++) {
        boolean extreme = r.nextInt(8) == 0;
        src[1 + i] = r.nextInt(6) == 0 ? null
            : spec.aggDecimal[i] ? BigDecimal.valueOf(r.nextInt(1_000_000), 2)
            : spec.aggIntegral[i] ? (Object) (extreme ? longs[r.nextInt(longs.length)] : (long) r.nextInt(1000))
            : (Object) (extreme ? doubles[r.nextInt(doubles.length)] : r.nextGaussian());
      }
      table.fold(src, 0, 1, slice, ms);
      Acc[] want = expected.computeIfAbsent(java.util.Arrays.asList(k, slice), x -> {
        Acc[] a = new Acc[na];
        for (int i = 0; i < na; i++) a[i] = new Acc();
        return a;
      });
      for (int i = 0; i < na; i++) want[i].add(spec, i, src[1 + i], ms);
    }
    List<Partials.Entry> got = table.drain();
    long differ = Math.abs(expected.size() - got.size());
    for (Partials.Entry e : got) {
      Acc[] want = expected.get(java.util.Arrays.asList(e.keys[0], e.slice));
      if (want == null || !java.util.Arrays.equals(Acc.encode(spec, want), Acc.encode(spec, e.accs))) differ++;
    }
    return new long[] {differ, got.size()};
  }

  /** The keys whose bucket ({@link Spec#bucketOf}) differs as a Java string and as a UTF8String (a map-side partial's key). */
  public static List<String> bucketsApart(Spec spec, List<String> keys) {
    List<String> apart = new ArrayList<>();
    for (String k : keys) {
      if (spec.bucketOf(new Object[] {k}) != spec.bucketOf(new Object[] {org.apache.spark.unsafe.types.UTF8String.fromString(k)})) apart.add(k);
    }
    return apart;
  }
}
