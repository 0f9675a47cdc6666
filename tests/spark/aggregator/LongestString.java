package eventtime_test;

import org.apache.spark.sql.Encoder;
import org.apache.spark.sql.Encoders;
import org.apache.spark.sql.expressions.Aggregator;

/** A user's Scala/Java Aggregator: the longest string (ties: the smallest), nulls ignored. */
public final class LongestString extends Aggregator<String, String, String> {
  private static final long serialVersionUID = 1L;

  private static String better(String a, String b) {
    if (a == null) return b;
    if (b == null) return a;
    if (a.length() != b.length()) return a.length() > b.length() ? a : b;
    return a.compareTo(b) <= 0 ? a : b;
  }

  @Override public String zero() { return null; }
  @Override public String reduce(String buffer, String value) { return better(buffer, value); }
  @Override public String merge(String a, String b) { return better(a, b); }
  @Override public String finish(String buffer) { return buffer; }
  @Override public Encoder<String> bufferEncoder() { return Encoders.STRING(); }
  @Override public Encoder<String> outputEncoder() { return Encoders.STRING(); }
}
