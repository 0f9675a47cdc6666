package eventtime.jvm;

import java.util.Arrays;

/**
 * The byte encoding of the state and of the map side's partials: the same bytes as {@link
 * java.io.DataOutputStream} writes (big-endian, so checkpoints written before stay readable), over
 * a plain array. The stream classes lock on every byte and declare {@code IOException}; these
 * rows are written and read once per key and batch.
 */
final class Bytes {
  private Bytes() {}

  /** A growing byte array. */
  static final class Out {
    private byte[] buf;
    private int n;

    Out(int capacity) {
      buf = new byte[Math.max(8, capacity)];
    }

    private void room(int more) {
      if (n + more > buf.length) buf = Arrays.copyOf(buf, Math.max(buf.length * 2, n + more));
    }

    void writeByte(int v) {
      room(1);
      buf[n++] = (byte) v;
    }

    void writeBoolean(boolean v) {
      writeByte(v ? 1 : 0);
    }

    void writeShort(int v) {
      room(2);
      buf[n++] = (byte) (v >>> 8);
      buf[n++] = (byte) v;
    }

    void writeInt(int v) {
      room(4);
      for (int s = 24; s >= 0; s -= 8) buf[n++] = (byte) (v >>> s);
    }

    void writeLong(long v) {
      room(8);
      for (int s = 56; s >= 0; s -= 8) buf[n++] = (byte) (v >>> s);
    }

    void writeFloat(float v) {
      writeInt(Float.floatToIntBits(v));
    }

    void writeDouble(double v) {
      writeLong(Double.doubleToLongBits(v));
    }

    void write(byte[] b) {
      room(b.length);
      System.arraycopy(b, 0, buf, n, b.length);
      n += b.length;
    }

    byte[] toByteArray() {
      return Arrays.copyOf(buf, n);
    }
  }

  /** Reads what {@link Out} wrote. */
  static final class In {
    private final byte[] buf;
    private int at;

    In(byte[] buf) {
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

    byte readByte() {
      return buf[next(1)];
    }

    int readUnsignedByte() {
      return buf[next(1)] & 0xFF;
    }

    boolean readBoolean() {
      return readByte() != 0;
    }

    short readShort() {
      int i = next(2);
      return (short) (((buf[i] & 0xFF) << 8) | (buf[i + 1] & 0xFF));
    }

    int readInt() {
      int i = next(4);
      int v = 0;
      for (int k = 0; k < 4; k++) v = (v << 8) | (buf[i + k] & 0xFF);
      return v;
    }

    long readLong() {
      int i = next(8);
      long v = 0;
      for (int k = 0; k < 8; k++) v = (v << 8) | (buf[i + k] & 0xFFL);
      return v;
    }

    float readFloat() {
      return Float.intBitsToFloat(readInt());
    }

    double readDouble() {
      return Double.longBitsToDouble(readLong());
    }

    void readFully(byte[] b) {
      System.arraycopy(buf, next(b.length), b, 0, b.length);
    }
  }
}
