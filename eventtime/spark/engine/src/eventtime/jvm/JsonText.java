package eventtime.jvm;

import com.fasterxml.jackson.core.io.schubfach.DoubleToDecimal;
import java.math.BigDecimal;
import java.math.MathContext;
import java.math.RoundingMode;
import java.time.LocalDate;
import java.time.LocalDateTime;
import java.time.ZoneOffset;
import java.util.List;
import org.apache.spark.sql.Column;
import org.apache.spark.sql.catalyst.InternalRow;
import org.apache.spark.sql.catalyst.expressions.Expression;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenFallback;
import org.apache.spark.sql.catalyst.expressions.codegen.CodegenContext;
import org.apache.spark.sql.catalyst.expressions.codegen.ExprCode;
import org.apache.spark.sql.catalyst.util.ArrayData;
import org.apache.spark.sql.catalyst.util.MapData;
import org.apache.spark.sql.classic.ExpressionUtils;
import org.apache.spark.sql.types.*;
import org.apache.spark.unsafe.types.UTF8String;
import scala.collection.immutable.IndexedSeq;
import scala.collection.immutable.Seq;
import scala.jdk.javaapi.CollectionConverters;

/**
 * The exact JSON text of a struct's values, as {@code eventtime/ops/json_text.py} renders it
 * (the late table's {@code payload}, spaced like Python's {@code json.dumps}; and its {@code key},
 * compact): integers as they are, decimals with their scale, doubles with Python's shortest
 * {@code repr} (Schubfach's digits, the digits Python chooses), NaN and infinities as quoted
 * text, dates and UTC timestamps in ISO-8601, bytes as hex, arrays, maps (as {@code [key,
 * value]} pairs) and structs recursively. A null struct is null. {@link #supports} names the
 * types it renders; the rules' parity with Python is tested value by value.
 */
public final class JsonText extends OneChildExpression implements CodegenFallback {
  private static final long serialVersionUID = 1L;
  private final boolean compact;

  public JsonText(Seq<Expression> children, boolean compact) {
    super(children);
    this.compact = compact;
  }

  /** The JSON text of {@code struct} (a struct column): spaced, or {@code compact}. */
  public static Column column(Column struct, boolean compact) {
    return ExpressionUtils.column(new JsonText(
        CollectionConverters.asScala(List.of(ExpressionUtils.expression(struct))).toList(), compact));
  }

  /** Whether every value of {@code type} has a rule here. */
  public static boolean supports(DataType type) {
    if (type instanceof StructType s) {
      for (StructField f : s.fields()) if (!supports(f.dataType())) return false;
      return true;
    }
    if (type instanceof ArrayType a) return supports(a.elementType());
    if (type instanceof MapType m) return supports(m.keyType()) && supports(m.valueType());
    return type instanceof BooleanType || type instanceof ByteType || type instanceof ShortType
        || type instanceof IntegerType || type instanceof LongType || type instanceof FloatType
        || type instanceof DoubleType || type instanceof DecimalType || type instanceof StringType
        || type instanceof BinaryType || type instanceof DateType || type instanceof TimestampType
        || type instanceof TimestampNTZType || type instanceof NullType;
  }

  /** The text of one row of {@code fields} (what the Python tests compare with). */
  public static String render(InternalRow row, StructType fields, boolean compact) {
    StringBuilder out = new StringBuilder();
    object(out, row, fields, compact);
    return out.toString();
  }

  /** Python's {@code repr} of a finite double. */
  public static String repr(double d) {
    if (d == 0) return (1 / d < 0) ? "-0.0" : "0.0";
    String s = DoubleToDecimal.toString(d); // shortest digits: "1.0E-5", "123.45", "-1.5E16"
    boolean negative = s.charAt(0) == '-';
    int e = s.indexOf('E');
    String mantissa = s.substring(negative ? 1 : 0, e < 0 ? s.length() : e);
    int exponent = e < 0 ? 0 : Integer.parseInt(s.substring(e + 1));
    int dot = mantissa.indexOf('.');
    StringBuilder digits = new StringBuilder(mantissa.substring(0, dot)).append(mantissa, dot + 1, mantissa.length());
    int point = dot + exponent; // digits before the decimal point
    int lead = 0;
    while (lead < digits.length() - 1 && digits.charAt(lead) == '0') lead++;
    digits.delete(0, lead);
    point -= lead;
    int end = digits.length();
    while (end > 1 && digits.charAt(end - 1) == '0') end--;
    digits.setLength(end);
    if (end == 2) { // Java writes at least two digits where one would do (4.9E-324, not 5E-324)
      BigDecimal one = new BigDecimal(d).round(new MathContext(1, RoundingMode.HALF_EVEN));
      if (one.doubleValue() == d) {
        digits.setLength(0);
        digits.append(one.unscaledValue().abs()); // one digit
        point = 1 - one.scale();
      }
    }
    StringBuilder out = new StringBuilder(negative ? "-" : "");
    int n = digits.length();
    if (point > 16 || point < -3) { // Python's repr: 1e+16, 1e-05
      out.append(digits.charAt(0));
      if (n > 1) out.append('.').append(digits, 1, n);
      int x = point - 1;
      out.append('e').append(x < 0 ? '-' : '+');
      if (Math.abs(x) < 10) out.append('0');
      return out.append(Math.abs(x)).toString();
    }
    if (point <= 0) return out.append("0.").append("0".repeat(-point)).append(digits).toString();
    if (point >= n) return out.append(digits).append("0".repeat(point - n)).append(".0").toString();
    return out.append(digits, 0, point).append('.').append(digits, point, n).toString();
  }

  private static void object(StringBuilder out, InternalRow row, StructType fields, boolean compact) {
    out.append('{');
    StructField[] fs = fields.fields();
    for (int i = 0; i < fs.length; i++) {
      if (i > 0) out.append(compact ? "," : ", ");
      quote(out, fs[i].name());
      out.append(compact ? ":" : ": ");
      value(out, row.isNullAt(i) ? null : row.get(i, fs[i].dataType()), fs[i].dataType());
    }
    out.append('}');
  }

  private static void value(StringBuilder out, Object v, DataType type) {
    if (v == null) {
      out.append("null");
    } else if (type instanceof StringType) {
      quote(out, v.toString());
    } else if (type instanceof BooleanType) {
      out.append((Boolean) v ? "true" : "false");
    } else if (type instanceof DoubleType || type instanceof FloatType) {
      double d = ((Number) v).doubleValue();
      if (Double.isNaN(d)) out.append("\"NaN\"");
      else if (Double.isInfinite(d)) out.append(d > 0 ? "\"Infinity\"" : "\"-Infinity\"");
      else out.append(repr(d));
    } else if (type instanceof DecimalType) {
      out.append(((Decimal) v).toJavaBigDecimal().toPlainString());
    } else if (type instanceof DateType) {
      out.append('"').append(LocalDate.ofEpochDay((Integer) v)).append('"');
    } else if (type instanceof TimestampType || type instanceof TimestampNTZType) {
      timestamp(out, (Long) v);
    } else if (type instanceof BinaryType) {
      out.append('"');
      for (byte b : (byte[]) v) out.append(Character.forDigit((b >> 4) & 15, 16)).append(Character.forDigit(b & 15, 16));
      out.append('"');
    } else if (type instanceof StructType s) {
      object(out, (InternalRow) v, s, false);
    } else if (type instanceof ArrayType a) {
      array(out, (ArrayData) v, a.elementType());
    } else if (type instanceof MapType m) {
      MapData map = (MapData) v;
      ArrayData keys = map.keyArray(), values = map.valueArray();
      out.append('[');
      for (int i = 0; i < map.numElements(); i++) {
        if (i > 0) out.append(", ");
        out.append('[');
        value(out, keys.isNullAt(i) ? null : keys.get(i, m.keyType()), m.keyType());
        out.append(", ");
        value(out, values.isNullAt(i) ? null : values.get(i, m.valueType()), m.valueType());
        out.append(']');
      }
      out.append(']');
    } else {
      out.append(v); // integers
    }
  }

  private static void array(StringBuilder out, ArrayData a, DataType element) {
    out.append('[');
    for (int i = 0; i < a.numElements(); i++) {
      if (i > 0) out.append(", ");
      value(out, a.isNullAt(i) ? null : a.get(i, element), element);
    }
    out.append(']');
  }

  /** Python's {@code datetime.isoformat()} of a UTC timestamp: microseconds only when not 0. */
  private static void timestamp(StringBuilder out, long micros) {
    long seconds = Math.floorDiv(micros, 1_000_000L);
    int fraction = (int) Math.floorMod(micros, 1_000_000L);
    LocalDateTime t = LocalDateTime.ofEpochSecond(seconds, 0, ZoneOffset.UTC);
    out.append('"').append(String.format("%04d-%02d-%02dT%02d:%02d:%02d", t.getYear(), t.getMonthValue(),
        t.getDayOfMonth(), t.getHour(), t.getMinute(), t.getSecond()));
    if (fraction != 0) out.append(String.format(".%06d", fraction));
    out.append("+00:00\"");
  }

  /** Python's {@code json.encoder.encode_basestring}: quotes, backslashes and control characters escaped. */
  private static void quote(StringBuilder out, String s) {
    out.append('"');
    for (int i = 0; i < s.length(); i++) {
      char c = s.charAt(i);
      switch (c) {
        case '"' -> out.append("\\\"");
        case '\\' -> out.append("\\\\");
        case '\n' -> out.append("\\n");
        case '\r' -> out.append("\\r");
        case '\t' -> out.append("\\t");
        case '\b' -> out.append("\\b");
        case '\f' -> out.append("\\f");
        default -> {
          if (c < 0x20) out.append(String.format("\\u%04x", (int) c));
          else out.append(c);
        }
      }
    }
    out.append('"');
  }

  @Override
  public DataType dataType() {
    return DataTypes.StringType;
  }

  @Override
  public Object eval(InternalRow row) {
    Object v = child().eval(row);
    if (v == null) return null;
    return UTF8String.fromString(render((InternalRow) v, (StructType) child().dataType(), compact));
  }

  @Override
  public ExprCode doGenCode(CodegenContext ctx, ExprCode ev) {
    return CodegenFallback.super.doGenCode(ctx, ev);
  }

  @Override
  public Expression withNewChildrenInternal(IndexedSeq<Expression> children) {
    return new JsonText(children.toList(), compact);
  }

  @Override
  public int productArity() {
    return 2;
  }

  @Override
  public Object productElement(int n) {
    return n == 0 ? kids : compact;
  }

  @Override
  public boolean canEqual(Object that) {
    return that instanceof JsonText;
  }
}
