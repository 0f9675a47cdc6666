package eventtime.jvm.state;

import eventtime.jvm.plan.Spec;
import eventtime.jvm.spark.SqlAggregate;
import java.math.BigDecimal;
import java.math.BigInteger;
import java.math.MathContext;

/**
 * The accumulator of one aggregation (eventtime/core/aggregations.py, exactly): count; sum and
 * mean (integers exact in 128 bits, decimals exact, floats in record order); min / max;
 * first / last by (event time, value). Nulls and NaN are ignored by all but count. A Spark SQL
 * aggregation's buffer ({@link SqlAggregate}) is {@code v}, {@code n} its number of records.
 */
public final class Acc {
  public long n; // count, or number of non-null values
  public long t; // event time of v (first / last)
  public long lo, hi; // exact integer sum: hi * 2^64 + unsigned lo
  public double d; // float sum
  public Object v; // min / max / first / last value, or the decimal sum

  /** A SQL aggregation's buffer still in its slice's state entry ({@link Slices}). */
  public static final Object UNREAD = new Object();

  private static final MathContext MC = new MathContext(100);
  private static final BigInteger TWO64 = BigInteger.ONE.shiftLeft(64);

  /**
   * Whether aggregation i's accumulator is its numbers alone, never {@code v}: count, and sum or
   * mean of integers or floats. Such accumulators can live in a {@code long[]} ({@link Partials}).
   */
  public static boolean numeric(Spec spec, int i) {
    int kind = spec.kinds[i];
    return kind == Spec.COUNT || ((kind == Spec.SUM || kind == Spec.MEAN) && !spec.aggDecimal[i]);
  }

  /**
   * The words a numeric accumulator ({@link #numeric}) of aggregation i takes in a {@code long[]}:
   * n, then d (a float sum) or lo and hi (an integer sum); a count is n alone.
   */
  public static int words(Spec spec, int i) {
    if (spec.kinds[i] == Spec.COUNT) return 1;
    return spec.aggIntegral[i] ? 3 : 2;
  }

  /** This numeric accumulator as the {@code words} ({@link #words}) at a[at ..] hold. */
  public void load(long[] a, int at, int words) {
    n = a[at];
    t = 0;
    lo = words == 3 ? a[at + 1] : 0;
    hi = words == 3 ? a[at + 2] : 0;
    d = words == 2 ? Double.longBitsToDouble(a[at + 1]) : 0;
    v = null;
  }

  /** Writes this numeric accumulator's {@code words} ({@link #words}) to a[at ..]. */
  public void store(long[] a, int at, int words) {
    a[at] = n;
    if (words == 2) {
      a[at + 1] = Double.doubleToRawLongBits(d);
    } else if (words == 3) {
      a[at + 1] = lo;
      a[at + 2] = hi;
    }
  }

  public static boolean isNull(Object value) {
    if (value == null) return true;
    if (value instanceof Double) return ((Double) value).isNaN();
    if (value instanceof Float) return ((Float) value).isNaN();
    return false;
  }

  /** Adds one record's value (null for count) with event time ts. */
  public void add(Spec spec, int i, Object value, long ts) {
    int kind = spec.kinds[i];
    if (kind == Spec.COUNT) {
      n++;
      return;
    }
    if (kind == Spec.SQL) {  // value: the record; the function sees every record, nulls its own way
      SqlAggregate sql = spec.sqlAggs[i];
      // the record as Spark's internal row: from the generated code already, or converted from a Row
      sql.update(buffer(sql), value instanceof org.apache.spark.sql.catalyst.InternalRow
          ? (org.apache.spark.sql.catalyst.InternalRow) value : spec.internal((org.apache.spark.sql.Row) value));
      n++;
      return;
    }
    if (isNull(value)) return;
    switch (kind) {
      case Spec.SUM:
      case Spec.MEAN:
        if (spec.aggIntegral[i]) add128(((Number) value).longValue());
        else if (spec.aggDecimal[i]) v = v == null ? value : ((BigDecimal) v).add((BigDecimal) value);
        else d += ((Number) value).doubleValue();
        n++;
        return;
      case Spec.MIN:
        if (n == 0 || compare(value, v) < 0) v = value;
        n++;
        return;
      case Spec.MAX:
        if (n == 0 || compare(value, v) > 0) v = value;
        n++;
        return;
      case Spec.FIRST:
        if (n == 0 || ts < t || (ts == t && compare(value, v) < 0)) {
          t = ts;
          v = value;
        }
        n++;
        return;
      case Spec.LAST:
        if (n == 0 || ts > t || (ts == t && compare(value, v) > 0)) {
          t = ts;
          v = value;
        }
        n++;
        return;
      default:
        throw new IllegalArgumentException("eventtime: unknown aggregation kind " + spec.aggKinds[i]);
    }
  }

  /**
   * A Spark SQL aggregation's buffer: a new one, or the one its state bytes hold, read now (a
   * window's buffers are read from the state with the key's, but most are not touched).
   */
  private org.apache.spark.sql.catalyst.InternalRow buffer(SqlAggregate sql) {
    if (v == UNREAD) throw new IllegalStateException("eventtime: a SQL buffer used before it was read from the state");
    if (v == null) v = sql.create();
    else if (v instanceof byte[]) v = sql.read((byte[]) v);
    return (org.apache.spark.sql.catalyst.InternalRow) v;
  }

  /** hi * 2^64 + unsigned lo += x (sign-extended). */
  private void add128(long x) {
    long r = lo + x;
    long carry = Long.compareUnsigned(r, lo) < 0 ? 1 : 0;
    hi += (x >> 63) + carry;
    lo = r;
  }

  /** this := merge(this, other); this holds the earlier records (ties keep this). */
  public void merge(Spec spec, int i, Acc o) {
    int kind = spec.kinds[i];
    if (o.n == 0) return;
    if (kind == Spec.SQL) {  // never shares o's buffer: o may be a slice that stays in state
      SqlAggregate sql = spec.sqlAggs[i];
      sql.merge(buffer(sql), o.buffer(sql));
      n += o.n;
      return;
    }
    switch (kind) {
      case Spec.COUNT:
        n += o.n;
        return;
      case Spec.SUM:
      case Spec.MEAN:
        if (spec.aggIntegral[i]) {
          long r = lo + o.lo;
          long carry = Long.compareUnsigned(r, lo) < 0 ? 1 : 0;
          hi += o.hi + carry;
          lo = r;
        } else if (spec.aggDecimal[i]) {
          v = v == null ? o.v : ((BigDecimal) v).add((BigDecimal) o.v);
        } else {
          d += o.d;
        }
        n += o.n;
        return;
      case Spec.MIN:
        if (n == 0 || compare(o.v, v) < 0) v = o.v;
        n += o.n;
        return;
      case Spec.MAX:
        if (n == 0 || compare(o.v, v) > 0) v = o.v;
        n += o.n;
        return;
      case Spec.FIRST:
        if (n == 0 || o.t < t || (o.t == t && compare(o.v, v) < 0)) {
          t = o.t;
          v = o.v;
        }
        n += o.n;
        return;
      case Spec.LAST:
        if (n == 0 || o.t > t || (o.t == t && compare(o.v, v) > 0)) {
          t = o.t;
          v = o.v;
        }
        n += o.n;
        return;
      default:
        throw new IllegalArgumentException("eventtime: unknown aggregation kind " + spec.aggKinds[i]);
    }
  }

  private BigInteger big() {
    BigInteger low = BigInteger.valueOf(lo);
    if (lo < 0) low = low.add(TWO64);
    return BigInteger.valueOf(hi).shiftLeft(64).add(low);
  }

  private boolean fitsLong() {
    return hi == (lo >> 63);
  }

  /** The output value (external Spark type of the output column). */
  public Object result(Spec spec, int i) {
    int kind = spec.kinds[i];
    if (kind == Spec.COUNT) return n;
    if (kind == Spec.SQL) {  // over no record: the function's own value of nothing (count: 0)
      SqlAggregate sql = spec.sqlAggs[i];
      Object value = sql.eval(v == null ? sql.create() : buffer(sql));
      return org.apache.spark.sql.catalyst.CatalystTypeConverters.convertToScala(value, sql.resultType);
    }
    if (n == 0) return null;
    switch (kind) {
      case Spec.SUM:
        if (spec.aggIntegral[i]) {
          if (!fitsLong()) {
            throw new ArithmeticException(
                "aggregation '" + spec.aggNames[i] + "': the sum " + big() + " is outside the bigint range (Spark's sum overflows too)");
          }
          return lo;
        }
        if (spec.aggDecimal[i]) return ((BigDecimal) v).setScale(spec.aggDecimalScale[i]);
        return d;
      case Spec.MEAN:
        if (spec.aggIntegral[i]) {
          if (fitsLong() && Math.abs(lo) < (1L << 53)) return (double) lo / (double) n;
          return new BigDecimal(big()).divide(BigDecimal.valueOf(n), MC).doubleValue();
        }
        if (spec.aggDecimal[i]) return ((BigDecimal) v).divide(BigDecimal.valueOf(n), MC).doubleValue();
        return d / n;
      default:
        return v;
    }
  }

  /**
   * A pane's first accumulator column ({@link Layout#oAccA}): a mean's exact sum (an integer sum
   * outside bigint: null, as eventtime/core/aggregations.py pane_values), first / last's event time,
   * a mergeable Spark SQL aggregation's buffer as it is written (a new one's over no record).
   */
  public Object accumulatorA(Spec spec, int i) {
    if (spec.kinds[i] == Spec.SQL) {
      if (v instanceof byte[]) return ((byte[]) v).clone();
      SqlAggregate sql = spec.sqlAggs[i];
      return sql.write(v == null ? sql.create() : buffer(sql));
    }
    if (n == 0) return null;
    if (spec.kinds[i] != Spec.MEAN) return t;
    if (spec.aggIntegral[i]) return fitsLong() ? (Object) lo : null;
    if (spec.aggDecimal[i]) return ((BigDecimal) v).setScale(spec.aggDecimalScale[i]);
    return d;
  }

  // --- values: order -----------------------------------------------------------------------

  /** Python's order of two values of one column type (strings by code point, bytes unsigned). */
  @SuppressWarnings({"unchecked", "rawtypes"})
  public static int compare(Object a, Object b) {
    if (a instanceof Double || a instanceof Float) {
      double x = ((Number) a).doubleValue(), y = ((Number) b).doubleValue();
      return x < y ? -1 : (x > y ? 1 : 0);
    }
    if (a instanceof Long || a instanceof Integer || a instanceof Short || a instanceof Byte) {
      return Long.compare(((Number) a).longValue(), ((Number) b).longValue());
    }
    if (a instanceof String) {
      String x = (String) a, y = (String) b;
      int i = 0, j = 0;
      while (i < x.length() && j < y.length()) {
        int cx = x.codePointAt(i), cy = y.codePointAt(j);
        if (cx != cy) return Integer.compare(cx, cy);
        i += Character.charCount(cx);
        j += Character.charCount(cy);
      }
      return Boolean.compare(i < x.length(), j < y.length());
    }
    if (a instanceof byte[]) {
      return java.util.Arrays.compareUnsigned((byte[]) a, (byte[]) b);
    }
    return ((Comparable) a).compareTo(b);
  }

  // --- storage: only the fields the kind uses, integers as variable-length ({@link Bytes}) ---

  /** All accumulators of one group, as bytes (a partial's et__accs column). */
  /** {@code n} empty accumulators, one per aggregation. */
  public static Acc[] fresh(int n) {
    Acc[] a = new Acc[n];
    for (int i = 0; i < n; i++) a[i] = new Acc();
    return a;
  }

  /** Merges each aggregation's accumulator of {@code from} into that of {@code into}. */
  public static void mergeAll(Spec spec, Acc[] into, Acc[] from) {
    for (int i = 0; i < into.length; i++) into[i].merge(spec, i, from[i]);
  }

  public static byte[] encode(Spec spec, Acc[] accs) {
    Bytes.Out out = new Bytes.Out(16);
    for (int i = 0; i < accs.length; i++) accs[i].write(spec, i, out);
    return out.toByteArray();
  }

  public static Acc[] decode(Spec spec, byte[] bytes) {
    Bytes.In in = new Bytes.In(bytes);
    Acc[] accs = new Acc[spec.aggKinds.length];
    for (int i = 0; i < accs.length; i++) accs[i] = read(spec, i, in);
    return accs;
  }

  public void write(Spec spec, int i, Bytes.Out out) {
    out.writeVarLong(n);
    if (n == 0) return;
    if (spec.kinds[i] == Spec.SQL) {  // a buffer read and not touched since: its bytes as they were
      out.writeValue(v instanceof byte[] ? v : spec.sqlAggs[i].write((org.apache.spark.sql.catalyst.InternalRow) v));
      return;
    }
    switch (spec.kinds[i]) {
      case Spec.COUNT:
        return;
      case Spec.SUM:
      case Spec.MEAN:
        if (spec.aggIntegral[i]) {
          out.writeVarLong(lo);
          out.writeVarLong(hi);
        } else if (spec.aggDecimal[i]) {
          out.writeValue(v);
        } else {
          out.writeDouble(d);
        }
        return;
      case Spec.FIRST:
      case Spec.LAST:
        out.writeVarLong(t);
        out.writeValue(v);
        return;
      default:
        out.writeValue(v);
    }
  }

  public static Acc read(Spec spec, int i, Bytes.In in) {
    Acc a = new Acc();
    a.n = in.readVarLong();
    if (a.n == 0) return a;
    if (spec.kinds[i] == Spec.SQL) {  // read into a buffer when it is first used (buffer())
      a.v = in.readValue();
      return a;
    }
    switch (spec.kinds[i]) {
      case Spec.COUNT:
        return a;
      case Spec.SUM:
      case Spec.MEAN:
        if (spec.aggIntegral[i]) {
          a.lo = in.readVarLong();
          a.hi = in.readVarLong();
        } else if (spec.aggDecimal[i]) {
          a.v = in.readValue();
        } else {
          a.d = in.readDouble();
        }
        return a;
      case Spec.FIRST:
      case Spec.LAST:
        a.t = in.readVarLong();
        a.v = in.readValue();
        return a;
      default:
        a.v = in.readValue();
        return a;
    }
  }
}
