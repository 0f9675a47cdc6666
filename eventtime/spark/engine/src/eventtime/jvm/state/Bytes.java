package eventtime.jvm.state;

import java.math.BigDecimal;
import java.math.BigInteger;
import java.nio.charset.StandardCharsets;
import java.util.Arrays;

/**
 * The byte encoding of the state and of the map side's partials: the same bytes as {@link
 * java.io.DataOutputStream} writes (big-endian, so checkpoints written before stay readable), over
 * a plain array, plus zigzag variable-length integers and tagged values (a column value as a
 * one-byte tag and its bytes). The stream classes lock on every byte and declare {@code
 * IOException}; these rows are written and read once per key and batch. Pinned by
 * tests/spark/test_state_bytes.py.
 */
public final class Bytes {
  private Bytes() {}

  /** A growing byte array. */
  public static final class Out {
    private byte[] buf;
    private int n;

    public Out(int capacity) {
      buf = new byte[Math.max(8, capacity)];
    }

    private void room(int more) {
      if (n + more > buf.length) buf = Arrays.copyOf(buf, Math.max(buf.length * 2, n + more));
    }

    public void writeByte(int v) {
      room(1);
      buf[n++] = (byte) v;
    }

    public void writeBoolean(boolean v) {
      writeByte(v ? 1 : 0);
    }

    public void writeShort(int v) {
      room(2);
      buf[n++] = (byte) (v >>> 8);
      buf[n++] = (byte) v;
    }

    public void writeInt(int v) {
      room(4);
      for (int s = 24; s >= 0; s -= 8) buf[n++] = (byte) (v >>> s);
    }

    public void writeLong(long v) {
      room(8);
      for (int s = 56; s >= 0; s -= 8) buf[n++] = (byte) (v >>> s);
    }

    public void writeFloat(float v) {
      writeInt(Float.floatToIntBits(v));
    }

    public void writeDouble(double v) {
      writeLong(Double.doubleToLongBits(v));
    }

    public void write(byte[] b) {
      room(b.length);
      System.arraycopy(b, 0, buf, n, b.length);
      n += b.length;
    }

    /** A zigzag variable-length integer: small magnitudes take one byte. */
    public void writeVarLong(long v) {
      long z = (v << 1) ^ (v >> 63);
      while ((z & ~0x7FL) != 0) {
        writeByte((int) ((z & 0x7F) | 0x80));
        z >>>= 7;
      }
      writeByte((int) z);
    }

    /** Its length (an int), then the bytes. */
    private void writeSized(byte[] b) {
      writeInt(b.length);
      write(b);
    }

    /** A value of a column type that state keeps: its tag (0 for null), then its bytes. */
    public void writeValue(Object v) {
      if (v == null) {
        writeByte(0);
      } else if (v instanceof Long) {
        writeByte(1);
        writeLong((Long) v);
      } else if (v instanceof Integer) {
        writeByte(2);
        writeInt((Integer) v);
      } else if (v instanceof Short) {
        writeByte(3);
        writeShort((Short) v);
      } else if (v instanceof Byte) {
        writeByte(4);
        writeByte((Byte) v);
      } else if (v instanceof Double) {
        writeByte(5);
        writeDouble((Double) v);
      } else if (v instanceof Float) {
        writeByte(6);
        writeFloat((Float) v);
      } else if (v instanceof BigDecimal) {
        BigDecimal b = (BigDecimal) v;
        writeByte(7);
        writeInt(b.scale());
        writeSized(b.unscaledValue().toByteArray());
      } else if (v instanceof String) {
        writeByte(8);
        writeSized(((String) v).getBytes(StandardCharsets.UTF_8));
      } else if (v instanceof Boolean) {
        writeByte(9);
        writeBoolean((Boolean) v);
      } else if (v instanceof java.sql.Date) {
        writeByte(10);
        writeLong(((java.sql.Date) v).toLocalDate().toEpochDay());
      } else if (v instanceof java.time.LocalDate) {
        writeByte(11);
        writeLong(((java.time.LocalDate) v).toEpochDay());
      } else if (v instanceof java.sql.Timestamp) {
        java.sql.Timestamp ts = (java.sql.Timestamp) v;
        writeByte(12);
        writeLong(ts.getTime());
        writeInt(ts.getNanos());
      } else if (v instanceof java.time.Instant) {
        java.time.Instant ins = (java.time.Instant) v;
        writeByte(13);
        writeLong(ins.getEpochSecond());
        writeInt(ins.getNano());
      } else if (v instanceof java.time.LocalDateTime) {
        java.time.LocalDateTime ldt = (java.time.LocalDateTime) v;
        writeByte(14);
        writeLong(ldt.toEpochSecond(java.time.ZoneOffset.UTC));
        writeInt(ldt.getNano());
      } else if (v instanceof byte[]) {
        writeByte(15);
        writeSized((byte[]) v);
      } else {
        throw new IllegalStateException("eventtime: cannot keep a value of type " + v.getClass().getName() + " in state");
      }
    }

    public byte[] toByteArray() {
      return Arrays.copyOf(buf, n);
    }
  }

  /** Reads what {@link Out} wrote. */
  public static final class In {
    private final byte[] buf;
    private int at;

    public In(byte[] buf) {
      this.buf = buf;
    }

    private int next(int count) {
      if (at + count > buf.length) {
        throw new IllegalStateException(
            "eventtime: a state value ends early (" + buf.length + " bytes, " + (at + count) + " needed): the checkpoint is damaged");
      }
      int from = at;
      at += count;
      return from;
    }

    public byte readByte() {
      return buf[next(1)];
    }

    public int readUnsignedByte() {
      return buf[next(1)] & 0xFF;
    }

    public boolean readBoolean() {
      return readByte() != 0;
    }

    public short readShort() {
      int i = next(2);
      return (short) (((buf[i] & 0xFF) << 8) | (buf[i + 1] & 0xFF));
    }

    public int readInt() {
      int i = next(4);
      int v = 0;
      for (int k = 0; k < 4; k++) v = (v << 8) | (buf[i + k] & 0xFF);
      return v;
    }

    public long readLong() {
      int i = next(8);
      long v = 0;
      for (int k = 0; k < 8; k++) v = (v << 8) | (buf[i + k] & 0xFFL);
      return v;
    }

    public float readFloat() {
      return Float.intBitsToFloat(readInt());
    }

    public double readDouble() {
      return Double.longBitsToDouble(readLong());
    }

    public void readFully(byte[] b) {
      System.arraycopy(buf, next(b.length), b, 0, b.length);
    }

    public long readVarLong() {
      long z = 0;
      int shift = 0;
      while (true) {
        int b = readUnsignedByte();
        z |= (long) (b & 0x7F) << shift;
        if ((b & 0x80) == 0) break;
        shift += 7;
      }
      return (z >>> 1) ^ -(z & 1);
    }

    private byte[] readSized() {
      byte[] b = new byte[readInt()];
      readFully(b);
      return b;
    }

    public Object readValue() {
      int tag = readByte();
      switch (tag) {
        case 0:
          return null;
        case 1:
          return readLong();
        case 2:
          return readInt();
        case 3:
          return readShort();
        case 4:
          return readByte();
        case 5:
          return readDouble();
        case 6:
          return readFloat();
        case 7: {
          int scale = readInt();
          return new BigDecimal(new BigInteger(readSized()), scale);
        }
        case 8:
          return new String(readSized(), StandardCharsets.UTF_8);
        case 9:
          return readBoolean();
        case 10:
          return java.sql.Date.valueOf(java.time.LocalDate.ofEpochDay(readLong()));
        case 11:
          return java.time.LocalDate.ofEpochDay(readLong());
        case 12: {
          java.sql.Timestamp ts = new java.sql.Timestamp(readLong());
          ts.setNanos(readInt());
          return ts;
        }
        case 13:
          return java.time.Instant.ofEpochSecond(readLong(), readInt());
        case 14:
          return java.time.LocalDateTime.ofEpochSecond(readLong(), readInt(), java.time.ZoneOffset.UTC);
        case 15:
          return readSized();
        default:
          throw new IllegalStateException("eventtime: unknown value tag " + tag + " in state");
      }
    }
  }
}
